"""helpers.timing: timers that wait for the device, and autorange; helpers.results: make bench's
results."""

import json
import time
from pathlib import Path

import pytest
import torch

import helpers.results as results
import helpers.timing as timing
from helpers.results import load_results
from helpers.timing import Stopwatch, autorange, images_per_second, synchronize, time_calls


@pytest.fixture
def waits(monkeypatch):
    """Every wait for a device, as (device type) in order, while the waits themselves do nothing."""
    seen = []
    monkeypatch.setattr(timing, "_wait_for", lambda device: lambda: seen.append(device.type))
    return seen


def test_each_kind_of_device_is_waited_for_with_its_own_call(monkeypatch):
    called = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device: called.append(device))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: called.append("mps"))
    timing._wait_for(torch.device("cuda", 1))()
    timing._wait_for(torch.device("mps"))()
    timing._wait_for(torch.device("cpu"))()  # nothing is queued on the CPU
    assert called == [torch.device("cuda", 1), "mps"]
    synchronize("cpu")
    synchronize(torch.device("meta"))


def test_the_stopwatch_waits_before_and_after_the_block(waits):
    with Stopwatch("cpu") as watch:
        assert watch.seconds is None and waits == ["cpu"]
        time.sleep(0.05)
    assert waits == ["cpu", "cpu"] and 0.045 <= watch.seconds < 1.0


def test_time_calls_leaves_the_warmup_out():
    calls = []

    def slow_first_call():
        calls.append(1)
        time.sleep(0.3 if len(calls) == 1 else 0.01)

    times = time_calls(slow_first_call, "cpu", warmup=1, repeats=4)
    assert len(calls) == 5 and len(times) == 4 and all(0.009 <= t < 0.25 for t in times)
    assert images_per_second(1000, 2.0) == 500.0


def test_autorange_times_with_a_clock_that_waits_for_the_device(waits):
    x = torch.randn(64, 64)
    m = autorange(lambda: x @ x, min_run_time=0.01)
    assert (
        m.median > 0 and m.num_threads == torch.get_num_threads() and len(waits) >= 2 * len(m.times)
    )


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: time_calls(3.0, "cpu"), TypeError, "fn must be a function"),
        (lambda: time_calls(lambda: None, "cpu", warmup=-1), ValueError, "warmup"),
        (lambda: time_calls(lambda: None, "cpu", repeats=2.5), TypeError, "repeats"),
        (lambda: time_calls(lambda: None, None), TypeError, "device"),
        (lambda: Stopwatch("cuda:99"), ValueError, "Stopwatch: device 'cuda:99'"),
        (lambda: synchronize("xla"), ValueError, "synchronize: device 'xla'"),
        (lambda: images_per_second("1000", 2.0), TypeError, "images is a count"),
        (lambda: images_per_second(0.5, 1000), TypeError, "images is a count, .* not 0.5"),
        (lambda: images_per_second(-3, 1.0), ValueError, "images is a count, .* not -3"),
        (lambda: images_per_second(1000, None), TypeError, "seconds is a number"),
        (lambda: images_per_second(1000, -1.0), ValueError, "Stopwatch"),
        (lambda: images_per_second(1000, 0.0), ValueError, "Stopwatch"),
        (lambda: images_per_second(1000, float("nan")), ValueError, "Stopwatch"),
        (lambda: autorange(None), TypeError, "autorange: fn must be a function"),
        (lambda: autorange(lambda: None, min_run_time="1"), TypeError, "min_run_time"),
        (lambda: autorange(lambda: None, min_run_time=0), ValueError, "min_run_time"),
        (lambda: autorange(lambda: None, min_run_time=-1.0), ValueError, "min_run_time"),
        (lambda: time_calls(lambda: None, "CPU"), ValueError, "lower case: 'cpu'"),
        (lambda: time_calls(lambda: None, "cpu", repeats=0), ValueError, "repeats"),
        (lambda: load_results(None), TypeError, "path of a folder"),
        (lambda: load_results("Makefile"), NotADirectoryError, "results_dir"),
        (lambda: load_results("no-such-folder"), FileNotFoundError, "results_dir"),
        (lambda: load_results("results", device_type="gpu"), ValueError, "'cuda'"),
        (lambda: load_results("results", device_type="CUDA"), ValueError, "'cuda'"),
        (
            lambda: load_results("results", quick="yes"),
            TypeError,
            "quick must be True, False or None",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("text", ["{not json", json.dumps({"device": {}}), "[]"])
def test_load_results_refuses_a_file_that_is_no_result(tmp_path, text, monkeypatch):
    monkeypatch.setattr(results, "results_dir", lambda: tmp_path / "none yet")  # no bench run yet
    assert load_results(tmp_path) == [] and load_results(tmp_path / "none yet") == []
    (tmp_path / "bench-other.json").write_text(text)
    with pytest.raises(ValueError, match="bench-other.json is not a result of make bench"):
        load_results(tmp_path)


def test_load_results_keeps_the_device_type_and_the_quick_runs_asked_for_oldest_first(tmp_path):
    runs = [
        ("gpu", "cuda", 0, "2026-02"),
        ("old", "cuda", 0, "2026-01"),
        ("cpu", "cpu", 0, "2026-03"),
    ]
    for name, kind, quick, date in [*runs, ("quick", "cuda", 1, "2026-04")]:
        result = {
            "device": {"type": kind},
            "versions": {},
            "date": date,
            "settings": {"quick": quick},
        }
        (tmp_path / f"bench-{name}.json").write_text(json.dumps({**result, "summary": {}}))
    names = [Path(r["path"]).name for r in load_results(tmp_path, device_type="cuda")]
    assert names == ["bench-old.json", "bench-gpu.json"]
    assert [r["date"] for r in load_results(tmp_path, quick=True)] == ["2026-04"]
    assert len(load_results(tmp_path, quick=None)) == 4
