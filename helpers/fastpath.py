"""The fast path of ``06_performance``: data on the device, mixed precision, a fused optimizer."""

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from helpers import _args
from helpers.devices import as_device
from helpers.timing import Stopwatch


def dataset_tensors(dataset, device="cpu", *, memory_format=torch.contiguous_format) -> tuple:
    """A dataset with ``.data`` (uint8 images N x H x W x 3) and ``.targets``, as CIFAR-10's, as two
    tensors on ``device``: images (N, 3, H, W) in [0, 1] as ``transforms.ToTensor()`` makes them, labels."""
    if not (hasattr(dataset, "data") and hasattr(dataset, "targets")):
        raise TypeError(
            f"dataset_tensors needs a dataset with .data and .targets; got {dataset!r:.40}."
        )
    device = as_device(device, caller="dataset_tensors", check_available=True)
    data = torch.as_tensor(dataset.data)
    if data.dtype != torch.uint8 or data.dim() != 4 or data.shape[-1] != 3:
        raise ValueError(
            f"dataset.data must be uint8 images (N, H, W, 3), not {data.dtype} {data.shape}."
        )
    labels = np.asarray(dataset.targets)
    whole = (
        labels.dtype.kind in "iuf" and (labels == np.round(labels)).all() and (labels >= 0).all()
    )
    if not whole:  # NaN too: NaN != NaN
        raise TypeError(
            f"dataset.targets must be class numbers 0, 1, 2, ...; got {dataset.targets!r:.40}."
        )
    if labels.shape != (len(data),):
        raise ValueError(
            f"{len(data)} images but {list(labels.shape)} targets: give one per image."
        )
    # on the host: a GPU divides by 255 as a product with 1/255, which differs from ToTensor in the last bit
    images = data.permute(0, 3, 1, 2).float().div(255).contiguous(memory_format=memory_format)
    return images.to(device), torch.from_numpy(labels.astype(np.int64)).to(device)


class DeviceLoader:
    """``DeviceLoader(images, labels, batch_size=64, shuffle=True)``: an epoch of batches on their device per
    pass, drawn as ``DataLoader(TensorDataset(images, labels), ...)`` draws them: same seed, same batches."""

    def __init__(
        self, *tensors: torch.Tensor, batch_size: int, shuffle: bool = False, generator=None
    ):
        if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError(
                f"DeviceLoader takes tensors, not {tensors!r:.40}: use dataset_tensors first."
            )
        if (
            len({t.shape[:1] for t in tensors}) != 1
            or tensors[0].dim() == 0
            or len(tensors[0]) == 0
        ):
            raise ValueError(
                f"Give one row per sample, at least one, in each: {[t.shape for t in tensors]}."
            )
        if len({t.device for t in tensors}) != 1:
            raise ValueError(
                "The tensors are on different devices: move them to one, e.g. x.to(device)."
            )
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"DeviceLoader: generator is a torch.Generator or None, not {generator!r:.40}."
            )
        self.tensors, self.generator = tensors, generator
        self.batch_size = _args.integer(batch_size, "batch_size", "DeviceLoader", minimum=1)
        self.shuffle = _args.boolean(shuffle, "shuffle", "DeviceLoader")

    def __len__(self) -> int:
        return math.ceil(len(self.tensors[0]) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        on_cpu = self.generator is None or self.generator.device.type == "cpu"
        if on_cpu:  # the seed a DataLoader draws for its workers when an iterator is made
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        return self._batches(on_cpu)

    def _batches(self, on_cpu: bool) -> Iterator[tuple[torch.Tensor, ...]]:
        order, generator, size, n = None, self.generator, self.batch_size, len(self.tensors[0])
        if self.shuffle:  # the order, drawn at the first batch
            if (
                generator is None
            ):  # as RandomSampler does: a fresh generator, seeded from the global one
                generator = torch.Generator().manual_seed(
                    int(torch.empty((), dtype=torch.int64).random_())
                )
            order = torch.randperm(n, generator=generator, device=generator.device).to(
                self.tensors[0].device
            )
        for start in range(0, n, size):
            rows = slice(start, start + size) if order is None else order[start : start + size]
            yield tuple(t[rows] for t in self.tensors)
        if (
            self.shuffle and self.generator is not None and on_cpu
        ):  # the spare order RandomSampler draws
            torch.randperm(n, generator=self.generator)


def bf16_supported(device: torch.device | str) -> bool:
    """Whether ``device`` computes bfloat16 natively (CUDA from Ampere on, CPUs with AVX512-BF16, AMX or
    Arm's BF16), so that bf16 autocast can pay; False elsewhere (Apple's MPS is unmeasured)."""
    device = as_device(device, caller="bf16_supported")
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    found = (
        getattr(torch.cpu, "get_capabilities", dict)() if device.type == "cpu" else {}
    )  # torch < 2.7: {}
    return any(bool(found.get(name)) for name in ("avx512_bf16", "amx_bf16", "bf16", "sve_bf16"))


class Autocast(nn.Module):
    """``Autocast(model)``: ``model``'s forward pass (only) under ``torch.autocast``, its outputs float32,
    so that a training loop runs in mixed precision unchanged. ``torch.float16`` needs a ``grad_scaler``."""

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"Autocast wraps a model (an nn.Module), got {_args.shown(model)}.")
        if dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"Autocast computes in torch.bfloat16 or torch.float16, got {dtype}.")
        self.model, self.dtype = model, dtype

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with torch.autocast(next(self.model.parameters()).device.type, dtype=self.dtype):
            return self.model(*args, **kwargs).float()


