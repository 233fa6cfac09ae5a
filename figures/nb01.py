"""The pictures of ``01_cuda_method``: what ``.cuda()`` moves, and when Python waits for the GPU.

``python scripts/draw_figures.py --notebook 01`` renders them and embeds them in the notebook.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from figures.style import BLUE, FONT, GREEN, GREY, ORANGE, PURPLE, arrow, box, canvas


def what_moves() -> Figure:
    """Host memory and GPU memory, with the four things of the recipe and what ``.cuda()`` does to
    each."""
    fig, ax = canvas(8, 4.2)
    left = 0.02
    right = 0.64
    width = 0.34
    box(ax, (left, 0.02), width, 0.86, "", colour=BLUE, fill=0.06)
    box(ax, (right, 0.02), width, 0.86, "", colour=ORANGE, fill=0.06)
    ax.text(
        left + width / 2,
        0.935,
        "host (CPU) memory",
        ha="center",
        va="center",
        fontsize=FONT + 1,
        weight="bold",
    )
    ax.text(
        right + width / 2,
        0.935,
        "GPU memory",
        ha="center",
        va="center",
        fontsize=FONT + 1,
        weight="bold",
    )
    inner = 0.30
    x_left = left + 0.02
    x_right = right + 0.02
    h = 0.14

    # Part 1: the model's parameters, once.
    y = 0.69
    box(ax, (x_left, y), inner, h, "tudui's parameters\n(145,578 numbers)", colour=BLUE)
    box(ax, (x_right, y), inner, h, "tudui's parameters", colour=ORANGE)
    arrow(ax, (x_left + inner + 0.01, y + h / 2), (x_right - 0.01, y + h / 2), "tudui.cuda()")
    ax.text(
        0.5,
        y + h / 2 - 0.03,
        "part 1: once,\nbefore training",
        ha="center",
        va="top",
        fontsize=FONT - 2,
    )

    # Part 2: the loss function holds no tensors.
    y = 0.48
    box(ax, (x_left, y), inner, h, "loss_fn =\nnn.CrossEntropyLoss()", colour=GREY)
    ax.text(
        0.5,
        y + h / 2 + 0.01,
        "loss_fn.cuda()",
        ha="center",
        va="bottom",
        fontsize=FONT - 1,
        family="monospace",
    )
    ax.text(
        0.5,
        y + h / 2 - 0.01,
        "part 2: no tensors,\nnothing to move",
        ha="center",
        va="top",
        fontsize=FONT - 2,
    )

    # Part 3: each batch, every step.
    y = 0.27
    box(ax, (x_left, y), inner, h, "imgs (64, 3, 32, 32)\ntargets (64,)", colour=BLUE)
    box(ax, (x_right, y), inner, h, "imgs, targets", colour=ORANGE)
    arrow(ax, (x_left + inner + 0.01, y + h / 2), (x_right - 0.01, y + h / 2), "imgs.cuda()", GREEN)
    ax.text(0.5, y + h / 2 - 0.03, "part 3: every step", ha="center", va="top", fontsize=FONT - 2)

    # Results come back as Python numbers.
    y = 0.06
    box(ax, (x_left, y), inner, h, "a Python number", colour=BLUE)
    box(ax, (x_right, y), inner, h, "loss, train_loss_sum,\ntrain_correct", colour=ORANGE)
    arrow(ax, (x_right - 0.01, y + h / 2), (x_left + inner + 0.01, y + h / 2), ".item()", PURPLE)
    ax.text(0.5, y + h / 2 - 0.03, "results, back", ha="center", va="top", fontsize=FONT - 2)
    return fig


def when_python_waits() -> Figure:
    """Two lanes over time: Python queues a step's work quickly, then ``imgs.cuda()`` waits for the
    GPU."""
    fig, ax = canvas(8, 3.4)
    py = 0.56
    gpu = 0.2
    h = 0.18
    for name, y in (("Python\n(CPU)", py), ("GPU", gpu)):
        ax.text(0.005, y + h / 2, name, ha="left", va="center", fontsize=FONT, weight="bold")

    def queue(x: float, text: str) -> None:
        # Four quick calls that only queue work: forward, loss, backward, step.
        for i in range(4):
            ax.add_patch(
                Rectangle((x + i * 0.035, py), 0.025, h, facecolor=BLUE, alpha=0.6, edgecolor=BLUE)
            )
        ax.text(x + 0.065, py + h + 0.03, text, ha="center", va="bottom", fontsize=FONT - 2)

    queue(0.11, "queue forward, loss,\nbackward, step")
    # time.time() reads the clock here, while the GPU is still busy.
    ax.plot([0.265, 0.265], [py - 0.03, py + h + 0.03], color=PURPLE, linewidth=2.5)
    ax.text(
        0.275,
        py + h + 0.03,
        "time.time()",
        ha="left",
        va="bottom",
        fontsize=FONT - 1,
        family="monospace",
        color=PURPLE,
    )
    box(ax, (0.29, py), 0.455, h, "next imgs.cuda(): Python waits", colour=GREY, fill=0.25)
    queue(0.78, "next step")

    # The GPU works through its queue in order; the copy runs after the step's work.
    work = [
        ("forward", 0.11, 0.23),
        ("backward", 0.23, 0.48),
        ("step", 0.48, 0.58),
        ("copy", 0.58, 0.755),
    ]
    for label, start, end in work:
        colour = GREEN if label == "copy" else ORANGE
        box(
            ax,
            (start + 0.01, gpu),
            end - start - 0.02,
            h,
            label,
            colour=colour,
            size=FONT - 1,
            fill=0.3,
        )
    box(ax, (0.79, gpu), 0.19, h, "next step", colour=ORANGE, size=FONT - 1, fill=0.3)
    arrow(ax, (0.76, gpu + h + 0.02), (0.76, py - 0.03), colour=GREEN)
    ax.text(
        0.77,
        (gpu + h + py) / 2,
        "copy done: Python goes on",
        ha="left",
        va="center",
        fontsize=FONT - 2,
    )
    ax.annotate(
        "", xy=(0.99, 0.07), xytext=(0.11, 0.07), arrowprops={"arrowstyle": "-|>", "color": GREY}
    )
    ax.text(0.55, 0.02, "time", ha="center", va="bottom", fontsize=FONT - 2, color=GREY)
    return fig


FIGURES = {
    "nn01-what-moves.png": ("01-12", what_moves),
    "nn01-when-python-waits.png": ("01-13a", when_python_waits),
}
