"""Timing code on any device, done right, and the benchmark results of ``make bench``.

Introduced in ``06_performance``. A GPU runs the work it is given later, in order, while Python
goes on: a clock read right after a call measures the launch, not the work. So every timer here
waits for the device (``synchronize``) before it starts and before it stops, and measures only
after warm-up calls. ``autorange`` and ``compare`` are thin wrappers around
``torch.utils.benchmark`` (``Timer.blocked_autorange`` and ``Compare``), which do the same once
``autorange`` hands ``Timer`` a clock that waits for the device (``_timer_for``): ``Timer``'s own
waits for Apple's MPS only from PyTorch 2.9, and the course allows 2.6.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import numbers
import time
import timeit
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from helpers import _args
from helpers.devices import as_device, pick_device

__all__ = [
    "Stopwatch",
    "autorange",
    "check_against_reference",
    "compare",
    "describe_result",
    "fit_step_time",
    "images_per_second",
    "load_results",
    "profile_table",
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
    try:  # PyTorch 2.6 prints the note to stderr instead of logging it
        with contextlib.redirect_stderr(io.StringIO()):
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
    wait = _known_wait(device)
    if wait is not None:
        wait(device)


def _known_wait(device: torch.device) -> Callable[[torch.device], Any] | None:
    """``_wait_for(device.type)``, refusing a device type that has a queue but no known way to wait."""
    wait = _wait_for(device.type)
    if wait is None and device.type not in ("cpu", "meta"):
        raise ValueError(f"Do not know how to wait for a {device.type!r} device: time it on 'cuda' or 'cpu'")
    return wait


def _wait_for(device_type: str) -> Callable[[torch.device], Any] | None:
    """The call that waits for a device of this type, or ``None``: nothing to wait for, or no known way."""
    if device_type in ("cpu", "meta"):
        return None  # an operation on the CPU has finished when it returns
    if device_type == "cuda":
        return torch.cuda.synchronize
    if device_type == "mps":
        return _wait_for_mps
    accel = getattr(torch, "accelerator", None)
    needed = ("synchronize", "current_accelerator", "is_available")
    if accel is not None and all(hasattr(accel, name) for name in needed):
        # PyTorch 2.6's current_accelerator() raises where there is no accelerator: ask first.
        current = accel.current_accelerator() if accel.is_available() else None
        if current is not None and current.type == device_type:
            return accel.synchronize
    module = getattr(torch, device_type, None)
    return getattr(module, "synchronize", None) if module is not None else None


def _wait_for_mps(device: torch.device) -> None:
    """``torch.mps.synchronize()``, which takes no device: a Mac has one Apple GPU."""
    torch.mps.synchronize()


def _timer_for(device: torch.device) -> Callable[[], float]:
    """The clock ``torch.utils.benchmark.Timer`` should read to time work on ``device``.

    ``Timer`` reads its clock before and after each block of calls. Its default clock waits for the
    accelerator first, but which one depends on the PyTorch version (``timer`` in
    ``torch/utils/benchmark/utils/timer.py``): 2.6 waits for CUDA (and a PrivateUse1 backend), 2.7
    and 2.8 for CUDA or XPU, 2.9 and later for ``torch.accelerator``'s device, MPS included. So on an
    Apple GPU under 2.6 to 2.8 a ``Timer`` with its own clock measures how fast Python queues the work.
    This clock waits for ``device`` itself (``synchronize``'s call for its type) on every version,
    then reads ``timeit.default_timer``; on the CPU it is ``timeit.default_timer`` alone.
    """
    wait = _known_wait(device)
    if wait is None:
        return timeit.default_timer

    def clock() -> float:
        wait(device)
        return timeit.default_timer()

    return clock


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


@dataclass(frozen=True)
class StepTime:
    """A training step's time as a fixed cost per step plus a cost per image (``fit_step_time``).

    ``fixed_seconds`` is what a step costs however small its batch: launching its kernels, Python,
    the optimizer's loop over the parameters. ``seconds_per_image`` is the work each image adds:
    arithmetic and memory traffic. ``worst_error`` is the largest relative miss of the fit on the
    measured points (0.1: 10%), which says how well two numbers describe them.
    """

    fixed_seconds: float
    seconds_per_image: float
    worst_error: float

    def seconds(self, batch_size: int) -> float:
        """The fitted time of one step at ``batch_size``."""
        return self.fixed_seconds + self.seconds_per_image * batch_size

    def fixed_share(self, batch_size: int) -> float:
        """The part of a step at ``batch_size`` that the fixed cost takes, from 0 to 1."""
        return self.fixed_seconds / self.seconds(batch_size)

    def bound(self, batch_size: int) -> str:
        """Which cost dominates a step at ``batch_size``, in words."""
        if self.fixed_share(batch_size) >= 0.5:
            return "fixed cost per step (launches, Python)"
        return "work per image (arithmetic, memory)"

    def batch_at_half(self) -> float:
        """The batch size where both costs are equal (infinite when nothing is fixed)."""
        if self.seconds_per_image == 0:
            return math.inf
        return self.fixed_seconds / self.seconds_per_image


def fit_step_time(batch_sizes: Iterable[int], seconds_per_step: Iterable[float]) -> StepTime:
    """Fit ``seconds = fixed + per_image * batch`` to measured step times, in relative error.

    Each point counts by its relative miss, so a step of 1 ms at batch 16 weighs as much as one of
    100 ms at batch 1,024 (ordinary least squares would fit the largest batches only). Neither
    cost can be negative: where the best fit would make one so, it is 0 and the other is refitted
    alone. Needs at least two different batch sizes and positive times.
    """
    sizes, times = list(batch_sizes), list(seconds_per_step)
    if len(sizes) != len(times):
        raise ValueError(
            f"fit_step_time: {len(sizes)} batch sizes but {len(times)} times; give one time per batch size."
        )
    for b in sizes:
        _args.integer(b, "batch_sizes", "fit_step_time", minimum=1)
    for t in times:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not (math.isfinite(t) and t > 0):
            raise ValueError(
                f"fit_step_time: every time must be a positive number of seconds, got {t!r}; "
                "time each step with a synchronize before reading the clock (autorange, Stopwatch)."
            )
    if len(set(sizes)) < 2:
        raise ValueError(
            f"fit_step_time: needs at least two different batch sizes to tell a fixed cost from a cost "
            f"per image, got {sizes}."
        )
    # minimise sum((a + b * B_i) / t_i - 1)^2: linear least squares in a and b
    u = [1 / t for t in times]
    v = [b / t for b, t in zip(sizes, times, strict=True)]
    suu, svv, suv = (
        sum(x * x for x in u),
        sum(x * x for x in v),
        sum(x * y for x, y in zip(u, v, strict=True)),
    )
    su, sv = sum(u), sum(v)
    det = suu * svv - suv * suv
    fixed = (su * svv - sv * suv) / det if det > 0 else -1.0
    per_image = (sv * suu - su * suv) / det if det > 0 else -1.0
    if fixed < 0 or per_image < 0:
        only_per_image = (0.0, sv / svv)
        only_fixed = (su / suu, 0.0)

        def misses(candidate):
            a, b = candidate
            return sum(((a + b * s) / t - 1) ** 2 for s, t in zip(sizes, times, strict=True))

        fixed, per_image = min(only_per_image, only_fixed, key=misses)
    worst = max(abs((fixed + per_image * s) / t - 1) for s, t in zip(sizes, times, strict=True))
    return StepTime(fixed_seconds=fixed, seconds_per_image=per_image, worst_error=worst)


def autorange(
    fn: Callable[[], Any],
    *,
    label: str = "",
    sub_label: str = "",
    description: str = "",
    min_run_time: float = 0.2,
    num_threads: int | None = None,
    device: torch.device | str | None = None,
) -> benchmark.Measurement:
    """``torch.utils.benchmark.Timer(...).blocked_autorange()`` for a function with no arguments.

    ``Timer`` warms up, picks how many calls to time in one block so that reading the clock costs
    nothing, and returns a ``Measurement`` (``.median``, ``.iqr``, ``.times`` in seconds per call).
    It reads a clock that waits for ``device`` around each block (``_timer_for``): by default the
    accelerator ``pick_device()`` chooses (the CPU where there is none), as ``Timer``'s own clock
    does from PyTorch 2.9 on; before 2.9 that clock does not wait for Apple's MPS. ``Timer`` runs
    with **one** CPU thread unless told otherwise; this wrapper uses as many as PyTorch trains with
    (``torch.get_num_threads()``), so CPU figures match training. ``label``/``sub_label``/
    ``description`` lay out ``compare``'s table.
    """
    _callable(fn, "autorange")
    device = (
        pick_device()
        if device is None
        else as_device(device, name="device", caller="autorange", check_available=True)
    )
    timer = _benchmark_timer(
        fn,
        device,
        label=label,
        sub_label=sub_label,
        description=description,
        num_threads=torch.get_num_threads() if num_threads is None else num_threads,
    )
    return timer.blocked_autorange(min_run_time=min_run_time)


def _benchmark_timer(fn: Callable[[], Any], device: torch.device, **task: Any) -> benchmark.Timer:
    """The ``torch.utils.benchmark.Timer`` ``autorange`` runs: ``fn()``, with ``_timer_for(device)``."""
    return benchmark.Timer(stmt="fn()", globals={"fn": fn}, timer=_timer_for(device), **task)


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


# ---- benchmark results files (written by benchmarks/bench.py, read by 06_performance) ----


def results_dir() -> Path:
    """``results/`` at the repository root, where ``make bench`` writes (elsewhere: in the current folder)."""
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "notebooks").is_dir():
        return repo / "results"
    return Path.cwd() / "results"


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
            raise ValueError(f"{path} is not a result of benchmarks/bench.py: it lacks {missing}")
        if device_type is not None and result["device"].get("type") != device_type:
            continue
        if quick is not None and bool(result["settings"].get("quick")) != quick:
            continue
        result["path"] = str(path)
        results.append(result)
    return sorted(results, key=lambda r: r["date"])


def describe_result(result: dict) -> str:
    """What a benchmark result measured, on which hardware and when: every run, never a mean alone.

    ``result`` is one item of ``load_results``. For a result of schema 2: each run's images per
    second, test accuracy and ratio, the time to the seed pipeline's accuracy, the warm-up, the
    ladder of steps, a ``FAILURE`` line for every failure the result records, and the targets.
    Older results (schema 1) are described as they were recorded.
    """
    missing = [key for key in _REQUIRED if key not in result] if isinstance(result, dict) else list(_REQUIRED)
    if missing:
        raise ValueError(
            f"describe_result takes one result of load_results() (a dict), which has {list(_REQUIRED)}; "
            f"this one lacks {missing}."
        )
    if result.get("schema", 1) >= 2:
        return "\n".join(_describe_v2(result))
    device, versions, settings, summary = (result[k] for k in ("device", "versions", "settings", "summary"))
    speed, accuracy = summary["images_per_second"], summary["test_accuracy"]
    ratio, same = summary["ratio"], summary["ratio_same_batches"]
    runs = settings["repeats"]
    return "\n".join(
        [
            _header(result),
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


def _header(result: dict) -> str:
    device, versions, settings = result["device"], result["versions"], result["settings"]
    return (
        f"{device['name']} ({device['type']}), measured {result['date'][:10]} with torch {versions['torch']}"
        + (f", CUDA {versions.get('cuda')}" if device["type"] == "cuda" else "")
        + (" (a quick run)" if settings.get("quick") else "")
    )


# The pipelines of a bench result, by their keys in the file, as the report names them.
_PATH_NAMES = {
    "seed_pipeline": "seed pipeline",
    "fast_path": "fast path",
    "linear_scaling_only": "no warm-up or decay",
}


def _fmt(value: float | None, pattern: str, missing: str = "none") -> str:
    return missing if value is None else format(value, pattern)


def _describe_v2(result: dict) -> list[str]:
    settings, summary = result["settings"], result["summary"]
    runs = result.get("runs", [])
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    lines = [
        _header(result),
        *(
            [f"INCOMPLETE: {result['incomplete']}: what follows is what the bench finished"]
            if result.get("incomplete")
            else []
        ),
        f"Tudui on {settings['train_size']:,} {_data(settings)} training images, {count} of each "
        f"pipeline: the seed pipeline {settings['epochs']} epochs per run, the fast paths "
        f"{settings.get('fast_epochs', settings['epochs'])}; tested on {settings['test_size']:,} images "
        "after every epoch (training time leaves testing out; images/s: the median epoch from epoch 2 on)",
    ]
    for path, name in _PATH_NAMES.items():
        config = settings.get("paths", {}).get(path)
        if config:
            lines.append(f"  {name}: {config['description']}")
    for number, run in enumerate(runs, start=1):
        parts = []
        for path, name in _PATH_NAMES.items():
            record = run.get(path)
            if record is None:
                continue
            text = f"{name} {_fmt(record.get('images_per_second'), ',.0f', 'no')} images/s, test "
            text += _fmt(record.get("test_accuracy"), ".1%", "not measured")
            if record.get("status") == "non-finite":
                text += " (non-finite)"
            parts.append(text)
        reach = run.get("time_to_accuracy") or {}
        ratio = run.get("ratio")
        line = (
            f"run {number}: " + "; ".join(parts) + f"; fast path / seed pipeline {_fmt(ratio, '.2f', 'no')}x"
        )
        if reach.get("target") is not None:
            line += (
                f"; fast path reached the seed's {reach['target']:.1%} after epoch {reach['epoch']}, "
                f"{reach['seconds']:.2f} s of training"
                if reach.get("seconds") is not None
                else f"; fast path never reached the seed's {reach['target']:.1%}"
            )
        lines.append(line)
    ratio = summary.get("ratio") or {}
    if ratio.get("runs"):
        lines.append(
            f"fast path / seed pipeline: {_fmt(ratio['first_run'], '.2f', 'no')}x in the first run; "
            f"every run: {', '.join(_fmt(r, '.2f', 'none') + 'x' for r in ratio['runs'])}"
        )
    warm = summary.get("warmup_seconds") or {}
    if warm:
        lines.append(
            "warm-up and compilation, measured apart before each run's first epoch (s): "
            + "; ".join(
                f"{_PATH_NAMES.get(p, p)} {', '.join(f'{s:.2f}' for s in v)}" for p, v in warm.items()
            )
        )
    first = summary.get("first_epoch_seconds") or {}
    if first:
        lines.append(
            "first epoch of each run (s) against a steady epoch (median): "
            + "; ".join(
                f"{_PATH_NAMES.get(p, p)} {', '.join(f'{s:.2f}' for s in v['runs'])} "
                + (
                    f"against {v['steady_median']:.2f}"
                    if v.get("steady_median") is not None
                    else "(no steady epoch)"
                )
                for p, v in first.items()
            )
        )
    check = result.get("recipe_check")
    if check:
        lines.append(f"recipe check: {check['verdict']}")
    ladder = result.get("ladder") or []
    if ladder:
        lines.append(
            f"ladder, each step added to the ones above ({settings.get('ladder_epochs')} epochs each; "
            "images/s: the median epoch from epoch 2 on; x the step before, x the seed pipeline):"
        )
        width = max(len(rung["step"]) for rung in ladder)
        for rung in ladder:
            if rung.get("skipped"):
                lines.append(f"  {rung['step']:<{width}}  skipped: {rung['skipped']}")
                continue
            ips = rung.get("images_per_second")
            text = f"  {rung['step']:<{width}}  {_fmt(ips, '12,.0f', '          no')} images/s"
            if rung.get("speedup_previous") is not None:
                text += f"  {rung['speedup_previous']:6.2f}x  {rung['speedup_seed']:7.2f}x"
            if rung.get("warmup_seconds") is not None:
                text += f"  (warm-up {rung['warmup_seconds']:.2f} s)"
            if rung.get("fast_path"):
                text += "  <- the fast path"
            lines.append(text)
    for failure in result.get("failures") or []:
        lines.append(f"FAILURE: {failure['where']}: {failure['why']}")
    lines.extend(_targets(result))
    return lines


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
    verdicts = []
    for name, target in targets.items():
        if not isinstance(target, dict) or "met" not in target:
            continue
        met = target.get("met")
        verdict = "not judged" if met is None else "met" if met else "NOT met"
        text = f"{name.replace('_', ' ')} {verdict}"
        if target.get("text"):
            text = f"{target['text']}: {verdict}"
        verdicts.append(text)
    return (
        [f"targets ({targets.get('judged_on', 'as recorded')}): " + "; ".join(verdicts)] if verdicts else []
    )


# The steps of 06_performance's section 4, named as make bench's ladder names them.
LADDER_STEPS = {
    "seed pipeline": "seed",
    "+ data on device": "device",
    "+ batch 512, lr x8": "large_batch",
    "+ channels_last": "channels_last",
    "+ bf16 autocast": "mixed_precision",
    "+ torch.compile": "compile",
    "+ CUDA graphs": "cuda_graphs",
}


def check_against_reference(
    live: dict[str, float], reference: dict | None, tolerance: float = 2.0, *, live_device: str | None = None
) -> tuple[list[str], list[str]]:
    """Live images/s of 06's steps beside a recorded ``make bench`` ladder, and what contradicts it.

    ``live`` maps step names (``LADDER_STEPS``) to images per second, the seed pipeline among them;
    ``reference`` is one result of ``load_results`` (or ``None``). Returns the lines of a side-by-side
    table (each step's speed-up over the seed pipeline, live and recorded) and the flags: a step that
    only removes work (the data on the device) measured much slower than the seed pipeline, or a
    live speed-up more than ``tolerance`` times away from the recorded one. A flag means: a busy
    machine during one of the measurements, or a machine unlike the recorded one; measure again.

    A GPU's speed-ups are checked only against a ladder recorded on a GPU of the same name
    (``live_device``; by default this machine's current CUDA GPU): a T4 and an H100 are bound by
    different costs, so the H100's ladder is shown beside a T4's figures but not held against them.
    """
    if not isinstance(live, dict) or not live:
        raise TypeError(f"check_against_reference: live must be a dict of step -> images/s, got {live!r}.")
    unknown = [step for step in live if step not in LADDER_STEPS]
    if unknown:
        raise ValueError(
            f"check_against_reference: unknown steps {unknown}; the steps are {list(LADDER_STEPS)}."
        )
    if "seed pipeline" not in live or not live["seed pipeline"] > 0:
        raise ValueError(
            "check_against_reference: live needs the seed pipeline's images/s (> 0), the base of every ratio."
        )
    if not tolerance > 1:
        raise ValueError(f"check_against_reference: tolerance must be above 1, got {tolerance!r}.")
    seed = live["seed pipeline"]
    ladder = {step["key"]: step for step in (reference or {}).get("ladder") or [] if not step.get("skipped")}
    recorded_seed = (ladder.get("seed") or {}).get("images_per_second")
    where = ""
    if reference and recorded_seed:
        where = f"{reference['device'].get('name', '?')}, {str(reference.get('date', '?'))[:10]}"
    recorded_on = (reference or {}).get("device") or {}
    if live_device is None and recorded_on.get("type") == "cuda" and torch.cuda.is_available():
        live_device = torch.cuda.get_device_name(torch.cuda.current_device())
    other_gpu = (
        recorded_on.get("type") == "cuda"
        and live_device is not None
        and live_device != recorded_on.get("name")
    )
    lines, flags = [], []
    for step, value in live.items():
        ratio = value / seed
        line = f"{step:20} live {value:>12,.0f} images/s = {ratio:6.2f}x"
        recorded = (ladder.get(LADDER_STEPS[step]) or {}).get("images_per_second")
        if recorded and recorded_seed:
            recorded_ratio = recorded / recorded_seed
            line += f" | recorded {recorded:>10,.0f} = {recorded_ratio:6.2f}x"
            if (
                step != "seed pipeline"
                and not other_gpu
                and not (recorded_ratio / tolerance <= ratio <= recorded_ratio * tolerance)
            ):
                flags.append(
                    f"{step}: {ratio:.2f}x the seed pipeline here, {recorded_ratio:.2f}x in the recorded "
                    f"run ({where}): more than {tolerance:g}x apart"
                )
        lines.append(line)
    device_step = live.get("+ data on device")
    if device_step is not None and device_step < 0.8 * seed:
        flags.append(
            f"+ data on device: {device_step / seed:.2f}x the seed pipeline, though it only removes work "
            "(no PIL, no per-sample Python, no copy per batch)"
        )
    if where and other_gpu:
        lines.insert(
            0,
            f"recorded: make bench's ladder on {where}; this GPU is {live_device}, another GPU, so the "
            "recorded speed-ups are shown beside yours, not checked against them",
        )
    elif where:
        lines.insert(0, f"recorded: make bench's ladder on {where}")
    elif reference:
        why = (
            "it was stopped before the ladder"
            if reference.get("incomplete")
            else "it was run with --skip ladder"
            if "ladder" in (reference.get("settings") or {}).get("skip", [])
            else "an earlier bench, before the ladder"
            if reference.get("schema", 1) < 2
            else "its ladder measured no step"
        )
        lines.insert(
            0,
            f"recorded: the make bench run on {reference['device'].get('name', '?')} of "
            f"{str(reference.get('date', '?'))[:10]} has no ladder ({why}): nothing to compare with",
        )
    else:
        lines.insert(0, "recorded: no make bench ladder for this kind of device yet")
    return lines, flags


def _device_time(event, self_only: bool) -> float:
    """An event's device time in microseconds, by the name of this torch version (cuda_* before 2.4)."""
    names = (
        ("self_device_time_total", "self_cuda_time_total")
        if self_only
        else ("device_time_total", "cuda_time_total")
    )
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_table(events, *, rows: int = 10, device: bool = False, name_width: int = 40) -> str:
    """``torch.profiler``'s ``key_averages()`` as a table narrow enough for a notebook (under 90
    characters; the profiler's own is about 180 with a GPU, and wraps every row).

    The operators with the most time (on the device when ``device``, else on the CPU), their calls,
    their total and self CPU time, and with ``device`` their device time, in milliseconds; then the
    totals of self time, whose ratio says how busy the device was while the CPU worked.
    """
    events = list(events)
    if not isinstance(rows, int) or rows < 1:
        raise ValueError(f"profile_table: rows must be a positive int, got {rows!r}.")
    if not events:
        raise ValueError(
            "profile_table: no events; pass prof.key_averages() of a profile that ran some operations."
        )

    def sort_key(event):
        return _device_time(event, False) if device else float(event.cpu_time_total)

    header = f"{'operator':{name_width}} {'calls':>6} {'CPU total':>10} {'self CPU':>9}"
    header += f" {'device':>9}" if device else ""
    lines = [header + "   (ms)", "-" * len(header)]
    for event in sorted(events, key=sort_key, reverse=True)[:rows]:
        name = event.key  # too long: its start and its end, which tell the operators apart
        if len(name) > name_width:
            name = name[: name_width // 3] + "~" + name[-(name_width - name_width // 3 - 1) :]
        cpu, self_cpu_ms = event.cpu_time_total / 1e3, event.self_cpu_time_total / 1e3
        line = f"{name:{name_width}} {event.count:>6} {cpu:>10.2f} {self_cpu_ms:>9.2f}"
        if device:
            line += f" {_device_time(event, False) / 1e3:>9.2f}"
        lines.append(line)
    self_cpu = sum(e.self_cpu_time_total for e in events) / 1e3
    total = f"self time in all: CPU {self_cpu:.2f} ms"
    if device:
        self_device = sum(_device_time(e, True) for e in events) / 1e3
        total += f", device {self_device:.2f} ms ({self_device / self_cpu:.0%} of the CPU's)"
    lines.append(total)
    return "\n".join(lines)
