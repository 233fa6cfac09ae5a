"""Checks for the exercises of ``01_cuda_method``: the answers run as on a machine without a GPU, where
nothing may use CUDA, as on one with a GPU (``meta`` stands in for it), and on a real GPU if there is one."""

import contextlib
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import (
    LearnerError,
    Machine,
    StandInCannot,
    describe,
    device_machines,
    exercise,
)
from helpers.models import Tudui, count_parameters

__all__ = ["check_cuda_batch", "check_cuda_model_and_loss", "check_tudui_with_relu"]

_ASKED = (
    (torch.cuda, "device_count"),
    (torch.cuda, "current_device"),
    (torch.accelerator, "is_available"),
)


def _run(m: Machine, function: Callable, *args: Any) -> Any:
    """``m.run``, where ``torch.cuda`` counts the machine's GPUs, and CUDA used without a GPU is told."""
    try:
        with contextlib.ExitStack() as told:
            if m.available is not None:  # what Machine leaves to the real torch.cuda
                for (owner, name), answer in zip(
                    _ASKED, (int(m.available), 0, m.available), strict=True
                ):
                    told.enter_context(mock.patch.object(owner, name, lambda answer=answer: answer))
            return m.run(function, *args)
    except LearnerError as error:
        if m.cuda == "real" or not any(
            word in str(error.error) for word in ("cuda", "CUDA", "NVIDIA")
        ):
            raise
        if m.available:  # the stand-in cannot answer what the learner asks about the GPU itself
            raise StandInCannot(f"it asked the GPU ({error.error})") from None
        raise error.instead(error.mistake, "do that only when torch.cuda.is_available()") from None


def _check_pair(
    who: str, function: Callable, make: Callable[[], tuple], names: tuple[str, str]
) -> None:
    """Run ``function(*make())`` on every machine: it must return the two, moved where there is a GPU."""
    for m in [Machine.without_gpu(), Machine.with_stand_in_gpu(), *device_machines()[2:]]:
        with m.tried():
            given = make()
            result = _run(m, function, *given)
            if not isinstance(result, tuple | list) or len(result) != 2:
                fail(f"{who} returned {describe(result)}", f"return ({', '.join(names)})")
            for name, was, got in zip(names, given, result, strict=True):
                _check_moved(m, f"{who} returned", name, was, got)


def _check_moved(m: Machine, returned: str, name: str, was: Any, got: Any) -> None:
    if got is not was and not (isinstance(was, torch.Tensor) and isinstance(got, torch.Tensor)):
        what = f"another {name}" if isinstance(got, nn.Module) else f"{describe(got)} as {name}"
        fail(f"{returned} {what}", f"return {name} itself, moved")
    held = (
        [*got.parameters(), *got.buffers()] if isinstance(got, nn.Module) else [got]
    )  # a loss's weights
    if m.device.type != "cpu" and any(t.device.type == "cpu" for t in held):
        fail(f"{name} was not moved to the GPU", f"keep what .cuda() gives, {name} = {name}.cuda()")
    if (
        isinstance(got, nn.Module)
        or got.dtype == was.dtype
        and (got.is_meta or torch.equal(got.cpu(), was))
    ):
        return
    fail(f"{name} changed on the way, to {describe(got)}", f"move {name}, and change nothing else")


@exercise(
    "write cuda_batch(imgs, targets) to return them, moved with .cuda() when a GPU is available"
)
def check_cuda_batch(cuda_batch: Callable[[torch.Tensor, torch.Tensor], Any]) -> str:
    batch = lambda: (torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3]))  # noqa: E731
    _check_pair("cuda_batch", cuda_batch, batch, ("imgs", "targets"))
    return "the batch goes to the GPU when there is one, and stays on the CPU when there is not"


@exercise(
    "write cuda_model_and_loss(model, loss_fn) to return both, moved by .cuda() if a GPU is available"
)
def check_cuda_model_and_loss(cuda_model_and_loss: Callable[[nn.Module, nn.Module], Any]) -> str:
    pair = lambda: (Tudui(), nn.CrossEntropyLoss(weight=torch.ones(10)))  # noqa: E731
    _check_pair("cuda_model_and_loss", cuda_model_and_loss, pair, ("model", "loss_fn"))
    return "model and loss go to the GPU when there is one, and stay on the CPU when there is not"


_LAYERS = ("first convolution", "second convolution", "third convolution", "first linear layer")
_SQUASHING = {
    "a ReLU": F.relu,
    "softmax": lambda x: x.softmax(1),
    "log_softmax": lambda x: x.log_softmax(1),
}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def _between(k: int, seen: list[tuple[torch.Tensor, torch.Tensor]]) -> str:
    """What comes between layer ``k``, which gave ``seen[k][1]``, and the next, given ``seen[k + 1][0]``."""
    tudui = (lambda x: x) if k == 3 else lambda x: F.max_pool2d(x, 2).flatten(1 if k == 2 else -1)
    expected = {"a ReLU": tudui(F.relu(seen[k][1])), "no ReLU": tudui(seen[k][1])}
    return next(
        (name for name, x in expected.items() if _same(seen[k + 1][0], x)), "another function"
    )


@exercise(
    "write tudui_with_relu() to return Tudui with nn.ReLU() after each convolution and the first linear layer"
)
def check_tudui_with_relu(tudui_with_relu: Callable[[], nn.Module]) -> str:
    model = _run(m := Machine.without_gpu(), tudui_with_relu)
    if not isinstance(model, nn.Module):
        what = f"the class {model.__name__}" if isinstance(model, type) else describe(model)
        fail(f"tudui_with_relu returned {what}, not a network", "make the network and return it")
    if any(nn.parameter.is_lazy(p) for p in model.parameters()):
        fail(
            "the network has lazy layers, whose sizes are not set yet",
            "give each layer its sizes, as Tudui",
        )
    if (got := count_parameters(model)) != (expected := count_parameters(Tudui())):
        fail(
            f"the network has {got:,} parameters, Tudui {expected:,}",
            "keep Tudui's layers, add only ReLUs",
        )
    seen = []

    def record(
        layer: nn.Module, args: tuple, out: Any
    ) -> None:  # each layer's input and output, in order
        if isinstance(layer, nn.Conv2d | nn.Linear):
            seen.append((args[0].clone(), out.clone()))  # before an in-place ReLU changes them

    images = torch.randn(16, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), nn.modules.module.register_module_forward_hook(record):
        out = _run(m, model, images)
    if len(seen) != 5 or not isinstance(out, torch.Tensor) or out.shape != (16, 10):
        fail(
            f"the network gives {describe(out)} from {len(seen)} layers",
            "keep Tudui's 5 layers, in order",
        )
    if not _same(out, last := seen[-1][1]):
        what = next(
            (name for name, f in _SQUASHING.items() if _same(out, f(last))), "another layer"
        )
        fail(
            f"{what} follows the last linear layer, but CrossEntropyLoss wants raw scores",
            "end with it",
        )
    for k, layer in enumerate(_LAYERS):
        if (between := _between(k, seen)) != "a ReLU":
            fail(f"there is {between} after the {layer}", "put one nn.ReLU() there")
    if (relus := sum(isinstance(layer, nn.ReLU) for layer in model.modules())) > 4:
        fail(
            f"the network has {relus} nn.ReLU layers, more than four",
            "keep one after each of the 4 layers",
        )
    return f"Tudui with four ReLUs: the same {expected:,} parameters, now with non-linearities"
