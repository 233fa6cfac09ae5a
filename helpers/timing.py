"""Timing code on any device, done right, and the benchmark results of ``make bench``.

Introduced in ``06_performance``. A GPU runs the work it is given later, in order, while Python
goes on: a clock read right after a call measures the launch, not the work. So every timer here
waits for the device (``synchronize``) before it starts and before it stops, and measures only
after warm-up calls. ``autorange`` and ``compare`` are thin wrappers around
``torch.utils.benchmark`` (``Timer.blocked_autorange`` and ``Compare``), which do the same.
"""

from __future__ import annotations

import json
import logging
import numbers
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from helpers import _args
from helpers.devices import as_device

__all__ = [
    "Stopwatch",
    "autorange",
    "compare",
    "describe_result",
    "images_per_second",
    "load_results",
    "result_stem",
    "results_dir",
    "synchronize",
    "time_calls",
]


def _import_benchmark():
    """``torch.utils.benchmark``, imported without the warning its import can log.

    It imports ``torch.utils.cpp_extension``, which on a machine with a CUDA toolkit but no usable GPU
    logs "No CUDA runtime is found, using CUDA_HOME=...": a note about compiling C++ extensions, which
    the course never does, that reads like an error at the top of ``06_performance``.
    """
    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        from torch.utils import benchmark
    finally:
        log.setLevel(level)
    return benchmark


benchmark = _import_benchmark()


def _callable(fn: Any, caller: str) -> None:
    if not callable(fn):
        raise TypeError(
            f"{caller}: fn must be a function to call with no arguments, e.g. lambda: model(x); "
            f"got {type(fn).__name__} {_args.shown(fn)} (a result, not a call?)."
        )


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished all the work queued on it; on the CPU there is none to wait for.

    CUDA: ``torch.cuda.synchronize(device)``; Apple's MPS: ``torch.mps.synchronize()``; another
    accelerator: ``torch.accelerator.synchronize(device)`` (PyTorch 2.6 and later), else the
    ``synchronize`` of its module (``torch.xpu``, ...); the CPU and ``meta``: nothing.
    """
    device = as_device(device, name="device", caller="synchronize", check_available=True)
    wait = _wait_for(device.type)
    if wait is None and device.type not in ("cpu", "meta"):
        raise ValueError(f"Do not know how to wait for a {device.type!r} device: time it on 'cuda' or 'cpu'")
    if wait is not None:
        wait(device)


def _wait_for(device_type: str) -> Callable[[torch.device], Any] | None:
    """The call that waits for a device of this type, or ``None``: nothing to wait for, or no known way."""
    if device_type in ("cpu", "meta"):
        return None  # an operation on the CPU has finished when it returns
    if device_type == "cuda":
        return torch.cuda.synchronize
    if device_type == "mps":
        return lambda device: torch.mps.synchronize()  # a Mac has one Apple GPU: it takes no device
    accel = getattr(torch, "accelerator", None)
    if accel is not None and hasattr(accel, "synchronize") and hasattr(accel, "current_accelerator"):
        current = accel.current_accelerator()
        if current is not None and current.type == device_type:
            return accel.synchronize
    module = getattr(torch, device_type, None)
    return getattr(module, "synchronize", None) if module is not None else None


class Stopwatch:
    """Wall time of a block of work on ``device``, including the work still queued when it ends.

    ``with Stopwatch(device) as watch: ...`` then ``watch.seconds``. It waits for the device on
    entry (so earlier work is not counted) and on exit (so all of this block's work is). On CUDA it
    times with CUDA events recorded on the current stream, which the GPU stamps itself.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = as_device(device, name="device", caller="Stopwatch", check_available=True)
        self.seconds: float | None = None
        self._start: Any = None

    def __enter__(self) -> Stopwatch:
        synchronize(self.device)
        if self.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            self.seconds = self._start.elapsed_time(end) / 1000  # elapsed_time is in milliseconds
        else:
            synchronize(self.device)
            self.seconds = time.perf_counter() - self._start


def time_calls(
    fn: Callable[[], Any], device: torch.device | str, *, warmup: int = 2, repeats: int = 5
) -> list[float]:
    """Seconds taken by each of ``repeats`` calls of ``fn()``, after ``warmup`` untimed calls.

    Each call is timed on its own with a ``Stopwatch``, so the list shows the spread; the first
    calls of anything pay one-off costs (kernel loading, library handles, autotuning,
    compilation), which ``warmup`` keeps out of the figures.
    """
    _callable(fn, "time_calls")
    device = as_device(device, name="device", caller="time_calls", check_available=True)
    warmup = _args.integer(warmup, "warmup", "time_calls", minimum=0, meaning="how many untimed calls")
    repeats = _args.integer(repeats, "repeats", "time_calls", minimum=1, meaning="how many timed calls")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        with Stopwatch(device) as watch:
            fn()
        times.append(watch.seconds)
    return times


def images_per_second(images: int, seconds: float) -> float:
    """Throughput: ``images / seconds``, refusing a zero or negative time (a clock read too early)."""
    for name, value in (("images", images), ("seconds", seconds)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"images_per_second: {name} must be a number, got {type(value).__name__} {value!r}."
            )
    if seconds <= 0:
        raise ValueError(
            f"{images} images in {seconds} s: a time of zero or less means the clock was read wrongly; "
            "time with Stopwatch(device), which waits for the device."
        )
    return images / seconds


def autorange(
    fn: Callable[[], Any],
    *,
    label: str = "",
    sub_label: str = "",
    description: str = "",
    min_run_time: float = 0.2,
    num_threads: int | None = None,
) -> benchmark.Measurement:
    """``torch.utils.benchmark.Timer(...).blocked_autorange()`` for a function with no arguments.

    ``Timer`` warms up, picks how many calls to time in one block so that reading the clock costs
    nothing, waits for the accelerator around each block, and returns a ``Measurement`` (``.median``,
    ``.iqr``, ``.times`` in seconds per call). ``Timer`` runs with **one** CPU thread unless told
    otherwise; this wrapper uses as many as PyTorch trains with (``torch.get_num_threads()``), so
    CPU figures match training. ``label``/``sub_label``/``description`` lay out ``compare``'s table.
    """
    _callable(fn, "autorange")
    timer = benchmark.Timer(
        stmt="fn()",
        globals={"fn": fn},
        label=label,
        sub_label=sub_label,
        description=description,
        num_threads=torch.get_num_threads() if num_threads is None else num_threads,
    )
    return timer.blocked_autorange(min_run_time=min_run_time)


def compare(measurements: Iterable[benchmark.Measurement]) -> str:
    """The table ``torch.utils.benchmark.Compare`` makes of ``measurements`` (times per call), as text.

    Rows are the ``sub_label``s, columns the ``description``s, one table per ``label``.
    """
    measurements = list(measurements) if isinstance(measurements, Iterable) else [measurements]
    wrong = [type(m).__name__ for m in measurements if not isinstance(m, benchmark.Measurement)]
    if wrong or not measurements:
        raise TypeError(
            "compare: measurements must be a list of what autorange() returns (Measurement objects); "
            f"got {', '.join(wrong) if wrong else 'none'}."
        )
    table = benchmark.Compare(measurements)
    table.trim_significant_figures()
    return str(table)


# ---- benchmark results files (written by scripts/bench.py, read by 06_performance) ----


def results_dir() -> Path:
    """``results/`` at the repository root, where ``make bench`` writes (elsewhere: in the current folder)."""
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "notebooks").is_dir():
        return repo / "results"
    return Path.cwd() / "results"


