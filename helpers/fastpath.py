"""The fast path of ``06_performance`` and ``make bench``: data on the device, a large-batch recipe, AMP.

``DeviceLoader`` serves batches from tensors that already live on the device: no per-sample Python,
no PIL images, no host-to-device copy per batch. For the same random state it yields exactly the
batches that ``DataLoader(TensorDataset(...), shuffle=True)`` yields (``tests/test_fastpath.py``
checks this), so the two pipelines can be compared on the same data in the same order.

``LargeBatchSchedule`` is the learning-rate recipe that lets a larger batch keep the accuracy
(a scaling rule, a warm-up, a decay), for SGD (``sgd``) up to the batch where its linear rule
holds and for Adam (``adam``) past it; ``choose_precision`` and ``grad_scaler`` pick the
mixed precision a device can use (bf16, else fp16 with a ``GradScaler`` on CUDA, else float32);
``train_epoch`` is the training loop that applies both, one learning rate per step.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers import _args
from helpers.devices import as_device

__all__ = [
    "Autocast",
    "DeviceLoader",
    "EpochStats",
    "LargeBatchSchedule",
    "LossStep",
    "PaddedInputConv2d",
    "Precision",
    "bf16_supported",
    "choose_precision",
    "cudnn_autotuner",
    "dataset_tensors",
    "adam",
    "added_weights_max",
    "grad_scaler",
    "sgd",
    "timed_epoch",
    "train_epoch",
    "widen_first_conv",
]

# The seed's recipe (seed 000 trains Tudui with SGD at batch 64, lr 0.01): what the rule scales from.
SEED_BATCH_SIZE, SEED_LR = 64, 0.01
# Adam's: PyTorch's default rate, 0.001, taken at batch 128, scaled by the square root of the batch
# (``LargeBatchSchedule(..., scaling="sqrt")``): 0.004 at batch 2,048.
ADAM_BASE_BATCH_SIZE, ADAM_BASE_LR = 128, 0.001


def _class_labels(targets: Any) -> torch.Tensor:
    """``targets`` as int64 class numbers, refusing values that converting would change (1.7 -> 1)."""
    try:
        labels = torch.as_tensor(targets)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(
            f"dataset_tensors: dataset.targets must be class numbers (0, 1, 2, ...), got "
            f"{type(targets).__name__} {_args.shown(targets)} ({error})."
        ) from None
    if labels.is_complex():
        raise TypeError(
            f"dataset_tensors: dataset.targets are complex numbers ({labels.dtype}), not class numbers."
        )
    if labels.is_floating_point():
        whole = torch.isfinite(labels) & (labels == labels.round())
        if not bool(whole.all()):
            index = int((~whole).nonzero()[0, 0]) if labels.dim() else 0
            value = labels.reshape(-1)[index].item()
            raise ValueError(
                f"dataset_tensors: dataset.targets[{index}] is {value}, not a whole number; class labels are "
                "0, 1, 2, ... and converting would change it. For soft labels or regression targets, build "
                "the tensors yourself: torch.as_tensor(dataset.targets, dtype=torch.float32)."
            )
    return labels.to(torch.int64)


def dataset_tensors(
    dataset: Any,
    device: torch.device | str = "cpu",
    *,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A CIFAR-10-like dataset as two tensors on ``device``: float32 images (N, 3, H, W) in [0, 1], labels.

    ``dataset`` needs ``data`` (a uint8 array (N, H, W, 3), as ``torchvision.datasets.CIFAR10`` and
    ``helpers.data.load_cifar10`` have) and ``targets``. The images are converted as
    ``transforms.ToTensor()`` converts each one (channels first, divided by 255), so the values are
    identical to what the per-sample pipeline produces; the conversion runs once, on the device.
    """
    missing = [name for name in ("data", "targets") if not hasattr(dataset, name)]
    if missing:
        raise TypeError(
            f"dataset_tensors needs a dataset with .data (uint8 images, N x H x W x 3) and .targets, "
            f"like torchvision's CIFAR10 or helpers.data.load_cifar10; {type(dataset).__name__} has no "
            f"{' or '.join('.' + m for m in missing)}. For another dataset, build the tensors yourself, "
            "e.g. torch.stack([image for image, _ in dataset])."
        )
    device = as_device(device, name="device", caller="dataset_tensors", check_available=True)
    if not isinstance(memory_format, torch.memory_format):
        raise TypeError(
            "dataset_tensors: memory_format must be torch.contiguous_format or torch.channels_last, "
            f"got {_args.shown(memory_format)}."
        )
    data = torch.as_tensor(dataset.data)
    if data.dtype != torch.uint8 or data.dim() != 4 or data.shape[-1] != 3:
        raise ValueError(
            f"dataset.data should be uint8 images of shape (N, H, W, 3), got {data.dtype} {tuple(data.shape)}"
        )
    labels = _class_labels(dataset.targets)
    if labels.shape != (data.shape[0],):
        raise ValueError(
            f"{data.shape[0]} images but {tuple(labels.shape)} targets: they must match one to one"
        )
    # Converted on the host, then copied: a GPU divides by 255 as a multiplication by 1/255, which
    # differs from ToTensor's division in the last bit for half of the 256 pixel values.
    images = data.permute(0, 3, 1, 2).float().div(255).contiguous(memory_format=memory_format)
    return images.to(device), labels.to(device)


