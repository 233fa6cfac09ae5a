"""The picture of ``04_data_parallel``: what ``nn.DataParallel`` does with each batch, on two GPUs.

``python scripts/draw_figures.py --notebook 04`` renders it and embeds it in the notebook.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from figures.style import BLUE, FONT, GREEN, ORANGE, PURPLE, arrow, box, canvas


def one_batch() -> Figure:
    """Section 1's ``wrapped(batch)`` on two GPUs: scatter, replicate, parallel_apply, gather;
    backward."""
    fig, ax = canvas(8, 4.6)
    lanes = {"cuda:0": (0.63, ORANGE, "thread 1"), "cuda:1": (0.15, GREEN, "thread 2")}
    lane_h = 0.27
    h = 0.14
    middle = 0.52  # the height of the batch, the model and the output, all three on cuda:0

    # Stages, left to right, as DataParallel.forward runs them.
    for x, text in (
        (0.165, "scatter"),
        (0.48, "parallel_apply: one thread per GPU"),
        (0.805, "gather"),
    ):
        ax.text(
            x,
            0.955,
            text,
            ha="center",
            va="center",
            fontsize=FONT,
            weight="bold",
            family="monospace",
        )

    box(ax, (0.01, middle - 0.09), 0.13, 0.18, "batch\n30 × 5\non cuda:0", colour=BLUE)
    box(ax, (0.84, middle - 0.09), 0.15, 0.18, "output\n30 × 2\non cuda:0", colour=BLUE)
    box(
        ax,
        (0.36, middle - 0.05),
        0.24,
        0.10,
        "wrapped.module\n(on cuda:0)",
        colour=PURPLE,
        size=FONT - 1,
    )

    for name, (y, colour, thread) in lanes.items():
        box(ax, (0.16, y), 0.64, lane_h, "", colour=colour, fill=0.07)
        ax.text(0.17, y + lane_h - 0.015, name, ha="left", va="top", fontsize=FONT, weight="bold")
        centre = y + lane_h / 2 - 0.025
        box(ax, (0.19, centre - h / 2), 0.12, h, "15 × 5", colour=colour, size=FONT - 1)
        box(
            ax,
            (0.38, centre - h / 2),
            0.20,
            h,
            f"replica\nrun by {thread}",
            colour=colour,
            size=FONT - 1,
        )
        box(ax, (0.65, centre - h / 2), 0.12, h, "15 × 2", colour=colour, size=FONT - 1)
        arrow(ax, (0.14, middle), (0.19, centre))  # scatter: one chunk per GPU
        arrow(ax, (0.31, centre), (0.38, centre))
        arrow(ax, (0.58, centre), (0.65, centre))
        arrow(ax, (0.77, centre), (0.84, middle))  # gather: the outputs joined on cuda:0

        # replicate (forward, solid) and the gradients summed back (backward, dashed)
        top_of_replica = centre + h / 2
        bottom_of_replica = centre - h / 2
        if y > middle:
            model_edge = middle + 0.06
            replica_edge = bottom_of_replica
        else:
            model_edge = middle - 0.06
            replica_edge = top_of_replica
        arrow(ax, (0.42, model_edge), (0.42, replica_edge))
        ax.add_patch(
            FancyArrowPatch(
                (0.54, replica_edge),
                (0.54, model_edge),
                arrowstyle="-|>",
                mutation_scale=14,
                color=PURPLE,
                linewidth=1.5,
                linestyle=(0, (3, 2)),
            )
        )

    ax.text(
        0.335, middle, "replicate", ha="right", va="center", fontsize=FONT - 1, family="monospace"
    )
    ax.text(
        0.622,
        middle,
        "backward: gradients\nsummed into it",
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=PURPLE,
    )
    ax.text(
        0.5,
        0.06,
        "All in one Python process.  Solid arrows: forward.  Dashed: backward, where the "
        "gradients\nof both replicas are added into the .grad of wrapped.module's parameters, "
        "on cuda:0.",
        ha="center",
        va="center",
        fontsize=FONT - 1,
    )
    return fig


FIGURES = {"nn04-one-batch.png": ("04-03", one_batch)}
