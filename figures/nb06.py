"""The pictures of ``06_performance``: how Python queues work on the GPU, and which calls wait for
it."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from figures.style import BLUE, FONT, GREEN, GREY, ORANGE, RED, arrow, box, canvas


def _span(
    ax, x0: float, x1: float, y: float, text: str, *, colour: str, below: bool = False
) -> None:
    """A bracket from ``x0`` to ``x1`` at height ``y``, with ``text`` above it (or below)."""
    tick = -0.03 if not below else 0.03
    ax.plot([x0, x0, x1, x1], [y + tick, y, y, y + tick], color=colour, linewidth=1.5)
    ax.text(
        (x0 + x1) / 2,
        y + (0.015 if not below else -0.015),
        text,
        ha="center",
        va="bottom" if not below else "top",
        fontsize=FONT - 1,
        color=colour,
    )


def queue() -> Figure:
    """Python queues three kernels and goes on; the GPU runs them later; a waiting call blocks till
    then."""
    fig, ax = canvas(8, 3.4)
    top = 0.58
    bottom = 0.22
    height = 0.14
    ax.text(0.01, top + height / 2, "Python\n(CPU)", va="center", fontsize=FONT, weight="bold")
    ax.text(0.01, bottom + height / 2, "GPU\nstream", va="center", fontsize=FONT, weight="bold")
    launches = [0.135, 0.19, 0.245]  # each box is drawn 0.01 wider on each side
    kernels = [(0.16, 0.39), (0.39, 0.62), (0.62, 0.86)]
    for i, (x, (k0, k1)) in enumerate(zip(launches, kernels, strict=True), 1):
        box(ax, (x, top), 0.03, height, "a@a", colour=BLUE, size=FONT - 2)
        box(ax, (k0 + 0.013, bottom), k1 - k0 - 0.026, height, f"kernel {i}", colour=ORANGE)
        arrow(ax, (x + 0.015, top), (k0 + 0.03, bottom + height), colour=GREY)
    # the clock read right after the launches
    clock = 0.3
    ax.plot([clock, clock], [top - 0.02, top + height + 0.02], color=RED, linewidth=2)
    # a call that waits: it returns when the queue is empty
    wait = Rectangle(
        (0.315, top), 0.86 - 0.315, height, facecolor="white", edgecolor=BLUE, hatch="///"
    )
    ax.add_patch(wait)
    ax.text(
        0.58,
        top + height / 2,
        " .item(), blocking .to(device) or synchronize(): waits ",
        ha="center",
        va="center",
        fontsize=FONT - 1,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
    )
    arrow(ax, (0.86, bottom + height), (0.86, top), colour=GREY)
    middle = (bottom + height + top) / 2
    ax.text(
        0.85, middle, "queue empty:\nthe call returns", ha="right", va="center", fontsize=FONT - 1
    )
    _span(
        ax, 0.125, clock, top + height + 0.07, "clock without a wait: only the queuing", colour=RED
    )
    _span(
        ax,
        0.125,
        0.86,
        bottom - 0.06,
        "clock after a wait: the GPU's real time",
        colour=BLUE,
        below=True,
    )
    ax.annotate(
        "",
        xy=(0.99, 0.03),
        xytext=(0.70, 0.03),
        arrowprops={"arrowstyle": "-|>", "color": GREY},
    )
    ax.text(0.99, 0.055, "time", ha="right", fontsize=FONT - 1, color=GREY)
    return fig


def streams() -> Figure:
    """A non-blocking copy on the one stream runs between the kernels; on a second stream, during
    them."""
    fig, ax = canvas(8, 3.2)
    h = 0.12
    rows = {
        "one stream": 0.70,
        "stream 1": 0.30,
        "stream 2": 0.12,
    }
    for name, y in rows.items():
        ax.text(0.01, y + h / 2, name, va="center", fontsize=FONT, weight="bold")
    ax.text(
        0.16,
        0.90,
        "non_blocking=True on the one stream: the copy waits its turn",
        fontsize=FONT,
        color=BLUE,
    )
    ax.text(
        0.16,
        0.50,
        "a second stream for copies: the copy runs during the kernels",
        fontsize=FONT,
        color=BLUE,
    )

    def block(x0: float, x1: float, y: float, text: str, colour: str) -> None:
        box(ax, (x0 + 0.01, y), x1 - x0 - 0.02, h, text, colour=colour, size=FONT - 1)

    block(0.16, 0.46, rows["one stream"], "step 1: kernels", ORANGE)
    block(0.46, 0.62, rows["one stream"], "copy batch 2", GREEN)
    block(0.62, 0.92, rows["one stream"], "step 2: kernels", ORANGE)
    block(0.16, 0.46, rows["stream 1"], "step 1: kernels", ORANGE)
    block(0.46, 0.76, rows["stream 1"], "step 2: kernels", ORANGE)
    block(0.20, 0.36, rows["stream 2"], "copy batch 2", GREEN)
    arrow(ax, (0.35, rows["stream 2"] + h), (0.47, rows["stream 1"]), colour=GREY)
    ax.text(
        0.38,
        0.18,
        "step 2 waits for the copy (wait_stream)",
        fontsize=FONT - 1,
        color=GREY,
        va="center",
    )
    ax.plot([0.76, 0.76], [0.08, 0.86], color=GREY, linewidth=1, linestyle=":")
    ax.plot([0.92, 0.92], [0.08, 0.86], color=GREY, linewidth=1, linestyle=":")
    ax.annotate(
        "", xy=(0.76, 0.05), xytext=(0.92, 0.05), arrowprops={"arrowstyle": "<->", "color": GREY}
    )
    ax.text(0.84, 0.0, "time saved", ha="center", va="bottom", fontsize=FONT - 1, color=GREY)
    return fig


FIGURES = {"nn06-queue.png": ("06-03", queue), "nn06-streams.png": ("06-27", streams)}