def result_stem(device_type: str, device_name: str, *, quick: bool = False) -> str:
    """The file name (without suffix) of a benchmark result: one per device, a quick run apart.

    ``bench-cuda-nvidia-h100-80gb-hbm3``, ``bench-cpu-amd-epyc``, ``bench-cpu-amd-epyc-quick``: a
    CPU run never overwrites a GPU result, nor a quick run a full one.
    """
    for name, value in (("device_type", device_type), ("device_name", device_name)):
        if not isinstance(value, str):
            raise TypeError(f"result_stem: {name} must be a string, got {type(value).__name__} {value!r}.")
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"
    return f"bench-{device_type}-{slug}" + ("-quick" if quick else "")


_REQUIRED = ("device", "versions", "date", "settings", "summary")


def load_results(
    folder: str | Path, *, device_type: str | None = None, quick: bool | None = False
) -> list[dict]:
    """The benchmark results (``bench-*.json``) in ``folder``, oldest first; ``[]`` when there are none.

    ``device_type`` keeps only those measured on that kind of device (``"cuda"``, ``"cpu"``);
    ``quick=False`` (the default) leaves out quick runs, ``None`` keeps both. Each result gets a
    ``"path"`` entry; a file that is not a benchmark result raises a ``ValueError`` naming it.
    """
    if not isinstance(folder, str | Path):
        raise TypeError(
            f"load_results: folder must be a folder path, e.g. results_dir(); got {type(folder).__name__}."
        )
    if quick is not None and not isinstance(quick, bool):
        raise TypeError(f"load_results: quick must be True, False or None (both), got {quick!r}.")
    folder = Path(folder)
    results = []
    for path in sorted(folder.glob("bench-*.json")) if folder.is_dir() else []:
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(
                f"{path} is not valid JSON ({error}); delete it or run make bench again"
            ) from error
        missing = (
            [key for key in _REQUIRED if key not in result] if isinstance(result, dict) else list(_REQUIRED)
        )
        if missing:
            raise ValueError(f"{path} is not a benchmark result of scripts/bench.py: it lacks {missing}")
        if device_type is not None and result["device"].get("type") != device_type:
            continue
        if quick is not None and bool(result["settings"].get("quick")) != quick:
            continue
        result["path"] = str(path)
        results.append(result)
    return sorted(results, key=lambda r: r["date"])


