"""helpers.timing: timers that wait for the device, torch.utils.benchmark wrappers, and bench results.

The results tests read the committed results in results/ (written by benchmarks/bench.py), as
06_performance reads them.
"""

import copy
import json
import re
import time
import timeit
from pathlib import Path

import pytest
import torch
from conftest import requires_cuda

from helpers.devices import pick_device
from helpers.timing import (
    Stopwatch,
    _benchmark_timer,
    _timer_for,
    _wait_for,
    _wait_for_mps,
    autorange,
    compare,
    describe_result,
    fit_step_time,
    images_per_second,
    load_results,
    results_dir,
    synchronize,
    time_calls,
)

ROOT = Path(__file__).resolve().parent.parent
# the first H100 run of make bench, kept under its date so that a new GPU bench never replaces it
FIRST_H100_BENCH = "bench-cuda-nvidia-h100-80gb-hbm3-2026-11-22.json"
requires_mps = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="needs Apple silicon (MPS)")


def test_synchronize_on_devices_without_a_queue_returns_at_once():
    synchronize("cpu")
    synchronize(torch.device("meta"))
    with pytest.raises(ValueError, match="synchronize: device 'xla': this machine has no xla device"):
        synchronize("xla")


def test_each_kind_of_device_is_waited_for_with_its_own_call(monkeypatch):
    assert _wait_for("cpu") is None and _wait_for("meta") is None  # nothing is queued there
    assert _wait_for("cuda") is torch.cuda.synchronize
    assert _wait_for("mps") is _wait_for_mps
    if not torch.backends.mps.is_built():  # the MPS call is really made, and here it has nothing to wait for
        with pytest.raises(RuntimeError, match="MPS"):
            _wait_for("mps")(torch.device("mps", 0))
    accelerator = getattr(torch, "accelerator", None)
    usable = accelerator is not None and accelerator.is_available()  # 2.6 raises without an accelerator
    built_for = accelerator.current_accelerator() if usable else None
    if built_for is not None and built_for.type not in ("cuda", "mps"):
        assert _wait_for(built_for.type) is accelerator.synchronize  # Intel XPU and the like
    if hasattr(torch, "xpu") and (built_for is None or built_for.type != "xpu"):
        assert _wait_for("xpu") is torch.xpu.synchronize  # not this build's accelerator: its own module
    assert _wait_for("xla") is None  # no torch.xla: synchronize() refuses it (see above)


def test_synchronize_and_the_stopwatch_work_here_with_or_without_torch_accelerator(monkeypatch):
    device = pick_device()
    for _ in range(2):
        synchronize(device)
        with Stopwatch(device) as watch:
            torch.ones(64, 64, device=device).sum()
        assert watch.seconds > 0
        monkeypatch.delattr(torch, "accelerator", raising=False)  # the second time as on PyTorch before 2.6
    assert not hasattr(torch, "accelerator")


def test_the_benchmark_clock_waits_for_the_device_it_times():
    # torch.utils.benchmark.Timer's own clock waits for MPS only from torch 2.9: autorange's must
    from torch.utils.benchmark.utils.timer import timer as torch_default_clock

    for device in (torch.device("cpu"), torch.device("meta")):
        assert _timer_for(device) is timeit.default_timer  # nothing queued: the plain clock
        assert _benchmark_timer(lambda: None, device)._timer.timer is timeit.default_timer
    for device in (torch.device("mps"), torch.device("cuda", 0)):  # a device object needs no Mac, no GPU
        clock = _benchmark_timer(lambda: None, device, label="x", num_threads=1)._timer.timer
        assert clock not in (timeit.default_timer, torch_default_clock)  # the Timer reads autorange's
    if not torch.backends.mps.is_built():  # the Timer's clock really calls the MPS wait: here it raises
        with pytest.raises(RuntimeError, match="MPS"):
            _benchmark_timer(lambda: None, torch.device("mps"))._timer.timer()
    if torch.cuda.is_available():
        clock = _timer_for(torch.device("cuda", 0))
        assert clock() <= clock()
    with pytest.raises(ValueError, match="Do not know how to wait for a 'xla' device"):
        _timer_for(torch.device("xla"))


