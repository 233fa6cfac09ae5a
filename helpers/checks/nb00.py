"""Checks for the exercises of ``00_devices_and_tensors``.

Each runs the learner's function on the machines of ``helpers.checks.harness.device_machines``:
given the CPU, given ``meta`` standing in for a GPU, and given this machine's GPU when it has one.
Values are compared on the CPU; on the stand-in only devices, shapes, dtypes and types count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, describe, device_machines, exercise, short, where

__all__ = ["check_as_floats", "check_move_all", "check_noise"]

_FROM_DATA = {"tensor", "as_tensor", "from_numpy", "asarray", "Tensor", "FloatTensor"}


def _noise_on(m: Machine, noise: Callable, shape: tuple[int, ...]) -> torch.Tensor:
    result = m.run(noise, shape, m.device)
    if result is None:
        fail("noise returned None", "return the tensor it makes")
    if not isinstance(result, torch.Tensor):
        fail(f"noise returned {describe(result)}, not a tensor", "return a tensor of random numbers")
    if tuple(result.shape) != shape:
        fail(
            f"noise({shape}, device) returned a tensor of shape {tuple(result.shape)}",
            "make it of the shape noise is given",
        )
    if result.device.type != m.device.type:
        fail(
            f"the tensor is on {result.device}, not on {where(m.device)}, the device noise was given",
            "make it there, with device=device",
        )
    moved = [move for move in m.moves if move.destination.type == m.device.type]
    if moved:
        fail(
            f"the numbers were made on {moved[0].source} and then copied to {moved[0].destination} "
            f"with .{moved[0].method}()",
            "make them on the device directly, by giving the factory function device=device",
        )
    if m.device.type != "cpu" and _FROM_DATA.intersection(m.names):
        fail(
            "the numbers were made outside PyTorch's factories (NumPy, a list) and copied in",
            "draw them with a PyTorch random function, made on the device with device=device",
        )
    if not result.is_floating_point():
        fail(
            f"the tensor holds {str(result.dtype).removeprefix('torch.')}, not floating-point numbers",
            "draw from the standard normal distribution, which gives floats",
        )
    return result


@exercise(
    "write noise(shape, device) so that it returns standard-normal random numbers of that shape, "
    "made directly on device"
)
def check_noise(noise: Callable[[tuple[int, ...], torch.device], torch.Tensor]) -> str:
    """Exercise 1: ``noise(shape, device)`` makes standard-normal noise directly on ``device``."""
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random numbers as they were
        torch.manual_seed(0)
        for m in device_machines():
            with m.tried():
                _noise_on(m, noise, (2, 3))
        sample = _noise_on(Machine.cpu(), noise, (20_000,)).detach().double()
    mean, std = sample.mean().item(), sample.std().item()
    if not (abs(mean) <= 0.05 and abs(std - 1.0) <= 0.05):
        if 0.4 < mean < 0.6 and 0.25 < std < 0.33:
            fail(
                f"the numbers are uniform in [0, 1) (mean {mean:.2f}, standard deviation {std:.2f})",
                "draw from the standard normal distribution, torch.randn, not torch.rand",
            )
        fail(
            f"the numbers have mean {mean:.2f} and standard deviation {std:.2f}, not about 0 and 1",
            "draw from the standard normal distribution and leave the numbers as drawn",
        )
    return "noise is made directly on the device it is given, whichever it is; nothing is copied from the CPU"


def _tensors_to_move() -> list[torch.Tensor]:
    return [torch.arange(3.0), torch.ones(2, 2), torch.zeros(4, dtype=torch.long)]


@exercise("write move_all(tensors, device) so that it returns a list of the tensors, each moved to device")
def check_move_all(move_all: Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]) -> str:
    """Exercise 2: ``move_all(tensors, device)`` returns a list of the tensors, each moved to ``device``."""
    for m in device_machines():
        with m.tried():
            given = _tensors_to_move()
            result = m.run(move_all, list(given), m.device)
            if result is None:
                fail("move_all returned None", "return the list of moved tensors")
            if not isinstance(result, list | tuple):
                fail(
                    f"move_all returned {describe(result)}",
                    "return a list with one tensor for each one given",
                )
            if len(result) != len(given):
                fail(
                    f"move_all returned {len(result)} items for the {len(given)} tensors it was given",
                    "return one moved tensor for each, in the same order",
                )
            for i, (original, got) in enumerate(zip(given, result, strict=True)):
                _check_moved(m, i, original, got)
    return "every tensor is moved to the device, and the moved copies are kept"


def _check_moved(m: Machine, i: int, original: torch.Tensor, got: Any) -> None:
    if not isinstance(got, torch.Tensor):
        fail(f"item {i} of the list is {describe(got)}, not a tensor", "put the moved tensors in the list")
    if got.device.type != m.device.type:
        if got is original and any(move.tensor is original for move in m.moves):
            fail(
                f"tensor {i} in the list is the one given, still on {original.device} (t.to(device) made "
                "a moved copy that was not kept)",
                "put what .to returns in the list (reassigning a loop variable does not change the list)",
            )
        if got is original:
            fail(
                f"tensor {i} was not moved (it is the tensor given, still on {original.device})",
                "move each tensor to the device and put the result in the list",
            )
        fail(
            f"tensor {i} is on {got.device}, not on {where(m.device)}",
            "move it to the device move_all is given",
        )
    if got.dtype != original.dtype or got.shape != original.shape:
        before = f"{str(original.dtype).removeprefix('torch.')} {tuple(original.shape)}"
        after = f"{str(got.dtype).removeprefix('torch.')} {tuple(got.shape)}"
        fail(
            f"tensor {i} changed on the way, from {before} to {after}", "move it and keep its shape and dtype"
        )
    if not got.is_meta and not torch.equal(got.detach().cpu(), original):
        fail(f"tensor {i} holds other numbers than the tensor given", "move it and change nothing else")


def _graph_tensor(device: torch.device) -> tuple[torch.Tensor, list[float]]:
    """Three numbers on ``device`` that require grad (a layer's output), and their values."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = nn.Linear(2, 3)
    expected = [float(v) for v in layer(torch.ones(1, 2)).squeeze(0).tolist()]
    layer.to(device)
    return layer(torch.ones(1, 2, device=device)).squeeze(0), expected


@exercise("write as_floats(t) so that it returns the numbers of the 1-D tensor t as a list of Python floats")
def check_as_floats(as_floats: Callable[[torch.Tensor], list[float]]) -> str:
    """Exercise 3: ``as_floats(t)``, Python floats from a 1-D tensor on any device, even one with grad."""
    for m in device_machines():
        with m.tried():
            tensor, expected = _graph_tensor(m.device)
            result = m.run(as_floats, tensor)
            _check_float_list(result, expected if m.device.type != "meta" else None)
            if not tensor.requires_grad:
                fail(
                    "as_floats switched off requires_grad of the tensor it was given",
                    "leave the tensor as it is: .detach() gives a copy out of the graph",
                )
    one = Machine.cpu().run(as_floats, torch.tensor([2.5]))
    if isinstance(one, float | int | np.number):
        fail(
            f"as_floats(torch.tensor([2.5])) returned the bare number {one!r}",
            "return a list for one number too, [2.5]",
        )
    _check_float_list(one, [2.5])
    return "as_floats gives Python floats from a tensor on any device, also one that requires grad"


def _check_float_list(result: Any, expected: list[float] | None) -> None:
    if result is None:
        fail("as_floats returned None", "return the list of floats")
    if isinstance(result, torch.Tensor):
        fail("as_floats returned a tensor, not Python floats", "turn it into Python numbers with .tolist()")
    if isinstance(result, np.ndarray):
        fail(
            "as_floats returned a NumPy array, not a list",
            "return a list of Python floats, as .tolist() gives",
        )
    if not isinstance(result, list):
        fail(f"as_floats returned {describe(result)}", "return a list of Python floats")
    if any(isinstance(v, torch.Tensor) for v in result):
        fail(
            "the list holds one-element tensors, not Python floats (list(t) splits a tensor into tensors)",
            "use t.tolist(), which gives Python numbers",
        )
    if not all(type(v) is float for v in result):
        kinds = ", ".join(sorted({type(v).__name__ for v in result if type(v) is not float}))
        fail(
            f"the list holds {kinds}, not only Python floats",
            "convert each number with float(), or use .tolist()",
        )
    if expected is None:
        return
    if len(result) != len(expected):
        fail(
            f"as_floats returned {len(result)} numbers for a tensor of {len(expected)}",
            "return one float for each number in the tensor",
        )
    if not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
        got, want = short([round(v, 4) for v in result]), short([round(v, 4) for v in expected])
        shown = f"{got}, not the tensor's {want}" if got != want else "numbers other than the tensor's"
        fail(f"as_floats returned {shown}", "return the tensor's own numbers, in order")
