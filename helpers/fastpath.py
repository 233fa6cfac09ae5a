"""The fast path of ``06_performance``: data on the device, mixed precision, a fused optimizer.

``DeviceLoader`` serves batches from tensors that already live on the device: no per-sample Python,
no PIL images, no host-to-device copy per batch. For the same random state it yields exactly the
batches that ``DataLoader(TensorDataset(...), shuffle=True)`` yields, so the two pipelines can be
compared on the same data in the same order.

``choose_precision`` and ``grad_scaler`` pick the mixed precision a device can use (bf16, else fp16
with a ``GradScaler`` on CUDA, else float32); ``sgd`` builds a fused optimizer where there is one;
``train_epoch`` and ``timed_epoch`` train one epoch with all of these, one learning rate per step.
"""

from __future__ import annotations

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
    "Precision",
    "bf16_supported",
    "choose_precision",
    "dataset_tensors",
    "grad_scaler",
    "sgd",
    "timed_epoch",
    "train_epoch",
]


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
    identical to what the per-sample pipeline produces. The conversion runs once, on the host; the
    finished tensors are then copied to ``device`` in one go (one blocking copy each).
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
    reports them; without them bf16 is emulated and slower than float32. Other devices, Apple's
    MPS among them: False. On MPS that is no finding that bf16 is slow there: PyTorch's autocast
    accepts bf16 on ``mps`` (torch 2.6 to 2.9 only from macOS 14), and the course has not measured it.
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
    - **float32** anywhere else. On a CPU without native bf16, bf16 would be emulated, which is
      slower than float32. On Apple's MPS (and any other accelerator) float32 is a default, not a
      finding: PyTorch's autocast accepts float16 and bf16 on ``mps``, but the course has not
      measured mixed precision on an Apple GPU, so it does not switch it on there.
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
    if device_type == "cpu":
        return Precision(None, False, "this CPU has no native bf16 (bf16_supported): float32")
    if device_type == "cuda":
        return Precision(None, False, "no usable CUDA GPU here: float32")
    return Precision(
        None, False, f"float32 on {device_type}: the course has not measured mixed precision there"
    )


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
    """``torch.optim.SGD(params, lr, momentum)``, fused where asked and possible (momentum 0 by default).

    Returns the optimizer and a few words on which implementation it uses. ``fused=True`` asks for
    the fused implementation (one kernel for all parameters; on CUDA, and on the CPU since pytorch
    PR 123629, 2024); where this torch or device has none, the default one is used (on a GPU
    ``foreach``: a few multi-tensor kernels; on a CPU a loop over the tensors) and the words say so.
    """
    return _maybe_fused(torch.optim.SGD, "SGD", params, fused, lr=lr, momentum=momentum)


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
    schedule: Any = None,
    first_step: int = 0,
    scaler: torch.amp.GradScaler | None = None,
    non_blocking: bool = False,
    loss_step: Any = None,
) -> EpochStats:
    """One pass over ``loader``: ``helpers.train.train_one_epoch``'s loop, with a schedule and a scaler.

    Before each step ``schedule.apply(optimizer, first_step + i)`` (if a ``schedule`` is given)
    sets the learning rate of that step (pass ``first_step=epoch * len(loader)``). With a
    ``scaler`` the loss is scaled before ``backward()`` and ``scaler.step`` skips a step whose
    gradients overflowed. Use a fused optimizer with a scaler (``sgd(..., fused=True)``): with any
    other, ``scaler.step`` reads the overflow flag back from the GPU at every step (``.item()``), a
    hidden wait for the queue. Batches are moved to ``device`` with ``non_blocking``: from pinned
    memory such a copy returns at once, which frees Python to queue the next work; on the same
    stream the copy still runs in order with the kernels, not during them (that needs a second
    CUDA stream). From pageable memory every copy waits for the queue.

    ``loss_step`` (a callable ``(inputs, targets) -> (loss, right answers)`` built around ``model``,
    compiled or not) replaces ``model``, ``loss_fn`` and the count, run one after the other.

    Nothing is read back from the device until the epoch ends (with a scaler: if the optimizer is
    fused): then the loss, the accuracy and a check that the loss stayed finite come back in one
    transfer. A NaN or infinite loss raises
    ``FloatingPointError`` at the end of the epoch; with a scaler such losses are counted instead
    (the scaler skipped those steps), and only weights that became NaN or infinite raise.
    """
    device = as_device(device, name="device", caller="train_epoch", check_available=True)
    loss_fn = nn.CrossEntropyLoss() if loss_fn is None else loss_fn
    first_step = _args.integer(first_step, "first_step", "train_epoch", minimum=0)
    if loss_step is not None and not callable(loss_step):
        raise TypeError(
            "train_epoch: loss_step must be a callable (inputs, targets) -> (loss, right answers), got "
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
            f"{what}. Lower the learning rate, or warm it up (a schedule)."
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