class DeviceLoader:
    """Batches of tensors that stay on their device, shuffled with ``torch.randperm``.

    ``DeviceLoader(images, labels, batch_size=512, shuffle=True)`` is an iterable like a
    ``DataLoader``: each pass over it is one epoch, in which every sample appears exactly once; the
    last batch is smaller when ``batch_size`` does not divide the number of samples, or left out
    with ``drop_last=True``. A batch is one indexing operation on the device (a view without
    shuffling), whatever the batch size.

    The random draws are the ones ``DataLoader(TensorDataset(...), shuffle=True, generator=...)``
    makes (read from torch 2.14's ``torch/utils/data/dataloader.py`` and ``sampler.py``): when an
    iterator is made, one int64 (the seed the DataLoader draws for its workers); at the first
    batch, ``torch.randperm(n, generator=...)``; at the end of a complete epoch, a second, unused
    permutation. With ``generator=None`` the global generator supplies a seed for a fresh
    generator, as ``RandomSampler`` does. So for the same seed both loaders give the same batches.
    Such a permutation is drawn on the CPU and copied to the device (``8 n`` bytes an epoch); pass
    a generator on the device, ``torch.Generator(device)``, to draw it there.
    """

    def __init__(
        self,
        *tensors: torch.Tensor,
        batch_size: int,
        shuffle: bool = False,
        drop_last: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        if not tensors:
            raise ValueError("DeviceLoader needs at least one tensor, e.g. DeviceLoader(images, labels, ...)")
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            kinds = ", ".join(type(t).__name__ for t in tensors)
            raise TypeError(
                f"DeviceLoader takes tensors, got {kinds}. For a dataset, use "
                "dataset_tensors(dataset, device) first."
            )
        sizes = {t.shape[0] if t.dim() else None for t in tensors}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                f"The tensors must have the same first dimension (one row per sample), got sizes "
                f"{[tuple(t.shape) for t in tensors]}"
            )
        devices = {t.device for t in tensors}
        if len(devices) != 1:
            raise ValueError(
                f"The tensors are on different devices {sorted(map(str, devices))}: move them all to one "
                "device first, e.g. images.to(device), labels.to(device)."
            )
        if sizes == {0}:
            raise ValueError("The tensors hold no samples: DeviceLoader needs at least one row")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DeviceLoader: batch_size must be a positive int, got {batch_size!r}")
        shuffle = _args.boolean(shuffle, "shuffle", "DeviceLoader")
        drop_last = _args.boolean(drop_last, "drop_last", "DeviceLoader")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                "DeviceLoader: generator must be a torch.Generator, e.g. torch.Generator().manual_seed(0), "
                f"or None; got {type(generator).__name__} {_args.shown(generator)}."
            )
        samples = int(tensors[0].shape[0])
        if drop_last and batch_size > samples:
            raise ValueError(
                f"DeviceLoader: batch_size={batch_size} with drop_last=True gives no batch at all: there are "
                f"only {samples} samples, and the one incomplete batch is dropped. Use batch_size={samples} "
                "or less, or drop_last=False."
            )
        self.tensors = tensors
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = generator
        self.device = tensors[0].device
        self.num_samples = int(tensors[0].shape[0])

    def __len__(self) -> int:
        """The number of batches in one epoch, as ``len(DataLoader)`` counts them."""
        if self.drop_last:
            return self.num_samples // self.batch_size
        return math.ceil(self.num_samples / self.batch_size)

    @property
    def samples_per_epoch(self) -> int:
        """How many samples one epoch yields (fewer than ``num_samples`` with ``drop_last=True``)."""
        return len(self) * self.batch_size if self.drop_last else self.num_samples

    def _permutation(self) -> torch.Tensor:
        n = self.num_samples
        if self.generator is None:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
            generator = torch.Generator().manual_seed(seed)
        else:
            generator = self.generator
        return torch.randperm(n, generator=generator, device=generator.device).to(self.device)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        if self.generator is None or self.generator.device.type == "cpu":
            # A DataLoader draws one int64 (its workers' seed) when an iterator is made, as here,
            # and the permutation at the first batch, as _batches does; so the two stay in step.
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        return self._batches()

    def _batches(self) -> Iterator[tuple[torch.Tensor, ...]]:
        order = self._permutation() if self.shuffle else None
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            if order is None:
                yield tuple(t[start : start + self.batch_size] for t in self.tensors)
            else:
                index = order[start : start + self.batch_size]
                yield tuple(t[index] for t in self.tensors)
        if self.shuffle and self.generator is not None and self.generator.device.type == "cpu":
            # RandomSampler draws a second permutation when an epoch ends (it keeps the first
            # num_samples % n of it: none); with a shared generator that draw moves the stream on.
            torch.randperm(self.num_samples, generator=self.generator)

    def __repr__(self) -> str:
        return (
            f"DeviceLoader({self.num_samples:,} samples on {self.device}, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last})"
        )


