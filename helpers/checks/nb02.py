"""Checks for the exercises of ``02_to_device_method``.

Where a check needs a device other than the CPU it uses the GPU when there is one and otherwise
PyTorch's ``meta`` device (``helpers.checks.nb00.stand_in_device``). On ``meta`` nothing has a
value, so a number cannot be read there: when the learner's evaluation gets as far as reading its
result (``.item()``) with everything on ``meta``, every batch reached the model's device, which is
what that part of the check is after; the value itself is checked on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks import correct, fail, not_answered
from helpers.checks.nb00 import stand_in_device, where
from helpers.data import CIFAR10_CLASSES

__all__ = ["check_accuracy", "check_move_batch", "check_weighted_loss"]


def _no_cuda(error: BaseException) -> bool:
    message = str(error)
    return any(
        s in message for s in ("NVIDIA driver", "not compiled with CUDA", "CUDA driver", "no CUDA GPUs")
    )


_HARD_CODED = (
    "moving to 'cuda' failed on this machine, which has no GPU: use the device you are given, not a "
    "hard-coded 'cuda', so that the code runs everywhere"
)


def check_move_batch(move_batch: Callable[[Any, torch.device], Any]) -> bool:
    """Exercise 1: ``move_batch(batch, device)`` returns ``(inputs, targets)``, both moved to ``device``."""
    target = stand_in_device()
    for batch in (
        [torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])],
        (torch.rand(2, 5), torch.tensor([1, 0])),
    ):
        given = list(batch)
        try:
            result = move_batch(batch, target)
        except (RuntimeError, AssertionError) as error:
            if _no_cuda(error):
                fail(_HARD_CODED)
            raise
        if result is None:
            return not_answered(
                "write move_batch(batch, device) so that it returns (inputs, targets), both moved to device"
            )
        if not isinstance(result, tuple | list) or len(result) != 2:
            fail(f"move_batch should return two tensors, (inputs, targets); it returned {result!r:.80}")
        for name, original, moved in zip(("inputs", "targets"), given, result, strict=True):
            if not isinstance(moved, torch.Tensor):
                fail(f"the {name} returned are a {type(moved).__name__}, not a tensor")
            if moved.device.type != target.type:
                hint = (
                    ": tensor.to(device) returns a moved copy and leaves the tensor where it was; "
                    "return what it gives"
                    if moved is original
                    else ""
                )
                fail(f"the {name} of this batch were not moved to {where(target)}{hint}")
            if moved.shape != original.shape or moved.dtype != original.dtype:
                fail(f"the {name} changed shape or dtype on the way: move them, and nothing else")
    return correct(f"both parts of the batch go to {target}, whatever the device")


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


# The same words whichever device stands for the GPU: on meta the move fails as it starts, on a GPU
# it succeeds and is found afterwards.
_MOVED_THE_MODEL = (
    "accuracy moved the model to the CPU: leave the model where it is, take the device from it, "
    "next(model.parameters()).device, and move each batch there"
)


def check_accuracy(accuracy: Callable[[nn.Module, Any], float]) -> bool:
    """Exercise 2: ``accuracy(model, loader)`` on the model's own device, in eval mode, without grad."""
    model, loader = _known_case()
    seen: list[tuple[bool, bool, torch.device]] = []  # (training, grad enabled, input device) per forward
    model.register_forward_pre_hook(
        lambda m, args: seen.append((m.training, torch.is_grad_enabled(), args[0].device))
    )
    model.train()  # as a model is after training: evaluating must switch it
    result = accuracy(model, loader)
    if result is None:
        return not_answered(
            "write accuracy(model, loader) so that it returns the fraction of samples the model classifies "
            "right, as a Python float, on the device the model is on"
        )
    if not seen:
        fail("accuracy never ran the model on the batches")
    if any(training for training, _, _ in seen):
        fail(
            "the model was in training mode: call model.eval() first "
            "(dropout and batch norm behave otherwise)"
        )
    if any(grad for _, grad, _ in seen):
        fail(
            "gradients were being recorded: evaluate inside `with torch.no_grad():`, "
            "which saves memory and time"
        )
    if isinstance(result, torch.Tensor):
        fail(f"accuracy returned a tensor, {result!r}; return a Python float: call .item() once, at the end")
    if not isinstance(result, int | float):
        fail(f"accuracy returned a {type(result).__name__}; return a Python float")
    if abs(result - 11 / 18) < 1e-3:
        fail(
            f"the accuracy is {result:.3f}, not 0.625: that is the mean of the batches' accuracies, but the "
            "last batch is smaller; count the right predictions and divide by the number of samples"
        )
    if abs(result - 62.5) < 1e-6:
        fail("the accuracy is 62.5, a percentage: return a fraction between 0 and 1 (0.625)")
    if abs(result - 0.625) > 1e-6:
        fail(f"the accuracy is {result}, expected 0.625 (5 of the 8 samples right)")

    target = stand_in_device()
    model.to(target)
    seen.clear()
    try:
        result = accuracy(model, loader)
    except NotImplementedError as error:
        if "meta" not in str(error):
            raise
        fail(_MOVED_THE_MODEL)
    except (RuntimeError, AssertionError) as error:
        message = str(error)
        if _no_cuda(error):
            fail(_HARD_CODED + "; take the device from the model, next(model.parameters()).device")
        if target.type == "meta" and "cannot be called on meta tensors" in message:
            result = None  # everything ran on meta, up to reading the number: the batches were moved
        elif "device" in message:
            part = "targets" if any(d.type == target.type for _, _, d in seen) else "inputs"
            fail(
                f"the {part} of the batches were not moved to the model's device, {where(target)}: take the "
                "device from the model, device = next(model.parameters()).device, and move each batch there"
            )
        else:
            raise
    if any(p.device.type != target.type for p in model.parameters()):
        fail(_MOVED_THE_MODEL)
    if result is not None and abs(result - 0.625) > 1e-6:
        fail(f"on {target} the accuracy is {result}, but 0.625 on the CPU")
    return correct(f"accuracy works on the model's device ({target}) and returns a Python float")


