"""Checks for the exercises of ``02_to_device_method``.

Each runs the learner's function given the CPU, given ``meta`` standing in for a GPU (where only
devices, shapes and types count), given the CPU on a Mac whose GPU the check stands in for, and
given a real GPU where there is one.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import fail
from helpers.checks.harness import (
    Machine,
    StandInError,
    Told,
    describe,
    device_machines,
    exercise,
)
from helpers.data import CIFAR10_CLASSES

__all__ = ["check_accuracy_anywhere", "check_move_batch", "check_weighted_loss"]


def _check_moved(m: Machine, name: str, was: torch.Tensor, got: Any) -> None:
    if not isinstance(got, torch.Tensor):
        fail(f"the {name} returned are {describe(got)}", f"return the {name} tensor, moved")
    if got.device.type != m.device.type:
        kept = ", the tensor given" if got is was else ""
        fail(
            f"the {name} are on {m.where(got.device)}, not on {m.where(m.device)}{kept}",
            "keep what .to gives",
        )
    if got.is_meta:
        same = got.dtype == was.dtype and got.shape == was.shape
    else:
        same = got.dtype == was.dtype and torch.equal(got.cpu(), was)
    if not same:
        fail(
            f"the {name} changed on the way, to {describe(got)}",
            "move them, and change nothing else",
        )


def _batches() -> list[list[torch.Tensor]]:
    """Batches as a DataLoader gives them, a list of two tensors, of two sizes."""
    generator = torch.Generator().manual_seed(0)
    return [
        [torch.rand(4, 3, 32, 32, generator=generator), torch.tensor([0, 1, 2, 3])],
        [torch.rand(3, 5, generator=generator), torch.tensor([9, 0, 4])],
    ]


@exercise(
    "write move_batch(batch, device) so that it returns (inputs, targets), both moved to device"
)
def check_move_batch(move_batch: Callable[[Any, torch.device], Any]) -> str:
    for m in device_machines():
        for given in _batches():
            result = m.run(move_batch, list(given), m.device, reads=False)
            if not isinstance(result, tuple | list) or len(result) != 2:
                fail(
                    f"move_batch returned {describe(result)}",
                    "return two tensors, (inputs, targets)",
                )
            _check_moved(m, "inputs", given[0], result[0])
            _check_moved(m, "targets", given[1], result[1])
    return "both parts of the batch go to the device it is given, whichever it is"


# ---- exercise 2: accuracy_anywhere ------------------------------------------------------------


class _Case:
    """A model of 4 inputs and 3 classes, on a device, and a loader whose labels it mostly gets.

    ``model.runs`` records (training, grad enabled, input's device) for each forward pass.
    """

    def __init__(self, size: int, batch_size: int, device: torch.device) -> None:
        generator = torch.Generator().manual_seed(size)
        self.model = nn.Linear(4, 3)
        with torch.no_grad():
            self.model.weight.copy_(torch.randn(3, 4, generator=generator))
            self.model.bias.zero_()
        inputs = torch.randn(size, 4, generator=generator)
        with torch.no_grad():
            labels = self.model(inputs).argmax(1)
        wrong = torch.arange(size) % 3 == 1  # a third of them made wrong: (label + 1) % 3
        labels = torch.where(wrong, (labels + 1) % 3, labels)
        self.loader = DataLoader(TensorDataset(inputs, labels), batch_size=batch_size)
        self.expected = (~wrong).sum().item() / size
        self.misreadings = self._misreadings()
        self.runs: list[tuple[bool, bool, str]] = []
        self.model.register_forward_pre_hook(self._record)
        self.model.to(device)

    def _record(self, module: nn.Module, args: tuple) -> None:
        self.runs.append((module.training, torch.is_grad_enabled(), args[0].device.type))

    def _misreadings(self) -> dict[float, str]:
        """What some wrong answers return, with what each did."""
        accuracies = []
        for inputs, labels in self.loader:
            with torch.no_grad():
                predicted = self.model(inputs).argmax(1)
            accuracies.append((predicted == labels).float().mean().item())
        mean = sum(accuracies) / len(accuracies)
        return {
            round(mean, 6): "the mean of the batches' accuracies, but the last batch is smaller",
            round(100 * self.expected, 6): "a percentage",
        }


_FIX = "take the device from the model, next(model.parameters()).device, and move each batch there"


def _accuracy_on(m: Machine, accuracy: Callable, case: _Case) -> tuple[Any, bool]:
    """The learner's result on ``m`` (None where the stand-in cannot read it), and whether the
    stand-in stopped at a move of the model."""

    def part() -> str:
        if not case.runs or case.runs[-1][2] != m.device.type:
            return "inputs"
        return "targets"

    told = (
        Told(r"same device|expected device", lambda: f"the {part()} {_NOT_THERE}", _FIX),
        Told(r"GpuRefusedError: (.*)", r"used the GPU itself (\1)", _FIX),
    )
    try:
        return m.run(accuracy, case.model, case.loader, told=told), False
    except StandInError as why:  # a value read on the stand-in (the CPU checks it), or a move
        return None, "Module.to_empty" in str(why) or not case.runs


_NOT_THERE = "of the batches are not on the model's device"


def _check_runs(m: Machine, case: _Case, moved: bool) -> None:
    here = m.where(m.device)
    if moved or next(case.model.parameters()).device.type != m.device.type:
        fail(
            f"accuracy_anywhere moved the model from {here}", "leave it there, and move the batches"
        )
    if not case.runs:
        fail(
            "accuracy_anywhere never ran the model on the batches",
            "compute the model's outputs for each batch",
        )
    if any(training for training, _, _ in case.runs):
        fail("the model was in training mode", "call model.eval() before evaluating")
    if any(grad for _, grad, _ in case.runs):
        fail("gradients were being recorded", "evaluate inside `with torch.no_grad():`")


def _check_value(result: Any, case: _Case) -> None:
    if isinstance(result, bool) or not isinstance(result, int | float):
        fail(
            f"accuracy_anywhere returned {describe(result)}, not a Python float",
            "call .item() once, at the end",
        )
    if abs(result - case.expected) > 1e-6:
        count = len(case.loader.dataset)
        right = round(case.expected * count)
        why = case.misreadings.get(round(result, 6), f"but {right} of the {count} are right")
        fail(
            f"the accuracy is {result:.3f}, {why}",
            f"divide the right ones by all {count} samples",
        )


@exercise(
    "write accuracy_anywhere(model, loader) to return the fraction of samples it classifies right, "
    "as a float"
)
def check_accuracy_anywhere(accuracy_anywhere: Callable[[nn.Module, Any], float]) -> str:
    for m in device_machines():
        for size, batch_size in ((11, 4), (6, 6), (7, 3)):
            case = _Case(size, batch_size, m.device)
            result, moved = _accuracy_on(m, accuracy_anywhere, case)
            _check_runs(m, case, moved)
            if result is not None or m.device.type != "meta":
                _check_value(result, case)
    return (
        "accuracy_anywhere runs on the model's device, whichever it is, and returns a Python float"
    )


# ---- exercise 3: a weighted loss --------------------------------------------------------------


def _check_weights(m: Machine, loss_fn: Any, weight: torch.Tensor) -> None:
    if not isinstance(loss_fn, nn.CrossEntropyLoss):
        fail(
            f"weighted_loss returned {describe(loss_fn)}",
            "return an nn.CrossEntropyLoss, made with weight=...",
        )
    got = loss_fn.weight
    if got is None or got.shape != (10,) or got.dtype != torch.float32:
        fail(
            f"the class weights are {describe(got)}",
            "give 10 float32 weights, one per CIFAR-10 class",
        )
    if got.device.type != m.device.type:
        fail(
            f"the class weights are on {m.where(got.device)}, not on {m.where(m.device)}",
            "move the loss too",
        )
    if got.is_meta:
        return
    cat = CIFAR10_CLASSES.index("cat")
    for i in (cat, *range(10)):
        if got[i] != weight[i]:
            fail(
                f"the weight of '{CIFAR10_CLASSES[i]}' (class {i}) is {got[i]:g}",
                "give only cat a 2",
            )


@exercise(
    "write weighted_loss(device) to return nn.CrossEntropyLoss weighting cat 2, others 1, on device"
)
def check_weighted_loss(weighted_loss: Callable[[torch.device], nn.Module]) -> str:
    weight = torch.tensor([2.0 if name == "cat" else 1.0 for name in CIFAR10_CLASSES])
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 10, generator=generator)
    targets = torch.tensor([3, 1, 0, 9, 3, 5])
    expected = nn.functional.cross_entropy(logits, targets, weight=weight)
    for m in device_machines():
        loss_fn = m.run(weighted_loss, m.device, reads=False)
        _check_weights(m, loss_fn, weight)
        value = m.run(loss_fn, logits.to(m.device), targets.to(m.device), reads=False)
        if not isinstance(value, torch.Tensor) or value.shape != ():
            fail(
                f"the loss gives {describe(value)}, not one number",
                "keep the default reduction, the mean",
            )
        if not value.is_meta and not torch.allclose(value.detach().cpu(), expected, atol=1e-6):
            fail(
                f"the loss is {value:.4f}, not {expected:.4f}",
                "change only the weights of the loss",
            )
    return "the weighted loss counts a cat twice and computes on the device of the outputs"