def test_autorange_times_with_the_clock_of_the_device_it_is_given(monkeypatch):
    import helpers.timing

    asked = []

    def recorded(device):
        asked.append(device)
        return _timer_for(device)

    monkeypatch.setattr(helpers.timing, "_timer_for", recorded)  # the real clock, with its device noted
    autorange(lambda: None, min_run_time=0.01)
    autorange(lambda: None, min_run_time=0.01, device="cpu")
    assert asked == [pick_device(), torch.device("cpu")]  # by default the accelerator, as torch 2.9's
    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match="autorange: device 'mps'"):
            autorange(lambda: None, device="mps")


@requires_mps
def test_on_an_apple_gpu_the_timers_see_work_a_bare_clock_misses():
    a = torch.randn(2048, 2048, device="mps")
    a @ a
    synchronize("mps")
    start = time.perf_counter()
    for _ in range(10):
        a @ a
    launch_only = time.perf_counter() - start
    with Stopwatch("mps") as watch:
        for _ in range(10):
            a @ a
    assert launch_only < watch.seconds
    per_call = autorange(lambda: a @ a, min_run_time=0.2, device="mps").median
    assert per_call > 0.5 * watch.seconds / 10, (per_call, watch.seconds / 10)  # the work, not the launch


def test_stopwatch_measures_the_block():
    with Stopwatch("cpu") as watch:
        assert watch.seconds is None
        time.sleep(0.05)
    assert 0.045 <= watch.seconds < 1.0


