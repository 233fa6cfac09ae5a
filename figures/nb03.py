"""The picture of ``03_results_errors_and_checkpoints``: the way back from a GPU tensor to a NumPy
array, ``.detach()`` then ``.cpu()`` then ``.numpy()``, and the error that each missing step
gives."""

from __future__ import annotations

from matplotlib.figure import Figure

from figures.style import BLUE, FONT, GREEN, ORANGE, RED, arrow, box, canvas, label


def way_back() -> Figure:
    """GPU tensor -> .detach() (no graph, same memory) -> .cpu() (a copy) -> .numpy() (same
    memory)."""
    fig, ax = canvas(8, 3.6)
    box(ax, (0.012, 0.33), 0.466, 0.65, "GPU memory", colour=ORANGE, fill=0.07, va="top")
    box(ax, (0.522, 0.33), 0.466, 0.65, "host (CPU) memory", colour=BLUE, fill=0.07, va="top")

    width = 0.15
    bottom = 0.40
    height = 0.40
    steps = [
        (0.03, ORANGE, "logits", "on cuda:0,\nin the autograd\ngraph"),
        (0.305, ORANGE, "detached", "same memory,\nout of the\ngraph"),
        (0.545, BLUE, "on_host", "a copy in\nhost memory"),
        (0.82, GREEN, "array", "np.ndarray:\nthe same\nhost memory"),
    ]
    for x, colour, name, what in steps:
        box(ax, (x, bottom), width, height, "", colour=colour, fill=0.25)
        label(ax, (x + width / 2, bottom + height - 0.07), name, mono=True)
        label(ax, (x + width / 2, bottom + height / 2 - 0.05), what, size=FONT - 1)
    middle = bottom + height / 2
    calls = [(".detach()", "no copy"), (".cpu()", "copy"), (".numpy()", "no copy")]
    for (x, *_), (x_next, *_), (call, copies) in zip(steps[:-1], steps[1:], calls, strict=True):
        start = x + width + 0.005
        end = x_next - 0.005
        arrow(ax, (start, middle), (end, middle))
        on_white = {"bbox": {"facecolor": "white", "edgecolor": "none", "pad": 1}}
        label(ax, ((start + end) / 2, middle + 0.06), call, size=FONT - 1, mono=True, **on_white)
        label(ax, ((start + end) / 2, middle - 0.06), copies, size=FONT - 1, **on_white)

    errors = [
        ("without .detach():", "RuntimeError: Can't call numpy() on Tensor that requires grad"),
        ("without .cpu():", "TypeError: can't convert cuda:0 device type tensor to numpy"),
    ]
    for row, (missing, error) in enumerate(errors):
        y = 0.21 - row * 0.12
        ax.text(0.02, y, missing, ha="left", va="center", fontsize=FONT - 1, family="monospace")
        ax.text(0.25, y, error, ha="left", va="center", fontsize=FONT - 1, color=RED)
    return fig


FIGURES = {"nn03-way-back.png": ("03-03", way_back)}
