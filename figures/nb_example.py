"""The pattern for a notebook's pictures (not embedded anywhere): copy it to ``figures/nbNN.py``.

``FIGURES`` maps the attachment's file name to the id of the markdown cell that shows it and a
function that draws it. ``python scripts/draw_figures.py --notebook NN`` renders each one and embeds
it in that cell, which refers to it as ``![what it shows](attachment:<file name>)``.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from figures.style import BLUE, ORANGE, arrow, box, canvas


def two_boxes() -> Figure:
    fig, ax = canvas(8, 2.5)
    box(ax, (0.05, 0.3), 0.35, 0.4, "host (CPU) memory", colour=BLUE)
    box(ax, (0.6, 0.3), 0.35, 0.4, "GPU memory", colour=ORANGE)
    arrow(ax, (0.41, 0.5), (0.59, 0.5), "x.to(device)")
    assert isinstance(ax.patches[0], FancyBboxPatch)
    return fig


FIGURES: dict = {}  # e.g. {"nnNN-two-boxes.png": ("NN-05", two_boxes)}
