"""Checks for the exercises of ``01_cuda_method``.

The ``.cuda()`` exercises must work on two machines: one without a GPU, where nothing may call
``.cuda()``, and one with a GPU, where everything must. Each check runs the learner's function on
both, played by ``helpers.checks.harness``: ``Machine.without_gpu()``, where ``torch.cuda`` says
there is no GPU and every use of CUDA fails as it does without a driver, and
``Machine.with_stand_in_gpu()``, where ``torch.cuda`` says there is one (its name, properties,
memory, ``synchronize``...) and ``.cuda()`` moves to ``meta``, which stands in for it; then, on a
machine with a GPU, on the real one as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, describe, exercise, real_gpu
from helpers.models import Tudui, count_parameters

__all__ = ["check_cuda_batch", "check_cuda_model_and_loss", "check_tudui_with_relu"]

_GUARD = "do that only when torch.cuda.is_available(), so that the code runs on every machine"


def _played_machines() -> list[Machine]:
    machines = [Machine.without_gpu(), Machine.with_stand_in_gpu()]
    if real_gpu() is not None and real_gpu().type == "cuda":
        machines.append(Machine.gpu(real_gpu()))
    for m in machines:
        m.cuda_fix = _GUARD
    return machines


def _pair(result: Any, function: str, what: str) -> tuple[Any, Any]:
    if result is None:
        fail(f"{function} returned None", f"return {what}, moved or not")
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"{function} returned {describe(result)}", f"return two things, {what}")
    return result[0], result[1]


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])


@exercise(
    "write cuda_batch(imgs, targets) so that it returns the batch, moved with .cuda() when a GPU is "
    "available and unchanged otherwise"
)
def check_cuda_batch(cuda_batch: Callable[[torch.Tensor, torch.Tensor], Any]) -> str:
    """Exercise 1: ``cuda_batch(imgs, targets)`` moves both with ``.cuda()`` if there is a GPU, else none."""
    for m in _played_machines():
        with m.tried():
            imgs, targets = _batch()
            result = m.run(cuda_batch, imgs, targets)
            out = _pair(result, "cuda_batch", "(imgs, targets)")
            if out[0] is targets or getattr(out[0], "shape", None) == targets.shape != imgs.shape:
                fail("cuda_batch returned (targets, imgs), the other way round", "return (imgs, targets)")
            for name, variable, given, tensor in zip(
                ("images", "targets"), ("imgs", "targets"), (imgs, targets), out, strict=True
            ):
                if not isinstance(tensor, torch.Tensor):
                    fail(
                        f"the {name} returned are {describe(tensor)}, not a tensor",
                        f"return {variable} itself",
                    )
                if m.gpu is None and tensor.device.type != "cpu":
                    fail(
                        f"without a GPU the {name} should stay on the CPU, but they are on {tensor.device}",
                        "move nothing when there is no GPU",
                    )
                if m.gpu is not None and tensor.device.type != m.gpu.type:
                    if tensor is given and any(move.tensor is given for move in m.moves):
                        fail(
                            f"the {name} were not moved to the GPU (.cuda() returned a moved copy that was "
                            "not kept)",
                            f"reassign it, {variable} = {variable}.cuda()",
                        )
                    fail(
                        f"on {m.label} the {name} were not moved to the GPU", f"move {variable} with .cuda()"
                    )
                if tensor.shape != given.shape or tensor.dtype != given.dtype:
                    fail(f"the {name} changed shape or dtype on the way", "move them and change nothing else")
                if m.gpu is None and not torch.equal(tensor, given):
                    fail(f"without a GPU the {name} came back with other values", "return them as they are")
    return "the batch goes to the GPU when there is one, and stays on the CPU when there is not"


def _model_and_loss() -> tuple[nn.Module, nn.Module]:
    return Tudui(), nn.CrossEntropyLoss(weight=torch.ones(10))


@exercise(
    "write cuda_model_and_loss(model, loss_fn) so that it returns (model, loss_fn), both moved with "
    ".cuda() when a GPU is available"
)
def check_cuda_model_and_loss(cuda_model_and_loss: Callable[[nn.Module, nn.Module], Any]) -> str:
    """Exercise 2: ``cuda_model_and_loss(model, loss_fn)`` moves both with ``.cuda()``, behind the guard."""
    for m in _played_machines():
        with m.tried():
            given_model, given_loss = _model_and_loss()
            result = m.run(cuda_model_and_loss, given_model, given_loss)
            model, loss_fn = _pair(result, "cuda_model_and_loss", "(model, loss_fn)")
            for what, value in (("model", model), ("loss_fn", loss_fn)):
                if not isinstance(value, nn.Module):
                    fail(
                        f"the {what} returned is {describe(value)}",
                        f"return the {what} module itself (a module's .cuda() moves it and returns it)",
                    )
            if model is not given_model or loss_fn is not given_loss:
                what = "model" if model is not given_model else "loss function"
                fail(
                    f"cuda_model_and_loss returned another {what} than the one it was given",
                    "move the one given (a module's .cuda() moves it in place and returns it)",
                )
            expected = "cpu" if m.gpu is None else m.gpu.type
            stray = [name for name, p in model.named_parameters() if p.device.type != expected]
            if stray:
                place = "the CPU" if m.gpu is None else "the GPU"
                fix = "move nothing when there is no GPU" if m.gpu is None else "move the model, model.cuda()"
                fail(f"on {m.label} the model's parameters are not on {place} ({stray[0]}, ...)", fix)
            weight = getattr(loss_fn, "weight", None)
            if isinstance(weight, torch.Tensor) and weight.device.type != expected:
                if m.gpu is None:
                    fail(
                        "without a GPU the loss's class weights left the CPU",
                        "move nothing when there is no GPU",
                    )
                fail(
                    f"the loss function's class weights are still on {weight.device} (a loss made with "
                    "weight= holds a tensor)",
                    "move the loss too, loss_fn = loss_fn.cuda()",
                )
    return "model and loss go to the GPU when there is one, and stay on the CPU when there is not"


_LAYERS = {"conv2d": "convolution", "linear": "linear layer"}
_RELUS = {"relu", "relu_"}
_SQUASHING = {
    "softmax",
    "log_softmax",
    "sigmoid",
    "tanh",
    "gelu",
    "leaky_relu",
    "elu",
    "silu",
    "hardtanh",
    "relu6",
}
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def _layer_name(index: int, kinds: list[str]) -> str:
    kind = kinds[index]
    n = sum(1 for k in kinds[: index + 1] if k == kind)
    return f"the {_ORDINALS[n - 1] if n <= len(_ORDINALS) else f'{n}th'} {_LAYERS[kind]}"


@exercise(
    "write tudui_with_relu() so that it returns Tudui's network with an nn.ReLU() after each convolution "
    "and after the first linear layer"
)
def check_tudui_with_relu(tudui_with_relu: Callable[[], nn.Module]) -> str:
    """Exercise 3: ``Tudui`` with ``nn.ReLU()`` after each convolution and after the first linear layer."""
    m = Machine.cpu()
    m.cuda_fix = "return the network on the CPU; the training loop moves it"
    model = m.run(tudui_with_relu)
    if model is None:
        fail("tudui_with_relu returned None", "return the network")
    if not isinstance(model, nn.Module):
        fail(
            f"tudui_with_relu returned {describe(model)}, not a network",
            "return an nn.Module, such as nn.Sequential",
        )
    expected = count_parameters(Tudui())
    got = count_parameters(model)
    if got != expected:
        fail(
            f"the network has {got:,} parameters, Tudui has {expected:,}, and a ReLU adds none",
            "keep Tudui's layers as they are and only add the ReLUs",
        )
    if any(p.device.type != "cpu" for p in model.parameters()):
        fail("tudui_with_relu returned the network on another device", "return it on the CPU")
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        images = torch.randn(16, 3, 32, 32)
        m.names.clear()
        outputs = m.run(model, images)
    if not isinstance(outputs, torch.Tensor) or tuple(outputs.shape) != (16, 10):
        fail(
            f"for 16 images the network gives {describe(outputs)}, not a (16, 10) tensor",
            "keep Tudui's layers, which give one score per class",
        )
    calls = [name for name in m.names if name in _LAYERS or name in _RELUS]
    kinds = [name for name in calls if name in _LAYERS]
    if kinds != ["conv2d"] * 3 + ["linear"] * 2:
        fail(
            f"the network runs {len(kinds)} convolutions and linear layers, Tudui runs 3 and 2",
            "keep Tudui's layers, in their order",
        )
    after = [0] * len(kinds)  # ReLUs between each layer and the next
    layer = -1
    for name in calls:
        if name in _LAYERS:
            layer += 1
        elif layer >= 0:
            after[layer] += 1
    if sum(after) == 0 and not any(name in _RELUS for name in calls):
        fail(
            "the network has no ReLU", "add nn.ReLU() after each convolution and after the first linear layer"
        )
    if after[-1]:
        fail(
            "a ReLU follows the last linear layer, so the class scores (logits) are never negative",
            "end with the linear layer",
        )
    last = max(i for i, name in enumerate(m.names) if name == "linear")
    squashed = [name for name in m.names[last + 1 :] if name in _SQUASHING]
    if squashed:
        fail(
            f"the network applies {squashed[0]} after the last linear layer, but CrossEntropyLoss wants raw "
            "scores (logits)",
            "end with the linear layer",
        )
    for index, count in enumerate(after[:-1]):
        if count == 0:
            fail(f"there is no ReLU after {_layer_name(index, kinds)}", "add an nn.ReLU() right after it")
        if count > 1:
            fail(f"there are {count} ReLUs after {_layer_name(index, kinds)}", "keep one")
    return f"Tudui with four ReLUs: the same {expected:,} parameters, now with non-linearities"
