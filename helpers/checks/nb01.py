"""Checks for the exercises of ``01_cuda_method``.

The answers run as on a machine without a GPU, where nothing may use CUDA; as on one with a GPU
(``meta`` stands in for it, and ``cuda:1`` does not exist); as on a Mac, whose GPU is no CUDA
GPU; and on this machine's GPU, if it has one.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from helpers.checks import fail
from helpers.checks.harness import Machine, cuda_machines, describe, exercise
from helpers.models import Tudui, count_parameters

__all__ = ["check_cuda_batch", "check_cuda_model_and_loss", "check_tudui_with_relu"]


def _held(value: Any) -> list[torch.Tensor]:
    """The tensors that ``value`` is or holds: a module's parameters and buffers."""
    if isinstance(value, nn.Module):
        return [*value.parameters(), *value.buffers()]
    return [value]


def _snapshot(value: Any) -> dict[str, torch.Tensor]:
    """Copies of what ``value`` holds, by name, to compare with after the call."""
    if isinstance(value, nn.Module):
        return {key: t.detach().clone() for key, t in value.state_dict().items()}
    return {"": value.detach().clone()}


def _check_pair(
    who: str, function: Callable, make: Callable[[], tuple], names: tuple[str, str]
) -> None:
    """Run ``function(*make())`` on every machine: it returns the two, moved where CUDA is."""
    for m in cuda_machines():
        with m.tried(), torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay
            given = make()
            before = [_snapshot(value) for value in given]
            result = m.run(function, *given)
            if not isinstance(result, tuple | list) or len(result) != 2:
                fail(f"{who} returned {describe(result)}", f"return ({', '.join(names)})")
            for name, was, got, kept in zip(names, given, result, before, strict=True):
                _check_moved(m, f"{who} returned", name, (was, got))
                _check_unchanged(name, got, kept)


def _check_moved(m: Machine, returned: str, name: str, pair: tuple[Any, Any]) -> None:
    was, got = pair
    both_tensors = isinstance(was, torch.Tensor) and isinstance(got, torch.Tensor)
    if got is not was and not both_tensors:
        if isinstance(got, nn.Module):
            fail(f"{returned} another {name}", f"return {name} itself, moved")
        fail(f"{returned} {describe(got)} as {name}", f"return {name} itself, moved")
    held = _held(got)
    if m.apple and any(t.is_meta for t in held):
        fail(
            f"{name} was moved to the Mac's GPU (mps), where CUDA alone is asked for",
            "move only with .cuda(), when torch.cuda.is_available()",
        )
    if m.device.type != "cpu" and any(t.device.type == "cpu" for t in held):
        fail(f"{name} was not moved to the GPU", f"keep what .cuda() gives, {name} = {name}.cuda()")


def _check_unchanged(name: str, got: Any, before: dict[str, torch.Tensor]) -> None:
    """What ``got`` holds has the dtypes and values it had before: only its device changed."""
    now = _snapshot(got)
    if isinstance(got, nn.Module) and list(now) != list(before):
        fail(f"{name} lost or gained tensors on the way", f"move {name}, and change nothing else")
    for key, tensor in now.items():
        was = before[key]
        if tensor.dtype != was.dtype or tensor.shape != was.shape:
            what = f"{name}.{key}" if key else name
            changed = f"from {str(was.dtype)[6:]} to {str(tensor.dtype)[6:]}"
            fail(f"{what} changed on the way, {changed}", f"move {name}, and change nothing else")
        if not tensor.is_meta and not torch.equal(tensor.cpu(), was.cpu()):
            fail(
                f"{name} changed on the way, to {describe(got)}",
                f"move {name}, and change nothing else",
            )


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])


@exercise(
    "write cuda_batch(imgs, targets) to return them, moved with .cuda() when a GPU is available"
)
def check_cuda_batch(cuda_batch: Callable[[torch.Tensor, torch.Tensor], Any]) -> str:
    _check_pair("cuda_batch", cuda_batch, _batch, ("imgs", "targets"))
    return "the batch goes to the GPU when there is one, and stays on the CPU when there is not"


def _model_and_loss() -> tuple[nn.Module, nn.Module]:
    return Tudui(), nn.CrossEntropyLoss(weight=torch.rand(10) + 0.5)


