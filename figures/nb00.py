"""The pictures of ``00_devices_and_tensors``: host memory and GPU memory, and the copies between
them."""

from __future__ import annotations

from matplotlib.figure import Figure

from figures.style import BLUE, FONT, GREEN, ORANGE, arrow, box, canvas


def _tensor(
    ax, xy: tuple[float, float], code: str, note: str, colour: str, *, size: int = FONT
) -> None:
    """A small box for one tensor: the code that makes it, and a grey note under it."""
    box(ax, xy, 0.36, 0.15, "", colour=colour, fill=0.35)
    ax.text(
        xy[0] + 0.18,
        xy[1] + 0.098,
        code,
        ha="center",
        va="center",
        fontsize=size,
        family="monospace",
    )
    ax.text(
        xy[0] + 0.18,
        xy[1] + 0.04,
        note,
        ha="center",
        va="center",
        fontsize=FONT - 1,
        color="#333333",
    )


def two_memories() -> Figure:
    """Host memory and GPU memory: .to(device) copies over, device= makes in place, .cpu() copies
    back."""
    fig, ax = canvas(8, 3.6)
    box(
        ax,
        (0.02, 0.03),
        0.40,
        0.94,
        "host (CPU) memory",
        colour=BLUE,
        fill=0.08,
        va="top",
        size=FONT + 1,
    )
    box(
        ax,
        (0.58, 0.03),
        0.40,
        0.94,
        "GPU memory",
        colour=ORANGE,
        fill=0.08,
        va="top",
        size=FONT + 1,
    )

    # Row 1: .to(device) copies x over and returns a new tensor; x stays where it was.
    _tensor(ax, (0.04, 0.66), "x = torch.rand(3)", "stays where it was", BLUE)
    _tensor(ax, (0.60, 0.66), "y = x.to(device)", "a new tensor: the copy", ORANGE)
    arrow(ax, (0.405, 0.735), (0.595, 0.735), "copy", offset=0.015)

    # Row 2: a factory function with device= makes the tensor in GPU memory: nothing crosses.
    _tensor(
        ax,
        (0.60, 0.38),
        "z = torch.zeros(3, device=device)",
        "made here: no copy",
        ORANGE,
        size=FONT - 1.5,
    )

    # Row 3: a result comes back with .cpu(); .numpy() then shares that CPU memory.
    _tensor(ax, (0.60, 0.10), "out = model(y)", "a result, on the GPU", ORANGE)
    _tensor(ax, (0.04, 0.38), "back = out.cpu()", "a copy in host memory", GREEN)
    _tensor(ax, (0.04, 0.10), "a = back.numpy()", "NumPy array, same memory", GREEN)
    arrow(ax, (0.595, 0.175), (0.405, 0.43))
    ax.text(0.475, 0.40, "copy back", ha="left", va="bottom", fontsize=FONT - 1, family="monospace")
    arrow(ax, (0.22, 0.375), (0.22, 0.255), style="-")
    return fig


FIGURES = {"nn00-two-memories.png": ("00-09", two_memories)}
