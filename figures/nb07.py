"""Pictures of ``07_memory_and_errors``: where a training step's GPU memory goes.

The sizes are the notebook's own: its network (3,072 -> 1,024 -> 1,024 -> 1,024 -> 10, float32)
has 5,256,202 parameters, so 20 MiB of parameters, 20 MiB of gradients and 2 x 20 MiB of Adam
state; autograd keeps (3 x 1,024 + 10) x 4 bytes of activations per image (cells 07-04 and 07-06
check both). The peak is the one cell 07-08 measured on an H100: the batch, the gradients and
one parameter-sized temporary that Adam's step makes (the square root of its second copy).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from figures.style import BLUE, GREEN, GREY, ORANGE, PURPLE, RED

MiB = 2**20
LAYERS = [(3 * 32 * 32, 1024), (1024, 1024), (1024, 1024), (1024, 10)]
PARAMETERS = sum(fan_in * fan_out + fan_out for fan_in, fan_out in LAYERS) * 4 / MiB  # 20.05 MiB
ACTIVATIONS_PER_IMAGE = (3 * 1024 + 10) * 4  # bytes autograd keeps for backward, per image
IMAGE_BYTES = 3 * 32 * 32 * 4 + 8  # an image and its int64 label


MEASURED_PEAK = 52.1  # MiB above the start of the step, on an H100 at batch 1,024 (cell 07-08)
BATCH = 1024


def _step() -> tuple[list[float], dict[str, list[float]]]:
    """Memory in MiB at the moments of one step at batch 1,024 (not the first: Adam's state
    exists), as stacked layers."""
    acts = BATCH * ACTIVATIONS_PER_IMAGE / MiB
    data = BATCH * IMAGE_BYTES / MiB
    p = PARAMETERS
    # moments: start, batch on the GPU, end of forward, end of backward, inside step(),
    # after step()
    x = [0, 1, 2, 3, 4, 5]
    layers = {
        "parameters": [p] * 6,
        "Adam state (2 copies)": [2 * p] * 6,
        "batch (images, labels)": [0, data, data, data, data, data],
        "activations kept for backward": [0, 0, acts, 0, 0, 0],
        "gradients": [0, 0, 0, p, p, p],
        "Adam's temporary in step()": [0, 0, 0, 0, p, 0],
    }
    return x, layers


COLOURS = {
    "parameters": BLUE,
    "Adam state (2 copies)": GREEN,
    "batch (images, labels)": GREY,
    "activations kept for backward": PURPLE,
    "gradients": ORANGE,
    "Adam's temporary in step()": RED,
}


def memory_of_a_step() -> Figure:
    fig = Figure(figsize=(8, 4.2))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.97, top=0.92, bottom=0.36)
    x, layers = _step()
    ax.stackplot(x, *layers.values(), colors=[COLOURS[k] for k in layers], alpha=0.75, linewidth=0)
    allocated = [sum(v[i] for v in layers.values()) for i in range(len(x))]
    start = allocated[0]
    peak = max(allocated)
    ax.plot([x[0], x[-1]], [peak + 2, peak + 2], color="black", linestyle="--", linewidth=1.5)
    ax.annotate(
        f"the peak, in step(): {peak - start:.1f} MiB above the start\n"
        f"(the H100 measured {MEASURED_PEAK} MiB); reserved memory stays there",
        xy=(4, peak + 2),
        xytext=(1.7, peak + 14),
        va="bottom",
        fontsize=9,
        ha="center",
        arrowprops={"arrowstyle": "-", "color": "black", "linewidth": 0.8},
    )
    ax.set_title(f"one step at batch {BATCH:,}, after the first", fontsize=10)
    labels = [
        "step\nstarts",
        "batch\nloaded",
        "after\nforward",
        "after\nbackward",
        "inside\nstep()",
        "after\nstep()",
    ]
    ax.set_xticks(x, labels, fontsize=9)
    ax.set_xlim(-0.2, 5.2)
    ax.set_ylim(0, 160)
    ax.tick_params(axis="y", labelsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_ylabel("GPU memory (MiB)", fontsize=10)
    handles = [Patch(color=c, alpha=0.75, label=k) for k, c in COLOURS.items()]
    handles.append(
        Patch(facecolor="none", edgecolor="black", linestyle="--", label="reserved (cache)")
    )
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.06),
        ncol=3,
        fontsize=9,
        frameon=False,
    )
    fig.text(
        0.5,
        0.01,
        "not drawn: the CUDA context, outside PyTorch's cache, and cuBLAS's workspace",
        ha="center",
        va="bottom",
        fontsize=9,
        color="black",
    )
    return fig


FIGURES = {"nn07-memory-of-a-step.png": ("07-09", memory_of_a_step)}
