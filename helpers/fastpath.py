"""The fast path of ``06_performance``: data on the device, mixed precision, and a training loop
that reads nothing back from the device until the epoch ends."""

import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from helpers import _args
from helpers.devices import as_device
from helpers.timing import Stopwatch

__all__ = [
    "Autocast",
    "DeviceLoader",
    "EpochStats",
    "Precision",
    "bf16_supported",
    "choose_precision",
    "dataset_tensors",
    "fast_path_epoch",
    "grad_scaler",
    "timed_epoch",
]


def _labels(dataset) -> np.ndarray:
    """``dataset.targets`` as an array of class numbers 0, 1, 2, ..."""
    labels = np.asarray(dataset.targets)
    numbers = labels.dtype.kind in "iuf"
    if not numbers or not (labels == np.round(labels)).all() or not (labels >= 0).all():
        raise TypeError(  # NaN too: NaN != NaN
            f"dataset_tensors: dataset.targets must be class numbers 0, 1, 2, ...; "
            f"got {dataset.targets!r:.40}."
        )
    return labels


def dataset_tensors(dataset, device="cpu", *, memory_format=torch.contiguous_format) -> tuple:
    """The images and labels of a dataset with ``.data`` (uint8 images N x H x W x 3) and
    ``.targets``, as CIFAR-10's, as two tensors on ``device``: images (N, 3, H, W) in [0, 1] as
    ``transforms.ToTensor()`` makes them, and the labels."""
    if not (hasattr(dataset, "data") and hasattr(dataset, "targets")):
        raise TypeError(
            f"dataset_tensors needs a dataset with .data and .targets; got {dataset!r:.40}."
        )
    device = as_device(device, caller="dataset_tensors", check_available=True)
    if not isinstance(memory_format, torch.memory_format):
        raise TypeError(
            f"dataset_tensors: memory_format is {memory_format!r}; give a torch.memory_format, "
            "e.g. memory_format=torch.channels_last."
        )
    data = torch.as_tensor(dataset.data)
    if data.dtype != torch.uint8 or data.dim() != 4 or data.shape[-1] != 3:
        raise ValueError(
            f"dataset_tensors: dataset.data must be uint8 images (N, H, W, 3), not {data.dtype} "
            f"{tuple(data.shape)}."
        )
    labels = _labels(dataset)
    if labels.shape != (len(data),):
        raise ValueError(
            f"dataset_tensors: {len(data)} images but {list(labels.shape)} targets; give one per "
            "image."
        )
    # divided on the host: a GPU divides by 255 as a product with 1/255, which differs from
    # ToTensor in the last bit
    images = data.permute(0, 3, 1, 2).float().div(255).contiguous(memory_format=memory_format)
    return images.to(device), torch.from_numpy(labels.astype(np.int64)).to(device)


def _check_tensors(tensors: tuple) -> None:
    if any(isinstance(t, int) and not isinstance(t, bool) for t in tensors):
        raise TypeError("DeviceLoader: give the batch size by name: batch_size=64.")
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        kinds = ", ".join(type(t).__name__ for t in tensors) or "nothing"
        raise TypeError(
            f"DeviceLoader takes tensors, not {kinds}: make them with dataset_tensors(dataset, "
            "device) (or torch.from_numpy) first."
        )
    if tensors[0].dim() == 0 or len(tensors[0]) == 0:
        raise ValueError("DeviceLoader: give at least one sample, one row per sample.")
    if len({len(t) if t.dim() else -1 for t in tensors}) != 1:
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        raise ValueError(f"DeviceLoader: give one row per sample in each tensor, not {shapes}.")
    if len({t.device for t in tensors}) != 1:
        raise ValueError(
            "DeviceLoader: the tensors are on different devices; move them to one, x.to(device)."
        )


