"""Timing code on any device (``06_performance``), and reading the results of ``make bench``. A GPU runs
its work later, while Python goes on: every timer here waits for the device before and after."""

import json
import logging
import numbers
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from helpers import _args
from helpers.devices import as_device, pick_device

# With a CUDA toolkit but no usable GPU, this import warns about CUDA_HOME (for C++ extensions): quiet it.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402


def _wait_for(device: torch.device) -> Callable[[], Any]:
    """The call that waits for the work queued on ``device`` (on the CPU, which queues none: no wait)."""
    if device.type in ("cpu", "meta"):
        return lambda: None
    if device.type == "mps":
        return torch.mps.synchronize  # a Mac has one Apple GPU: this call takes no device
    return lambda: getattr(torch, device.type).synchronize(device)  # torch.cuda, torch.xpu, ...


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished all the work queued on it; on the CPU there is none to wait for."""
    _wait_for(as_device(device, caller="synchronize", check_available=True))()


class Stopwatch:
    """``with Stopwatch(device) as watch: ...``, then ``watch.seconds``: the wall time of the block's work
    on ``device``. It waits for the device on entry (earlier work is not counted) and on exit."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = as_device(device, caller="Stopwatch", check_available=True)
        self.seconds: float | None = None

    def __enter__(self) -> "Stopwatch":
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


def time_calls(
    fn: Callable, device: torch.device | str, *, warmup: int = 2, repeats: int = 5
) -> list[float]:
    """Seconds taken by each of ``repeats`` calls of ``fn()``, each timed with a ``Stopwatch``, after
    ``warmup`` untimed calls (which pay the one-off costs: loading kernels, creating library handles)."""
    if not callable(fn):
        raise TypeError(
            f"time_calls: fn must be a function, e.g. lambda: model(x); got {_args.shown(fn)}."
        )
    device = as_device(device, caller="time_calls", check_available=True)
    warmup = _args.integer(
        warmup, "warmup", "time_calls", minimum=0, meaning="how many untimed calls"
    )
    repeats = _args.integer(
        repeats, "repeats", "time_calls", minimum=1, meaning="how many timed calls"
    )
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        with Stopwatch(device) as watch:
            fn()
        times.append(watch.seconds)
    return times


def images_per_second(images: int, seconds: float) -> float:
    """Throughput: ``images / seconds``, refusing a time of zero or less (a clock read too early)."""
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in (images, seconds)):
        raise TypeError(f"images_per_second takes two numbers; got {images!r} and {seconds!r}.")
    if not seconds > 0:  # NaN too
        raise ValueError(
            f"{images} images in {seconds} s: a clock read too early; use Stopwatch(device)."
        )
    return images / seconds


def autorange(fn: Callable[[], Any], *, min_run_time: float = 0.2) -> Any:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time)``, on as many
    threads as PyTorch trains with, with a clock that waits for ``pick_device()``. The ``Measurement`` it
    returns has ``.median`` and ``.times``, in seconds per call."""
    if not callable(fn):
        raise TypeError(
            f"autorange: fn must be a function, e.g. lambda: model(x); got {_args.shown(fn)}."
        )
    if (
        isinstance(min_run_time, bool)
        or not isinstance(min_run_time, numbers.Real)
        or min_run_time <= 0
    ):
        raise ValueError(
            f"autorange: min_run_time is a number of seconds above 0, got {min_run_time!r}."
        )
    wait = _wait_for(pick_device())

    def clock() -> float:
        wait()
        return timeit.default_timer()

    timer = benchmark.Timer(
        stmt="fn()", globals={"fn": fn}, timer=clock, num_threads=torch.get_num_threads()
    )
    return timer.blocked_autorange(min_run_time=min_run_time)


def results_dir() -> Path:
    """``results/`` at the repository root, where ``make bench`` writes (elsewhere: in the current folder)."""
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "notebooks").is_dir():
        return repo / "results"
    return Path.cwd() / "results"


_RESULT_KEYS = ("device", "versions", "date", "settings", "summary")


def load_results(
    folder: str | Path, *, device_type: str | None = None, quick: bool | None = False
) -> list:
    """The ``make bench`` results (``bench-*.json``) in ``folder``, oldest first, each with its ``"path"``:
    those measured on ``device_type`` (``"cuda"``, ``"cpu"``; None: all), quick runs or not (None: both).
    A missing ``results_dir()`` holds none yet."""
    if not isinstance(folder, str | Path):
        raise TypeError(
            f"load_results: folder is the path of a folder, e.g. results_dir(); got {folder!r}."
        )
    if not Path(folder).is_dir() and Path(folder).resolve() != results_dir().resolve():
        raise ValueError(
            f"load_results: {folder} is no folder: give results_dir(), where make bench writes."
        )
    if device_type not in (None, "cuda", "cpu", "mps"):
        raise ValueError(
            f"load_results: device_type is 'cuda', 'cpu', 'mps' or None, not {device_type!r}."
        )
    if quick is not None and not isinstance(quick, bool):
        raise TypeError(f"load_results: quick must be True, False or None (both), got {quick!r}.")
    results = []
    for path in sorted(Path(folder).glob("bench-*.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # not JSON, not UTF-8
            result = None
        if not isinstance(result, dict) or not all(key in result for key in _RESULT_KEYS):
            raise ValueError(
                f"{path} is not a result of make bench (JSON with {_RESULT_KEYS}): delete it."
            )
        same_device = device_type is None or result["device"].get("type") == device_type
        if same_device and (quick is None or bool(result["settings"].get("quick")) == quick):
            results.append({**result, "path": str(path)})
    return sorted(results, key=lambda r: r["date"])
