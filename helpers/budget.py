"""How much each notebook trains on this run, and whether the accuracy it reached is right.

A run on an accelerator trains on all the data; a run on the CPU on a subset; a quick run
(``COURSE_QUICK=1``, as the tests run the notebooks) on a sliver.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from helpers import _args, devices
from helpers.standin import SyntheticCIFAR10

__all__ = ["Budget", "expect_accuracy", "quick_mode", "training_budget"]

_MODES = ("full", "cpu", "quick")


def quick_mode() -> bool:
    """Whether ``COURSE_QUICK=1`` asks for the small, fast run that the tests make."""
    return _args.environment("COURSE_QUICK", ("0", "1"), "0") == "1"


@dataclass(frozen=True)
class Budget:
    """How much a notebook trains on this run (see ``training_budget``); ``str()`` says it."""

    train_size: int | None  # None: all the training images
    test_size: int | None
    num_epochs: int
    why: str
    mode: str = "full"  # "full" (an accelerator), "cpu" (a subset) or "quick" (COURSE_QUICK=1)

    def __str__(self) -> str:
        train = f"{self.train_size:,}" if self.train_size else "all"
        test = f"{self.test_size:,}" if self.test_size else "all"
        epochs = f"{self.num_epochs} epoch{'s' if self.num_epochs != 1 else ''}"
        return f"Training on {train} training images for {epochs}, testing on {test}: {self.why}."


def training_budget(
    device,
    *,
    gpu_epochs,
    cpu_epochs,
    cpu_train_size=10_000,
    cpu_test_size=2_000,
    quick_train_size=2_000,
    quick_test_size=500,
    quick_epochs=1,
    small_on_gpu=None,
) -> Budget:
    """How much to train on ``device``: all of it on an accelerator, a subset on a CPU, a sliver in
    quick mode. Returns a ``Budget`` (``train_size`` and ``test_size``, None for all, and
    ``num_epochs``); print it to say why. ``small_on_gpu``, a reason in words, keeps an
    accelerator to the CPU's subset and epochs."""
    numbers = {
        "gpu_epochs": gpu_epochs,
        "cpu_epochs": cpu_epochs,
        "cpu_train_size": cpu_train_size,
        "cpu_test_size": cpu_test_size,
        "quick_train_size": quick_train_size,
        "quick_test_size": quick_test_size,
        "quick_epochs": quick_epochs,
    }
    for name, value in numbers.items():
        allow_none = name.endswith("_size")  # a size may be None: all the images
        _args.integer(value, name, "training_budget", minimum=1, allow_none=allow_none)
    device = devices.as_device(device, caller="training_budget", check_available=True)
    if small_on_gpu is not None and not (isinstance(small_on_gpu, str) and small_on_gpu.strip()):
        raise TypeError(
            f"training_budget: small_on_gpu is {small_on_gpu!r:.40}; give a reason in words."
        )
    if quick_mode():
        return Budget(quick_train_size, quick_test_size, quick_epochs, "quick mode", "quick")
    if device.type == "cpu":
        if small_on_gpu:
            gpu_run = f"the same subset: {small_on_gpu}"
        else:
            gpu_run = f"all for {gpu_epochs} epochs"
        why = f"a subset, because this run is on the CPU (a GPU run uses {gpu_run})"
        return Budget(cpu_train_size, cpu_test_size, cpu_epochs, why, "cpu")
    if small_on_gpu:
        why = f"the CPU's subset on {device} too: {small_on_gpu}"
        return Budget(cpu_train_size, cpu_test_size, cpu_epochs, why, "cpu")
    return Budget(None, None, gpu_epochs, f"the full dataset on {device}")


def _fraction(accuracy) -> float:
    """``accuracy`` as a float from 0 to 1: a 0-d tensor or a NumPy number gives its value."""
    if isinstance(accuracy, torch.Tensor | np.number) and accuracy.ndim == 0:
        accuracy = accuracy.item()
    if isinstance(accuracy, bool) or not isinstance(accuracy, float | int):
        raise TypeError(
            f"expect_accuracy: accuracy is {_args.shown(accuracy)}; give a number, 0.55 for 55%."
        )
    if not 0 <= accuracy <= 1:  # NaN too
        raise ValueError(
            f"expect_accuracy: accuracy is {accuracy!r}; give a fraction, 0.55 for 55%."
        )
    return float(accuracy)


def _band(budget: Budget, bands: dict) -> tuple[float, float]:
    """The band of accuracies this budget's mode should reach, checked."""
    unknown = sorted(set(bands) - set(_MODES))
    if unknown:
        raise TypeError(
            f"expect_accuracy: {', '.join(unknown)} is no budget mode; give full=, cpu=, quick=."
        )
    if budget.mode not in bands:
        raise TypeError(
            f"expect_accuracy: this run's budget is {budget.mode!r}; "
            f"give {budget.mode}=(low, high)."
        )
    band = bands[budget.mode]
    pair = isinstance(band, tuple | list) and len(band) == 2
    numbers = pair and all(isinstance(v, float | int) for v in band)
    if not numbers or not 0 <= band[0] <= band[1] <= 1:
        raise ValueError(
            f"expect_accuracy: {budget.mode}={band!r}; give (low, high), 0 <= low <= high <= 1."
        )
    return band[0], band[1]


def expect_accuracy(accuracy: float, budget: Budget, dataset, **bands) -> tuple[float, float]:
    """Check a test accuracy against the band the recipe reaches with this budget; print it and
    return the band. ``bands`` maps each ``Budget.mode`` (``full``, ``cpu``, ``quick``) to
    ``(low, high)``, measured on the stand-in. On the stand-in the accuracy must lie in the band;
    on CIFAR-10, only above chance (10%)."""
    accuracy = _fraction(accuracy)
    if not isinstance(budget, Budget):
        raise TypeError(
            f"expect_accuracy: budget is {_args.shown(budget)}; pass what training_budget() gave."
        )
    if not isinstance(dataset, Dataset):
        raise TypeError(
            f"expect_accuracy: dataset is a {type(dataset).__name__}; pass the test set."
        )
    low, high = _band(budget, bands)
    print(
        f"test accuracy {accuracy:.1%} (chance: 10%; on the stand-in this gives "
        f"{low:.0%} to {high:.0%})"
    )
    synthetic = isinstance(dataset, SyntheticCIFAR10)
    if synthetic and accuracy < low:
        raise AssertionError(
            f"test accuracy {accuracy:.1%} is below {low:.0%} to {high:.0%}: "
            "it learned less than it should."
        )
    if synthetic and accuracy > high:
        raise AssertionError(
            f"test accuracy {accuracy:.1%} is above {low:.0%} to {high:.0%}: "
            "the data is easier than it should be."
        )
    if not synthetic and low > 0.15 >= accuracy:
        raise AssertionError(
            f"test accuracy {accuracy:.1%} is near chance (10%): the model learned nothing."
        )
    return low, high
