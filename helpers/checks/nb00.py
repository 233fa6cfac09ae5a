"""Checks for the exercises of ``00_devices_and_tensors``.

Each runs the learner's function given the CPU, given ``meta`` standing in for a GPU (where only
devices, shapes and types count), given the CPU on a Mac whose GPU the check stands in for, and
given a real GPU where there is one.
"""

from collections.abc import Callable
from typing import Any

import torch

from helpers.checks import fail
from helpers.checks.harness import (
    Machine,
    Told,
    describe,
    device_machines,
    exercise,
    plural,
    short,
)

__all__ = ["check_as_floats", "check_move_all", "check_noise"]

_TOLD = (
    Told(
        r"'(list|tuple)' object has no attribute '(\w+)'",
        r"called .\2() on a \1",
        "call it on each tensor",
    ),
    Told(r"converted to Scalar", "called .item() on a tensor of several numbers", "use t.tolist()"),
    Told(
        r"flags of leaf",
        "tried to switch off requires_grad of the tensor given",
        "leave the tensor as it is",
    ),
)
_SHAPES = ((2, 3), (5,), (1, 4, 3))


def _noise_on(m: Machine, noise: Callable, shape: tuple[int, ...]) -> torch.Tensor:
    t = m.run(noise, shape, m.device, reads=False, told=_TOLD)
    if not isinstance(t, torch.Tensor):
        fail(f"noise returned {describe(t)}, not a tensor", "return the tensor of random numbers")
    if tuple(t.shape) != shape:
        fail(
            f"noise({shape}, device) gave a tensor of shape {tuple(t.shape)}",
            "use the shape it is given",
        )
    if t.device.type != m.device.type:
        fail(
            f"the tensor is on {m.where(t.device)}, not on {m.device}",
            "make it there, device=device",
        )
    if not t.is_floating_point():
        fail(
            f"the tensor holds {str(t.dtype).removeprefix('torch.')}, not floating-point numbers",
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
        for m in device_machines():
            m.copies_refused = True  # a copy made on the CPU, then moved, is refused
            for shape in _SHAPES:
                _noise_on(m, noise, shape)
        sample = _noise_on(Machine.cpu(), noise, (20_000,)).detach().double()
    mean = sample.mean().item()
    std = sample.std().item()
    said = f"mean {mean:.2f}, standard deviation {std:.2f}"
    if 0.4 < mean < 0.6 and 0.25 < std < 0.33:
        fail(
            f"the numbers are uniform in [0, 1) ({said})",
            "draw them with torch.randn, not torch.rand",
        )
    if abs(mean) > 0.05 or abs(std - 1.0) > 0.05:
        fail(f"the numbers have {said}, not 0 and 1", "leave the standard-normal numbers as drawn")
    return "noise is made directly on the device it is given, whichever it is; nothing is copied"


def _tensor_lists() -> list[list[torch.Tensor]]:
    """Lists of tensors of several dtypes and shapes, as ``move_all`` gets them."""
    return [
        [torch.arange(3.0), torch.ones(2, 2), torch.zeros(4, dtype=torch.long)],
        [torch.tensor(7, dtype=torch.int32)],
        [torch.rand(2, 3, dtype=torch.float64), torch.tensor([True, False]), torch.ones(1)],
    ]


@exercise(
    "write move_all(tensors, device) so that it returns a list of the tensors, each moved to device"
)
def check_move_all(
    move_all: Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]],
) -> str:
    """Exercise 2: ``move_all(tensors, device)``, the tensors, each moved to ``device``."""
    for m in device_machines():
        for given in _tensor_lists():
            result = m.run(move_all, list(given), m.device, reads=False, told=_TOLD)
            _check_moved_list(m, given, result)
    return "every tensor is moved to the device, and the moved copies are kept"


def _check_moved_list(m: Machine, given: list[torch.Tensor], result: Any) -> None:
    count = len(given)
    if not isinstance(result, list | tuple) or len(result) != count:
        fail(
            f"move_all returned {describe(result)} for {count} tensor(s)",
            f"return a list of the {count}, each moved",
        )
    for i, (original, got) in enumerate(zip(given, result, strict=True)):
        if not isinstance(got, torch.Tensor):
            fail(f"item {i} of the list is {describe(got)}", "put the moved tensors in the list")
        if got.device.type != m.device.type:
            kept = ", the list holds the tensor given" if got is original else ""
            fail(
                f"tensor {i} was not moved to {m.where(m.device)}{kept}",
                "put t.to(device), a moved copy, in it",
            )
        if got.dtype != original.dtype or got.shape != original.shape:
            was = f"{str(original.dtype)[6:]} {tuple(original.shape)}"
            now = f"{str(got.dtype)[6:]} {tuple(got.shape)}"
            fail(f"tensor {i} changed on the way, from {was} to {now}", "keep its shape and dtype")
        if not got.is_meta and not torch.equal(got.detach().cpu(), original):
            fail(
                f"tensor {i} holds other numbers than the one given",
                "move it and change nothing else",
            )


def _graph_tensors(device: torch.device) -> list[torch.Tensor]:
    """1-D tensors in a graph (as a model's outputs are), of several sizes and two dtypes."""
    generator = torch.Generator().manual_seed(0)
    made = []
    for size, dtype in ((3, torch.float32), (1, torch.float32), (6, torch.float64)):
        values = torch.randn(size, dtype=dtype, generator=generator) / 3
        made.append(values.to(device).requires_grad_() * 2)
    return made


@exercise(
    "write as_floats(t) so that it returns the numbers of the 1-D tensor t "
    "as a list of Python floats"
)
def check_as_floats(as_floats: Callable[[torch.Tensor], list[float]]) -> str:
    """Exercise 3: ``as_floats(t)``, Python floats from a 1-D tensor anywhere, even with grad."""
    for m in device_machines():
        with m.tried():
            for tensor in _graph_tensors(m.device):
                result = m.run(as_floats, tensor, told=_TOLD)
                if not tensor.requires_grad:
                    fail(
                        "as_floats switched off requires_grad of the tensor given",
                        "leave the tensor as it is",
                    )
                _check_floats(result, tensor)
    return "as_floats gives Python floats from a tensor on any device, also one that requires grad"


def _check_floats(result: Any, tensor: torch.Tensor) -> None:
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
    kinds = ", ".join(sorted({type(v).__name__ for v in result if type(v) is not float}))
    if kinds:
        fail(
            f"the list holds {kinds}, not only Python floats",
            "use t.tolist(), which gives Python floats",
        )
    if len(result) != len(tensor):
        fail(
            f"as_floats returned {plural(len(result), 'number')} for a tensor of {len(tensor)}",
            "return all of them, in order",
        )
    if tensor.is_meta:
        return  # no values to compare: the other machines compare them
    expected = tensor.detach().cpu().tolist()
    if result != expected:
        got = short([round(v, 6) for v in result])
        want = short([round(v, 6) for v in expected])
        fail(
            f"as_floats returned {got}, not the tensor's {want}",
            "return the tensor's numbers, in order and unrounded",
        )
