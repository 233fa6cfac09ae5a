"""Checks for the exercises of ``02_to_device_method``.

Each runs the learner's function on the machines of ``helpers.checks.harness.device_machines``:
given the CPU, given ``meta`` standing in for a GPU, and given this machine's GPU when it has one.
On the stand-in nothing has a value: reading one back (``.item()``, ``.cpu()``, ``.tolist()``)
gives a placeholder, so there the check looks at devices, modes and types, and compares the
numbers of the CPU run (and of a real GPU's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import fail
from helpers.checks.harness import LearnerError, Machine, describe, device_machines, exercise, short, where
from helpers.data import CIFAR10_CLASSES

__all__ = ["check_accuracy", "check_move_batch", "check_weighted_loss"]


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


@exercise("write move_batch(batch, device) so that it returns (inputs, targets), both moved to device")
def check_move_batch(move_batch: Callable[[Any, torch.device], Any]) -> str:
    """Exercise 1: ``move_batch(batch, device)`` returns ``(inputs, targets)``, both moved to ``device``."""
    for m in device_machines():
        with m.tried():
            for batch in (
                [torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])],
                (torch.rand(2, 5), torch.tensor([1, 0])),
            ):
                given = list(batch)
                result = m.run(move_batch, batch, m.device)
                if result is None:
                    fail("move_batch returned None", "return (inputs, targets), both moved")
                if not isinstance(result, tuple | list) or len(result) != 2:
                    fail(f"move_batch returned {describe(result)}", "return two tensors, (inputs, targets)")
                for name, original, moved in zip(("inputs", "targets"), given, result, strict=True):
                    _check_moved(m, name, original, moved)
    return "both parts of the batch go to the device it is given, whichever it is"


def _check_moved(m: Machine, name: str, original: torch.Tensor, moved: Any) -> None:
    if not isinstance(moved, torch.Tensor):
        fail(f"the {name} returned are {describe(moved)}, not a tensor", f"return the {name} tensor, moved")
    if moved.device.type != m.device.type:
        if moved is original and any(move.tensor is original for move in m.moves):
            fail(
                f"the {name} of this batch were not moved (tensor.to(device) returned a moved copy that was "
                "not kept)",
                "return what .to gives",
            )
        fail(f"the {name} are on {moved.device}, not on {where(m.device)}", "move them to the device given")
    if moved.shape != original.shape or moved.dtype != original.dtype:
        fail(
            f"the {name} changed on the way, from {_dtype(original)} {tuple(original.shape)} to "
            f"{_dtype(moved)} {tuple(moved.shape)}",
            "move them and keep their shape and dtype",
        )
    if not moved.is_meta and not torch.equal(moved.cpu(), original):
        fail(f"the {name} hold other values than the batch's", "move them and change nothing else")


def _known_case() -> tuple[nn.Module, DataLoader]:
    """A model whose prediction is the larger input, and 8 samples of which 5 are predicted right.

    With batches of 3, 3 and 2 the batches score 3/3, 1/3 and 1/2: their mean (0.611) is not the
    accuracy (5/8 = 0.625), which is what a sum over samples gives.
    """
    model = nn.Sequential(nn.Linear(2, 2))
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(2))
        model[0].bias.zero_()
    inputs = torch.tensor([[1.0, 0], [0, 1], [1, 0], [1, 0], [0, 1], [0, 1], [1, 0], [0, 1]])
    targets = torch.tensor([0, 1, 0, 1, 0, 1, 0, 0])
    return model, DataLoader(TensorDataset(inputs, targets), batch_size=3)


def _accuracy_on(
    m: Machine, accuracy: Callable
) -> tuple[Any, list[tuple[bool, bool, torch.device]], nn.Module]:
    model, loader = _known_case()
    model.to(m.device)
    seen: list[tuple[bool, bool, torch.device]] = []  # (training, grad enabled, input device) per forward
    model.register_forward_pre_hook(
        lambda module, args: seen.append(
            (module.training, torch.is_grad_enabled(), getattr(args[0], "device", None) if args else None)
        )
    )
    model.train()  # as a model is after training: evaluating must switch it
    m.cuda_fix = "take the device from the model, next(model.parameters()).device"
    try:
        result = m.run(accuracy, model, loader)
    except LearnerError as error:
        if error.kind == "devices":
            part = "inputs" if any(device != m.device for _, _, device in seen) or not seen else "targets"
            raise error.instead(
                f"the {part} of the batches are not on the model's device, {where(m.device)}",
                "take the device from the model, next(model.parameters()).device, and move each batch there",
            ) from None
        raise
    return result, seen, model


@exercise(
    "write accuracy(model, loader) so that it returns the fraction of the loader's samples that the model "
    "classifies right, as a Python float, on the device the model is on"
)
def check_accuracy(accuracy: Callable[[nn.Module, Any], float]) -> str:
    """Exercise 2: ``accuracy(model, loader)`` on the model's own device, in eval mode, without grad."""
    for m in device_machines():
        with m.tried():
            reads = len(m.reads)
            result, seen, model = _accuracy_on(m, accuracy)
            if any(p.device.type != m.device.type for p in model.parameters()):
                fail(
                    f"accuracy moved the model from {where(m.device)} to another device",
                    "leave the model where it is, and move each batch to the model's device",
                )
            if not seen:
                fail(
                    "accuracy never ran the model on the batches",
                    "compute the model's outputs for each batch",
                )
            if any(training for training, _, _ in seen):
                fail("the model was in training mode", "call model.eval() before evaluating")
            if any(grad for _, grad, _ in seen):
                fail("gradients were being recorded", "evaluate inside `with torch.no_grad():`")
            if isinstance(result, torch.Tensor):
                fail(
                    f"accuracy returned {describe(result)}, not a Python float",
                    "call .item() once, at the end",
                )
            if isinstance(result, bool) or not isinstance(result, int | float):
                fail(f"accuracy returned {describe(result)}", "return the fraction as a Python float")
            if m.device.type == "meta" and len(m.reads) > reads:
                continue  # values read back from the stand-in are placeholders: the CPU run has the number
            _check_value(float(result), m)
    return "accuracy runs on the model's device, whichever it is, and returns the fraction as a Python float"