class DeviceLoader:
    """``DeviceLoader(images, labels, batch_size=64, shuffle=True)``: an epoch of batches on their
    device per pass, drawn as ``DataLoader(TensorDataset(images, labels), ...)`` draws them: the
    same seed gives the same batches."""

    def __init__(
        self, *tensors: torch.Tensor, batch_size: int, shuffle: bool = False, generator=None
    ):
        _check_tensors(tensors)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"DeviceLoader: generator is a torch.Generator or None, not {generator!r:.40}."
            )
        self.tensors = tensors
        self.generator = generator
        self.batch_size = _args.integer(batch_size, "batch_size", "DeviceLoader", minimum=1)
        self.shuffle = _args.boolean(shuffle, "shuffle", "DeviceLoader")

    def __len__(self) -> int:
        return math.ceil(len(self.tensors[0]) / self.batch_size)

    def _on_cpu(self) -> bool:
        return self.generator is None or self.generator.device.type == "cpu"

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        if self._on_cpu():  # the number a DataLoader draws for its workers when an iterator is made
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        return self._batches()

    def _order(self) -> torch.Tensor:
        """The order of one epoch, drawn as ``RandomSampler`` draws it."""
        n = len(self.tensors[0])
        generator = self.generator
        if generator is None:  # a fresh generator, seeded from the global one
            seed = int(torch.empty((), dtype=torch.int64).random_())
            generator = torch.Generator().manual_seed(seed)
        order = torch.randperm(n, generator=generator, device=generator.device)
        return order.to(self.tensors[0].device)

    def _batches(self) -> Iterator[tuple[torch.Tensor, ...]]:
        n = len(self.tensors[0])
        order = self._order() if self.shuffle else None  # drawn at the first batch
        for start in range(0, n, self.batch_size):
            if order is None:
                rows = slice(start, start + self.batch_size)
            else:
                rows = order[start : start + self.batch_size]
            yield tuple(t[rows] for t in self.tensors)
        if self.shuffle and self.generator is not None and self._on_cpu():
            torch.randperm(n, generator=self.generator)  # the spare order RandomSampler draws


def bf16_supported(device: torch.device | str) -> bool:
    """Whether ``device`` computes bfloat16 natively (CUDA from Ampere on, CPUs with AVX512-BF16,
    AMX or Arm's BF16), so that bf16 autocast can pay; False elsewhere (Apple's MPS: unmeasured)."""
    device = as_device(device, caller="bf16_supported")
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    found = getattr(torch.cpu, "get_capabilities", dict)()  # torch < 2.7: {}
    return any(bool(found.get(name)) for name in ("avx512_bf16", "amx_bf16", "bf16", "sve_bf16"))


def _as_float32(outputs: Any) -> Any:
    """``outputs`` with its floating-point tensors in float32, in tuples, lists and dicts too."""
    if isinstance(outputs, torch.Tensor):
        return outputs.float() if outputs.is_floating_point() else outputs
    if isinstance(outputs, tuple) and hasattr(outputs, "_fields"):  # a named tuple
        return type(outputs)(*[_as_float32(item) for item in outputs])
    if isinstance(outputs, list | tuple):
        return type(outputs)(_as_float32(item) for item in outputs)
    if isinstance(outputs, dict):
        return {key: _as_float32(value) for key, value in outputs.items()}
    return outputs


class Autocast(nn.Module):
    """``Autocast(model)``: ``model``'s forward pass (only) under ``torch.autocast``, its outputs
    float32, so that a training loop runs in mixed precision unchanged. ``torch.float16`` needs a
    ``grad_scaler``."""

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"Autocast wraps a model (an nn.Module), got {_args.shown(model)}.")
        if dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"Autocast computes in torch.bfloat16 or torch.float16, got {dtype}.")
        self.model = model
        self.dtype = dtype

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [*self.model.parameters(), *args, *kwargs.values()]
        found = [t.device.type for t in tensors if isinstance(t, torch.Tensor)]
        if not found:
            raise TypeError("Autocast: the model has no parameters and was given no tensor.")
        with torch.autocast(found[0], dtype=self.dtype):
            outputs = self.model(*args, **kwargs)
        return _as_float32(outputs)


class Precision(NamedTuple):
    """``choose_precision``'s pick: a name, the autocast dtype (None: none), whether to scale the
    loss, and why."""

    name: str
    dtype: torch.dtype | None
    scaler: bool
    why: str


def choose_precision(device: torch.device | str) -> Precision:
    """bf16 where ``device`` computes it natively, else fp16 with a GradScaler on CUDA (a T4), else
    float32."""
    device = as_device(device, caller="choose_precision")
    if bf16_supported(device):
        why = f"{device.type} computes bf16 natively"
        return Precision("bf16 autocast", torch.bfloat16, False, why)
    if device.type == "cuda" and torch.cuda.is_available():
        why = "torch.cuda.is_bf16_supported(including_emulation=False) returned False"
        return Precision("fp16 autocast + GradScaler", torch.float16, True, why)
    if device.type == "cpu":
        why = "this CPU reports none of AVX512-BF16, AMX or Arm's BF16"
    elif device.type == "cuda":
        why = "no CUDA GPU here"
    else:
        why = f"bf16 on {device.type} has not been measured to pay"
    return Precision("float32", None, False, f"{why}: float32")


def grad_scaler(device: torch.device | str, **kwargs: Any) -> torch.amp.GradScaler:
    """``torch.amp.GradScaler`` for ``device``'s type (``kwargs`` go to it), for
    ``fast_path_epoch(scaler=...)``."""
    device = as_device(device, caller="grad_scaler")
    if "enabled" in kwargs:
        _args.boolean(kwargs["enabled"], "enabled", "grad_scaler")
    return torch.amp.GradScaler(device.type, **kwargs)