def describe_result(result: dict) -> str:
    """A few lines saying what a benchmark result measured, on which hardware and when."""
    missing = [key for key in _REQUIRED if key not in result] if isinstance(result, dict) else list(_REQUIRED)
    if missing:
        raise ValueError(
            f"describe_result takes one result of load_results() (a dict), which has {list(_REQUIRED)}; "
            f"this one lacks {missing}."
        )
    device, versions, settings, summary = (result[k] for k in ("device", "versions", "settings", "summary"))
    speed, accuracy = summary["images_per_second"], summary["test_accuracy"]
    ratio, same = summary["ratio"], summary["ratio_same_batches"]
    runs = settings["repeats"]
    return "\n".join(
        [
            f"{device['name']} ({device['type']}), measured {result['date'][:10]} with "
            f"torch {versions['torch']}"
            + (f", CUDA {versions.get('cuda')}" if device["type"] == "cuda" else "")
            + (" (a quick run)" if settings.get("quick") else ""),
            f"Tudui on {settings['train_size']:,} {_data(settings)} training images, "
            f"{settings['epochs']} epochs, {runs} runs of each pipeline",
            f"seed pipeline {speed['seed_pipeline']['first_run']:,.0f} images/s, fast path "
            f"{speed['fast_path']['first_run']:,.0f} images/s in the first run: {ratio['first_run']:.1f}x; "
            f"over the {runs} runs median {ratio['median']:.1f}x, "
            f"from {ratio['min']:.1f}x to {ratio['max']:.1f}x",
            f"fast path with the seed's batches (64): "
            f"{speed['fast_same_batches']['first_run']:,.0f} images/s, {same['first_run']:.1f}x in the first "
            f"run (median {same['median']:.1f}x, from {same['min']:.1f}x to {same['max']:.1f}x)",
            f"test accuracy after {settings['epochs']} epochs, every run: seed pipeline "
            f"{_runs(accuracy['seed_pipeline']['runs'])}, fast path with the seed's batches "
            f"{_runs(accuracy['fast_same_batches']['runs'])}, "
            f"fast path {_runs(accuracy['fast_path']['runs'])}",
            *_diverged(accuracy),
            *_targets(result),
        ]
    )


def _data(settings: dict) -> str:
    """The data a result trained on, naming an older version of the synthetic stand-in as such."""
    from helpers.data import STAND_IN_VERSION  # here: helpers.timing imports nothing heavy at first

    if settings.get("data") != "synthetic stand-in":
        return str(settings.get("data"))
    version = settings.get("stand_in", 1)  # results from before the field were made on version 1
    if version == STAND_IN_VERSION:
        return "synthetic stand-in"
    return f"synthetic stand-in (version {version}, far easier than today's: its accuracies do not compare)"


def _runs(values: list[float]) -> str:
    return ", ".join(f"{value:.1%}" for value in values)


def _diverged(accuracy: dict) -> list[str]:
    """A line for every run that ended near chance (10 classes): a mean over the runs would hide it.

    Where another run of the same pipeline learned (30% or more), this one diverged; where none
    did, the budget was too small for the network to learn at all.
    """
    lines = []
    for path, record in accuracy.items():
        best = max(record["runs"], default=0.0)
        for number, value in enumerate(record["runs"], start=1):
            if value < 0.15:
                name = path.replace("_", " ")
                why = f"it diverged (another run reached {best:.1%})" if best >= 0.3 else "it learned nothing"
                lines.append(f"FAILED: {name} run {number} ended at {value:.1%}, near chance (10%): {why}")
    return lines


def _targets(result: dict) -> list[str]:
    targets = result.get("targets") or {}
    verdicts = [
        f"{name.replace('_', ' ')} {'met' if target.get('met') else 'NOT met'}"
        for name, target in targets.items()
        if isinstance(target, dict) and "met" in target
    ]
    return (
        [f"targets ({targets.get('judged_on', 'as recorded')}): " + "; ".join(verdicts)] if verdicts else []
    )
