"""Where training memory goes, out-of-memory errors, and errors reported in a fresh process.

Introduced in ``07_memory_and_errors``. Everything here works on any device: the byte counts are
counts of real tensors (on a GPU, ``torch.cuda.max_memory_allocated`` measures the same things, plus
the temporaries of each operation), and the fresh-process runner is how the notebook shows errors
that would otherwise leave the student's own kernel unusable. Nothing probes the hardware at import.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

__all__ = [
    "MiB",
    "ScriptRun",
    "StateBytes",
    "largest_batch_that_fits",
    "measure_state",
    "run_script",
    "saved_for_backward",
    "tensor_bytes",
]

MiB = 2**20


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """The bytes the elements of these tensors take: ``numel() * element_size()`` summed.

    Works for tensors on any device, ``meta`` included (its tensors have sizes but no storage).
    """
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"tensor_bytes counts tensors; got {type(t).__name__}. Pass the tensors themselves."
            )
        total += t.numel() * t.element_size()
    return total


@dataclass(frozen=True)
class StateBytes:
    """The bytes of the tensors that live as long as training does (see ``measure_state``)."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    def __str__(self) -> str:
        rows = [
            ("parameters", self.parameters),
            ("gradients", self.gradients),
            ("optimizer state", self.optimizer),
        ]
        rows.append(("total", self.total))
        return "\n".join(f"{name:>16}: {size / MiB:8.2f} MiB" for name, size in rows)


