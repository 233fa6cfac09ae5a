"""CIFAR-10 with an offline fallback, and the run sizes that keep every notebook fast on a CPU.

Introduced in ``01_cuda_method``. Environment variables:

- ``COURSE_DATA=auto|cifar10|synthetic`` (default ``auto``): ``auto`` uses CIFAR-10 when it is on
  disk or can be downloaded, and otherwise the synthetic stand-in, saying so in one printed line;
  ``cifar10`` insists on the real data (a clear error when it cannot be had); ``synthetic`` always
  uses the stand-in.
- ``COURSE_DATA_DIR``: where datasets live (default: ``data/`` at the repository root).
- ``COURSE_QUICK=1``: shrink dataset sizes and epochs so that every notebook runs in seconds, on the
  same code paths (CI sets it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from helpers import _args
from helpers.devices import as_device

__all__ = [
    "CIFAR10_CLASSES",
    "Budget",
    "SyntheticCIFAR10",
    "data_dir",
    "load_cifar10",
    "make_synthetic_cifar10",
    "quick_mode",
    "training_budget",
]

CIFAR10_CLASSES = (
    "plane",
    "car",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)

# The mean foreground colour of each synthetic class. Colour alone separates the classes only
# partly (several are close); the shape of each class does the rest, so a convnet is needed.
_PALETTE = torch.tensor(
    [
        [0.55, 0.75, 1.00],
        [1.00, 0.35, 0.35],
        [1.00, 0.85, 0.35],
        [0.85, 0.55, 1.00],
        [0.45, 1.00, 0.45],
        [1.00, 0.60, 0.20],
        [0.30, 0.90, 0.90],
        [1.00, 0.50, 0.85],
        [0.60, 0.60, 1.00],
        [0.90, 0.90, 0.75],
    ]
)
_SHAPES = (
    "disk",
    "square",
    "triangle",
    "ring",
    "horizontal bars",
    "vertical bars",
    "plus",
    "cross",
    "checkerboard",
    "two dots",
)
_CHUNK = 1000  # images generated per random stream: a smaller dataset is a prefix of a larger one
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode() -> bool:
    """Whether ``COURSE_QUICK`` asks for the small, fast run that CI uses."""
    value = os.environ.get("COURSE_QUICK", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"COURSE_QUICK={os.environ['COURSE_QUICK']!r} is not understood: "
        "set it to 1 for the quick run or 0 (or leave it unset) for the full one."
    )


def data_dir() -> Path:
    """The folder datasets are stored in: ``COURSE_DATA_DIR``, else ``data/`` at the repository root.

    When the helpers are installed from a wheel (as on Colab) there is no repository, and the
    default is ``data/`` in the current folder.
    """
    configured = os.environ.get("COURSE_DATA_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "notebooks").is_dir():
        return repo / "data"
    return Path.cwd() / "data"


def _shape_masks(n: int, g: torch.Generator) -> torch.Tensor:
    """Boolean masks (n, 10, 32, 32): the shape of every class, at a random place and size."""
    ys, xs = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    cx = 15.5 + (torch.rand(n, 1, 1, generator=g) - 0.5) * 10
    cy = 15.5 + (torch.rand(n, 1, 1, generator=g) - 0.5) * 10
    half = 6.0 + torch.rand(n, 1, 1, generator=g) * 4.0
    dx, dy = (xs - cx) / half, (ys - cy) / half
    r = torch.sqrt(dx**2 + dy**2)
    box = (dx.abs() <= 1) & (dy.abs() <= 1)
    return torch.stack(
        [
            r <= 1,
            torch.maximum(dx.abs(), dy.abs()) <= 0.9,
            (dy.abs() <= 0.9) & (dx.abs() <= (dy + 0.9) / 1.8 * 0.95),
            (r <= 1.1) & (r >= 0.6),
            box & (torch.cos(dy * math.pi * 2.5) > 0),
            box & (torch.cos(dx * math.pi * 2.5) > 0),
            box & ((dx.abs() <= 0.3) | (dy.abs() <= 0.3)),
            box & (((dx - dy).abs() <= 0.35) | ((dx + dy).abs() <= 0.35)),
            box & ((torch.floor(dx * 2) + torch.floor(dy * 2)) % 2 == 0),
            (((dx - 0.55) ** 2 + dy**2) <= 0.2) | (((dx + 0.55) ** 2 + dy**2) <= 0.2),
        ],
        dim=1,
    )


def _synthetic_chunk(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    mask = _shape_masks(n, g)[torch.arange(n), labels].unsqueeze(1).float()
    tint = _PALETTE[labels].view(n, 3, 1, 1)
    background = torch.rand(n, 3, 1, 1, generator=g) * 0.3 + 0.15 * tint
    foreground = (tint + 0.15 * torch.randn(n, 3, 1, 1, generator=g)).clamp(0.3, 1.0)
    angle = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    ys, xs = torch.meshgrid(torch.arange(32.0) - 15.5, torch.arange(32.0) - 15.5, indexing="ij")
    gradient = ((torch.cos(angle) * xs + torch.sin(angle) * ys) * (0.3 / 32)).unsqueeze(1)
    images = background + gradient + (foreground - background) * mask
    images = images + 0.08 * torch.randn(n, 3, 32, 32, generator=g)
    images = (images.clamp(0, 1) * 255).round().to(torch.uint8)
    return images.permute(0, 2, 3, 1).contiguous(), labels


def make_synthetic_cifar10(n: int, *, train: bool = True, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """Generate ``n`` CIFAR-10-shaped images: ``(uint8 array (n, 32, 32, 3), labels)``.

    Each class is one shape (disk, square, triangle, ring, horizontal bars, vertical bars, plus,
    cross, checkerboard, two dots) at a random position and size, in a colour drawn around the
    class's own, on a random dark background with a gradient and pixel noise. Deterministic for
    ``(seed, train)``; the first ``k`` images are the same whatever ``n`` is; train and test
    images are different draws from the same distribution.
    """
    if n < 0:
        raise ValueError(f"n must be 0 or more, got {n}")
    images, labels = [], []
    for chunk, start in enumerate(range(0, n, _CHUNK)):
        chunk_seed = (seed * 2 + (0 if train else 1)) * 1_000_003 + chunk
        x, y = _synthetic_chunk(_CHUNK, chunk_seed)
        size = min(_CHUNK, n - start)
        images.append(x[:size])
        labels.append(y[:size])
    if not images:
        return np.zeros((0, 32, 32, 3), dtype=np.uint8), []
    return torch.cat(images).numpy(), torch.cat(labels).tolist()


class SyntheticCIFAR10(Dataset):
    """A learnable stand-in for CIFAR-10 with the same interface as ``torchvision.datasets.CIFAR10``.

    ``data`` is a uint8 array (N, 32, 32, 3), ``targets`` a list of ints, ``classes`` the CIFAR-10
    class names; items are ``(transform(PIL image), target)``, so the same transforms apply.
    """

    def __init__(
        self,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        *,
        size: int | None = None,
        seed: int = 0,
    ) -> None:
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self.classes = list(CIFAR10_CLASSES)
        self.shapes = list(_SHAPES)
        n = (50_000 if train else 10_000) if size is None else size
        self.data, self.targets = make_synthetic_cifar10(n, train=train, seed=seed)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image, target = Image.fromarray(self.data[index]), self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return f"SyntheticCIFAR10({split}, {len(self)} images, shapes standing in for CIFAR-10 classes)"


def _real_cifar10(train: bool, transform: Callable | None, root: Path) -> tuple[Dataset | None, str]:
    """CIFAR-10 from ``root``, downloading it if needed: (dataset, "") or (None, why not)."""
    from torchvision.datasets import CIFAR10

    try:
        return CIFAR10(root=str(root), train=train, transform=transform, download=False), ""
    except RuntimeError:
        pass  # not on disk (or damaged): try to download it
    try:
        root.mkdir(parents=True, exist_ok=True)
        return CIFAR10(root=str(root), train=train, transform=transform, download=True), ""
    except (OSError, RuntimeError) as error:  # URLError is an OSError
        return None, f"is not in {root} and could not be downloaded ({type(error).__name__}: {error})"


def _split(train: Any) -> bool:
    """``train`` as a bool: a split name or a number in its place would pick a split by truthiness."""
    if isinstance(train, bool | np.bool_):
        return bool(train)
    if isinstance(train, str):
        wanted = (
            "False" if train.strip().lower() in {"test", "val", "valid", "validation", "eval"} else "True"
        )
        fix = (
            f"For the {'test' if wanted == 'False' else 'training'} split write load_cifar10(train={wanted})."
        )
    else:
        fix = "Write load_cifar10(train=True) for the training split, train=False for the test split."
    raise TypeError(
        f"load_cifar10: train must be True (the training split) or False (the test split), "
        f"got {type(train).__name__} {_args.shown(train)}. {fix}"
    )


def load_cifar10(
    train: bool,
    transform: Callable | None = None,
    *,
    size: int | None = None,
    source: str | None = None,
    root: str | os.PathLike | None = None,
    seed: int = 0,
) -> Dataset:
    """The CIFAR-10 train or test split, or its synthetic stand-in when the real one cannot be had.

    ``size`` keeps only the first ``size`` images (the notebooks train on a subset on a CPU).
    ``source`` overrides ``COURSE_DATA`` (``auto``, ``cifar10`` or ``synthetic``); ``root``
    overrides the data folder. The returned dataset has ``data``, ``targets`` and ``classes``
    like ``torchvision.datasets.CIFAR10``. Introduced in ``01_cuda_method``.
    """
    train = _split(train)
    if isinstance(transform, type):
        raise TypeError(
            f"load_cifar10: transform is the class {transform.__name__}, not a transform; "
            f"pass an instance: {transform.__name__}() (with its arguments, if it takes any)."
        )
    if transform is not None and not callable(transform):
        raise TypeError(
            f"load_cifar10: transform must be a function of an image, e.g. transforms.ToTensor(), or None; "
            f"got {type(transform).__name__} {_args.shown(transform)}."
        )
    size = _args.integer(
        size, "size", "load_cifar10", minimum=1, allow_none=True, meaning="a number of images"
    )
    if source is not None and not isinstance(source, str):
        raise TypeError(
            f"load_cifar10: source must be 'auto', 'cifar10', 'synthetic' or None, got {_args.shown(source)}."
        )
    if root is not None and not isinstance(root, str | os.PathLike):
        raise TypeError(
            f"load_cifar10: root must be a folder path (a str or a Path), got {_args.shown(root)}."
        )
    seed = _args.integer(seed, "seed", "load_cifar10")
    choice = (source if source is not None else os.environ.get("COURSE_DATA", "auto")).strip().lower()
    if choice not in {"auto", "cifar10", "synthetic"}:
        raise ValueError(
            f"Unknown dataset source {choice!r} (from {'source=' if source is not None else 'COURSE_DATA'}): "
            "use 'auto' (CIFAR-10 when it can be had, else the synthetic stand-in), "
            "'cifar10' (the real data only) or 'synthetic'."
        )
    folder = Path(root).expanduser() if root is not None else data_dir()
    split = "train" if train else "test"

    if choice != "synthetic":
        dataset, why_not = _real_cifar10(train, transform, folder)
        if dataset is not None:
            if size is not None:
                dataset.data, dataset.targets = dataset.data[:size], dataset.targets[:size]
            return dataset
        if choice == "cifar10":
            raise FileNotFoundError(
                f"COURSE_DATA=cifar10 asks for the real CIFAR-10, but it {why_not}. Connect to the "
                f"internet and run again, copy the folder cifar-10-batches-py into {folder}, "
                "or set COURSE_DATA=auto to fall back to the synthetic stand-in."
            )
        reason = f"CIFAR-10 {why_not.split(' (')[0]} (offline?)"
    else:
        reason = "COURSE_DATA=synthetic asks for it"

    dataset = SyntheticCIFAR10(train, transform, size=size, seed=seed)
    print(f"Dataset: synthetic CIFAR-10 stand-in ({split}, {len(dataset):,} images), because {reason}.")
    return dataset


@dataclass(frozen=True)
class Budget:
    """How much a notebook trains on this run: see ``training_budget``."""

    train_size: int | None  # None: the whole training set
    test_size: int | None
    num_epochs: int
    why: str

    def __str__(self) -> str:
        train = "all" if self.train_size is None else f"{self.train_size:,}"
        test = "all" if self.test_size is None else f"{self.test_size:,}"
        epochs = f"{self.num_epochs} epoch{'s' if self.num_epochs != 1 else ''}"
        return f"Training on {train} training images for {epochs}, testing on {test}: {self.why}."


def training_budget(
    device: torch.device | str,
    *,
    gpu_epochs: int,
    cpu_epochs: int,
    cpu_train_size: int | None = 10_000,
    cpu_test_size: int | None = 2_000,
    quick_train_size: int | None = 2_000,
    quick_test_size: int | None = 500,
    quick_epochs: int = 1,
) -> Budget:
    """How much to train: everything on an accelerator, a subset on a CPU, a sliver in quick mode.

    The numbers are chosen per notebook so that its default run takes under 5 minutes on a 2-core
    CPU; ``str(budget)`` says what was chosen and why, for the notebook to print. Epochs are whole
    numbers from 1, sizes whole numbers from 1 or ``None`` (all the images).
    """
    device = as_device(device, name="device", caller="training_budget")

    def epochs(value: Any, name: str) -> int:
        return _args.integer(value, name, "training_budget", minimum=1, meaning="a number of epochs")

    def images(value: Any, name: str) -> int | None:
        return _args.integer(
            value, name, "training_budget", minimum=1, allow_none=True, meaning="a number of images or None"
        )

    gpu_epochs, cpu_epochs = epochs(gpu_epochs, "gpu_epochs"), epochs(cpu_epochs, "cpu_epochs")
    quick_epochs = epochs(quick_epochs, "quick_epochs")
    cpu_train_size, cpu_test_size = (
        images(cpu_train_size, "cpu_train_size"),
        images(cpu_test_size, "cpu_test_size"),
    )
    quick_train_size = images(quick_train_size, "quick_train_size")
    quick_test_size = images(quick_test_size, "quick_test_size")
    if quick_mode():
        return Budget(quick_train_size, quick_test_size, quick_epochs, "quick mode (COURSE_QUICK=1)")
    if device.type == "cpu":
        return Budget(
            cpu_train_size,
            cpu_test_size,
            cpu_epochs,
            f"a subset, because this run is on the CPU (a GPU run uses all of it for {gpu_epochs} epochs)",
        )
    return Budget(None, None, gpu_epochs, f"the full dataset on {device}")
