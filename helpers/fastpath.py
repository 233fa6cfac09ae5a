"""The fast path of ``06_performance``: the dataset held on the device, bf16 autocast where it is native.

``DeviceLoader`` serves batches from tensors that already live on the device: no per-sample Python,
no PIL images, no host-to-device copy per batch. For the same random state it yields exactly the
batches that ``DataLoader(TensorDataset(...), shuffle=True)`` yields (``tests/test_fastpath.py``
checks this), so the two pipelines can be compared on the same data in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from helpers import _args
from helpers.devices import as_device

__all__ = ["Autocast", "DeviceLoader", "bf16_supported", "dataset_tensors"]


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
    float32's range, so no gradient scaler is needed. The weights stay float32 in ``model``.
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