@exercise(
    "write cuda_model_and_loss(model, loss_fn) to return both, moved by .cuda() if a GPU is "
    "available"
)
def check_cuda_model_and_loss(cuda_model_and_loss: Callable[[nn.Module, nn.Module], Any]) -> str:
    names = ("model", "loss_fn")
    _check_pair("cuda_model_and_loss", cuda_model_and_loss, _model_and_loss, names)
    return "model and loss go to the GPU when there is one, and stay on the CPU when there is not"


_LAYERS = ("first convolution", "second convolution", "third convolution", "first linear layer")
_SQUASHING = {
    "a ReLU": functional.relu,
    "softmax": lambda x: x.softmax(1),
    "log_softmax": lambda x: x.log_softmax(1),
}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def _after_layer(k: int, x: torch.Tensor) -> torch.Tensor:
    """What Tudui does between layer ``k``'s output ``x`` and the next layer: pool and flatten."""
    if k == 3:
        return x
    pooled = functional.max_pool2d(x, 2)
    if k == 2:
        return pooled.flatten(1)
    return pooled


def _between(k: int, seen: list[tuple[torch.Tensor, torch.Tensor]]) -> str:
    """What lies between layer ``k`` (its output ``seen[k][1]``) and the next (``seen[k+1][0]``)."""
    output = seen[k][1]
    following_input = seen[k + 1][0]
    if _same(following_input, _after_layer(k, functional.relu(output))):
        return "a ReLU"
    if _same(following_input, _after_layer(k, output)):
        return "no ReLU"
    return "another function"


def _network(tudui_with_relu: Callable[[], nn.Module]) -> nn.Module:
    model = Machine.no_gpu().run(tudui_with_relu)
    if not isinstance(model, nn.Module):
        fail(f"tudui_with_relu returned {describe(model)}, not a network", "make it and return it")
    if any(nn.parameter.is_lazy(p) for p in model.parameters()):
        fail(
            "the network has lazy layers, whose sizes are not set yet",
            "give each layer its sizes, as Tudui",
        )
    got = count_parameters(model)
    expected = count_parameters(Tudui())
    if got != expected:
        fail(
            f"the network has {got:,} parameters, Tudui {expected:,}",
            "keep Tudui's layers, add only ReLUs",
        )
    return model


def _run_recorded(model: nn.Module) -> tuple[Any, list[tuple[torch.Tensor, torch.Tensor]]]:
    """The network's output for a batch, and each layer's input and output, in order."""
    seen = []

    def record(layer: nn.Module, args: tuple, out: Any) -> None:
        if isinstance(layer, nn.Conv2d | nn.Linear):
            seen.append((args[0].clone(), out.clone()))  # before an in-place ReLU changes them

    images = torch.randn(16, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), nn.modules.module.register_module_forward_hook(record):
        out = Machine.no_gpu().run(model, images)
    if len(seen) != 5 or not isinstance(out, torch.Tensor) or out.shape != (16, 10):
        fail(
            f"the network gives {describe(out)} from {len(seen)} layers",
            "keep Tudui's 5 layers, in order",
        )
    return out, seen


@exercise(
    "write tudui_with_relu() to return Tudui with nn.ReLU() after each convolution and the first "
    "linear layer"
)
def check_tudui_with_relu(tudui_with_relu: Callable[[], nn.Module]) -> str:
    model = _network(tudui_with_relu)
    out, seen = _run_recorded(model)
    last = seen[-1][1]
    if not _same(out, last):
        squashed = [name for name, f in _SQUASHING.items() if _same(out, f(last))]
        what = squashed[0] if squashed else "another layer"
        fail(
            f"{what} follows the last linear layer, but CrossEntropyLoss wants raw scores",
            "end with it",
        )
    for k, layer in enumerate(_LAYERS):
        between = _between(k, seen)
        if between != "a ReLU":
            fail(f"there is {between} after the {layer}", "put one nn.ReLU() there")
    relus = sum(isinstance(layer, nn.ReLU) for layer in model.modules())
    if relus > 4:
        fail(
            f"the network has {relus} nn.ReLU layers, more than four",
            "keep one after each of the 4 layers",
        )
    parameters = count_parameters(model)
    return f"Tudui with four ReLUs: the same {parameters:,} parameters, now with non-linearities"
