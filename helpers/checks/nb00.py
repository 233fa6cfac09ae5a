"""Checks for the exercises of ``00_devices_and_tensors``: each runs the learner's function given the CPU,
given ``meta`` standing in for a GPU (where only devices, shapes and types count), and given a real GPU.
"""

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from helpers.checks import fail, harness
from helpers.checks.harness import LearnerError, Machine, describe, device_machines, exercise

__all__ = ["check_as_floats", "check_move_all", "check_noise"]

_EXPLAINED = {  # the learner's error: the mistake it means (\1: a group), the fix
    r"'(list|tuple)' object has no attribute '(\w+)'": (
        r"called .\2() on a \1",
        "call it on each tensor",
    ),
    r"converted to Scalar": ("called .item() on a tensor of several numbers", "use t.tolist()"),
    r"flags of leaf": (
        "tried to switch off requires_grad of the tensor given",
        "leave the tensor as it is",
    ),
}


def _run(m: Machine, function: Callable, *args: Any, reads: bool = False) -> Any:
    """``m.run``; unless the task ``reads`` values, copying them off the stand-in is a mistake."""
    try:
        return m.run(function, *args, reads=reads)
    except LearnerError as error:
        for pattern, (mistake, fix) in _EXPLAINED.items():
            if found := re.search(pattern, str(error.error)):
                name = function.__name__.replace("<lambda>", "your function")
                raise error.instead(f"{name} {found.expand(mistake)}", fix) from None
        raise


def _noise_on(m: Machine, noise: Callable, shape: tuple[int, ...]) -> torch.Tensor:
    t = _run(m, noise, shape, m.device)
    if not isinstance(t, torch.Tensor):
        fail(f"noise returned {describe(t)}, not a tensor", "return the tensor of random numbers")
    if tuple(t.shape) != shape:
        fail(
            f"noise({shape}, device) gave a tensor of shape {tuple(t.shape)}",
            "use the shape it is given",
        )
    if t.device.type != m.device.type:
        fail(
            f"the tensor is on {t.device}, not on {harness.where(m.device)}",
            "make it there, device=device",
        )
    if not t.is_floating_point():
        fail(
            f"the tensor holds {str(t.dtype)[6:]}, not floating-point numbers",
            "draw them with torch.randn",
        )
    return t


@exercise(
    "write noise(shape, device) so that it returns standard-normal random numbers of that shape, "
    "made directly on device"
)
def check_noise(noise: Callable[[tuple[int, ...], torch.device], torch.Tensor]) -> str:
    """Exercise 1: ``noise(shape, device)`` makes standard-normal noise directly on ``device``."""
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random numbers as they were
        torch.manual_seed(0)
        for m in device_machines():  # the copies_refused machines refuse a copy made to the device
            _noise_on(Machine(m.device, m.cuda, copies_refused=True), noise, (2, 3))
        sample = _noise_on(Machine.cpu(), noise, (20_000,)).detach().double()
    mean, std = sample.mean().item(), sample.std().item()
    said = f"mean {mean:.2f}, standard deviation {std:.2f}"
    if 0.4 < mean < 0.6 and 0.25 < std < 0.33:
        fail(
            f"the numbers are uniform in [0, 1) ({said})",
            "draw them with torch.randn, not torch.rand",
        )
    if abs(mean) > 0.05 or abs(std - 1.0) > 0.05:
        fail(f"the numbers have {said}, not 0 and 1", "leave the standard-normal numbers as drawn")
    return "noise is made directly on the device it is given, whichever it is; nothing is copied from the CPU"


@exercise(
    "write move_all(tensors, device) so that it returns a list of the tensors, each moved to device"
)
def check_move_all(
    move_all: Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]],
) -> str:
    """Exercise 2: ``move_all(tensors, device)`` returns a list of the tensors, each moved to ``device``."""
    for m in device_machines():
        given = [torch.arange(3.0), torch.ones(2, 2), torch.zeros(4, dtype=torch.long)]
        here = harness.where(m.device)
        result = _run(m, move_all, list(given), m.device)
        if not isinstance(result, list | tuple) or len(result) != len(given):
            fail(
                f"move_all returned {describe(result)} for 3 tensors",
                "return a list of the 3, each moved",
            )
        for i, (original, got) in enumerate(zip(given, result, strict=True)):
            if not isinstance(got, torch.Tensor):
                fail(
                    f"item {i} of the list is {describe(got)}", "put the moved tensors in the list"
                )
            if got.device.type != m.device.type:
                kept = ", the list holds the tensor given" * (got is original)
                fail(
                    f"tensor {i} was not moved to {here}{kept}",
                    "put t.to(device), a moved copy, in it",
                )
            if got.dtype != original.dtype or got.shape != original.shape:
                was, now = (f"{str(t.dtype)[6:]} {tuple(t.shape)}" for t in (original, got))
                fail(
                    f"tensor {i} changed on the way, from {was} to {now}",
                    "keep its shape and dtype",
                )
            if not got.is_meta and not torch.equal(got.detach().cpu(), original):
                fail(
                    f"tensor {i} holds other numbers than the one given",
                    "move it and change nothing else",
                )
    return "every tensor is moved to the device, and the moved copies are kept"


@exercise(
    "write as_floats(t) so that it returns the numbers of the 1-D tensor t as a list of Python floats"
)
def check_as_floats(as_floats: Callable[[torch.Tensor], list[float]]) -> str:
    """Exercise 3: ``as_floats(t)``, Python floats from a 1-D tensor on any device, even one with grad."""
    for m in device_machines():
        with m.tried():
            tensor = (
                torch.tensor([0.1234, -1.25, 3.0], device=m.device, requires_grad=True) * 2
            )  # in a graph
            result = _run(m, as_floats, tensor, reads=True)
            if not tensor.requires_grad:
                fail(
                    "as_floats switched off requires_grad of the tensor given",
                    "leave the tensor as it is",
                )
            _check_floats(result, [0.2468, -2.5, 6.0])
    _check_floats(
        _run(Machine.cpu(), as_floats, torch.tensor([2.5])), [2.5]
    )  # one number: a list too
    return "as_floats gives Python floats from a tensor on any device, also one that requires grad"


def _check_floats(result: Any, expected: list[float]) -> None:
    if not isinstance(result, list):
        fail(
            f"as_floats returned {describe(result)}, not a list",
            "return t.tolist(), a list of floats",
        )
    if any(isinstance(v, torch.Tensor) for v in result):
        fail(
            "the list holds one-element tensors (list(t) splits a tensor into tensors)",
            "use t.tolist()",
        )
    if kinds := ", ".join(sorted({type(v).__name__ for v in result if type(v) is not float})):
        fail(
            f"the list holds {kinds}, not only Python floats",
            "use t.tolist(), which gives Python floats",
        )
    if len(result) != len(expected) or not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
        got, want = (harness.short([round(v, 4) for v in values]) for values in (result, expected))
        fail(
            f"as_floats returned {got}, not the tensor's {want}",
            "return the tensor's numbers, in order",
        )
