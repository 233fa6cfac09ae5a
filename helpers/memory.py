"""Where training memory goes, out-of-memory errors, and errors shown in a fresh process (``07``)."""

import contextlib
import os
import re
import subprocess
import sys
from types import SimpleNamespace
from typing import NamedTuple

import torch

MiB = 2**20


def tensor_bytes(tensors) -> int:
    """The bytes the elements of these tensors take, ``numel() * element_size()`` summed, on any device."""
    if isinstance(tensors, torch.nn.Module | dict):
        raise TypeError(
            "tensor_bytes counts tensors: give model.parameters() or a dict's .values()."
        )
    tensors = list(tensors)
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"tensor_bytes counts tensors, got {[type(t).__name__ for t in tensors]}.")
    return sum(t.numel() * t.element_size() for t in tensors)


class StateBytes(NamedTuple):
    """The bytes of what lives as long as training does (``measure_state``); ``print`` shows them in MiB."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    def __str__(self) -> str:
        rows = zip(
            ("parameters", "gradients", "optimizer state", "total"),
            (*self, self.total),
            strict=True,
        )
        return "\n".join(f"{name:>16}: {size / MiB:8.2f} MiB" for name, size in rows)


def measure_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> StateBytes:
    """The bytes of ``model``'s parameters, their ``.grad`` and ``optimizer``'s state, as they are now."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"measure_state: model is an nn.Module, not {type(model).__name__}.")
    if not isinstance(optimizer, torch.optim.Optimizer | None):
        raise TypeError(
            f"measure_state: optimizer is a torch.optim optimizer or None, not {optimizer!r:.30}"
        )
    params = list(model.parameters())
    if optimizer and {id(p) for g in optimizer.param_groups for p in g["params"]}.isdisjoint(
        map(id, params)
    ):
        raise ValueError(
            "measure_state: the optimizer is another model's; make it with model.parameters()."
        )
    grads = [p.grad for p in params if p.grad is not None]
    state = [
        v
        for s in (optimizer.state.values() if optimizer else [])
        for k, v in s.items()
        if k != "step"
    ]
    return StateBytes(
        tensor_bytes(params), tensor_bytes(grads), tensor_bytes(filter(torch.is_tensor, state))
    )


@contextlib.contextmanager
def saved_for_backward(exclude=()):
    """``with saved_for_backward(exclude=[*model.parameters(), x]) as saved: loss = ...``, then
    ``saved.bytes``: what autograd kept for backward (the activations), each storage once, but ``exclude``."""
    saved, sizes = (
        SimpleNamespace(bytes=0),
        {t.untyped_storage()._cdata: 0 for t in exclude},
    )  # per storage

    def pack(t: torch.Tensor) -> torch.Tensor:
        sizes.setdefault(t.untyped_storage()._cdata, t.untyped_storage().nbytes())
        return t  # autograd keeps the tensor as it would without the hook

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved
    saved.bytes = sum(sizes.values())


def largest_batch_that_fits(step, low: int, high: int) -> int | None:
    """The largest ``b`` in ``[low, high]`` with which ``step(b)`` does not run out of memory, or None."""
    if not (callable(step) and isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        raise ValueError(
            f"largest_batch_that_fits needs a function and 1 <= low <= high; got {low}, {high}."
        )
    best, middle = None, low  # low first: does any batch fit?
    while middle is not None:
        try:
            step(middle)
            best = middle
        except (
            torch.OutOfMemoryError
        ):  # leaving this block frees the error's frames, and their tensors
            high = middle - 1
        middle = (best + high + 1) // 2 if best is not None and best < high else None
    return best


class ScriptRun(subprocess.CompletedProcess):
    """``run_script``'s result: ``returncode``, ``stdout``, ``stderr``, ``source``, and the ``error`` that
    stopped it ("Type: message") at line ``error_line``, or None; ``line(n)``, ``line_of(text)``: lines."""

    def line(self, number: int | None) -> str:
        return "" if number is None else self.source.splitlines()[number - 1].strip()

    def line_of(self, text: str) -> int:
        (number,) = [
            i for i, line in enumerate(self.source.splitlines(), 1) if text in line
        ]  # exactly one
        return number


def run_script(code: str, *, env: dict[str, str] | None = None) -> ScriptRun:
    """Run ``code`` as a script in a new Python process, with ``env`` added to its environment."""
    command, env = (
        [sys.executable, "-u", "-c", code],
        {**os.environ, **(env or {})},
    )  # -u: no output lost
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    stack = (
        done.stderr[done.stderr.rfind("Traceback (most recent call last)") :]
        if done.returncode
        else ""
    )
    lines = re.findall(
        r'File "<string>", line (\d+)', stack
    )  # the script's lines; the last is the deepest
    run = ScriptRun(done.args, done.returncode, done.stdout, done.stderr)
    run.source, run.error_line = code, int(lines[-1]) if lines else None
    run.error = next((line for line in stack.splitlines()[1:] if line[:1].strip()), None)
    return run