def bf16_supported(device: torch.device | str) -> bool:
    """Whether ``device`` computes in bfloat16 natively, so that bf16 autocast can pay.

    CUDA: compute capability 8.0 or newer (Ampere on), not the emulation older GPUs offer. CPU: the
    AVX512-BF16 or AMX-BF16 instructions (x86), or BF16 (Arm), as ``torch.cpu.get_capabilities``
    reports them; without them bf16 is emulated and slower than float32. Other devices: False.
    """
    device = as_device(device, name="device", caller="bf16_supported")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return False
        try:
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # torch < 2.4 has no including_emulation
            return torch.cuda.get_device_capability(device) >= (8, 0)
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", None)
        if capabilities is None:  # torch < 2.7 cannot tell: assume emulation
            return False
        found = capabilities()
        return any(bool(found.get(name, False)) for name in ("avx512_bf16", "amx_bf16", "bf16", "sve_bf16"))
    return False


class Autocast(nn.Module):
    """Runs ``model``'s forward pass under ``torch.autocast`` and returns float32 outputs.

    Autocast should cover the forward pass only, not ``backward()`` or the optimizer step; wrapping
    the model does exactly that, so a training loop such as ``helpers.train.train_one_epoch`` runs
    in mixed precision unchanged (the loss is computed from the float32 outputs). bf16 keeps
    float32's range, so no gradient scaler is needed; float16 (``dtype=torch.float16``, for GPUs
    without native bf16) needs one: ``train_epoch(..., scaler=grad_scaler(device))``, and
    ``choose_precision`` says which the device takes. The weights stay float32 in ``model``.
    """

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"Autocast wraps a model (an nn.Module), got {type(model).__name__} {_args.shown(model)}."
            )
        if dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"autocast computes in torch.bfloat16 or torch.float16, got {dtype}")
        self.model = model
        self.dtype = dtype

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        device_type = next(self.model.parameters()).device.type
        with torch.autocast(device_type, dtype=self.dtype):
            outputs = self.model(*args, **kwargs)
        return outputs.float()


class LossStep(nn.Module):
    """A training step's forward half as one module: ``LossStep(model)(inputs, targets)`` returns
    the loss and the number of right answers.

    ``train_epoch(model, ..., loss_step=torch.compile(LossStep(model)))`` then compiles the loss and the
    count with the model into one graph, instead of the model alone with the loss and the count
    launched eagerly after it: fewer kernels a step, which pays where a step is bound by launching
    them. Measured on one H100 (``scripts/fastpath_probe.py``, 2026-11-23, ``Tudui`` at batch 2,048,
    bf16, fused Adam): ``train_epoch`` ran at 634,626 images/s with the model compiled alone, and a
    loop like it with this step compiled (without its per-step check for a non-finite loss) at
    775,818. ``train_epoch`` with this step compiled under CUDA graphs (``mode="reduce-overhead"``),
    as ``make bench`` runs it on CUDA, trained at 806,669 images/s in the bench's first run on an H100
    later that day, against 516,622 for the model compiled alone in the bench before. The loss is
    computed from ``model``'s outputs as ``loss_fn`` gives it (``nn.CrossEntropyLoss()`` by default).
    """

    def __init__(self, model: nn.Module, loss_fn: nn.Module | None = None) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"LossStep wraps a model (an nn.Module), got {type(model).__name__} {_args.shown(model)}."
            )
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss() if loss_fn is None else loss_fn

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.model(inputs)
        return self.loss_fn(outputs, targets), (outputs.argmax(dim=1) == targets).sum()


@contextlib.contextmanager
def cudnn_autotuner(enabled: bool) -> Iterator[bool]:
    """``torch.backends.cudnn.benchmark`` set to ``enabled`` inside the block, and put back after.

    With it on, cuDNN times its candidate algorithms for a convolution (up to
    ``torch.backends.cudnn.benchmark_limit`` of them, 10 by default) the first time it meets its
    shape, and keeps the fastest; with it off (PyTorch's default) it takes the one its heuristics
    name, without timing. Either way the plan it picked is kept for that shape for the rest of the
    process: the key of PyTorch's plan cache has no place for the flag. So the flag acts only on
    shapes the process has not run yet, and putting it back undoes nothing; to compare the two,
    run each in a process of its own (``scripts/fastpath_probe.py`` does). For a network whose
    shapes never change (``Tudui``'s batches all have one shape but the last) the timing is paid
    once. Only CUDA's convolutions read the flag; on a CPU it changes nothing. The price is
    repeatability: the timing can pick another algorithm in the next run, and with it other
    rounding, so two runs from one seed may differ in their last bits (``07_memory_and_errors``,
    deterministic algorithms).

    Why the fast path may want it: in the H100 profile of its loop
    (``results/gpu/nvidia-h100-80gb-hbm3/fastpath-probe-2026-11-23.log``) one generic bf16 NHWC
    convolution kernel, ``convolve_common_engine_float_NHWC``, took 13.917 ms of the 58.181 ms
    of kernel time over 25 steps (23.9%) with the flag off. Whether the autotuner picks a faster
    one there is for the probe, and for two benches (``make bench`` with and without
    ``--cudnn-benchmark on``), to measure on a GPU.
    """
    if not isinstance(enabled, bool):
        raise TypeError(
            f"cudnn_autotuner(enabled) takes True or False, got {type(enabled).__name__} "
            f"{_args.shown(enabled)}."
        )
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        yield enabled
    finally:
        torch.backends.cudnn.benchmark = saved