def _check_value(result: float, m: Machine) -> None:
    if abs(result - 11 / 18) < 1e-3:
        fail(
            f"the accuracy is {result:.3f}, the mean of the batches' accuracies, but the last batch is "
            "smaller",
            "count the right predictions and divide by the number of samples",
        )
    if abs(result - 62.5) < 1e-6:
        fail("the accuracy is 62.5, a percentage", "return a fraction between 0 and 1 (0.625)")
    if abs(result - 0.625) > 1e-6:
        fail(
            f"on {m.label} the accuracy is {short(result, 12)}, but 5 of the 8 samples are right (0.625)",
            "count the right predictions over all batches and divide by the number of samples",
        )


def _weight_expected() -> torch.Tensor:
    weight = torch.ones(len(CIFAR10_CLASSES))
    weight[CIFAR10_CLASSES.index("cat")] = 2.0
    return weight


@exercise(
    "write weighted_loss(device) so that it returns nn.CrossEntropyLoss with class weight 2.0 for 'cat' and "
    "1.0 for the other classes, ready for outputs on device"
)
def check_weighted_loss(weighted_loss: Callable[[torch.device], nn.Module]) -> str:
    """Exercise 3: ``weighted_loss(device)``, cross-entropy weighting cat 2 and the rest 1, on ``device``."""
    expected_weight = _weight_expected()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        logits = torch.randn(6, len(CIFAR10_CLASSES))
    targets = torch.tensor([3, 1, 2, 3, 0, 9])
    expected = nn.functional.cross_entropy(logits, targets, weight=expected_weight)
    for m in device_machines():
        with m.tried():
            loss_fn = m.run(weighted_loss, m.device)
            _check_loss_module(loss_fn, m, expected_weight)
            value = m.run(loss_fn, logits.to(m.device), targets.to(m.device))
            if not isinstance(value, torch.Tensor) or value.shape != ():
                fail(
                    f"the loss gives {describe(value)}, not one number",
                    "keep the default reduction, the mean",
                )
            if value.device.type != m.device.type:
                fail(f"the loss is computed on {value.device}", "keep the loss on the device of the outputs")
            if not value.is_meta and not torch.allclose(value.detach().cpu(), expected, atol=1e-5):
                fail(
                    f"the loss is {value.item():.4f}, but weighted cross-entropy gives {expected.item():.4f}",
                    "keep nn.CrossEntropyLoss's other settings as they are, and change only the weights",
                )
    return "the weighted loss counts a cat twice and computes on the device of the outputs"


def _check_loss_module(loss_fn: Any, m: Machine, expected_weight: torch.Tensor) -> None:
    if loss_fn is None:
        fail("weighted_loss returned None", "return the loss")
    if not isinstance(loss_fn, nn.CrossEntropyLoss):
        fail(f"weighted_loss returned {describe(loss_fn)}", "return an nn.CrossEntropyLoss")
    weight = loss_fn.weight
    if weight is None:
        fail(
            "the loss has no class weights", "pass weight=... (a tensor of 10 numbers) to nn.CrossEntropyLoss"
        )
    if tuple(weight.shape) != (len(CIFAR10_CLASSES),):
        fail(f"the class weights have shape {tuple(weight.shape)}", "give 10 weights, one per CIFAR-10 class")
    if weight.dtype != torch.float32:
        fail(
            f"the class weights are {_dtype(weight)}, but the model's outputs are float32",
            "make them float32, e.g. with 2.0 and 1.0 or .float()",
        )
    if weight.device.type != m.device.type:
        fail(
            f"the class weights are on {weight.device}, not on {where(m.device)}, and a loss made with "
            "weight= holds a tensor",
            "move the loss to the device, or make the weights there",
        )
    if weight.is_meta:
        return
    values = weight.detach().cpu()
    cat = CIFAR10_CLASSES.index("cat")
    if values[cat].item() != 2.0:
        fail(f"the weight of 'cat' (class {cat}) is {values[cat].item():g}", "make it 2.0")
    for index, name in enumerate(CIFAR10_CLASSES):
        if values[index].item() != expected_weight[index].item():
            fail(
                f"the weight of '{name}' (class {index}) is {values[index].item():g}",
                "make it 1.0 (only cat gets 2)",
            )