def check_weighted_loss(weighted_loss: Callable[[torch.device], nn.Module]) -> bool:
    """Exercise 3: ``weighted_loss(device)``, cross-entropy weighting cat 2 and the rest 1, on ``device``."""
    loss_fn = weighted_loss(torch.device("cpu"))
    if loss_fn is None:
        return not_answered(
            "write weighted_loss(device) so that it returns nn.CrossEntropyLoss with class weight 2.0 for "
            "'cat' and 1.0 for the other classes, ready to use on device"
        )
    if not isinstance(loss_fn, nn.CrossEntropyLoss):
        fail(f"weighted_loss returned a {type(loss_fn).__name__}; return an nn.CrossEntropyLoss")
    weight = loss_fn.weight
    if weight is None:
        fail("the loss has no class weights: pass weight=... (a tensor of 10 numbers) to nn.CrossEntropyLoss")
    if tuple(weight.shape) != (len(CIFAR10_CLASSES),):
        fail(f"the class weights have shape {tuple(weight.shape)}; CIFAR-10 has 10 classes, so 10 weights")
    cat = CIFAR10_CLASSES.index("cat")
    if weight[cat].item() != 2.0:
        fail(f"the weight of 'cat' (class {cat}) is {weight[cat].item():g}, expected 2.0")
    for index, name in enumerate(CIFAR10_CLASSES):
        if index != cat and weight[index].item() != 1.0:
            fail(
                f"the weight of '{name}' (class {index}) is {weight[index].item():g}, "
                "expected 1.0: only cat gets 2"
            )

    target = stand_in_device()
    loss_fn = weighted_loss(target)
    if loss_fn.weight.device.type != target.type:
        fail(
            f"the loss's class weights are still on {loss_fn.weight.device}, not on {where(target)}: "
            "a loss made with weight= holds a tensor, so move the loss, loss_fn.to(device), "
            "or make the weight on the device"
        )
    logits = torch.randn(4, len(CIFAR10_CLASSES), device=target)
    loss_fn(logits, torch.tensor([3, 1, 2, 3], device=target))  # computes where the outputs are
    return correct(f"the weighted loss counts cat twice and computes on {target}")