class PaddedInputConv2d(nn.Conv2d):
    """A copy of ``conv`` over ``channels`` input channels that pads its input with zero channels.

    The weights of the added channels start at zero and meet only zeros, so the layer computes what
    ``conv`` computes, and their gradients are zero: SGD and Adam leave them at zero (weight decay too:
    a decayed zero is zero). ``added_weights_max`` reads back how far they moved, so that a run on a
    GPU, whose kernels round differently, shows that they stayed at zero. What changes is the kernel:
    cuDNN's fast bf16 kernels for ``channels_last`` want a channel count divisible by 8 (or 4), and an
    image's 3 channels are neither. On one H100 (2026-11-23, ``scripts/fastpath_probe.py``) one generic
    NHWC convolution kernel, called once a step, took 24% of the fast path's kernel time; whether this
    layer removes it was not profiled; the probe's throughput, later that day: 595,488 images/s with
    8 channels against 545,903 with 3 with the model compiled alone, but 637,973 against 830,346
    with the whole step under CUDA graphs, where 3 channels are faster. Under ``torch.compile`` the
    padding joins the conversion of the input that happens anyway.
    """

    def __init__(self, conv: nn.Conv2d, channels: int) -> None:
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"PaddedInputConv2d copies an nn.Conv2d, got {type(conv).__name__}.")
        channels = _args.integer(channels, "channels", "PaddedInputConv2d", minimum=1)
        if conv.groups != 1 or channels < conv.in_channels:
            raise ValueError(
                f"PaddedInputConv2d: cannot widen a convolution of {conv.in_channels} input channels"
                f"{f' in {conv.groups} groups' if conv.groups != 1 else ''} to {channels}; it adds zero "
                "channels to an ungrouped convolution, so give at least as many as it has."
            )
        super().__init__(
            channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            conv.dilation,
            bias=conv.bias is not None,
            padding_mode=conv.padding_mode,
            device=conv.weight.device,
            dtype=conv.weight.dtype,
        )
        self.given_channels = conv.in_channels
        with torch.no_grad():
            self.weight.zero_()
            self.weight[:, : conv.in_channels].copy_(conv.weight)
            if conv.bias is not None:
                self.bias.copy_(conv.bias)

    def pad_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (N, C, H, W) or (C, H, W) with zero channels added up to ``in_channels``, in its layout."""
        missing = self.in_channels - x.shape[-3]
        if missing <= 0:
            return x
        channels_last = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
        x = nn.functional.pad(x, (0, 0, 0, 0, 0, missing))
        # F.pad keeps channels_last in the torch versions tried; say so rather than rely on it
        return x.contiguous(memory_format=torch.channels_last) if channels_last else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.pad_input(x))


def added_weights_max(model: nn.Module) -> float | None:
    """The largest ``|weight|`` of the channels that ``widen_first_conv`` added (0.0 while the model is
    the same network as before), or ``None`` for a model without a ``PaddedInputConv2d``."""
    added = [m.weight[:, m.given_channels :] for m in model.modules() if isinstance(m, PaddedInputConv2d)]
    if not added:
        return None
    return max(float(w.detach().abs().max()) if w.numel() else 0.0 for w in added)


def widen_first_conv(model: nn.Module, channels: int) -> nn.Module:
    """``model`` with its first ``nn.Conv2d`` replaced by a ``PaddedInputConv2d`` over ``channels``
    input channels: the same function, fed the same images (3 channels for ``Tudui``). In place; the
    model is returned. Call it before ``.to(memory_format=...)`` and before building the optimizer."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"widen_first_conv takes a model (an nn.Module), got {type(model).__name__}.")
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else None
            wide = PaddedInputConv2d(module, channels)
            if parent is None:
                raise TypeError(
                    "widen_first_conv: the model is a convolution itself; use PaddedInputConv2d(conv, n)."
                )
            setattr(parent, child, wide)
            return model
    raise ValueError(f"widen_first_conv: {type(model).__name__} has no nn.Conv2d to widen.")


# ---- a learning-rate recipe for large batches ----------------------------------------------------

