"""Checks for the exercises of ``00_devices_and_tensors``, and two tools the later checks share.

``stand_in_device()`` is where a check sends things: the GPU (or other accelerator) when this
machine has one, else PyTorch's ``meta`` device, which exists everywhere and, like a GPU, is not
the CPU (it keeps shapes and dtypes, no values). ``TorchCalls`` records the PyTorch functions and
methods that the learner's code calls, through PyTorch's public ``torch.overrides.TorchFunctionMode``,
so that a check can tell a tensor made on the device from one made on the CPU and copied there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from helpers.checks import correct, fail, not_answered
from helpers.devices import pick_device

__all__ = ["TorchCalls", "check_as_floats", "check_move_all", "check_noise", "stand_in_device", "where"]

_MOVES = {"to", "cuda", "cpu", "mps", "xpu", "copy_"}


def stand_in_device() -> torch.device:
    """The accelerator this machine has (``pick_device()``), or ``meta`` when it has only the CPU."""
    device = pick_device()
    return device if device.type != "cpu" else torch.device("meta")


def where(device: torch.device) -> str:
    """How a check's message names ``device``: the ``meta`` device is said to stand in for a GPU."""
    if device.type == "meta":
        return "meta (the check's stand-in for a GPU, as this machine has none)"
    return str(device)


class TorchCalls(TorchFunctionMode):
    """Inside ``with TorchCalls() as calls:``, record every PyTorch call and every move between devices.

    ``calls.names`` lists the functions and methods called, in order (``"randn"``, ``"to"``,
    ``"numpy"``, ...); ``calls.args`` and ``calls.kwargs`` their arguments; ``calls.moves`` each
    ``(method, from_device, to_device)`` for a ``.to``/``.cuda``/``.cpu``/``.copy_`` that changed
    the device, and ``calls.moved`` the tensors those moves were made from. Nothing is changed:
    every call runs as it would without the recorder.
    """

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.args: list[tuple] = []
        self.kwargs: list[dict[str, Any]] = []
        self.moves: list[tuple[str, torch.device, torch.device]] = []
        self.moved: list[torch.Tensor] = []

    def _run(self, func: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
        return func(*args, **kwargs)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", repr(func))
        self.names.append(name)
        self.args.append(args)
        self.kwargs.append(kwargs)
        result = self._run(func, args, kwargs)
        if name in _MOVES and len(args) >= 1 and isinstance(result, torch.Tensor):
            source = args[1] if name == "copy_" and len(args) > 1 else args[0]
            if isinstance(source, torch.Tensor) and source.device != result.device:
                self.moves.append((name, source.device, result.device))
                self.moved.append(source)
        return result


def check_noise(noise: Callable[[tuple[int, ...], torch.device], torch.Tensor]) -> bool:
    """Exercise 1: ``noise(shape, device)`` makes standard-normal noise directly on ``device``."""
    target = stand_in_device()
    with TorchCalls() as calls:
        result = noise((2, 3), target)
    if result is None:
        return not_answered(
            "write noise(shape, device) so that it returns standard-normal random numbers of that shape, "
            "made directly on device"
        )
    if not isinstance(result, torch.Tensor):
        fail(f"noise returned a {type(result).__name__}, not a tensor")
    if tuple(result.shape) != (2, 3):
        fail(f"noise((2, 3), device) returned a tensor of shape {tuple(result.shape)}: pass the shape on")
    if result.device.type != target.type:
        fail(
            f"the tensor is on {result.device}, not on {where(target)}: "
            "give the factory function device=device"
        )
    if calls.moves:
        method, source, _ = calls.moves[0]
        fail(
            f"the tensor was made on {source} and then copied to the device with .{method}(): make it there "
            "instead, by giving the factory function device=device, so that nothing is copied"
        )
    if not result.is_floating_point():
        fail(f"the tensor holds {result.dtype}, not floating-point numbers")
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random numbers as they were
        sample = noise((20_000,), torch.device("cpu"))
    mean, std = sample.float().mean().item(), sample.float().std().item()
    if abs(mean) > 0.05 or abs(std - 1.0) > 0.05:
        uniform = (
            " (torch.rand draws uniformly from [0, 1); torch.randn from a standard normal)"
            if mean > 0.3
            else ""
        )
        fail(
            f"the numbers are not standard-normal: their mean is {mean:.2f} and their standard deviation "
            f"{std:.2f}, expected about 0 and 1{uniform}"
        )
    return correct(f"noise is made directly on {target}; nothing is copied from the CPU")


def check_move_all(move_all: Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]) -> bool:
    """Exercise 2: ``move_all(tensors, device)`` returns a list of the tensors, each moved to ``device``."""
    target = stand_in_device()
    tensors = [torch.arange(3.0), torch.ones(2, 2), torch.zeros(4, dtype=torch.long)]
    result = move_all(list(tensors), target)
    if result is None:
        return not_answered(
            "write move_all(tensors, device) so that it returns a list of the tensors moved to device"
        )
    if not isinstance(result, list | tuple):
        fail(f"move_all returned a {type(result).__name__}; return a list of tensors")
    if len(result) != len(tensors):
        fail(f"move_all returned {len(result)} items for {len(tensors)} tensors")
    for i, (given, got) in enumerate(zip(tensors, result, strict=True)):
        if not isinstance(got, torch.Tensor):
            fail(f"item {i} of the result is a {type(got).__name__}, not a tensor")
        if got is given:
            fail(
                f"tensor {i} is the very tensor you were given, still on {given.device}: t.to(device) does "
                "not move t, it returns a moved copy; put what it returns in the list (reassigning the "
                "loop variable does not change the list)"
            )
        if got.device.type != target.type:
            fail(f"tensor {i} is on {got.device}, not on {where(target)}")
        if got.shape != given.shape or got.dtype != given.dtype:
            fail(f"tensor {i} changed its shape or dtype on the way: move it, and nothing else")
    return correct(f"every tensor was moved to {target}, and the moved copies were kept")


