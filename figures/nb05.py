"""The pictures of ``05_distributed_data_parallel``: see ``figures/nb_example.py`` for the
pattern."""

from __future__ import annotations

from matplotlib.figure import Figure

from figures.style import BLUE, GREEN, GREY, ORANGE, PURPLE, arrow, box, canvas


def ddp_processes() -> Figure:
    """Two DDP processes: each its own model copy and data share; gradients all-reduced in
    backward."""
    fig, ax = canvas(8, 3.6)
    rows = {0: 0.56, 1: 0.08}  # lower edge of each rank's row
    height = 0.34
    for rank, y in rows.items():
        middle = y + height / 2
        ax.text(
            0.02,
            y + height + 0.015,
            f"process rank {rank} (cuda:{rank}, or the CPU)",
            fontsize=10,
            color=GREY,
            va="bottom",
        )
        box(
            ax,
            (0.02, y),
            0.19,
            height,
            "its share of the data\n(DistributedSampler:\nevery 2nd image)",
            colour=ORANGE,
            size=10,
        )
        box(
            ax,
            (0.26, y),
            0.19,
            height,
            "its own copy\nof the model\nforward, backward",
            colour=BLUE,
            size=10,
        )
        box(ax, (0.5, y + 0.06), 0.1, height - 0.12, f"grads\ng{rank}", colour=PURPLE, size=10)
        box(
            ax,
            (0.82, y),
            0.16,
            height,
            "optimizer.step()\nthe same step:\nidentical weights",
            colour=GREEN,
            size=10,
        )
        arrow(ax, (0.215, middle), (0.255, middle))
        arrow(ax, (0.455, middle), (0.495, middle))
        arrow(ax, (0.605, middle), (0.645, middle))
        arrow(ax, (0.775, middle), (0.815, middle))
    box(
        ax,
        (0.65, rows[1]),
        0.12,
        rows[0] + height - rows[1],
        "all-reduce\nduring\nbackward:\nboth get\n(g0 + g1) / 2",
        colour=PURPLE,
        size=10,
        fill=0.3,
    )
    return fig


FIGURES = {"nn05-ddp.png": ("05-03", ddp_processes)}