_DECAYS = ("cosine", "linear", "none")
_SCALINGS = ("linear", "sqrt")


@dataclass(frozen=True)
class LargeBatchSchedule:
    """The learning rate of every step when the batch grows: scale it, warm it up, decay it.

    ``LargeBatchSchedule(batch_size=512, steps_per_epoch=98, epochs=10)`` for ``Tudui``:

    - **the linear scaling rule**: the peak learning rate is the seed's (``base_lr`` 0.01 at
      ``base_batch_size`` 64) times ``batch_size / base_batch_size``: 0.08 at batch 512. A batch
      *k* times larger takes *k* times fewer steps per epoch; a *k* times larger step keeps the
      distance travelled per epoch about the same (Goyal et al. 2017, "Accurate, Large Minibatch
      SGD"). ``max_lr`` caps it;
    - **a linear warm-up** over the first ``warmup_epochs`` (default one epoch), from ``base_lr``
      (the seed's rate, or Adam's base rate) up to the peak: the rule is least safe in the first
      steps, when the weights are random and the gradients change fast;
    - **a decay** from the peak to ``final_lr``, reached at the end of the last step: ``"cosine"``
      (half a cosine), ``"linear"``, or ``"none"`` (stay at the peak). A constant large rate can
      also fail late, as the network sharpens: the first H100 bench (batch 512, lr 0.08 from step
      0 to the end) ended one run of three at 10.0% test accuracy, and on the CPU the same rate
      diverged in epoch 8 of 10 (below), where the decaying one did not.

    ``lr_at(step)`` gives the rate of step ``step`` (from 0 to ``total_steps - 1``, counted over all
    epochs); ``apply(optimizer, step)`` sets it in every parameter group, before that step.
    ``warmup_epochs=0, decay="none"`` is the peak from the first step (for SGD: plain linear scaling).

    **Its limits.** The rule holds while a step of ``batch_size`` samples is still small against
    the curvature of the loss; beyond some batch size a *k* times larger step overshoots, and the
    rule gives rates that diverge even after a warm-up (for ResNet-50 on ImageNet, with momentum,
    Goyal et al. found that point near batch 8,192). For ``Tudui`` (SGD without momentum, no
    normalisation) on the course's stand-in, ``scripts/large_batch.py`` measured on a CPU, all
    50,000 images, bf16 (``results/large-batch-cpu-amd-epyc.json``): at batch 512 the rule's
    constant 0.08 kept the seed pipeline's pace for 7 epochs and then diverged (NaN in epoch 8);
    the recipe did not diverge but ended at 32.8% after 10 epochs, against the seed pipeline's
    52.2%, so at batch 512 it needs more epochs than the seed (``make bench`` gives it three
    times as many); at batch 2,048 (lr 0.32) and 8,192 (lr 1.28) the recipe diverged (NaN in
    epochs 4 and 2). So the rule stops working between batch 512 and 2,048 here: cap the rate
    (``max_lr``) beyond, and check every run's accuracy.

    **Past it: Adam.** Adam divides each weight's step by a running estimate of its gradient's
    size, so no step grows with the gradients the way SGD's does. Its rate is usually scaled by
    the square root of the batch: ``scaling="sqrt"`` with ``base_lr=ADAM_BASE_LR`` (0.001, PyTorch's
    default) at ``base_batch_size=ADAM_BASE_BATCH_SIZE`` (128) gives 0.004 at batch 2,048. With the
    same warm-up and cosine decay over 15 epochs (``results/large-batch-adam-cpu-amd-epyc.json``,
    the same CPU, data and settings as above), three seeds at batch 2,048 each reached the seed
    pipeline's 52.2% after epoch 6 (53.4%, 54.5% and 53.6%) and ended at 65.0%, 65.3% and 63.1%; at
    batch 8,192 (0.008) the square-root rule failed too: the training loss rose to 27.0, 7.2 and
    19.8 (a uniform guess scores 2.3), the test accuracy stayed below 14% for 6 epochs, and the
    runs ended at 20.8%, 22.5% and 22.4%. That is why ``make bench``'s
    fast path on a GPU trains at batch 2,048 with Adam.
    """

    batch_size: int
    steps_per_epoch: int
    epochs: int
    base_batch_size: int = SEED_BATCH_SIZE
    base_lr: float = SEED_LR
    warmup_epochs: float = 1.0
    decay: str = "cosine"
    final_lr: float = 0.0
    max_lr: float | None = None
    scaling: str = "linear"

    def __post_init__(self) -> None:
        caller = "LargeBatchSchedule"
        for name in ("batch_size", "steps_per_epoch", "epochs", "base_batch_size"):
            _args.integer(getattr(self, name), name, caller, minimum=1)
        for name in ("base_lr", "warmup_epochs", "final_lr", "max_lr"):
            value = getattr(self, name)
            if value is None and name == "max_lr":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise TypeError(f"{caller}: {name} must be a finite number, got {_args.shown(value)}.")
            if value < 0 or (value == 0 and name in ("base_lr", "max_lr")):
                bound = "more than" if name in ("base_lr", "max_lr") else "at least"
                raise ValueError(f"{caller}: {name} must be {bound} 0, got {value}.")
        if self.decay not in _DECAYS:
            raise ValueError(f"{caller}: decay must be one of {_DECAYS}, got {_args.shown(self.decay)}.")
        if self.scaling not in _SCALINGS:
            raise ValueError(
                f"{caller}: scaling must be one of {_SCALINGS} ('linear' for SGD, 'sqrt' for Adam), "
                f"got {_args.shown(self.scaling)}."
            )
        if self.final_lr > self.peak_lr:
            raise ValueError(
                f"{caller}: final_lr {self.final_lr} is above the peak {self.peak_lr:g}: a decay goes down."
            )

    @property
    def scaled_lr(self) -> float:
        """``base_lr`` times ``batch_size / base_batch_size`` (``scaling="linear"``) or its square root."""
        factor = self.batch_size / self.base_batch_size
        return self.base_lr * (factor if self.scaling == "linear" else math.sqrt(factor))

    @property
    def peak_lr(self) -> float:
        """``scaled_lr`` (the scaling rule's rate), at most ``max_lr``."""
        return self.scaled_lr if self.max_lr is None else min(self.scaled_lr, self.max_lr)

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    @property
    def warmup_steps(self) -> int:
        """Steps of the warm-up: ``warmup_epochs`` epochs' worth, rounded, never more than all the steps."""
        return min(round(self.warmup_epochs * self.steps_per_epoch), self.total_steps)

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0 is the first step of the first epoch)."""
        step = _args.integer(step, "step", "LargeBatchSchedule.lr_at", minimum=0)
        if step >= self.total_steps:
            raise ValueError(
                f"LargeBatchSchedule.lr_at: step {step} is past the last step ({self.total_steps - 1}): "
                f"the schedule was made for {self.epochs} epochs of {self.steps_per_epoch} steps."
            )
        peak, warmup = self.peak_lr, self.warmup_steps
        start = min(self.base_lr, peak)
        if step < warmup:
            return start + (peak - start) * step / warmup
        if self.decay == "none":
            return peak
        done = (step - warmup) / (self.total_steps - warmup)  # reaches 1 just after the last step
        if self.decay == "linear":
            return peak + (self.final_lr - peak) * done
        return self.final_lr + (peak - self.final_lr) * 0.5 * (1 + math.cos(math.pi * done))

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set ``lr_at(step)`` in every parameter group of ``optimizer``; return it."""
        lr = self.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def describe(self) -> str:
        """One line: the peak, the warm-up and the decay, in words."""
        scaled = self.scaled_lr
        ratio = f"{self.batch_size}/{self.base_batch_size}"
        peak = f"lr {self.peak_lr:g}" + (
            f" (max_lr; the rule gives {scaled:g})"
            if self.peak_lr < scaled
            else f" = {self.base_lr:g} x " + (ratio if self.scaling == "linear" else f"sqrt({ratio})")
        )
        warmup = (
            f"a warm-up from {min(self.base_lr, self.peak_lr):g} over {self.warmup_steps} steps"
            if self.warmup_steps
            else "no warm-up"
        )
        rest = self.total_steps - self.warmup_steps
        decay = "constant" if self.decay == "none" else f"a {self.decay} decay to {self.final_lr:g}"
        return f"batch {self.batch_size}: {peak}, {warmup}, then {decay} over {rest} steps"