def check_as_floats(as_floats: Callable[[torch.Tensor], list[float]]) -> bool:
    """Exercise 3: ``as_floats(t)``, a list of Python floats from any tensor, even one that requires grad."""
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random numbers as they were
        torch.manual_seed(0)
        layer = nn.Linear(2, 3)
    t = layer(torch.ones(1, 2)).squeeze(0)  # three numbers, part of the autograd graph
    expected = [float(v) for v in t.detach().numpy()]
    candidates = [t]
    device = stand_in_device()
    if device.type != "meta":  # a real GPU: its numbers can be read, so check from there too
        candidates.append(t.to(device))
    for tensor in candidates:
        try:
            result = as_floats(tensor)
        except RuntimeError as error:
            if "converted to Scalar" in str(error) or "one element" in str(error):
                fail(
                    ".item() gives one number and works only for a tensor with one element; this one has "
                    "3: use .tolist() to get all of them"
                )
            if "requires grad" in str(error):
                fail(
                    "this tensor requires grad: call .detach() first "
                    "(or use .tolist(), which needs no detach)"
                )
            raise
        except TypeError as error:
            if "Use Tensor.cpu()" in str(error):
                fail(
                    f"this tensor is on {tensor.device}: .numpy() works on the CPU only; "
                    ".tolist() works from any device"
                )
            raise
        if result is None:
            return not_answered(
                "write as_floats(t) so that it returns the numbers of t as a list of Python floats"
            )
        _check_float_list(result, expected)
    one = as_floats(torch.tensor([2.5]))
    if isinstance(one, float):
        fail(
            "as_floats(torch.tensor([2.5])) returned a bare number; return a list, [2.5], for one element too"
        )
    _check_float_list(one, [2.5])
    return correct("as_floats gives Python floats for any tensor, also one that requires grad")


def _check_float_list(result: Any, expected: list[float]) -> None:
    if isinstance(result, torch.Tensor):
        fail("as_floats returned a tensor, not Python floats: .tolist() turns a tensor into Python numbers")
    if isinstance(result, np.ndarray):
        fail("as_floats returned a NumPy array; the exercise asks for a list of Python floats: use .tolist()")
    if not isinstance(result, list):
        fail(f"as_floats returned a {type(result).__name__}; return a list")
    if any(isinstance(v, torch.Tensor) for v in result):
        fail(
            "the list holds tensors, not Python floats (list(t) splits a tensor into one-element tensors): "
            "use t.tolist()"
        )
    if not all(type(v) is float for v in result):
        kinds = sorted({type(v).__name__ for v in result})
        fail(f"the list holds {', '.join(kinds)}, not Python floats: use t.tolist()")
    if len(result) != len(expected) or not np.allclose(result, expected):
        fail(f"as_floats returned {result}, expected {expected}")