class Precision(NamedTuple):
    """``choose_precision``'s pick: a name, the autocast dtype (``None``: none), whether to scale the loss."""

    name: str
    dtype: torch.dtype | None
    scaler: bool
    why: str


def choose_precision(device: torch.device | str) -> Precision:
    """bf16 where ``device`` computes it natively, else fp16 + GradScaler on CUDA (a T4), else float32."""
    device = as_device(device, caller="choose_precision")
    if bf16_supported(device):
        return Precision(
            "bf16 autocast", torch.bfloat16, False, f"{device.type} computes bf16 natively"
        )
    if device.type == "cuda" and torch.cuda.is_available():
        return Precision(
            "fp16 autocast + GradScaler", torch.float16, True, "this GPU has no native bf16"
        )
    return Precision("float32", None, False, f"this {device.type} has no native bf16: float32")


def grad_scaler(device: torch.device | str, **kwargs: Any) -> torch.amp.GradScaler:
    """``torch.amp.GradScaler`` for ``device``'s type (``kwargs`` go to it), for ``timed_epoch(scaler=)``."""
    return torch.amp.GradScaler(as_device(device, caller="grad_scaler").type, **kwargs)


def sgd(params: Iterable, lr: float, *, fused: bool = False) -> tuple[Any, str]:
    """``torch.optim.SGD(params, lr)``, fused (one kernel for all parameters) if ``fused``; and its kind."""
    if isinstance(params, nn.Module):
        raise TypeError(
            "sgd takes the weights to train, not the model: use sgd(model.parameters(), lr)."
        )
    fused = _args.boolean(fused, "fused", "sgd")
    return torch.optim.SGD(params, lr, fused=fused or None), "fused" if fused else "default"


class EpochStats(NamedTuple):
    """What ``train_epoch`` measured: mean loss per sample, accuracy, samples, losses skipped, the scale."""

    loss: float
    accuracy: float
    samples: int
    nonfinite_losses: int
    scale: float | None


def train_epoch(model, loader, optimizer, device, *, scaler=None, loss_step=None) -> EpochStats:
    """One pass over ``loader``, reading nothing back from the device until it ends: its ``EpochStats``.
    A ``scaler`` skips steps whose gradients overflowed, ``loss_step(inputs, targets) -> (loss, right
    answers)`` replaces the cross-entropy, and a run that diverged raises ``FloatingPointError``."""
    device = as_device(device, caller="train_epoch", check_available=True)
    held = [p for group in optimizer.param_groups for p in group["params"]]
    if {id(p) for p in held}.isdisjoint(map(id, model.parameters())):
        raise ValueError(
            "train_epoch: the optimizer is for another model; make it with model.parameters()."
        )
    scaler = scaler or torch.amp.GradScaler(
        device.type, enabled=False
    )  # disabled: passes everything on
    model.train()
    totals, samples = (
        torch.zeros(3, device=device),
        0,
    )  # loss x samples, right answers, non-finite losses
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        if loss_step is None:
            outputs = model(inputs)
            loss, right = (
                nn.functional.cross_entropy(outputs, targets),
                (outputs.argmax(1) == targets).sum(),
            )
        else:
            loss, right = loss_step(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach().float()
        totals += torch.stack([loss * len(targets), right.float(), (~loss.isfinite()).float()])
        samples += len(targets)
    if samples == 0:
        raise ValueError("train_epoch: the loader gave no batches.")
    loss_sum, right_sum, bad = totals.tolist()
    broken = not all(bool(p.isfinite().all()) for p in held)
    if broken or (bad and not scaler.is_enabled()):
        what = (
            "the weights are NaN or infinite"
            if broken
            else f"{bad:.0f} losses were NaN or infinite"
        )
        raise FloatingPointError(
            f"train_epoch: training diverged, {what}: lower the learning rate."
        )
    scale = float(scaler.get_scale()) if scaler.is_enabled() else None
    return EpochStats(loss_sum / samples, right_sum / samples, samples, int(bad), scale)


def timed_epoch(model, loader, optimizer, device, **options) -> tuple[float, EpochStats]:
    """Images per second of one ``train_epoch`` (``options`` go to it) after 2 untimed batches; its stats."""
    train_epoch(model, list(itertools.islice(loader, 2)), optimizer, device, **options)
    with Stopwatch(device) as watch:
        stats = train_epoch(model, loader, optimizer, device, **options)
    return stats.samples / watch.seconds, stats
