"""Checks for the exercises of ``02_to_device_method``: each runs the learner's function given the CPU, given
``meta`` standing in for a GPU (where only devices, shapes and types count), and given a real GPU."""

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import fail, harness
from helpers.checks.harness import (
    LearnerError,
    Machine,
    StandInCannot,
    describe,
    device_machines,
    exercise,
)
from helpers.data import CIFAR10_CLASSES

__all__ = ["check_accuracy", "check_move_batch", "check_weighted_loss"]


def _check_moved(m: Machine, name: str, was: torch.Tensor, got: Any) -> None:
    if not isinstance(got, torch.Tensor):
        fail(f"the {name} returned are {describe(got)}", f"return the {name} tensor, moved")
    if got.device.type != m.device.type:
        kept = ", the tensor given" * (got is was)
        fail(
            f"the {name} are on {got.device}, not on {harness.where(m.device)}{kept}",
            "keep what .to gives",
        )
    if got.dtype != was.dtype or not (
        got.shape == was.shape if got.is_meta else torch.equal(got.cpu(), was)
    ):
        fail(
            f"the {name} changed on the way, to {describe(got)}",
            "move them, and change nothing else",
        )


@exercise(
    "write move_batch(batch, device) so that it returns (inputs, targets), both moved to device"
)
def check_move_batch(move_batch: Callable[[Any, torch.device], Any]) -> str:
    for m in device_machines():
        given = [
            torch.rand(4, 3, 32, 32),
            torch.tensor([0, 1, 2, 3]),
        ]  # a batch as a DataLoader gives it
        result = m.run(move_batch, list(given), m.device, reads=False)
        if not isinstance(result, tuple | list) or len(result) != 2:
            fail(f"move_batch returned {describe(result)}", "return two tensors, (inputs, targets)")
        _check_moved(m, "inputs", given[0], result[0])
        _check_moved(m, "targets", given[1], result[1])
    return "both parts of the batch go to the device it is given, whichever it is"


def _model(device: torch.device) -> nn.Module:
    """A model that predicts the larger of two inputs; ``model.runs`` records (training, grad, device)."""
    model = nn.Linear(2, 2)
    nn.init.eye_(model.weight), nn.init.zeros_(model.bias)
    runs = model.runs = []
    model.register_forward_pre_hook(
        lambda m, x: runs.append((m.training, torch.is_grad_enabled(), x[0].device.type))
    )
    return model.to(device)


_INPUTS = [
    [1.0, 0],
    [0, 1],
    [1, 0],
    [1, 0],
    [0, 1],
    [0, 1],
    [1, 0],
    [0, 1],
]  # 5 of 8 right; batches of 3:
_DATA = TensorDataset(
    torch.tensor(_INPUTS), torch.tensor([0, 1, 0, 1, 0, 1, 0, 0])
)  # 3/3, 1/3, 1/2
_MISREAD = {
    0.611: "the mean of the batches' accuracies, but the last batch is smaller",
    62.5: "a percentage",
}


@exercise(
    "write accuracy(model, loader) to return the fraction of samples it classifies right, as a float"
)
def check_accuracy(accuracy: Callable[[nn.Module, Any], float]) -> str:
    fix = (
        "take the device from the model, next(model.parameters()).device, and move each batch there"
    )
    for m in device_machines():
        model, result, moved, here = _model(m.device), None, False, harness.where(m.device)
        try:
            result = m.run(accuracy, model, DataLoader(_DATA, batch_size=3))
        except (
            StandInCannot
        ) as why:  # a value read on the stand-in (the CPU run checks it), or a move
            moved = (
                "Module.to_empty" in str(why) or not model.runs
            )  # nothing but a move is read first
        except LearnerError as error:
            if isinstance(error.error, harness.CudaRefused):
                raise error.instead(error.mistake, fix) from None
            if not any(words in str(error.error) for words in ("same device", "expected device")):
                raise
            part = "inputs" if not model.runs or model.runs[-1][2] != m.device.type else "targets"
            raise error.instead(
                f"the {part} of the batches are not on the model's device", fix
            ) from None
        if moved or next(model.parameters()).device.type != m.device.type:
            fail(f"accuracy moved the model from {here}", "leave it there, and move the batches")
        if not model.runs:
            fail(
                "accuracy never ran the model on the batches",
                "compute the model's outputs for each batch",
            )
        if any(training for training, _, _ in model.runs):
            fail("the model was in training mode", "call model.eval() before evaluating")
        if any(grad for _, grad, _ in model.runs):
            fail("gradients were being recorded", "evaluate inside `with torch.no_grad():`")
        if result is not None and (isinstance(result, bool) or not isinstance(result, int | float)):
            fail(
                f"accuracy returned {describe(result)}, not a Python float",
                "call .item() once, at the end",
            )
        if result is not None and abs(result - 0.625) > 1e-6:
            why = _MISREAD.get(round(result, 3), "but 5 of the 8 samples are right")
            fail(f"the accuracy is {result:.3f}, {why}", "divide the right ones by all 8 samples")
    return "accuracy runs on the model's device, whichever it is, and returns the fraction as a Python float"


@exercise(
    "write weighted_loss(device) to return nn.CrossEntropyLoss weighting cat 2, others 1, on device"
)
def check_weighted_loss(weighted_loss: Callable[[torch.device], nn.Module]) -> str:
    cat = CIFAR10_CLASSES.index("cat")
    weight = torch.tensor([2.0 if name == "cat" else 1.0 for name in CIFAR10_CLASSES])
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([3, 1, 0, 9])
    expected = nn.functional.cross_entropy(logits, targets, weight=weight)
    for m in device_machines():
        loss_fn, here = m.run(weighted_loss, m.device, reads=False), harness.where(m.device)
        if not isinstance(loss_fn, nn.CrossEntropyLoss):
            what = (
                f"the class {loss_fn.__name__}" if isinstance(loss_fn, type) else describe(loss_fn)
            )
            fail(
                f"weighted_loss returned {what}",
                "return an nn.CrossEntropyLoss, made with weight=...",
            )
        if (got := loss_fn.weight) is None or got.shape != (10,) or got.dtype != torch.float32:
            fail(
                f"the class weights are {describe(got)}",
                "give 10 float32 weights, one per CIFAR-10 class",
            )
        if got.device.type != m.device.type:
            fail(f"the class weights are on {got.device}, not on {here}", "move the loss too")
        i = (
            None
            if got.is_meta
            else next((i for i in (cat, *range(10)) if got[i] != weight[i]), None)
        )
        if i is not None:
            fail(
                f"the weight of '{CIFAR10_CLASSES[i]}' (class {i}) is {got[i]:g}",
                "give only cat a 2",
            )
        value = m.run(loss_fn, logits.to(m.device), targets.to(m.device), reads=False)
        if not isinstance(value, torch.Tensor) or value.shape != ():
            fail(
                f"the loss gives {describe(value)}, not one number",
                "keep the default reduction, the mean",
            )
        if not value.is_meta and not torch.allclose(value.detach().cpu(), expected, atol=1e-5):
            fail(
                f"the loss is {value:.4f}, not {expected:.4f}",
                "change only the weights of the loss",
            )
    return "the weighted loss counts a cat twice and computes on the device of the outputs"
