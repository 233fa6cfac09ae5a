"""Checks for the exercises of ``03_results_errors_and_checkpoints``.

``check_as_numpy`` runs the learner's function on a tensor on the CPU, on ``meta`` standing in for
a GPU (where ``.numpy()`` fails as it does on a GPU) and on this machine's GPU when it has one.

``check_load_on_cpu`` needs a checkpoint saved on a GPU. On a machine with one it saves a real
one; on a machine without, it writes one whose tensors are recorded as ``cuda:0``, which is what
``torch.save`` records for tensors on the first GPU (a location tagger registered with PyTorch's
public ``torch.serialization.register_package`` labels them while the check saves, and does
nothing otherwise). The learner's function loads it twice: once on a machine that says it has a
GPU (where ``torch.load`` is watched, so that a ``map_location`` that means the GPU there, such as
``pick_device()``, is caught on every machine), and once on this machine as it is.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import LearnerError, Machine, a_gpu, describe, device_machines, exercise, short
from helpers.models import SimpleModel

__all__ = ["check_as_numpy", "check_load_on_cpu", "check_most_confused"]


def _graph_tensor(device: torch.device) -> tuple[torch.Tensor, np.ndarray]:
    """A (4, 2) float32 tensor on ``device`` that requires grad (a layer's output), and its values."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = nn.Linear(3, 2)
    with torch.no_grad():
        expected = layer(torch.ones(4, 3)).numpy().copy()
    layer.to(device)
    return layer(torch.ones(4, 3, device=device)), expected


@exercise(
    "write as_numpy(t) so that it returns a NumPy array of t, wherever t lives and whether or not it "
    "requires grad"
)
def check_as_numpy(as_numpy: Callable[[torch.Tensor], np.ndarray]) -> str:
    """Exercise 1: ``as_numpy(t)``, a NumPy array from any tensor: on any device, requiring grad or not."""
    for m in device_machines():
        with m.tried():
            tensor, expected = _graph_tensor(m.device)
            m.cuda_fix = "bring the tensor to the CPU, wherever it is, with .cpu()"
            try:
                result = m.run(as_numpy, tensor)
            except LearnerError as error:
                if error.kind == "numpy-device":
                    raise error.instead(
                        f"as_numpy works only on a CPU tensor: .numpy() fails on {a_gpu(m.device)}",
                        "add .cpu() before .numpy()",
                    ) from None
                raise
            if result is None:
                fail("as_numpy returned None", "return the array")
            if isinstance(result, torch.Tensor):
                fail(f"as_numpy returned {describe(result)}, not a NumPy array", "end with .numpy()")
            if not isinstance(result, np.ndarray):
                fail(f"as_numpy returned {describe(result)}, not a NumPy array", "return what .numpy() gives")
            if result.shape != expected.shape or result.dtype != expected.dtype:
                fail(
                    f"the array is {result.dtype} of shape {result.shape}, the tensor float32 of shape "
                    f"{expected.shape}",
                    "keep the tensor's shape and dtype, as .numpy() does",
                )
            if m.device.type != "meta" and not np.allclose(result, expected, atol=1e-6):
                fail(
                    "the array does not hold the tensor's values",
                    "convert the tensor itself, changing nothing",
                )
            if not tensor.requires_grad:
                fail(
                    "as_numpy switched off requires_grad of the tensor it was given",
                    "use .detach(), which leaves the tensor as it is",
                )
    return "as_numpy works for any tensor: out of the graph, onto the CPU, into NumPy"


class _TagAsCuda:
    """A location tagger for ``torch.save``: ``cuda:0`` while ``active``, else no opinion (``None``)."""

    active = False
    registered = False

    @classmethod
    def tag(cls, storage: Any) -> str | None:
        return "cuda:0" if cls.active else None

    @staticmethod
    def no_restore(storage: Any, location: str) -> None:
        return None  # leave loading to PyTorch's own rules

    @classmethod
    def save(cls, obj: Any, path: Path) -> None:
        if not cls.registered:
            torch.serialization.register_package(-1, cls.tag, cls.no_restore)
            cls.registered = True
        cls.active = True
        try:
            torch.save(obj, path)
        finally:
            cls.active = False


def _save_gpu_checkpoint(state: dict[str, torch.Tensor], path: Path) -> None:
    if torch.cuda.is_available():
        torch.save({k: v.cuda() for k, v in state.items()}, path)
    else:
        _TagAsCuda.save(state, path)


def _shown(map_location: Any) -> str:
    if isinstance(map_location, torch.device):
        return f"torch.device('{map_location}')"
    return short(repr(map_location), 40)


def _where_loaded(map_location: Any) -> torch.device | None:
    """Where ``torch.load(..., map_location)`` puts a tensor saved on ``cuda:0``; ``None`` if unknown."""
    if map_location is None:
        return torch.device("cuda", 0)
    if isinstance(map_location, Mapping):
        return _where_loaded(map_location.get("cuda:0", "cuda:0"))
    if isinstance(map_location, int) and not isinstance(map_location, bool):
        return torch.device("cuda", map_location)
    if isinstance(map_location, str | torch.device):
        try:
            return torch.device(map_location)
        except (RuntimeError, ValueError):
            return None
    return None  # a function: what it gives is checked afterwards


@contextlib.contextmanager
def _watched_load(m: Machine) -> Iterator[list[Any]]:
    """``torch.load`` that refuses, on a machine that says it has a GPU, to load onto it."""
    asked: list[Any] = []
    original = torch.load

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        asked.append(map_location)
        device = _where_loaded(map_location)
        if device is not None and device.type == "cuda":
            m.use_cuda(f"torch.load(..., map_location={map_location!r})")
        return original(f, map_location, *args, **kwargs)

    torch.load = torch.serialization.load = load
    try:
        yield asked
    finally:
        torch.load = torch.serialization.load = original


@exercise(
    "write load_on_cpu(path) so that it returns the state_dict in the file, with every tensor on the CPU, "
    "on any machine"
)
def check_load_on_cpu(load_on_cpu: Callable[[Path], Any]) -> str:
    """Exercise 2: ``load_on_cpu(path)`` loads a state_dict saved on a GPU with every tensor on the CPU."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        state = SimpleModel().state_dict()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gpu_weights.pt"
        _save_gpu_checkpoint(state, path)
        for m in (Machine.cpu(), Machine.as_is()):
            m.cuda_fix = "load with map_location='cpu', which works on every machine"
            watch = _watched_load(m) if m.cuda == "refused" else contextlib.nullcontext([])
            with watch as asked:
                try:
                    loaded = m.run(load_on_cpu, path)
                except LearnerError as error:
                    if error.kind == "cuda" and asked and asked[-1] is None:
                        raise error.instead(
                            "torch.load puts each tensor back where it was saved, on cuda:0, which fails "
                            "without a GPU",
                            "load with map_location='cpu'",
                        ) from None
                    if error.kind == "cuda" and asked:
                        raise error.instead(
                            f"map_location={_shown(asked[-1])} loads the tensors onto the GPU on a "
                            "machine that has one",
                            "use map_location='cpu', which means the CPU on every machine",
                        ) from None
                    raise
            _check_state(loaded, state)
    return "a checkpoint saved on a GPU loads onto the CPU, on a machine with a GPU or without"


def _check_state(loaded: Any, state: dict[str, torch.Tensor]) -> None:
    if loaded is None:
        fail("load_on_cpu returned None", "return what torch.load gives, the state_dict")
    if isinstance(loaded, nn.Module):
        fail("load_on_cpu returned a model", "return what torch.load gives, the state_dict")
    if not isinstance(loaded, Mapping):
        fail(f"load_on_cpu returned {describe(loaded)}", "return the state_dict, the dict torch.load gives")
    if set(loaded) != set(state):
        fail(
            f"the state_dict has the keys {short(sorted(map(str, loaded)), 60)}, the file {sorted(state)}",
            "return the whole state_dict, as torch.load gives it",
        )
    for key in state:
        value = loaded[key]
        if not isinstance(value, torch.Tensor):
            fail(
                f"the state_dict's {key} is {describe(value)}", "return the tensors as torch.load gives them"
            )
        if value.device.type != "cpu":
            fail(
                f"the tensors were loaded onto {value.device} ({key}, ...), not the CPU",
                "pass map_location='cpu'",
            )
        if not torch.equal(value, state[key]):
            fail(f"the tensor {key} differs from the one saved", "return the tensors as they were saved")


_CONFUSIONS = [
    np.array([[50, 2, 9, 0], [4, 40, 1, 3], [1, 2, 45, 6], [0, 12, 3, 38]]),  # (3, 1); 50 is on the diagonal
    np.array([[7, 0, 1], [2, 9, 0], [0, 5, 8]]),  # (2, 1)
    np.array([[9, 1], [6, 3]]),  # (1, 0): the largest number off the diagonal is below it
]


def _as_pair(result: Any) -> tuple[int, int] | None:
    if isinstance(result, str | bytes | Mapping) or not hasattr(result, "__len__"):
        return None
    try:
        if len(result) != 2:
            return None
        first, second = (v.item() if isinstance(v, torch.Tensor | np.ndarray) else v for v in result)
    except (TypeError, ValueError, RuntimeError):
        return None
    if any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in (first, second)):
        return None
    return int(first), int(second)


@exercise(
    "write most_confused(confusion) so that it returns (actual, predicted), the row and column of the "
    "largest count off the diagonal"
)
def check_most_confused(most_confused: Callable[[np.ndarray], Any]) -> str:
    """Exercise 3: ``most_confused(confusion)``: (actual, predicted) of the largest count off the diagonal."""
    m = Machine.cpu()
    m.cuda_fix = "work on the NumPy array as it is given"
    for confusion in _CONFUSIONS:
        given = confusion.copy()
        result = m.run(most_confused, given)
        if not np.array_equal(given, confusion):
            fail(
                "most_confused changed the matrix it was given (np.fill_diagonal works in place)",
                "work on a copy, confusion.copy()",
            )
        if result is None:
            fail("most_confused returned None", "return the pair (actual, predicted)")
        if isinstance(result, int | np.integer) and not isinstance(result, bool):
            fail(
                f"most_confused returned one number, {result}, perhaps a flat index from argmax",
                "return the pair (row, column), e.g. with np.unravel_index(index, confusion.shape)",
            )
        pair = _as_pair(result)
        if pair is None and isinstance(result, tuple | list) and len(result) == 2:
            fail(
                f"most_confused returned {short(repr(tuple(result)), 40)}, not two ints",
                "return (row, column) as ints",
            )
        if pair is None:
            fail(f"most_confused returned {describe(result)}", "return a pair of ints, (actual, predicted)")
        actual, predicted = pair
        n = len(confusion)
        if not (0 <= actual < n and 0 <= predicted < n):
            fail(f"({actual}, {predicted}) is outside the {n}x{n} matrix", "return a row and a column of it")
        off = confusion.copy()
        np.fill_diagonal(off, -1)
        answer = tuple(int(i) for i in np.unravel_index(int(off.argmax()), off.shape))
        if actual == predicted:
            fail(
                f"({actual}, {predicted}) is on the diagonal, which counts the right predictions",
                "look off the diagonal only",
            )
        if (predicted, actual) == answer:
            fail(
                f"({actual}, {predicted}) is the mirror image (rows are actual classes, columns "
                "predicted ones)",
                "return (row, column)",
            )
        if (actual, predicted) != answer:
            fail(
                f"confusion[{actual}, {predicted}] is {confusion[actual, predicted]}, but {off.max()} "
                "off the diagonal is larger",
                "find the largest count off the diagonal",
            )
    return "most_confused finds the pair of classes the model mixes up most"
