"""Timing code on any device (``06_performance``). A GPU runs its work later, while Python goes on:
every timer here waits for the device before and after."""

import logging
import numbers
import time
import timeit
from collections.abc import Callable
from typing import Any

import torch

from helpers import _args
from helpers.devices import as_device, pick_device

__all__ = ["Stopwatch", "autorange", "images_per_second", "synchronize", "time_calls"]


def _wait_for(device: torch.device) -> Callable[[], Any]:
    """The call that waits for the work queued on ``device`` (the CPU queues none: no wait)."""
    if device.type in ("cpu", "meta"):
        return lambda: None
    if device.type == "mps":
        return torch.mps.synchronize  # a Mac has one Apple GPU: this call takes no device
    backend = getattr(torch, device.type)  # torch.cuda, torch.xpu, ...
    return lambda: backend.synchronize(device)


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished all the work queued on it (on the CPU: none)."""
    _wait_for(as_device(device, caller="synchronize", check_available=True))()


class Stopwatch:
    """``with Stopwatch(device) as watch: ...``, then ``watch.seconds``: the wall time of the
    block's work on ``device``. It waits for the device on entry (earlier work is not counted) and
    on exit."""

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


def _check_function(fn, caller: str) -> None:
    if not callable(fn):
        raise TypeError(
            f"{caller}: fn must be a function, e.g. lambda: model(x); got {_args.shown(fn)}."
        )


def time_calls(
    fn: Callable, device: torch.device | str, *, warmup: int = 2, repeats: int = 5
) -> list[float]:
    """Seconds taken by each of ``repeats`` calls of ``fn()``, each timed with a ``Stopwatch``,
    after ``warmup`` calls not timed (which pay the one-off costs: loading kernels, creating
    library handles)."""
    _check_function(fn, "time_calls")
    device = as_device(device, caller="time_calls", check_available=True)
    warmup = _args.integer(
        warmup, "warmup", "time_calls", minimum=0, meaning="how many calls not timed"
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
    """Throughput, ``images / seconds``. A time of zero or less (a clock read too early) is
    refused."""
    call = "call it as images_per_second(len(dataset), watch.seconds)"
    if isinstance(images, bool) or not isinstance(images, numbers.Integral):
        raise TypeError(
            f"images_per_second: images is a count, a whole number, not {_args.shown(images)}; "
            f"{call}."
        )
    if images < 0:
        raise ValueError(f"images_per_second: images is a count, 0 or more, not {images}; {call}.")
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        shown = _args.shown(seconds)
        raise TypeError(f"images_per_second: seconds is a number, not {shown}; {call}.")
    if not seconds > 0:  # NaN too
        raise ValueError(
            f"images_per_second: {images} images in {seconds} s: a clock read too early; "
            "time the work with Stopwatch(device)."
        )
    return images / seconds


def _benchmark_module():
    """``torch.utils.benchmark``, imported without the warning about CUDA_HOME that importing it
    logs on a machine with a CUDA toolkit and no GPU (the level is set back afterwards)."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import benchmark
    finally:
        logger.setLevel(level)
    return benchmark


def autorange(fn: Callable[[], Any], *, min_run_time: float = 0.2) -> Any:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time)``, on
    as many threads as PyTorch trains with, with a clock that waits for ``pick_device()``. The
    ``Measurement`` it returns has ``.median`` and ``.times``, in seconds per call."""
    _check_function(fn, "autorange")
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, numbers.Real):
        raise TypeError(
            f"autorange: min_run_time is a number of seconds, not {_args.shown(min_run_time)}."
        )
    if not min_run_time > 0:
        raise ValueError(f"autorange: min_run_time is seconds above 0, got {min_run_time!r}.")
    wait = _wait_for(pick_device())

    def clock() -> float:
        wait()
        return timeit.default_timer()

    benchmark = _benchmark_module()
    threads = torch.get_num_threads()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, timer=clock, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time)
