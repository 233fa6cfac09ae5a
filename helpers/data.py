"""The data the notebooks train on: CIFAR-10, or the synthetic stand-in where it cannot be had.

Two environment variables choose it. ``COURSE_DATA`` is ``auto`` (the default: CIFAR-10 if it is
on disk or can be downloaded, else the stand-in), ``cifar10`` or ``synthetic``. ``COURSE_DATA_DIR``
is the folder CIFAR-10 is kept in (by default ``data/`` in the course's folder).
"""

import os
from pathlib import Path

import torch
from torch.utils.data import Dataset

from helpers import _args, devices
from helpers.paths import course_root
from helpers.standin import CIFAR10_CLASSES, STAND_IN_VERSION, SyntheticCIFAR10

# CIFAR10_CLASSES and STAND_IN_VERSION: which classes, and which version of the stand-in, the data
# may be (helpers.recorded and the checks read them from here).
__all__ = ["CIFAR10_CLASSES", "STAND_IN_VERSION", "data_dir", "load_cifar10", "loader_workers"]

_SOURCES = ("auto", "cifar10", "synthetic")
_SPLIT_SIZES = {"train": 50_000, "test": 10_000}  # CIFAR-10's, and the stand-in's


def data_dir() -> Path:
    """The folder CIFAR-10 is kept in: ``COURSE_DATA_DIR``, else ``data/`` in the course's folder
    (or in the current folder, for helpers installed without the course)."""
    chosen = os.environ.get("COURSE_DATA_DIR", "").strip()
    if not chosen:
        return (course_root() or Path.cwd()) / "data"
    folder = Path(chosen).expanduser()
    blocked = [p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()]
    if blocked:
        raise NotADirectoryError(
            f"COURSE_DATA_DIR={chosen!r}: {blocked[-1]} is a file, not a folder. Point it at a "
            "folder (it is made if it does not exist), or unset it to use data/."
        )
    return folder


def _check_source(source) -> str:
    if source is None:
        return _args.environment("COURSE_DATA", _SOURCES, "auto")
    if source not in _SOURCES:
        raise ValueError(
            f"load_cifar10: source {source!r} is unknown; use 'auto', 'cifar10' or 'synthetic'."
        )
    return source


def _cifar10(folder: Path, train: bool, transform, size: int | None) -> Dataset:
    """torchvision's CIFAR-10 from ``folder``, downloaded there first if it is not there yet."""
    from torchvision.datasets import CIFAR10  # imported here: torchvision is slow to import

    dataset = CIFAR10(str(folder), train, transform, download=True)
    dataset.data = dataset.data[:size]
    dataset.targets = dataset.targets[:size]
    return dataset


def load_cifar10(train, transform=None, *, size=None, source=None) -> Dataset:
    """The CIFAR-10 training (``train=True``) or test split, or the stand-in where CIFAR-10 cannot
    be had. ``size`` keeps the first ``size`` images; ``source`` (``"auto"``, ``"cifar10"`` or
    ``"synthetic"``) overrides ``COURSE_DATA``. The dataset has ``data``, ``targets`` and
    ``classes``, like torchvision's."""
    train = _args.boolean(train, "train", "load_cifar10")
    transform = _args.transform(transform, "load_cifar10")
    size = _args.integer(size, "size", "load_cifar10", minimum=1, allow_none=True)
    split = "train" if train else "test"
    images = _SPLIT_SIZES[split]
    if size is not None and size > images:
        raise ValueError(
            f"load_cifar10: size={size:_} is more than the {images:_} images of the {split} set; "
            f"give size={images:_} or less, or size=None for all of them."
        )
    source = _check_source(source)
    reason = "the environment variable COURSE_DATA=synthetic asks for it"
    if source != "synthetic":
        folder = data_dir()
        try:
            return _cifar10(folder, train, transform, size)
        except (OSError, RuntimeError) as error:  # offline: a URLError is an OSError
            reason = f"CIFAR-10 is not in {folder} and could not be downloaded"
            failure = f"{type(error).__name__}: {error}"
        if source == "cifar10":
            raise FileNotFoundError(
                f"COURSE_DATA=cifar10 asks for the real data, but {reason} ({failure}): go "
                f"online, copy the folder cifar-10-batches-py into {folder}, or set "
                "COURSE_DATA=auto for the stand-in."
            )
    dataset = SyntheticCIFAR10(train, transform, size=size)
    print(
        f"Dataset: synthetic CIFAR-10 stand-in ({split}, {len(dataset):,} images), "
        f"because {reason}."
    )
    return dataset


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def loader_workers(device: torch.device | str, *, processes: int = 1) -> int:
    """``num_workers`` for a ``DataLoader`` feeding ``device``. On a CUDA GPU: one per core less
    one, at most 4, the cores shared among ``processes`` (one per GPU with DDP). Elsewhere 0, which
    leaves the cores to training."""
    device = devices.as_device(device, caller="loader_workers", check_available=True)
    processes = _args.integer(processes, "processes", "loader_workers", minimum=1)
    if device.type != "cuda":
        return 0
    return max(1, min(4, _cores() // processes - 1))
