"""Checks for the exercises of ``03_results_errors_and_checkpoints``.

``check_load_on_cpu`` needs a checkpoint saved on a GPU. On a machine with one it saves a real
one; on a machine without, it writes one whose tensors are recorded as ``cuda:0``, which is what
``torch.save`` records for tensors on the first GPU (a location tagger registered with PyTorch's
public ``torch.serialization.register_package`` labels them while the check saves, and does
nothing otherwise). Loading that file without ``map_location`` then fails exactly as a real GPU
checkpoint does on a CPU-only machine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.checks import correct, fail, not_answered
from helpers.checks.nb00 import TorchCalls, stand_in_device
from helpers.models import SimpleModel

__all__ = ["check_as_numpy", "check_load_on_cpu", "check_most_confused"]


def check_as_numpy(as_numpy: Callable[[torch.Tensor], np.ndarray]) -> bool:
    """Exercise 1: ``as_numpy(t)``, a NumPy array from any tensor: on any device, requiring grad or not."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = nn.Linear(3, 2)
    t = layer(torch.ones(4, 3))  # on the CPU, and part of the autograd graph
    expected = t.detach().numpy().copy()
    tensors = [t]
    device = stand_in_device()
    if device.type != "meta":  # a real GPU: check from there as well
        tensors.append(t.to(device))
    for tensor in tensors:
        with TorchCalls() as calls:
            try:
                result = as_numpy(tensor)
            except RuntimeError as error:
                if "requires grad" in str(error) or "requires_grad" in str(error):
                    fail("this tensor requires grad: call .detach() first")
                raise
            except TypeError as error:
                if "Use Tensor.cpu()" in str(error):
                    fail(f"this tensor is on {tensor.device}: call .cpu() before .numpy()")
                raise
        if result is None:
            return not_answered(
                "write as_numpy(t) so that it returns a NumPy array of t, wherever t lives and even if it "
                "requires grad"
            )
        if isinstance(result, torch.Tensor):
            fail("as_numpy returned a tensor: .numpy() turns a CPU tensor into a NumPy array")
        if not isinstance(result, np.ndarray):
            fail(f"as_numpy returned a {type(result).__name__}, not a NumPy array (.tolist() gives lists)")
        if result.shape != expected.shape or not np.allclose(result, expected, atol=1e-6):
            fail(
                f"the array (shape {result.shape}) does not hold the tensor's values (shape {expected.shape})"
            )
        if not _brings_to_cpu(calls):
            fail(
                "this works only because the tensor is already on the CPU: from a GPU, .numpy() fails with "
                '"TypeError: can\'t convert cuda:0 device type tensor to numpy"; add .cpu() before .numpy()'
            )
    if not t.requires_grad:
        fail(
            "as_numpy switched off requires_grad of the tensor it was given: "
            "use .detach(), which leaves the tensor as it is"
        )
    return correct("as_numpy works for any tensor: .detach() for the graph, .cpu() for the device, .numpy()")


def _is_cpu(value: Any) -> bool:
    return (isinstance(value, str) and value.strip() == "cpu") or (
        isinstance(value, torch.device) and value.type == "cpu"
    )


def _brings_to_cpu(calls: TorchCalls) -> bool:
    """Whether the calls include ``.cpu()``, ``.to("cpu")`` or ``.numpy(force=True)``."""
    for name, args, kwargs in zip(calls.names, calls.args, calls.kwargs, strict=True):
        if name == "cpu" or (name == "numpy" and kwargs.get("force")):
            return True
        if name == "to" and any(_is_cpu(a) for a in (*args[1:], *kwargs.values())):
            return True
    return False


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


def check_load_on_cpu(load_on_cpu: Callable[[Path], Any]) -> bool:
    """Exercise 2: ``load_on_cpu(path)`` loads a state_dict saved on a GPU with every tensor on the CPU."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        state = SimpleModel().state_dict()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gpu_weights.pt"
        _save_gpu_checkpoint(state, path)
        try:
            loaded = load_on_cpu(path)
        except RuntimeError as error:
            message = str(error)
            if "deserialize object on a CUDA device" in message:
                fail(
                    "torch.load puts every tensor back on the device it was saved from, cuda:0, and this "
                    "machine has no GPU: load with map_location='cpu'"
                )
            if any(s in message for s in ("NVIDIA driver", "CUDA driver", "not compiled with CUDA")):
                fail(
                    "loading tried to put the tensors on a GPU, which this machine lacks: map_location='cpu'"
                )
            raise
    if loaded is None:
        return not_answered(
            "write load_on_cpu(path) so that it returns the state_dict in the file, "
            "with every tensor on the CPU"
        )
    if isinstance(loaded, nn.Module):
        fail("load_on_cpu returned a model; return what torch.load gives, the state_dict")
    if not isinstance(loaded, Mapping):
        fail(f"load_on_cpu returned a {type(loaded).__name__}; return the state_dict (a dict of tensors)")
    if set(loaded) != set(state):
        fail(f"the state_dict has the keys {sorted(loaded)}, expected {sorted(state)}")
    elsewhere = {k: v.device for k, v in loaded.items() if v.device.type != "cpu"}
    if elsewhere:
        name, device = next(iter(elsewhere.items()))
        fail(f"the tensors were loaded onto {device} ({name}, ...), not the CPU: pass map_location='cpu'")
    if not all(torch.equal(loaded[k], state[k]) for k in state):
        fail("the tensors loaded differ from those saved")
    return correct("a checkpoint saved on a GPU loads onto the CPU with map_location='cpu'")


def check_most_confused(most_confused: Callable[[np.ndarray], Any]) -> bool:
    """Exercise 3: ``most_confused(confusion)``: (actual, predicted) of the largest count off the diagonal."""
    cases = [
        np.array(
            [[50, 2, 9, 0], [4, 40, 1, 3], [1, 2, 45, 6], [0, 12, 3, 38]]
        ),  # (3, 1); 50 is on the diagonal
        np.array([[7, 0, 1], [2, 9, 0], [0, 5, 8]]),  # answer (2, 1)
    ]
    for confusion in cases:
        given = confusion.copy()
        result = most_confused(given)
        if result is None:
            return not_answered(
                "write most_confused(confusion) so that it returns (actual, predicted) for the largest "
                "count off the diagonal"
            )
        if not np.array_equal(given, confusion):
            fail(
                "most_confused changed the matrix it was given (np.fill_diagonal works in place): "
                "work on a copy, confusion.copy()"
            )
        if isinstance(result, int | np.integer):
            fail(
                f"most_confused returned one number, {result}, perhaps a flat index from argmax: return the "
                "pair (row, column), e.g. with np.unravel_index(index, confusion.shape)"
            )
        try:
            actual, predicted = (int(v) for v in result)
        except (TypeError, ValueError):
            fail(f"most_confused should return a pair (actual, predicted), got {result!r:.80}")
        off = confusion.copy()
        np.fill_diagonal(off, -1)
        answer = np.unravel_index(int(off.argmax()), off.shape)
        if actual == predicted:
            fail(
                f"({actual}, {predicted}) is on the diagonal, which counts the right predictions: "
                "look off the diagonal"
            )
        if (predicted, actual) == answer:
            fail(
                f"({actual}, {predicted}) is the mirror image: the rows of the confusion matrix are the "
                "actual classes and the columns the predicted ones, so return (row, column)"
            )
        if (actual, predicted) != answer:
            fail(
                f"confusion[{actual}, {predicted}] is {confusion[actual, predicted]}, but another count "
                f"off the diagonal is larger ({off.max()})"
            )
    return correct("most_confused finds the pair of classes the model mixes up most")