def test_time_calls_leaves_the_warmup_out():
    calls = []

    def slow_first_call():
        calls.append(1)
        time.sleep(0.3 if len(calls) == 1 else 0.01)

    times = time_calls(slow_first_call, "cpu", warmup=1, repeats=4)
    assert len(calls) == 5 and len(times) == 4
    assert all(0.009 <= t < 0.25 for t in times)
    with pytest.raises(ValueError, match="repeats .*must be 1 or more, got 0"):
        time_calls(slow_first_call, "cpu", repeats=0)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: time_calls(3.0, "cpu"), TypeError, "fn must be a function"),
        (lambda: time_calls(lambda: None, "cpu", warmup=-1), ValueError, "warmup"),
        (lambda: time_calls(lambda: None, "cpu", repeats=2.5), TypeError, "repeats"),
        (lambda: time_calls(lambda: None, None), TypeError, "device"),
        (lambda: Stopwatch("cuda:99"), ValueError, "Stopwatch: device 'cuda:99'"),
        (lambda: images_per_second("1000", 2.0), TypeError, "images must be a number"),
        (lambda: autorange(None), TypeError, "autorange: fn must be a function"),
    ],
)
def test_bad_timing_arguments_are_named(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: compare([0.5, 0.7]), TypeError, "compare: measurements must be a list of what autorange"),
        (lambda: compare([]), TypeError, "got none"),
        (lambda: describe_result({"device": {}}), ValueError, r"lacks \['versions'"),
        (lambda: describe_result([]), ValueError, "describe_result takes one result"),
        (lambda: load_results(None), TypeError, "load_results: folder must be a folder path"),
        (lambda: load_results("results", quick="yes"), TypeError, "quick must be True, False or None"),
    ],
)
def test_bad_result_arguments_are_named(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_images_per_second():
    assert images_per_second(1000, 2.0) == 500.0
    with pytest.raises(ValueError, match="clock was read wrongly"):
        images_per_second(1000, 0.0)


def test_autorange_uses_the_training_thread_count_and_compare_tabulates():
    calls = []
    x = torch.randn(64, 64)

    def work():
        calls.append(1)
        return x @ x

    measurements = [
        autorange(work, label="matmul", sub_label="64x64", description=d, min_run_time=0.01)
        for d in ("a", "b")
    ]
    m = measurements[0]
    assert m.num_threads == torch.get_num_threads()
    assert m.median > 0 and len(m.times) >= 1 and len(calls) >= m.number_per_run * len(m.times)
    table = compare(measurements)
    assert "matmul" in table and "64x64" in table and "a" in table and "b" in table
    assert autorange(work, num_threads=1, min_run_time=0.01).num_threads == 1


@requires_cuda
def test_on_a_gpu_the_stopwatch_sees_work_a_bare_clock_misses():
    a = torch.randn(4096, 4096, device="cuda")
    a @ a
    synchronize("cuda")
    start = time.perf_counter()
    for _ in range(10):
        a @ a
    launch_only = time.perf_counter() - start
    with Stopwatch("cuda") as watch:
        for _ in range(10):
            a @ a
    assert launch_only < watch.seconds


def test_load_results_of_an_empty_or_missing_folder(tmp_path):
    assert load_results(tmp_path) == [] and load_results(tmp_path / "nowhere") == []


def test_load_results_refuses_other_files(tmp_path):
    (tmp_path / "bench-x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_results(tmp_path)
    (tmp_path / "bench-x.json").write_text(json.dumps({"device": {}}))
    with pytest.raises(ValueError, match="not a result of benchmarks/bench.py"):
        load_results(tmp_path)


def test_load_results_keeps_the_device_type_and_the_quick_runs_asked_for(tmp_path):
    (committed,) = [r for r in load_results(ROOT / "results", device_type="cpu")][-1:]
    for name, device, quick in (
        ("bench-a", "cpu", False),
        ("bench-b", "cuda", False),
        ("bench-c", "cpu", True),
    ):
        result = copy.deepcopy(committed)
        result["device"]["type"], result["settings"]["quick"] = device, quick
        result.pop("path")
        (tmp_path / f"{name}.json").write_text(json.dumps(result))
    assert [Path(r["path"]).stem for r in load_results(tmp_path, device_type="cpu")] == ["bench-a"]
    assert [Path(r["path"]).stem for r in load_results(tmp_path, quick=True)] == ["bench-c"]
    assert len(load_results(tmp_path, quick=None)) == 3
    assert results_dir() == ROOT / "results"


def test_every_recorded_failure_is_reported():
    (result,) = [r for r in load_results(ROOT / "results", device_type="cpu")][-1:]
    assert "FAILURE" not in describe_result(result)
    failed = copy.deepcopy(result)
    failed["failures"] = [{"where": "fast path run 2", "path": "fast_path", "why": "non-finite: NaN"}]
    assert "FAILURE: fast path run 2: non-finite: NaN" in describe_result(failed)
    stopped = {**copy.deepcopy(result), "incomplete": "written before the ladder ran"}
    assert describe_result(stopped).splitlines()[1].startswith("INCOMPLETE: written before the ladder ran")


def test_a_diverged_run_is_reported_not_averaged_away():
    """The H100 bench of 2026-11-22: one fast-path run of three ended at chance; the mean was 69.7%."""
    recorded = load_results(ROOT / "results", device_type="cuda")
    (result,) = [r for r in recorded if Path(r["path"]).name == FIRST_H100_BENCH]
    text = describe_result(result)
    assert "99.5%, 10.0%, 99.6%" in text
    assert "FAILED: fast path run 2 ended at 10.0%, near chance (10%): it diverged (another run" in text


def _cpu_reference() -> dict:
    (reference,) = [r for r in load_results(ROOT / "results", device_type="cpu") if r.get("ladder")][-1:]
    return reference


def test_live_figures_are_put_beside_the_recorded_ladder():
    from helpers.timing import check_against_reference

    reference = _cpu_reference()
    ladder = {
        step["key"]: step["images_per_second"] for step in reference["ladder"] if not step.get("skipped")
    }
    live = {"seed pipeline": ladder["seed"], "+ data on device": ladder["device"]}
    lines, flags = check_against_reference(live, reference)
    assert flags == []  # the recorded figures themselves contradict nothing
    assert lines[0].startswith("recorded: make bench's ladder on ")
    assert f"{ladder['device']:,.0f}" in lines[2] and f"{ladder['device'] / ladder['seed']:.2f}x" in lines[2]


def test_a_live_figure_that_contradicts_the_recorded_one_is_flagged():
    from helpers.timing import check_against_reference

    reference = _cpu_reference()
    seed = 1_000.0
    recorded = {s["key"]: s for s in reference["ladder"]}
    channels_last = recorded["channels_last"]["images_per_second"] / recorded["seed"]["images_per_second"]
    within = {"seed pipeline": seed, "+ channels_last": seed * channels_last * 1.9}
    assert check_against_reference(within, reference)[1] == []
    beyond = {"seed pipeline": seed, "+ channels_last": seed * channels_last * 2.1}
    (flag,) = check_against_reference(beyond, reference)[1]
    assert flag.startswith("+ channels_last: ") and "more than 2x apart" in flag
    # the student's busy machine: data on the device at a tenth of the seed, with or without a reference
    for ref in (reference, None):
        flags = check_against_reference({"seed pipeline": 1_900.0, "+ data on device": 178.0}, ref)[1]
        assert any("only removes work" in f for f in flags)
    lines, flags = check_against_reference({"seed pipeline": 1_900.0, "+ data on device": 2_000.0}, None)
    assert flags == [] and lines[0] == "recorded: no make bench ladder for this kind of device yet"
    # the first H100 run was made before the bench had a ladder: said so, not "no bench yet"
    (first,) = [
        r
        for r in load_results(ROOT / "results", device_type="cuda")
        if Path(r["path"]).name == FIRST_H100_BENCH
    ]
    live = {"seed pipeline": 1_900.0, "+ data on device": 2_000.0}
    lines, flags = check_against_reference(live, first)
    assert flags == [] and lines[0] == (
        "recorded: the make bench run on NVIDIA H100 80GB HBM3 of 2026-11-22 has no ladder (an earlier "
        "bench, before the ladder): nothing to compare with"
    )
    stopped = {**reference, "ladder": [], "incomplete": "written before the ladder ran"}
    assert "(it was stopped before the ladder)" in check_against_reference(live, stopped)[0][0]
    skipped = {**reference, "ladder": [], "settings": {**reference["settings"], "skip": ["ladder"]}}
    assert "(it was run with --skip ladder)" in check_against_reference(live, skipped)[0][0]


def test_a_gpu_is_checked_only_against_a_ladder_recorded_on_a_gpu_of_its_name():
    # a student on Colab's T4 must not be told to measure again because an H100 scaled differently
    from helpers.timing import check_against_reference

    (h100,) = [
        r
        for r in load_results(ROOT / "results", device_type="cuda")
        if r.get("ladder") and r["path"].endswith("-2026-11-23.json")
    ]
    recorded = {s["key"]: s["images_per_second"] for s in h100["ladder"] if not s.get("skipped")}
    seed = 1_000.0
    far = {"seed pipeline": seed, "+ batch 512, lr x8": seed * recorded["large_batch"] / recorded["seed"] / 5}
    lines, flags = check_against_reference(far, h100, live_device="NVIDIA H100 80GB HBM3")
    assert len(flags) == 1 and flags[0].startswith("+ batch 512, lr x8: ")  # the same GPU: checked
    lines, flags = check_against_reference(far, h100, live_device="Tesla T4")
    assert flags == [] and "this GPU is Tesla T4, another GPU" in lines[0] and "not checked" in lines[0]
    assert "| recorded" in lines[2]  # still shown beside it
    busy = {"seed pipeline": 1_900.0, "+ data on device": 178.0}  # a busy machine is one on any GPU
    assert any(
        "only removes work" in f for f in check_against_reference(busy, h100, live_device="Tesla T4")[1]
    )


@pytest.mark.parametrize(
    ("live", "tolerance", "words"),
    [
        ({}, 2.0, "dict of step"),
        ({"+ data on device": 5.0}, 2.0, "seed pipeline"),
        ({"seed pipeline": 0.0}, 2.0, "seed pipeline"),
        ({"seed pipeline": 5.0, "+ warp drive": 9.0}, 2.0, "unknown steps"),
        ({"seed pipeline": 5.0}, 1.0, "tolerance"),
    ],
)
def test_check_against_reference_says_what_is_wrong(live, tolerance, words):
    from helpers.timing import check_against_reference

    with pytest.raises((TypeError, ValueError), match=words):
        check_against_reference(live, None, tolerance)


def _profiled_tudui():
    from torch.profiler import ProfilerActivity, profile

    from helpers.models import Tudui

    model, images = Tudui(), torch.randn(16, 3, 32, 32)
    with profile(activities=[ProfilerActivity.CPU], acc_events=True) as prof:
        for _ in range(2):
            model(images).sum().backward()
    return prof.key_averages()


def test_the_profile_table_fits_a_notebook_and_keeps_the_order():
    from helpers.timing import profile_table

    events = _profiled_tudui()
    table = profile_table(events, rows=6)
    lines = table.splitlines()
    assert max(len(line) for line in lines) < 90
    assert len(lines) == 2 + 6 + 1  # header, rule, six operators, the totals
    totals = [float(line.split()[-2]) for line in lines[2:8]]  # CPU total (ms) of each row
    assert totals == sorted(totals, reverse=True)
    assert sorted(events, key=lambda e: e.cpu_time_total)[-1].key[:13] in lines[2]
    assert lines[-1] == f"self time in all: CPU {sum(e.self_cpu_time_total for e in events) / 1e3:.2f} ms"
    assert "device" in profile_table(events, device=True).splitlines()[0]


def test_the_profile_table_reads_the_device_time_of_older_torch_versions():
    from types import SimpleNamespace

    from helpers.timing import profile_table

    old = SimpleNamespace(  # before torch 2.4 the device columns were named cuda_*
        key="aten::addmm",
        count=3,
        cpu_time_total=4_000.0,
        self_cpu_time_total=1_000.0,
        cuda_time_total=500.0,
        self_cuda_time_total=500.0,
    )
    table = profile_table([old], device=True)
    assert "0.50" in table.splitlines()[2] and "device 0.50 ms (50% of the CPU's)" in table


@pytest.mark.parametrize(("events", "rows", "words"), [([], 10, "no events"), (None, 0, "rows")])
def test_profile_table_says_what_is_wrong(events, rows, words):
    from helpers.timing import profile_table

    with pytest.raises(ValueError, match=words):
        profile_table(_profiled_tudui() if events is None else events, rows=rows)


# --- fit_step_time: a fixed cost per step and a cost per image ------------------------------------


def test_fit_step_time_recovers_the_two_costs_it_was_made_from():
    sizes = [16, 64, 256, 1024]
    fit = fit_step_time(sizes, [0.002 + 3e-6 * b for b in sizes])
    assert fit.fixed_seconds == pytest.approx(0.002, rel=1e-9)
    assert fit.seconds_per_image == pytest.approx(3e-6, rel=1e-9)
    assert fit.worst_error < 1e-9
    assert fit.batch_at_half() == pytest.approx(0.002 / 3e-6)
    assert fit.fixed_share(16) > 0.9 and fit.bound(16).startswith("fixed cost")
    assert fit.fixed_share(8192) < 0.1 and fit.bound(8192).startswith("work per image")


def test_fit_step_time_weighs_every_batch_by_its_relative_miss():
    # one noisy large batch must not swamp the small ones, as an ordinary least-squares fit would
    sizes = [16, 64, 256, 1024]
    times = [0.001 + 1e-6 * b for b in sizes]
    times[-1] *= 1.3
    fit = fit_step_time(sizes, times)
    assert fit.seconds(16) == pytest.approx(times[0], rel=0.05)


def test_fit_step_time_never_returns_a_negative_cost():
    # time per image falling with the batch (caches) would give a negative fixed cost: it is 0 instead
    sizes = [16, 64, 256, 1024]
    fit = fit_step_time(
        sizes, [0.0104, 0.0324, 0.168, 0.766]
    )  # an earlier bench's Tudui sweep on the 2-core CPU
    assert fit.fixed_seconds == 0 and fit.seconds_per_image > 0 and fit.fixed_share(16) == 0
    flat = fit_step_time(sizes, [0.0015, 0.0014, 0.0014, 0.0012])  # time per step falling: no cost per image
    assert flat.seconds_per_image == 0 and flat.fixed_seconds > 0 and flat.batch_at_half() == float("inf")


@pytest.mark.parametrize(
    "sizes, times, words",
    [
        ([16, 64], [0.001], "2 batch sizes but 1 times"),
        ([64, 64], [0.001, 0.002], "two different batch sizes"),
        ([16, 64], [0.001, 0.0], "positive number of seconds"),
        ([16, 64], [0.001, float("nan")], "positive number of seconds"),
        ([16, 0], [0.001, 0.002], "batch_sizes"),
    ],
)
def test_fit_step_time_says_what_is_wrong(sizes, times, words):
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        fit_step_time(sizes, times)
