"""Shared drawing helpers for the course's pictures: a blank canvas, labelled boxes and arrows."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Colour-blind-safe (Okabe and Ito).
BLUE = "#0072B2"
ORANGE = "#E69F00"
GREEN = "#009E73"
RED = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#999999"
FONT = 11


def canvas(width: float = 8, height: float = 3) -> tuple[Figure, Axes]:
    """A figure ``width`` x ``height`` inches with one axes spanning it, from (0, 0) to (1, 1), no
    frame."""
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig, ax


def box(
    ax: Axes,
    xy: tuple[float, float],
    width: float,
    height: float,
    text: str = "",
    *,
    colour: str = BLUE,
    size: int = FONT,
    fill: float = 0.15,
    va: str = "center",
) -> FancyBboxPatch:
    """A rounded box at ``xy`` (lower left) with ``text`` in it, edged in ``colour``, lightly
    filled."""
    patch = FancyBboxPatch(
        xy,
        width,
        height,
        boxstyle="round,pad=0.01,rounding_size=0.02",
        edgecolor=colour,
        facecolor=colour,
        linewidth=1.5,
    )
    patch.set_facecolor((*_rgb(colour), fill))
    ax.add_patch(patch)
    if text:
        y = xy[1] + height / 2 if va == "center" else xy[1] + height - 0.03
        ax.text(xy[0] + width / 2, y, text, ha="center", va=va, fontsize=size)
    return patch


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    text: str = "",
    colour: str = "black",
    *,
    size: int = FONT - 1,
    offset: float = 0.04,
    style: str = "-|>",
) -> None:
    """An arrow from ``start`` to ``end`` with ``text`` written above its middle (``offset``
    higher)."""
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle=style, mutation_scale=14, color=colour, linewidth=1.5
        )
    )
    if text:
        middle = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + offset)
        ax.text(*middle, text, ha="center", va="bottom", fontsize=size, family="monospace")


def label(
    ax: Axes, xy: tuple[float, float], text: str, *, size: int = FONT, mono: bool = False, **kw
) -> None:
    """``text`` centred at ``xy``, in a monospaced font with ``mono`` (for code)."""
    ax.text(
        *xy,
        text,
        ha="center",
        va="center",
        fontsize=size,
        family="monospace" if mono else None,
        **kw,
    )


def _rgb(colour: str) -> tuple[float, float, float]:
    colour = colour.lstrip("#")
    return tuple(int(colour[i : i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]