class EpochStats(NamedTuple):
    """What ``fast_path_epoch`` measured: mean loss per sample, accuracy, samples, the losses that
    were NaN or infinite, and the scaler's scale (None without one)."""

    loss: float
    accuracy: float
    samples: int
    nonfinite_losses: int
    scale: float | None


def _check_fast_path(model, optimizer, scaler, loss_step) -> None:
    caller = "fast_path_epoch"
    if not isinstance(model, nn.Module):
        raise TypeError(f"{caller}: model must be an nn.Module, got {_args.shown(model)}.")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"{caller}: optimizer is {_args.shown(optimizer)}; make one, e.g. "
            "torch.optim.SGD(model.parameters(), lr=0.01, fused=True)."
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if held.isdisjoint(map(id, model.parameters())):
        raise ValueError(
            f"{caller}: the optimizer is for another model; make it with model.parameters()."
        )
    if scaler is not None and not isinstance(scaler, torch.amp.GradScaler):
        raise TypeError(f"{caller}: scaler is {_args.shown(scaler)}; give grad_scaler(device).")
    if loss_step is not None and not callable(loss_step):
        raise TypeError(f"{caller}: loss_step is {_args.shown(loss_step)}; give a function.")


def _cross_entropy_step(model: nn.Module) -> Callable:
    """The loss and the right answers of a batch, as ``loss_step`` gives them."""

    def step(inputs: torch.Tensor, targets: torch.Tensor):
        outputs = model(inputs)
        loss = nn.functional.cross_entropy(outputs, targets)
        right = (outputs.argmax(1) == targets).sum()
        return loss, right

    return step


def fast_path_epoch(model, loader, optimizer, device, *, scaler=None, loss_step=None) -> EpochStats:
    """One pass over ``loader``, reading nothing back from the device until it ends: its
    ``EpochStats``. A ``scaler`` skips the steps whose gradients overflowed; ``loss_step(inputs,
    targets) -> (loss, right answers)`` replaces the cross-entropy. A run whose loss became NaN
    or infinite (where no scaler skipped the step) raises ``FloatingPointError``."""
    device = as_device(device, caller="fast_path_epoch", check_available=True)
    _check_fast_path(model, optimizer, scaler, loss_step)
    if scaler is None:
        scaler = torch.amp.GradScaler(device.type, enabled=False)  # passes everything on
    if loss_step is None:
        loss_step = _cross_entropy_step(model)
    model.train()
    loss_sum = torch.zeros((), device=device)
    right_sum = torch.zeros((), device=device)
    nonfinite = torch.zeros((), device=device)
    samples = 0
    for inputs, targets in loader:
        inputs = inputs.to(device)
        targets = targets.to(device)
        loss, right = loss_step(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach().float()
        loss_sum += loss * len(targets)
        right_sum += right.float()
        nonfinite += (~loss.isfinite()).float()
        samples += len(targets)
    return _epoch_stats(model, scaler, [loss_sum, right_sum, nonfinite], samples)


def _epoch_stats(model, scaler, sums: list[torch.Tensor], samples: int) -> EpochStats:
    """The epoch's stats, read from the device (one wait); a run that diverged raises."""
    if samples == 0:
        raise ValueError("fast_path_epoch: the loader gave no batches.")
    loss_sum, right_sum, nonfinite = torch.stack(sums).tolist()
    broken = not all(bool(p.isfinite().all()) for p in model.parameters())
    if broken or (nonfinite and not scaler.is_enabled()):
        if broken:
            what = "the weights are NaN or infinite"
        else:
            what = f"{nonfinite:.0f} losses were NaN or infinite"
        raise FloatingPointError(
            f"fast_path_epoch: training diverged, {what}: lower the learning rate."
        )
    scale = float(scaler.get_scale()) if scaler.is_enabled() else None
    return EpochStats(loss_sum / samples, right_sum / samples, samples, int(nonfinite), scale)


_FAST_PATH_OPTIONS = ("scaler", "loss_step")  # fast_path_epoch's keyword-only arguments


def timed_epoch(model, loader, optimizer, device, **options) -> tuple[float, EpochStats]:
    """Images per second of one ``fast_path_epoch`` (``options`` go to it) after 2 batches not
    timed; and its stats."""
    unknown = sorted(set(options) - set(_FAST_PATH_OPTIONS))
    if unknown:
        raise TypeError(
            f"timed_epoch: fast_path_epoch takes no option {unknown[0]!r}; its options are "
            f"{', '.join(_FAST_PATH_OPTIONS)}."
        )
    fast_path_epoch(model, list(itertools.islice(loader, 2)), optimizer, device, **options)
    with Stopwatch(device) as watch:
        stats = fast_path_epoch(model, loader, optimizer, device, **options)
    return stats.samples / watch.seconds, stats
