"""The pictures of ``02_to_device_method``: what ``.to(device)`` does to a module and to a tensor,
and an optimizer left holding parameters that the model no longer uses."""

from __future__ import annotations

from functools import partial

from matplotlib.figure import Figure

from figures.style import BLUE, FONT, GREY, ORANGE, PURPLE, RED, arrow, box, canvas, label

_label = partial(label, mono=True)  # most labels here are code


def module_and_tensor() -> Figure:
    """tudui.to(device) moves the parameters' data in place, returns tudui; imgs.to(device) makes a
    copy."""
    fig, ax = canvas(8, 4.4)
    box(ax, (0.01, 0.02), 0.27, 0.96, "Python objects", colour=GREY, fill=0.06, va="top")
    box(ax, (0.36, 0.02), 0.28, 0.96, "host (CPU) memory", colour=BLUE, fill=0.08, va="top")
    box(ax, (0.71, 0.02), 0.28, 0.96, "GPU memory", colour=ORANGE, fill=0.08, va="top")

    # Top: the module. Same module, same Parameter objects; only the data they point to moves.
    box(ax, (0.03, 0.50), 0.23, 0.37, "", colour=PURPLE, fill=0.2)
    _label(ax, (0.145, 0.82), "tudui")
    _label(ax, (0.145, 0.74), "same module, same\nParameter objects", size=FONT - 2, mono=False)
    box(ax, (0.05, 0.53), 0.19, 0.10, "its Parameters", colour=PURPLE, fill=0.35, size=FONT - 1)
    _label(ax, (0.145, 0.45), "tudui.to(device)", size=FONT - 1)
    _label(ax, (0.145, 0.405), "returns tudui itself", size=FONT - 1, mono=False)
    box(ax, (0.39, 0.50), 0.22, 0.11, "old data, freed", colour=GREY, fill=0.1, size=FONT - 1)
    box(ax, (0.74, 0.72), 0.22, 0.12, "parameter data", colour=ORANGE, fill=0.35, size=FONT - 1)
    arrow(ax, (0.245, 0.565), (0.385, 0.555), "before", colour=GREY, offset=0.012, style="-")
    arrow(ax, (0.245, 0.60), (0.735, 0.78), "after", offset=0.03)

    # Bottom: a tensor. A new tensor in GPU memory; the old one stays where it was.
    _label(ax, (0.145, 0.25), "imgs", size=FONT)
    _label(ax, (0.145, 0.12), "imgs = imgs.to(device)", size=FONT - 2)
    _label(ax, (0.145, 0.07), "keeps the copy", size=FONT - 2, mono=False)
    box(ax, (0.39, 0.19), 0.22, 0.12, "imgs: a batch", colour=BLUE, fill=0.35, size=FONT - 1)
    box(ax, (0.74, 0.19), 0.22, 0.12, "a new tensor", colour=ORANGE, fill=0.35, size=FONT - 1)
    arrow(ax, (0.19, 0.25), (0.385, 0.25))
    arrow(ax, (0.615, 0.25), (0.735, 0.25), "copy", offset=0.015)
    _label(ax, (0.50, 0.10), "imgs stays\non the CPU", size=FONT - 1, mono=False)
    _label(ax, (0.85, 0.12), "imgs.to(device)", size=FONT - 1)
    _label(ax, (0.85, 0.075), "returns this copy", size=FONT - 1, mono=False)
    return fig


def stale_optimizer() -> Figure:
    """An optimizer built before a conversion that made new parameters: its step() changes
    nothing."""
    fig, ax = canvas(8, 3.2)
    box(ax, (0.02, 0.58), 0.26, 0.26, "early_optimizer", colour=RED, fill=0.2)
    box(ax, (0.02, 0.14), 0.26, 0.26, "model", colour=PURPLE, fill=0.2)
    box(ax, (0.45, 0.58), 0.30, 0.26, "", colour=GREY, fill=0.1)
    _label(ax, (0.60, 0.75), "old parameters")
    _label(ax, (0.60, 0.66), ".grad is None", size=FONT - 1)
    box(ax, (0.45, 0.14), 0.30, 0.26, "", colour=ORANGE, fill=0.3)
    _label(ax, (0.60, 0.31), "new parameters")
    _label(ax, (0.60, 0.22), ".grad set by backward()", size=FONT - 1)
    arrow(ax, (0.285, 0.71), (0.445, 0.71), "holds", offset=0.015)
    arrow(ax, (0.285, 0.27), (0.445, 0.27), "uses", offset=0.015)
    _label(
        ax, (0.88, 0.71), "step() skips them:\nno gradient,\nno change", size=FONT - 1, mono=False
    )
    _label(ax, (0.88, 0.27), "no optimizer\nholds them:\nno change", size=FONT - 1, mono=False)
    return fig


FIGURES = {
    "nn02-module-and-tensor.png": ("02-05", module_and_tensor),
    "nn02-stale-optimizer.png": ("02-28", stale_optimizer),
}
