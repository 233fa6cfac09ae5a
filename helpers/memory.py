"""Where training memory goes, and the largest batch that fits (``07``)."""

import contextlib
from collections.abc import Iterable
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import torch

from helpers import _args

__all__ = [
    "MiB",
    "StateBytes",
    "largest_batch_that_fits",
    "measure_state",
    "saved_for_backward",
    "tensor_bytes",
]

MiB = 2**20


def tensor_bytes(tensors) -> int:
    """The bytes the elements of these tensors take, ``numel() * element_size()`` summed, on any
    device."""
    if isinstance(tensors, torch.nn.Module | dict):
        raise TypeError(
            "tensor_bytes counts tensors: give model.parameters() or a dict's .values()."
        )
    if isinstance(tensors, torch.Tensor):
        raise TypeError("tensor_bytes counts a list of tensors: give [tensor].")
    if isinstance(tensors, np.ndarray):
        raise TypeError(
            "tensor_bytes counts tensors, not a NumPy array: give [torch.from_numpy(array)], or "
            "read array.nbytes."
        )
    tensors = list(tensors)
    kinds = [type(t).__name__ for t in tensors if not isinstance(t, torch.Tensor)]
    if kinds:
        raise TypeError(f"tensor_bytes counts tensors, and got {', '.join(kinds)} too.")
    return sum(t.numel() * t.element_size() for t in tensors)


class StateBytes(NamedTuple):
    """The bytes of what lives as long as training does (``measure_state``); ``print`` shows them
    in MiB."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    def __str__(self) -> str:
        names = ("parameters", "gradients", "optimizer state", "total")
        sizes = (*self, self.total)
        rows = zip(names, sizes, strict=True)
        return "\n".join(f"{name:>16}: {size / MiB:8.2f} MiB" for name, size in rows)


def measure_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> StateBytes:
    """The bytes of ``model``'s parameters, their ``.grad`` and ``optimizer``'s state, as they are
    now."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"measure_state: model is an nn.Module, not {_args.shown(model)}.")
    if not isinstance(optimizer, torch.optim.Optimizer | None):
        raise TypeError(
            f"measure_state: optimizer is a torch.optim optimizer or None, not {optimizer!r:.30}."
        )
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    if optimizer is None:
        return StateBytes(tensor_bytes(params), tensor_bytes(grads), 0)
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if held.isdisjoint(map(id, params)):
        raise ValueError(
            "measure_state: the optimizer is another model's; make it with model.parameters()."
        )
    state = []
    for per_parameter in optimizer.state.values():
        for name, value in per_parameter.items():
            if name != "step" and isinstance(value, torch.Tensor):
                state.append(value)  # "step" is a count, not state that grows with the model
    return StateBytes(tensor_bytes(params), tensor_bytes(grads), tensor_bytes(state))


def _storage(tensor: torch.Tensor) -> tuple[torch.device, int]:
    """Where ``tensor``'s memory starts: tensors that share a storage share it."""
    return tensor.device, tensor.untyped_storage().data_ptr()


@contextlib.contextmanager
def saved_for_backward(exclude=()):
    """``with saved_for_backward(exclude=[*model.parameters(), x]) as saved: loss = ...``, then
    ``saved.bytes``: what autograd kept for backward (the activations), each storage once, but
    those of ``exclude``."""
    one_object = isinstance(exclude, torch.nn.Module | torch.Tensor)
    listed = isinstance(exclude, Iterable) and not one_object
    if listed:
        exclude = list(exclude)
    if not listed or not all(isinstance(t, torch.Tensor) for t in exclude):
        raise TypeError(
            "saved_for_backward: exclude is a list of tensors, e.g. [*model.parameters(), x]."
        )
    if any(t.is_meta for t in exclude):
        raise ValueError("saved_for_backward: meta tensors take no memory; use the CPU or a GPU.")
    saved = SimpleNamespace(bytes=0)
    sizes = {_storage(t): 0 for t in exclude}  # bytes per storage; those excluded count 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        sizes.setdefault(_storage(t), t.untyped_storage().nbytes())
        return t  # autograd keeps the tensor as it would without the hook

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved
    saved.bytes = sum(sizes.values())


def _check_range(step, low, high) -> None:
    if not callable(step):
        raise TypeError(
            f"largest_batch_that_fits: step is {_args.shown(step)}; give a function of the batch "
            "size, e.g. lambda b: train_step(b)."
        )
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high))
    if not ints or not 1 <= low <= high:
        raise ValueError(
            f"largest_batch_that_fits needs whole numbers 1 <= low <= high; got {low!r}, {high!r}."
        )


def largest_batch_that_fits(step, low: int, high: int) -> int | None:
    """The largest ``b`` in ``[low, high]`` with which ``step(b)`` does not run out of memory, or
    None. Bisection: ``low`` first (does any batch fit?), then halves of what is left."""
    _check_range(step, low, high)
    best = None
    middle = low
    while True:
        try:
            step(middle)
            best = middle
        except torch.OutOfMemoryError:  # leaving this block frees the error's frames and tensors
            high = middle - 1
        if best is None or best >= high:
            return best
        middle = (best + high + 1) // 2