def measure_state(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> StateBytes:
    """Measure what the model's parameters, their ``.grad`` and the optimizer's state take now.

    Counts the tensors that exist at the moment: before the first ``backward`` there are no
    gradients, and most optimizers create their state in the first ``step``. Per-parameter step
    counters (one number each) are left out; buffers (BatchNorm's running statistics) are not
    parameters and are not counted.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"measure_state(model, optimizer) takes an nn.Module first; got {type(model).__name__}."
        )
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    state: list[torch.Tensor] = []
    if optimizer is not None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"measure_state: optimizer must be a torch.optim optimizer; got {type(optimizer).__name__}."
            )
        for per_param in optimizer.state.values():
            state.extend(v for k, v in per_param.items() if isinstance(v, torch.Tensor) and k != "step")
    return StateBytes(tensor_bytes(params), tensor_bytes(grads), tensor_bytes(state))


class saved_for_backward:  # noqa: N801 (used like a function: `with saved_for_backward(model) as saved:`)
    """Count the bytes autograd keeps for the backward pass while the block runs: the activations.

    ``with saved_for_backward(exclude=[*model.parameters(), inputs]) as saved: loss = ...`` and then
    ``saved.bytes``. Every tensor an operation saves for ``backward`` is counted once per storage
    (several views of one tensor take its memory once); tensors in ``exclude`` (parameters, the input
    batch: memory that exists anyway) are not counted. Uses ``torch.autograd.graph.saved_tensors_hooks``,
    so it counts what autograd really keeps, on any device.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        self._exclude = {self._key(t) for t in exclude}
        self._sizes: dict[object, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    @staticmethod
    def _key(t: torch.Tensor) -> object:
        storage = t.untyped_storage()
        pointer = storage.data_ptr()
        return (t.device, pointer) if pointer else ("no-storage", id(t))

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        key = self._key(t)
        if key not in self._exclude:
            size = (
                t.untyped_storage().nbytes()
                if t.untyped_storage().data_ptr()
                else t.numel() * t.element_size()
            )
            self._sizes[key] = size
        return t  # autograd keeps the tensor as it would without the hook; only its size is noted

    @property
    def bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def tensors(self) -> int:
        return len(self._sizes)

    def __enter__(self) -> saved_for_backward:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


def largest_batch_that_fits(step: Callable[[int], object], low: int, high: int) -> int | None:
    """The largest batch size in ``[low, high]`` for which ``step(batch_size)`` runs without running
    out of memory, found by bisection (about log2(high - low) calls), or ``None`` if ``low`` does not fit.

    ``step`` should do what training does at that batch size (forward, backward, optimizer step).
    Only ``torch.OutOfMemoryError`` (the same class as ``torch.cuda.OutOfMemoryError``) means "does
    not fit"; any other error is a bug in ``step`` and is raised as it is. It assumes what fits is
    monotone: if a batch fits, every smaller one does.
    """
    if (
        isinstance(low, bool)
        or isinstance(high, bool)
        or not isinstance(low, int)
        or not isinstance(high, int)
    ):
        raise TypeError(f"largest_batch_that_fits: low and high are whole numbers; got {low!r} and {high!r}.")
    if not 1 <= low <= high:
        raise ValueError(f"largest_batch_that_fits: need 1 <= low <= high; got low={low}, high={high}.")
    if not callable(step):
        raise TypeError(f"largest_batch_that_fits: step must be a function of the batch size; got {step!r}.")

    def fits(batch_size: int) -> bool:
        try:
            step(batch_size)
        except torch.OutOfMemoryError:
            return False  # leaving the except block drops the error and its frames, and their tensors
        return True

    if not fits(low):
        return None
    best, lo, hi = low, low + 1, high  # invariant: best fits; the answer is best or in [lo, hi]
    while lo <= hi:
        middle = (lo + hi) // 2
        if fits(middle):
            best, lo = middle, middle + 1
        else:
            hi = middle - 1
    return best


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


@dataclass(frozen=True)
class ScriptRun:
    """What a fresh Python process printed (see ``run_script``)."""

    source: str
    returncode: int
    stdout: str
    stderr: str
    error: str | None  # the exception's first line, "Type: message", if the script failed
    error_line: int | None  # the line of the script the exception was raised at, as the traceback says

    def line(self, number: int | None) -> str:
        """The script's source line ``number`` (1-based), stripped; '' for None."""
        if number is None:
            return ""
        return self.source.splitlines()[number - 1].strip()

    def line_of(self, text: str) -> int:
        """The number of the only script line that contains ``text``."""
        found = [i for i, line in enumerate(self.source.splitlines(), 1) if text in line]
        if len(found) != 1:
            raise ValueError(f"{text!r} is on {len(found)} lines of the script, not exactly one.")
        return found[0]


def _parse_traceback(stderr: str, script: str) -> tuple[str | None, int | None]:
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return None, None
    error_line = None
    error = None
    for i in range(starts[-1] + 1, len(lines)):
        match = _FRAME.match(lines[i])
        if match:
            if Path(match["file"]).name == Path(script).name:
                error_line = int(match["line"])
            continue
        if lines[i] and not lines[i][0].isspace():
            error = lines[i]
            break
    return error, error_line


def run_script(code: str, *, env: Mapping[str, str] | None = None, timeout: float = 300) -> ScriptRun:
    """Run ``code`` as a script in a new Python process and report what it printed and where it failed.

    ``env`` is added to this process's environment (as ``VAR=value python script.py`` does). The
    script is written to a file, so that a traceback names its lines; ``error`` is the exception's
    first line and ``error_line`` the line of the script the traceback points at. Used for errors
    that would leave the notebook's own process unusable (a CUDA device-side assert), and for
    settings read once at start-up (``CUDA_LAUNCH_BLOCKING``, ``CUBLAS_WORKSPACE_CONFIG``).
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError("run_script needs the script's code as a non-empty string.")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not isinstance(value, str) or not name or "=" in name:
            raise ValueError(
                f"Environment variables are name/value strings, e.g. {{'CUDA_LAUNCH_BLOCKING': '1'}}; "
                f"got {name!r}: {value!r}."
            )
    source = textwrap.dedent(code).strip("\n") + "\n"
    with tempfile.TemporaryDirectory(prefix="course-script-") as folder:
        script = Path(folder) / "lesson_script.py"
        script.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=folder,
            )
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(
                f"The script did not finish within {timeout:g} s and was stopped. "
                "Make it do less, or pass a larger timeout."
            ) from error
    error, error_line = _parse_traceback(done.stderr, str(script))
    return ScriptRun(source, done.returncode, done.stdout, done.stderr, error, error_line)
