"""Pictures of ``07_memory_and_errors``: where a training step's GPU memory goes.

The sizes are the notebook's own: its network (3,072 -> 1,024 -> 1,024 -> 1,024 -> 10, float32)
has 5,256,202 parameters, so 20 MiB of parameters, 20 MiB of gradients and 2 x 20 MiB of Adam
state; autograd keeps (3 x 1,024 + 10) x 4 bytes of activations per image (cells 07-04 and 07-06
check both).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from figures.style import BLUE, GREEN, GREY, ORANGE, PURPLE

MiB = 2**20
LAYERS = [(3 * 32 * 32, 1024), (1024, 1024), (1024, 1024), (1024, 10)]
PARAMETERS = sum(fan_in * fan_out + fan_out for fan_in, fan_out in LAYERS) * 4 / MiB  # 20.05 MiB
ACTIVATIONS_PER_IMAGE = (3 * 1024 + 10) * 4  # bytes autograd keeps for backward, per image
IMAGE_BYTES = 3 * 32 * 32 * 4 + 8  # an image and its int64 label


def _step(batch: int) -> tuple[list[float], dict[str, list[float]]]:
    """Memory in MiB at the moments of one step (not the first: Adam's state exists), as stacked
    layers."""
    acts = batch * ACTIVATIONS_PER_IMAGE / MiB
    data = batch * IMAGE_BYTES / MiB
    p = PARAMETERS
    # moments: start, batch on the GPU, end of forward, middle of backward, end of backward,
    # after step()
    x = [0, 1, 2, 3, 4, 5]
    layers = {
        "parameters": [p] * 6,
        "Adam state (2 copies)": [2 * p] * 6,
        "batch (images, labels)": [0, data, data, data, data, data],
        "activations kept for backward": [0, 0, acts, acts / 2, 0, 0],
        "gradients": [0, 0, 0, p / 2, p, p],
    }
    return x, layers


COLOURS = {
    "parameters": BLUE,
    "Adam state (2 copies)": GREEN,
    "batch (images, labels)": GREY,
    "activations kept for backward": PURPLE,
    "gradients": ORANGE,
}


def memory_of_a_step() -> Figure:
    fig = Figure(figsize=(8, 4))
    axes = fig.subplots(1, 2, sharey=True)
    fig.subplots_adjust(left=0.08, right=0.97, top=0.92, bottom=0.35, wspace=0.1)
    for ax, batch in zip(axes, (1024, 4096), strict=True):
        x, layers = _step(batch)
        ax.stackplot(
            x, *layers.values(), colors=[COLOURS[k] for k in layers], alpha=0.75, linewidth=0
        )
        allocated = [sum(v[i] for v in layers.values()) for i in range(len(x))]
        reserved = max(allocated) + 6  # the cache keeps the blocks of earlier steps' peak
        ax.plot([x[0], x[-1]], [reserved, reserved], color="black", linestyle="--", linewidth=1.5)
        ax.annotate(
            "reserved by PyTorch: the peak of\nearlier steps, kept in the cache",
            xy=(1.2, reserved),
            xytext=(1.6, reserved + 30),
            fontsize=9,
            ha="center",
            arrowprops={"arrowstyle": "-", "color": "black", "linewidth": 0.8},
        )
        acts = batch * ACTIVATIONS_PER_IMAGE / MiB
        ax.set_title(f"batch {batch:,}: {acts:.0f} MiB of activations", fontsize=10)
        ax.set_xticks(
            x,
            [
                "step\nstarts",
                "batch\nloaded",
                "after\nforward",
                "during\nbackward",
                "after\nbackward",
                "after\nstep()",
            ],
            fontsize=8,
        )
        ax.set_xlim(-0.4, 5.4)
        ax.set_ylim(0, 245)
        ax.tick_params(axis="y", labelsize=9)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_ylabel("GPU memory (MiB)", fontsize=10)
    handles = [Patch(color=c, alpha=0.75, label=k) for k, c in COLOURS.items()]
    handles.append(
        Patch(facecolor="none", edgecolor="black", linestyle="--", label="reserved (cache)")
    )
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.05),
        ncol=3,
        fontsize=9,
        frameon=False,
    )
    fig.text(
        0.5,
        0.01,
        "not drawn: the CUDA context and library workspaces, outside PyTorch's cache",
        ha="center",
        va="bottom",
        fontsize=9,
        color="black",
    )
    return fig


FIGURES = {"nn07-memory-of-a-step.png": ("07-09", memory_of_a_step)}
