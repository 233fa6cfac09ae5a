"""Checks for the exercises of ``03_results_errors_and_checkpoints``."""

from collections.abc import Callable, Mapping
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import torch

from helpers.checks import fail
from helpers.checks.harness import (
    LearnerError,
    Machine,
    describe,
    device_machines,
    exercise,
    short,
    where,
)
from helpers.models import SimpleModel

__all__ = ["check_as_numpy", "check_load_on_cpu", "check_most_confused"]

_DETACH = "use .detach(), which leaves the tensor as it is"
_SWITCH = ("leaf variables",), "as_numpy tried to switch off requires_grad of the tensor", _DETACH
_GPU = (
    (".cuda()", "'cuda"),
    "as_numpy moved the tensor to the GPU",
    "use .cpu(), which works anywhere",
)


def _run(
    m: Machine, function: Callable, argument: Any, *retold: tuple[tuple[str, ...], str, str]
) -> Any:
    """``m.run(function, argument)``, where an error with one of ``words`` is told as ``mistake: fix``."""
    try:
        return m.run(function, argument)
    except LearnerError as error:
        for words, mistake, fix in retold:
            if any(word in str(error.error) for word in words):
                raise error.instead(mistake, fix) from None
        raise


@exercise(
    "write as_numpy(t) so that it returns a NumPy array of t, from any device, requiring grad or not"
)
def check_as_numpy(as_numpy: Callable[[torch.Tensor], np.ndarray]) -> str:
    expected = np.arange(8, dtype=np.float32).reshape(4, 2) / 4
    for m in device_machines():  # the CPU, meta standing in for a GPU, and the GPU if any
        with m.tried():
            tensor = (
                torch.arange(8.0, device=m.device).reshape(4, 2).requires_grad_() / 4
            )  # a model's output
            device = (
                ("to numpy",),
                f".numpy() fails on {where(m.device)}",
                "add .cpu() before .numpy()",
            )
            result = _run(m, as_numpy, tensor, _SWITCH, device, _GPU)
            if not isinstance(result, np.ndarray):
                fail(
                    f"as_numpy returned {describe(result)}, not a NumPy array",
                    "return what .numpy() gives",
                )
            if result.shape != expected.shape or result.dtype != expected.dtype:
                got = f"the array is {result.dtype} of shape {result.shape}, not float32 of shape (4, 2)"
                fail(got, "keep the tensor's shape and dtype, as .numpy() does")
            if m.device.type != "meta" and not np.allclose(result, expected):
                fail(
                    "the array does not hold the tensor's values",
                    "convert the tensor, changing nothing",
                )
            if not tensor.requires_grad:
                fail("as_numpy switched off requires_grad of the tensor it was given", _DETACH)
    return "as_numpy works for any tensor: out of the graph, onto the CPU, into NumPy"


_TAGGING = [False]  # while True, torch.save records every tensor as saved on cuda:0, as on a GPU
torch.serialization.register_package(
    -1, lambda storage: "cuda:0" if _TAGGING[0] else None, lambda *a: None
)


@exercise(
    "write load_on_cpu(path) so that it returns the state_dict in the file, all on the CPU, anywhere"
)
def check_load_on_cpu(load_on_cpu: Callable[[Path], Any]) -> str:
    with torch.random.fork_rng(devices=[]):
        state = SimpleModel().state_dict()
    gpu = ("cuda", "CUDA", "NVIDIA"), "load_on_cpu loads onto the GPU", "pass map_location='cpu'"
    with TemporaryDirectory() as folder:
        _TAGGING[
            0
        ] = not torch.cuda.is_available()  # where there is a GPU, the tensors are saved on it
        saved = state if _TAGGING[0] else {key: value.cuda() for key, value in state.items()}
        try:
            torch.save(saved, path := Path(folder) / "gpu_weights.pt")
        finally:
            _TAGGING[0] = False
        for m in (Machine.cpu(), Machine.with_stand_in_gpu()):  # CUDA refused; a GPU said to exist
            with m.tried():
                loaded = _run(m, load_on_cpu, path, gpu)
                if not isinstance(loaded, Mapping):
                    fail(
                        f"load_on_cpu returned {describe(loaded)}",
                        "return the state_dict torch.load gives",
                    )
                if set(loaded) != set(state):
                    keys = short(sorted(map(str, loaded)), 50)
                    fail(
                        f"the state_dict has the keys {keys}",
                        "return it whole, as torch.load gives it",
                    )
                for key, value in loaded.items():
                    if not isinstance(value, torch.Tensor):
                        fail(
                            f"the state_dict's {key} is {describe(value)}",
                            "return the tensors as loaded",
                        )
                    if value.device.type != "cpu":
                        fail(f"the tensors are on {where(value.device)}", "pass map_location='cpu'")
                    if value.dtype != state[key].dtype or not torch.equal(value, state[key]):
                        fail(
                            f"the tensor {key} differs from the one saved",
                            "return the tensors as saved",
                        )
    return "a checkpoint saved on a GPU loads onto the CPU, on a machine with a GPU or without"


def _pair(result: Any) -> tuple[int, int] | None:
    if isinstance(result, torch.Tensor) and not result.is_meta:
        result = result.tolist()
    two = isinstance(result, tuple | list | np.ndarray) and len(result) == 2
    if two and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in result):
        return int(result[0]), int(result[1])
    return None


@exercise(
    "write most_confused(confusion) so that it returns (actual, predicted) of the most common mistake"
)
def check_most_confused(most_confused: Callable[[np.ndarray], Any]) -> str:
    matrices = (
        [[50, 2, 9, 0], [4, 40, 1, 3], [1, 2, 45, 6], [0, 12, 3, 38]],
        [[9, 1], [6, 3]],
        [[0, 5, 5], [0, 0, 0], [9, 0, 0]],
    )
    # the answers: (3, 1), with 50 on the diagonal; (1, 0), below it; (2, 0), not in the largest row
    for confusion in map(np.array, matrices):
        result = Machine.cpu().run(most_confused, given := confusion.copy())
        off, n = np.where(np.eye(len(confusion), dtype=bool), -1, confusion), len(confusion)
        answer = tuple(int(i) for i in np.unravel_index(off.argmax(), off.shape))
        if not np.array_equal(given, confusion):
            fail(
                "most_confused changed the matrix it was given (as np.fill_diagonal does)",
                "work on a copy",
            )
        if isinstance(result, int | np.integer) and not isinstance(result, bool):
            fail(
                f"most_confused returned a number, {result}",
                "return (row, column), see np.unravel_index",
            )
        if (pair := _pair(result)) is None:
            shown = (
                short(repr(tuple(result)), 40)
                if isinstance(result, tuple | list)
                else describe(result)
            )
            fail(
                f"most_confused returned {shown}, not two ints",
                "return (actual, predicted) as ints",
            )
        if not (0 <= pair[0] < n and 0 <= pair[1] < n):
            fail(f"{pair} is outside the {n}x{n} matrix", "return a row and a column of it")
        if pair[0] == pair[1]:
            fail(
                f"{pair} is on the diagonal, which counts the right answers",
                "look off the diagonal only",
            )
        if pair[::-1] == answer:
            fail(
                f"{pair} is the mirror image (rows are the actual classes)", "return (row, column)"
            )
        if pair != answer:
            larger = f"{pair} counts {confusion[pair]}, but {off.max()} off the diagonal is larger"
            fail(larger, "return the row and column of the largest")
    return "most_confused finds the pair of classes the model mixes up most"