# ---- mixed precision that works everywhere -------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    """What ``choose_precision`` picked: the autocast dtype (``None``: float32), whether to scale the loss."""

    dtype: torch.dtype | None
    scaler: bool
    why: str

    @property
    def name(self) -> str:
        if self.dtype is None:
            return "float32"
        return {torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast + GradScaler"}[self.dtype]


def choose_precision(device: torch.device | str) -> Precision:
    """The mixed precision ``device`` can train in: bf16, else fp16 with a gradient scaler, else float32.

    - **bf16 autocast** where the device computes bf16 natively (``bf16_supported``: NVIDIA GPUs
      from Ampere, the A100 and H100, on; CPUs with AVX512-BF16 or AMX). bf16 has float32's range,
      so gradients never overflow and no scaler is needed.
    - **fp16 autocast with a ``torch.amp.GradScaler``** on other CUDA GPUs, such as Colab's T4
      (Turing: fp16 tensor cores, no bf16). fp16's largest value is 65,504 and its smallest normal
      one 6e-5: small gradients would round to zero, so the loss is multiplied by a large scale
      before ``backward()`` and the gradients divided by it before the step; a step whose
      gradients overflowed (inf or NaN) is skipped and the scale halved (``grad_scaler``).
    - **float32** anywhere else (a CPU without native bf16, Apple's MPS, ...): emulated 16-bit
      arithmetic is slower than float32, so it does not pay.
    """
    device = as_device(device, name="device", caller="choose_precision")
    return _precision_for(
        device.type, bf16_native=bf16_supported(device), cuda_available=torch.cuda.is_available()
    )


def _precision_for(device_type: str, *, bf16_native: bool, cuda_available: bool) -> Precision:
    """``choose_precision``'s rule, from the facts it reads off the machine."""
    if bf16_native:
        return Precision(torch.bfloat16, False, f"{device_type} computes bf16 natively (bf16_supported)")
    if device_type == "cuda" and cuda_available:
        return Precision(
            torch.float16,
            True,
            "this CUDA GPU has no native bf16 (older than Ampere, e.g. a T4): fp16 with a gradient scaler",
        )
    return Precision(None, False, f"{device_type} has no native 16-bit arithmetic that pays: float32")


def grad_scaler(device: torch.device | str, **kwargs: Any) -> torch.amp.GradScaler:
    """A ``torch.amp.GradScaler`` for ``device``'s type (``"cuda"``, ``"cpu"``); ``kwargs`` go to it.

    ``torch.amp.GradScaler(device_type)`` exists from torch 2.3, with kernels for the CPU too
    (pytorch PR 109281; checked here on torch 2.14, and Colab's torch 2.6 or later has them); an
    older torch gets ``torch.cuda.amp.GradScaler`` on CUDA, and no scaler on the CPU.
    Use it as ``scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()``, which is
    what ``train_epoch(..., scaler=scaler)`` does. With a plain optimizer, ``scaler.step`` reads
    back whether the gradients overflowed (one wait for the GPU per step); a fused optimizer
    (``sgd(..., fused=True)``) takes the scale and the overflow flag on the device and skips that wait.
    """
    device = as_device(device, name="device", caller="grad_scaler")
    amp_scaler = getattr(torch.amp, "GradScaler", None)
    if amp_scaler is not None:
        return amp_scaler(device.type, **kwargs)
    if device.type == "cuda":  # torch < 2.3
        return torch.cuda.amp.GradScaler(**kwargs)
    raise RuntimeError(
        f"grad_scaler: this torch ({torch.__version__}) has no GradScaler for {device.type}; "
        "torch.amp.GradScaler needs torch 2.3 or later."
    )


def sgd(
    params: Iterable, lr: float, *, fused: bool = False, momentum: float = 0.0
) -> tuple[torch.optim.SGD, str]:
    """``torch.optim.SGD(params, lr, momentum)``, fused where asked and possible (momentum 0: the seed's).

    Returns the optimizer and a few words on which implementation it uses. ``fused=True`` asks for
    the fused implementation (one kernel for all parameters; on CUDA, and on the CPU since pytorch
    PR 123629, 2024); where this torch or device has none, the default one is used (on a GPU
    ``foreach``: a few multi-tensor kernels; on a CPU a loop over the tensors) and the words say so.
    """
    return _maybe_fused(torch.optim.SGD, "SGD", params, fused, lr=lr, momentum=momentum)


def adam(params: Iterable, lr: float, *, fused: bool = False) -> tuple[torch.optim.Adam, str]:
    """``torch.optim.Adam(params, lr)``, fused where asked and possible: the fast path's optimizer past
    the batch sizes where SGD's linear scaling rule holds (see ``LargeBatchSchedule``).

    Returns the optimizer and a few words on which implementation it uses, as ``sgd`` does (fused
    Adam: on CUDA since torch 2.0, on the CPU since 2.4).
    """
    return _maybe_fused(torch.optim.Adam, "Adam", params, fused, lr=lr)


def _maybe_fused(cls: type, name: str, params: Iterable, fused: bool, **kwargs: Any) -> tuple[Any, str]:
    params = list(params)
    if not fused:
        return cls(params, **kwargs), "default"
    try:
        optimizer = cls(params, fused=True, **kwargs)
        try:  # the device check happens at the first step; make it now, where this torch has it
            from torch.optim.optimizer import _device_dtype_check_for_fused
        except ImportError:
            _device_dtype_check_for_fused = None
        if _device_dtype_check_for_fused is not None:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    _device_dtype_check_for_fused(p)
        return optimizer, "fused"
    except (TypeError, RuntimeError) as error:
        reason = str(error).split("\n")[0]
        return cls(params, **kwargs), f"default (no fused {name} here: {reason})"


# ---- the training loop of the fast path ----------------------------------------------------------


@dataclass(frozen=True)
class EpochStats:
    """What ``train_epoch`` measured: mean loss per sample, training accuracy, steps, the last step's rate."""

    loss: float
    accuracy: float
    steps: int
    samples: int
    lr: float | None
    nonfinite_losses: int = 0
    scale: float | None = None


def train_epoch(
    model: nn.Module,
    loader: Iterable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
    *,
    loss_fn: nn.Module | None = None,
    schedule: LargeBatchSchedule | None = None,
    first_step: int = 0,
    scaler: torch.amp.GradScaler | None = None,
    non_blocking: bool = False,
    loss_step: Any = None,
) -> EpochStats:
    """One pass over ``loader``: ``helpers.train.train_one_epoch``'s loop, with a schedule and a scaler.

    Before each step the ``schedule`` (if any) sets the learning rate of step ``first_step + i``
    (pass ``epoch * len(loader)``). With a ``scaler`` the loss is scaled before ``backward()`` and
    ``scaler.step`` skips a step whose gradients overflowed. Batches are moved to ``device`` with
    ``non_blocking`` (which overlaps the copy with the GPU's work when the loader pins memory).

    ``loss_step`` (a ``LossStep`` of ``model``, compiled or not) computes the loss and the count of right
    answers in one call, in place of ``model``, ``loss_fn`` and the count run one after the other;
    ``loss_fn`` is then the step's own.

    Nothing is read back from the device until the epoch ends: then the loss, the accuracy and a
    check that the loss stayed finite come back in one transfer. A NaN or infinite loss raises
    ``FloatingPointError`` at the end of the epoch; with a scaler such losses are counted instead
    (the scaler skipped those steps), and only weights that became NaN or infinite raise.
    """
    device = as_device(device, name="device", caller="train_epoch", check_available=True)
    loss_fn = nn.CrossEntropyLoss() if loss_fn is None else loss_fn
    first_step = _args.integer(first_step, "first_step", "train_epoch", minimum=0)
    if loss_step is not None and not callable(loss_step):
        raise TypeError(
            "train_epoch: loss_step must be a LossStep of the model (compiled or not), got "
            f"{type(loss_step).__name__}."
        )
    model.train()
    if isinstance(loss_step, nn.Module):
        loss_step.train()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    nonfinite = torch.zeros((), device=device, dtype=torch.long)
    steps = samples = 0
    lr = None
    for step, (inputs, targets) in enumerate(loader):
        if schedule is not None:
            lr = schedule.apply(optimizer, first_step + step)
        inputs = inputs.to(device, non_blocking=non_blocking)
        targets = targets.to(device, non_blocking=non_blocking)
        if loss_step is None:
            outputs = model(inputs)
            right = (outputs.argmax(dim=1) == targets).sum()  # now: the next forward overwrites graph outputs
            loss = loss_fn(outputs, targets)
        else:
            loss, right = loss_step(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        loss = loss.detach()
        total_loss += loss * targets.size(0)
        correct += right
        nonfinite += ~torch.isfinite(loss)
        steps += 1
        samples += targets.size(0)
    if steps == 0:
        raise ValueError("train_epoch: the loader produced no batches")
    loss_sum, right_sum, bad = torch.stack(
        [total_loss, correct.to(total_loss.dtype), nonfinite.to(total_loss.dtype)]
    ).tolist()
    bad = int(bad)
    weights_finite = all(bool(torch.isfinite(p).all()) for g in optimizer.param_groups for p in g["params"])
    if (bad and scaler is None) or not weights_finite:
        what = (
            "the weights are NaN or infinite"
            if not weights_finite
            else f"{bad} of {steps} losses were NaN or infinite"
        )
        raise FloatingPointError(
            f"train_epoch: training diverged in this epoch (steps {first_step} to {first_step + steps - 1}): "
            f"{what}. Lower the learning rate, or warm it up (LargeBatchSchedule)."
        )
    if lr is None:
        lr = optimizer.param_groups[0]["lr"]
        lr = float(lr) if not isinstance(lr, torch.Tensor) else float(lr.item())
    return EpochStats(
        loss=loss_sum / samples,
        accuracy=right_sum / samples,
        steps=steps,
        samples=samples,
        lr=lr,
        nonfinite_losses=bad,
        scale=float(scaler.get_scale()) if scaler is not None else None,
    )


def timed_epoch(
    model: nn.Module,
    loader: Iterable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
    *,
    warmup_batches: int = 2,
    **train_options: Any,
) -> tuple[float, EpochStats]:
    """Images per second of one ``train_epoch`` over ``loader``, and its ``EpochStats``.

    The first ``warmup_batches`` of ``loader`` are trained first, untimed (the first calls pay for
    cuDNN's choices, memory and, compiled, compilation); then one whole epoch is timed with a
    ``helpers.timing.Stopwatch``, which waits for the device. ``train_options`` go to ``train_epoch``
    (``scaler=grad_scaler(device)`` for fp16, ``schedule=``, ...). Used by ``06_performance`` for the
    fp16 step on GPUs without native bf16.
    """
    from helpers.timing import Stopwatch  # here: helpers.timing is not needed to import this module

    warmup_batches = _args.integer(warmup_batches, "warmup_batches", "timed_epoch", minimum=0)
    warmup = list(itertools.islice(loader, warmup_batches)) if warmup_batches else []
    if warmup:
        train_epoch(model, warmup, optimizer, device, **train_options)
    with Stopwatch(device) as watch:
        stats = train_epoch(model, loader, optimizer, device, **train_options)
    return stats.samples / watch.seconds, stats
