"""helpers.timing: timers that wait for the device, torch.utils.benchmark wrappers, and bench results.

The results tests read a results file written by a real (short) run of scripts/bench.py on this
machine's CPU, in a temporary folder.
"""

import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import requires_cuda

from helpers.devices import pick_device
from helpers.timing import (
    LADDER_STEPS,
    Stopwatch,
    _wait_for,
    autorange,
    bench_failures,
    compare,
    describe_result,
    fit_step_time,
    images_per_second,
    load_results,
    result_stem,
    results_dir,
    run_failure,
    synchronize,
    time_calls,
    time_to_accuracy,
)

ROOT = Path(__file__).resolve().parent.parent
# the first H100 run of make bench, kept under its date so that a new GPU bench never replaces it
FIRST_H100_BENCH = "bench-cuda-nvidia-h100-80gb-hbm3-2026-11-22.json"


def test_synchronize_on_devices_without_a_queue_returns_at_once():
    synchronize("cpu")
    synchronize(torch.device("meta"))
    with pytest.raises(ValueError, match="synchronize: device 'xla': this machine has no xla device"):
        synchronize("xla")


def test_each_kind_of_device_is_waited_for_with_its_own_call(monkeypatch):
    assert _wait_for("cpu") is None and _wait_for("meta") is None  # nothing is queued there
    assert _wait_for("cuda") is torch.cuda.synchronize
    if not torch.backends.mps.is_built():  # the MPS call is really made, and here it has nothing to wait for
        with pytest.raises(RuntimeError, match="MPS"):
            _wait_for("mps")(torch.device("mps", 0))
    accelerator = getattr(torch, "accelerator", None)
    built_for = accelerator.current_accelerator() if accelerator is not None else None
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
        (lambda: result_stem("cuda", None), TypeError, "device_name must be a string"),
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


def test_result_stem_keeps_devices_and_quick_runs_apart():
    assert result_stem("cuda", "NVIDIA H100 80GB HBM3") == "bench-cuda-nvidia-h100-80gb-hbm3"
    assert result_stem("cpu", "AMD EPYC", quick=True) == "bench-cpu-amd-epyc-quick"
    assert result_stem("cpu", "???") == "bench-cpu-unknown"
    assert results_dir() == ROOT / "results"


def test_load_results_of_an_empty_or_missing_folder(tmp_path):
    assert load_results(tmp_path) == [] and load_results(tmp_path / "nowhere") == []


def test_load_results_refuses_other_files(tmp_path):
    (tmp_path / "bench-x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_results(tmp_path)
    (tmp_path / "bench-x.json").write_text(json.dumps({"device": {}}))
    with pytest.raises(ValueError, match="not a benchmark result"):
        load_results(tmp_path)


def _bench(out, *options):
    """scripts/bench.py run for real on this machine's CPU, on the synthetic stand-in, into ``out``."""
    env = {**os.environ, "COURSE_DATA": "synthetic", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--device", "cpu"]
    command += [*options, "--out", str(out)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)


def _bench_result(out, *options):
    """``_bench`` that must succeed: its printout and the JSON it wrote into ``out``."""
    done = _bench(out, *options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = Path(out).glob("*.json")
    return done.stdout, json.loads(path.read_text())


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A real, short benchmark run on this machine's CPU, written to a temporary folder."""
    out = tmp_path_factory.mktemp("bench")
    printed, result = _bench_result(
        out, "--train-size", "256", "--test-size", "200", "--epochs", "2", "--repeats", "2"
    )
    return out, printed, result


PATHS = ("seed_pipeline", "fast_path", "linear_scaling_only")
LADDER = ["seed", "workers", "device", "large_batch", "channels_last", "mixed_precision", "fused"]


def test_the_bench_writes_a_result_and_a_plot_named_for_the_device(cpu_run):
    out, stdout, result = cpu_run
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and files[0].startswith("bench-cpu-") and files[0].endswith("-quick.json")
    assert files[1] == files[0].replace(".json", ".png") and (out / files[1]).stat().st_size > 10_000
    assert result["schema"] == 2 and result["device"]["type"] == "cpu"
    assert result["versions"]["torch"] == torch.__version__
    assert result["settings"]["train_size"] == 256 and result["settings"]["quick"] is True
    assert result["failures"] == [] and result["exit_status"] == 0 and "wrote" in stdout
    assert "incomplete" not in result  # written whole at the end, after the partial writes


def test_a_bench_stopped_after_its_runs_keeps_them(tmp_path):
    """A GPU machine's 10-minute commands can stop the bench midway: the runs it finished stay on disk."""
    env = {**os.environ, "COURSE_DATA": "synthetic", "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--device", "cpu"]
    command += ["--train-size", "256", "--test-size", "200", "--repeats", "1", "--out", str(tmp_path)]
    stem = result_stem("cpu", _bench_module().device_name(torch.device("cpu")), quick=True)
    stale = tmp_path / f"{stem}.png"  # an earlier run's plot: it no longer matches the new JSON
    stale.write_bytes(b"an earlier run's plot")
    process = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if "(the runs; the rest follows)" in line:
                break
    finally:
        process.kill()  # as a time limit stops it: no chance to write anything more
        process.wait(timeout=60)
    assert "(the runs; the rest follows)" in seen[-1], "".join(seen[-30:])
    (path,) = tmp_path.glob("*.json")
    assert path.name == f"{stem}.json" and not stale.exists(), (
        "the earlier plot was removed; the new one comes last"
    )
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.partial"))
    result = json.loads(path.read_text())
    assert result["incomplete"] == "written before the ladder, the timing demo and the batch-size sweep ran"
    assert len(result["runs"]) == 1 and result["ladder"] == [] and result["sweep"] == []
    assert result["runs"][0]["fast_path"]["status"] == "ok" and result["targets"]
    text = describe_result(result).splitlines()
    assert text[1] == (
        "INCOMPLETE: written before the ladder, the timing demo and the batch-size sweep ran: "
        "what follows is what the bench finished"
    )
    assert any(line.startswith("run 1: seed pipeline ") for line in text)


def test_a_later_part_that_fails_leaves_the_runs_and_says_what_stopped_it(tmp_path, monkeypatch):
    bench = _bench_module()

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory (raised by the test in place of the ladder)")

    monkeypatch.setattr(bench, "run_ladder", out_of_memory)
    monkeypatch.setenv("COURSE_DATA", "synthetic")
    args = ["--quick", "--device", "cpu", "--train-size", "256", "--test-size", "200", "--repeats", "1"]
    with pytest.raises(RuntimeError, match="raised by the test"):
        bench.run([*args, "--out", str(tmp_path)])
    (path,) = tmp_path.glob("*.json")
    result = json.loads(path.read_text())
    assert result["incomplete"] == (
        "written before the ladder, the timing demo and the batch-size sweep ran; the ladder stopped by "
        "RuntimeError: CUDA out of memory (raised by the test in place of the ladder)"
    )
    assert result["exit_status"] == 1 and len(result["runs"]) == 1


def test_every_run_records_its_epochs_its_throughput_and_its_accuracy(cpu_run):
    _, _, result = cpu_run
    assert len(result["runs"]) == 2
    for run in result["runs"]:
        for path in PATHS:
            record = run[path]
            assert record["status"] == "ok" and len(record["epoch_seconds"]) == 2
            assert record["epoch_images"] == [256, 256]
            # throughput over the epochs after the first (the median epoch: here the only one)
            assert record["images_per_second"] == pytest.approx(256 / record["epoch_seconds"][1])
            assert record["images_per_second_mean"] == pytest.approx(record["images_per_second"])
            assert record["first_epoch_seconds"] == record["epoch_seconds"][0]
            # tested after every epoch, the last one being the run's accuracy
            assert len(record["epoch_test_accuracy"]) == 2
            assert record["test_accuracy"] == record["epoch_test_accuracy"][-1]
            assert all(0 <= a <= 1 for a in record["epoch_test_accuracy"])
        fast, seed = run["fast_path"], run["seed_pipeline"]
        assert run["ratio"] == pytest.approx(fast["images_per_second"] / seed["images_per_second"])
    assert (
        "lr 0.02 = 0.01 x 128/64" in result["runs"][0]["fast_path"]["lr"]  # a CPU's fast batch, 128
        and "warm-up" in result["runs"][0]["fast_path"]["lr"]
    )
    assert "no warm-up" in result["runs"][0]["linear_scaling_only"]["lr"]


def test_compilation_and_warm_up_are_timed_apart_from_throughput(cpu_run):
    _, stdout, result = cpu_run
    for run in result["runs"]:
        for path in PATHS:
            assert run[path]["warmup_seconds"] > 0  # measured before the first epoch, not inside it
    first = result["summary"]["first_epoch_seconds"]["fast_path"]
    assert first["runs"] == [r["fast_path"]["epoch_seconds"][0] for r in result["runs"]]
    assert "warm-up and compilation, measured apart before each run's first epoch" in stdout


def test_time_to_accuracy_comes_from_the_per_epoch_records(cpu_run):
    _, _, result = cpu_run
    for run in result["runs"]:
        fast, target = run["fast_path"], run["seed_pipeline"]["test_accuracy"]
        seconds, epoch = time_to_accuracy(fast["epoch_seconds"], fast["epoch_test_accuracy"], target)
        assert run["time_to_accuracy"] == {"target": target, "seconds": seconds, "epoch": epoch}
        if epoch is not None:
            assert seconds == pytest.approx(sum(fast["epoch_seconds"][:epoch]))


def test_the_ladder_measures_each_step_or_says_why_not(cpu_run):
    _, stdout, result = cpu_run
    ladder = result["ladder"]
    # in this order; on a CPU the fast path's smaller batch (128) comes last, after 06's batch 512
    assert [rung["key"] for rung in ladder] == [*LADDER, "compile", "cuda_graphs", "fast_batch"]
    sizes = [rung["config"]["batch_size"] for rung in ladder if rung["config"]]  # the measured rungs
    assert sizes[:3] == [64] * 3 and set(sizes[3:-1]) == {512} and sizes[-1] == 128
    measured = [rung for rung in ladder if not rung["skipped"]]
    assert [r["key"] for r in measured][:5] == LADDER[:5]  # none of these can be skipped
    for before, rung in zip(measured, measured[1:], strict=False):
        assert rung["speedup_previous"] == pytest.approx(
            rung["images_per_second"] / before["images_per_second"]
        )
    assert measured[0]["speedup_seed"] is None or measured[0]["speedup_seed"] == 1
    assert all(r["images_per_second"] > 0 and r["warmup_seconds"] > 0 for r in measured)
    assert {r["key"]: r["skipped"] for r in ladder[-3:-1]} == {
        "compile": "GPU only: on a CPU it needs a C++ compiler and a long first compile "
        "(--compile-mode tries it)",
        "cuda_graphs": "CUDA only",
    }
    assert [r["key"] for r in ladder if r["fast_path"]] == [measured[-1]["key"]]  # the top is the fast path
    assert measured[-1]["config"] == result["settings"]["fast_config"]
    for rung in ladder:
        assert rung["step"] in stdout
    # 06's live steps are put beside these rungs by key (check_against_reference)
    assert set(LADDER_STEPS.values()) <= {rung["key"] for rung in ladder}


def test_the_report_shows_every_run_and_the_targets(cpu_run):
    out, stdout, result = cpu_run
    assert load_results(out) == []  # quick runs are left out unless asked for
    assert load_results(out, device_type="cuda", quick=None) == []  # what 06 without a GPU reference sees
    (loaded,) = load_results(out, device_type="cpu", quick=True)
    text = describe_result(loaded)
    assert text in stdout and "(a quick run)" in text
    for number, run in enumerate(result["runs"], start=1):
        line = next(line for line in text.splitlines() if line.startswith(f"run {number}: "))
        for path in PATHS:  # every run's figures, never a mean alone
            assert (
                f"{run[path]['images_per_second']:,.0f} images/s, test {run[path]['test_accuracy']:.1%}"
                in line
            )
        assert f"{run['ratio']:.2f}x" in line
    assert "recipe check: batch 128, 2 epochs, against the seed pipeline's" in text
    check = result["recipe_check"]
    for path in ("fast_path", "linear_scaling_only"):
        assert check[path]["final"] == [run[path]["test_accuracy"] for run in result["runs"]]
        assert check[path]["failed_runs"] == []
    assert check["fast_path"]["reached_after_epoch"] == [
        r["time_to_accuracy"]["epoch"] for r in result["runs"]
    ]
    targets = result["targets"]
    assert targets["ratio"]["target"] == 2.0  # the CPU target
    assert targets["ratio"]["met"] == (result["runs"][0]["ratio"] >= 2.0)
    seed_learned = all(r["seed_pipeline"]["test_accuracy"] >= 0.15 for r in result["runs"])
    expected = all(r["time_to_accuracy"]["seconds"] is not None for r in result["runs"])
    assert targets["accuracy"]["met"] == (expected if seed_learned else None)  # None: not judged
    if not seed_learned:
        assert "not judged: the seed pipeline ended below 15%" in text
    verdict = "met" if targets["ratio"]["met"] else "NOT met"
    assert f"fast path >= 2x the seed pipeline ({result['runs'][0]['ratio']:.2f}x): {verdict}" in text
    assert Path(loaded["path"].replace(".json", ".png")).is_file()  # the plot the notebook displays


def test_a_diverged_run_in_a_result_is_reported_as_a_failure(cpu_run):
    """A real quick result, changed to say that run 2's fast path ended near chance while its seed learned."""
    _, _, result = cpu_run
    changed = copy.deepcopy(result)
    run = changed["runs"][1]
    run["seed_pipeline"]["test_accuracy"] = 0.52
    run["fast_path"]["test_accuracy"] = run["fast_path"]["epoch_test_accuracy"][-1] = 0.1002
    run["linear_scaling_only"]["test_accuracy"] = 0.41  # worse than the seed, but it learned: no failure
    (failure,) = bench_failures(changed)
    assert failure["where"] == "fast path run 2" and failure["path"] == "fast_path"
    text = describe_result(changed)
    assert (
        "FAILURE: fast path run 2: diverged: it ended at 10.0% test accuracy, near chance (10%), while the "
        "seed pipeline of the same run reached 52.0%" in text
    )
    run["linear_scaling_only"]["status"] = "non-finite"
    run["linear_scaling_only"]["error"] = "epoch 2: the loss was NaN"
    assert "FAILURE: no warm-up or decay run 2: non-finite: epoch 2: the loss was NaN" in describe_result(
        changed
    )
    assert bench_failures(result) == []  # the result as measured has none


def test_a_run_that_diverges_fails_the_bench_with_a_clear_line(tmp_path):
    """The real bench at a rate that no network survives: the fast paths fail, and the exit status is 1."""
    done = _bench(
        tmp_path,
        *("--train-size", "128", "--test-size", "100", "--epochs", "2", "--repeats", "1"),
        *("--fast-base-lr", "10000", "--skip", "ladder", "--skip", "demo", "--skip", "sweep"),
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = tmp_path.glob("*.json")
    result = json.loads(path.read_text())
    assert result["exit_status"] == 1
    assert {f["where"] for f in result["failures"]} == {"fast path run 1", "no warm-up or decay run 1"}
    assert result["runs"][0]["seed_pipeline"]["status"] == "ok"  # the seed's rate is untouched
    for failure in result["failures"]:
        assert f"FAILURE: {failure['where']}: {failure['why']}" in done.stdout
    assert "FAILED: 1 run(s) diverged or became non-finite (above): exit status 1" in done.stdout
    assert "also failed: no warm-up or decay run 1 (above)" in done.stdout
    assert result["targets"]["accuracy"]["met"] is False


def test_a_failing_control_is_reported_but_does_not_fail_the_bench():
    """The control diverging (its peak rate from the first step) is reported, and leaves exit status 0."""
    bench = _bench_module()
    failures = [{"where": "no warm-up or decay run 1", "path": "linear_scaling_only", "run": 1, "why": "x"}]
    assert bench.failing(failures) == []
    assert bench.failing([*failures, {"where": "fast path run 1", "path": "fast_path"}]) == [
        {"where": "fast path run 1", "path": "fast_path"}
    ]
    assert bench.failing([{"where": "ladder step 'x'", "path": "fused"}])  # a ladder step fails it too
    assert bench.failing([{"where": "ladder step 'batch 8192 ...'", "path": "batch_8192"}]) == []  # past it


def test_time_to_accuracy_counts_whole_epochs_of_training():
    seconds, accuracy = [2.0, 0.5, 0.5, 0.5], [0.12, 0.31, 0.45, 0.44]
    assert time_to_accuracy(seconds, accuracy, 0.45) == (3.0, 3)
    assert time_to_accuracy(seconds, accuracy, 0.10) == (2.0, 1)
    assert time_to_accuracy(seconds, accuracy, 0.46) == (None, None)
    with pytest.raises(ValueError, match="4 epoch times but 3 accuracies"):
        time_to_accuracy(seconds, accuracy[:3], 0.45)
    with pytest.raises(ValueError, match="target is an accuracy from 0 to 1"):
        time_to_accuracy(seconds, accuracy, 45)


@pytest.mark.parametrize(
    ("record", "seed", "words"),
    [
        ({"status": "non-finite", "error": "epoch 3: NaN"}, 0.5, "non-finite: epoch 3: NaN"),
        ({"epoch_train_loss": [2.3, float("nan")]}, None, "non-finite: the training loss of epoch 2 is nan"),
        ({"epoch_train_loss": [2.3, 9.1], "test_accuracy": 0.2}, None, "diverged: the training loss"),
        (
            {"test_accuracy": 0.1, "epoch_test_accuracy": [0.1]},
            0.45,
            "while the seed pipeline .* reached 45.0%",
        ),
        (
            {"test_accuracy": 0.1, "epoch_test_accuracy": [0.35, 0.1]},
            0.12,
            "reached 35.0% .* epoch 1, then fell",
        ),
        ({"test_accuracy": 0.1, "epoch_test_accuracy": [0.1, 0.1]}, 0.11, None),  # nothing learned: budget
        ({"test_accuracy": 0.4, "epoch_train_loss": [2.0]}, 0.5, None),  # worse than the seed is no failure
    ],
)
def test_what_counts_as_a_failed_run(record, seed, words):
    why = run_failure(record, seed)
    if words is None:
        assert why is None
    else:
        assert why is not None and re.search(words, why), why


def test_a_diverged_run_is_reported_not_averaged_away():
    """The H100 bench of 2026-11-22: one fast-path run of three ended at chance; the mean was 69.7%."""
    recorded = load_results(ROOT / "results", device_type="cuda")
    (result,) = [r for r in recorded if Path(r["path"]).name == FIRST_H100_BENCH]
    text = describe_result(result)
    assert "99.5%, 10.0%, 99.6%" in text
    assert "FAILED: fast path run 2 ended at 10.0%, near chance (10%): it diverged (another run" in text


def _large_batch(tmp_path, name: str, *options: str) -> dict:
    """scripts/large_batch.py run for real on this CPU (256 images, 2 epochs, quick): its result."""
    env = {**os.environ, "COURSE_DATA": "synthetic", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(ROOT / "scripts" / "large_batch.py"), "--device", "cpu", "--quick"]
    command += ["--train-size", "256", "--test-size", "100", "--epochs", "2", "--name", name, *options]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = tmp_path.glob(f"large-batch-{name}-cpu-*-quick.json")
    return json.loads(path.read_text())


def test_the_large_batch_script_records_every_epoch_and_every_divergence(tmp_path):
    result = _large_batch(tmp_path, "test", "--configs", "plain@64,recipe@128,adam@512", "--seeds", "0,1")
    configs = [(run["config"], run["seed"]) for run in result["runs"]]
    assert configs == [(c, seed) for c in ("plain@64", "recipe@128", "adam@512") for seed in (0, 1)]
    for run in result["runs"]:
        assert run["status"] == "ok" and len(run["epoch_test_accuracy"]) == len(run["epoch_train_loss"]) == 2
    plain, recipe, adam = (result["runs"][i] for i in (0, 2, 4))
    assert "no warm-up" in plain["schedule"] and "cosine decay" in recipe["schedule"]
    assert plain["optimizer"].startswith("SGD") and adam["optimizer"].startswith("Adam")
    assert "lr 0.002 = 0.001 x sqrt(512/128), a warm-up from 0.001" in adam["schedule"]
    # two seeds: other initial weights, so other losses
    assert result["runs"][0]["epoch_train_loss"] != result["runs"][1]["epoch_train_loss"]
    reference = result["seed_pipeline_reference"]
    assert reference["batch_size"] == 64 and reference["epochs"] == 10 and reference["test_accuracy"] > 0.4


def test_the_large_batch_script_takes_a_longer_warm_up_and_a_capped_rate(tmp_path):
    """--warmup-epochs and --max-lr (tried for Adam at batch 4,096, where the square-root rule's
    0.0057 failed): the recipes' schedules say what they were given, and the control keeps none."""
    result = _large_batch(
        tmp_path, "cap", "--configs", "adam@512,adamplain@512,recipe@128", "--warmup-epochs", "2",
        "--max-lr", "0.0015",
    )  # fmt: skip
    assert (result["settings"]["warmup_epochs"], result["settings"]["max_lr"]) == (2.0, 0.0015)
    adam, plain, recipe = (run["schedule"] for run in result["runs"])
    assert "lr 0.0015 (max_lr; the rule gives 0.002), a warm-up from 0.001 over 2 steps" in adam, adam
    assert "lr 0.002 = 0.001 x sqrt(512/128)" in plain and "no warm-up" in plain, plain
    assert "lr 0.0015 (max_lr; the rule gives 0.02), a warm-up from 0.0015 over 4 steps" in recipe, recipe


def _script(name: str):
    """scripts/<name>.py, imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_module():
    return _script("bench")


def test_the_fast_path_trains_with_sgd_up_to_its_limit_and_with_adam_past_it():
    bench = _bench_module()
    assert bench.optimizer_for(512, "auto") == "sgd" and bench.optimizer_for(513, "auto") == "adam"
    assert bench.optimizer_for(2048, "sgd") == "sgd" and bench.optimizer_for(128, "adam") == "adam"
    # a GPU's defaults, worked out here without one: batch 2,048, Adam, 15 epochs, the whole step
    # compiled with CUDA graphs (on the H100 on 2026-11-23: 806,669 images/s against the model
    # compiled in the default mode's 516,622), the ladder going on to 8,192
    gpu = bench.settings_for(torch.device("cuda"), bench.parse_args([]))
    fast = gpu["fast_config"]
    assert (fast["batch_size"], fast["optimizer"], fast["compile"]) == (2048, "adam", "reduce-overhead")
    assert fast["compile_scope"] == "step"
    # the model alone compiled, as before: CUDA graphs only up to batch 1,024 (the first H100 probe's
    # bare step at 2,048 ran faster in the default mode)
    model = bench.settings_for(torch.device("cuda"), bench.parse_args(["--compile-scope", "model"]))
    assert model["fast_config"]["compile"] == "default" and "compile_scope" not in model["fast_config"]
    small = bench.settings_for(
        torch.device("cuda"), bench.parse_args(["--compile-scope", "model", "--fast-batch", "512"])
    )
    assert small["fast_config"]["compile"] == "reduce-overhead"
    assert gpu["fast_epochs"] == 15 and gpu["ladder_batches"] == [8192]
    assert gpu["adam_recipe"]["scaling"] == "sqrt" and gpu["recipe"]["scaling"] == "linear"
    described = bench.describe_config(fast, gpu)
    assert "batch 2048, lr 0.004 (square-root scaling) after a 1-epoch warm-up, cosine decay" in described
    assert "fused Adam" in described
    cpu = bench.settings_for(torch.device("cpu"), bench.parse_args([]))
    # on a CPU nothing is compiled by default, and the step is not a LossStep
    assert cpu["fast_config"]["compile"] is None and "compile_scope" not in cpu["fast_config"]
    assert (cpu["fast_config"]["batch_size"], cpu["fast_config"]["optimizer"], cpu["fast_epochs"]) == (
        128,
        "sgd",
        30,
    )
    assert "lr 0.02 (linear scaling)" in bench.describe_config(cpu["fast_config"], cpu)


def _cuda_ladder(bench, monkeypatch, *options):
    """The ladder ``make bench`` would climb on a CUDA GPU, worked out on the CPU (nothing is run):
    the one device query it makes, whether fused SGD exists there, answered as on the H100."""
    monkeypatch.setattr(bench, "_fused_available", lambda device: (True, "fused"))
    settings = bench.settings_for(torch.device("cuda"), bench.parse_args(list(options)))
    return settings, bench.ladder_steps(torch.device("cuda"), settings)


def test_on_cuda_the_cudnn_autotuner_comes_with_the_fast_path_and_not_as_a_step_of_its_own(monkeypatch):
    # cuDNN keeps the plan it chose for a shape for the whole process, whatever the flag was then, so a
    # ladder step that only turned the flag on would reuse the runs' plans and measure nothing
    bench = _bench_module()
    settings, steps = _cuda_ladder(bench, monkeypatch)
    fast = settings["fast_config"]
    assert "cudnn_benchmark" not in fast  # off by default: not yet measured on a GPU
    keys = [step["key"] for step in steps]
    assert keys[-3:] == ["cuda_graphs", "fast_batch", "batch_8192"] and "cudnn_benchmark" not in keys
    by_key = {step["key"]: step for step in steps}
    assert by_key["fast_batch"]["config"] == fast and by_key["fast_batch"]["fast_path"]
    assert all("cudnn_benchmark" not in (step["config"] or {}) for step in steps)
    # batch 8,192 compiled as the fast path is (the whole step under CUDA graphs), at its peak rate
    top = by_key["batch_8192"]["config"]
    assert top["compile"] == fast["compile"] == "reduce-overhead" and top["compile_scope"] == "step"
    assert top["batch_size"] == 8192 and top["max_lr"] == pytest.approx(0.001 * 16**0.5)
    # another mode for the fast path: the larger batch follows it
    settings, steps = _cuda_ladder(bench, monkeypatch, "--compile-mode", "max-autotune")
    assert [s["config"]["compile"] for s in steps if s["key"] in ("fast_batch", "batch_8192")] == [
        "max-autotune"
    ] * 2
    # asked for (--cudnn-benchmark on): in the fast path's step, named there, and in the batch after it
    settings, steps = _cuda_ladder(bench, monkeypatch, "--cudnn-benchmark", "on")
    fast = settings["fast_config"]
    assert fast["cudnn_benchmark"] is True
    (fastest,) = [step for step in steps if step["fast_path"]]
    assert fastest["key"] == "fast_batch" and fastest["config"] == fast
    assert fastest["step"].endswith(", the whole step, the cuDNN autotuner (this device's fast path)")
    assert bench.describe_config(fast, settings).endswith(
        "the cuDNN autotuner (torch.backends.cudnn.benchmark)"
    )
    assert [s["key"] for s in steps if s["config"] and s["config"].get("cudnn_benchmark")] == [
        "fast_batch",
        "batch_8192",
    ]


def test_the_bench_refuses_the_cudnn_autotuner_off_cuda(tmp_path):
    done = _bench(tmp_path, "--cudnn-benchmark", "on")
    assert done.returncode != 0 and list(tmp_path.iterdir()) == []
    assert (
        "--cudnn-benchmark on: the cuDNN autotuner tunes CUDA's convolutions, and this run is on cpu; "
        "leave it out there, or run on a CUDA GPU (--device cuda)"
    ) in done.stderr


def test_each_run_sets_the_cudnn_autotuner_as_its_config_asks_and_puts_it_back(monkeypatch):
    bench = _bench_module()
    settings = bench.settings_for(torch.device("cpu"), bench.parse_args(["--quick", "--train-size", "64"]))
    images, labels = torch.rand(64, 3, 32, 32), torch.randint(0, 10, (64,))
    data = {"train_tensors": (images, labels), "train_tensors_cl": (images, labels)}
    seen = []
    real = bench.train_epoch

    def watched(*args, **kwargs):  # the real loop, noting the flag each epoch ran under
        seen.append(torch.backends.cudnn.benchmark)
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "train_epoch", watched)
    before = torch.backends.cudnn.benchmark
    for asked in (True, False):
        config = {**settings["fast_config"], "cudnn_benchmark": asked}
        pipe = bench.Pipeline(config, data, torch.device("cpu"), 2, 0, settings)
        seen.clear()
        record = bench.train_run(pipe, data, torch.device("cpu"), 2, "autotuner", test=False)
        assert record["status"] == "ok" and record["cudnn_benchmark"] is asked
        assert seen == [asked] * 3  # the warm-up and both epochs
        assert torch.backends.cudnn.benchmark is before


def test_past_the_limit_the_bench_runs_adam_in_every_path_and_on_the_ladders_top(tmp_path):
    _, result = _bench_result(
        tmp_path, "--train-size", "256", "--test-size", "200", "--epochs", "2", "--repeats", "1",
        "--fast-batch", "1024", "--skip", "demo", "--skip", "sweep",
    )  # fmt: skip
    assert result["settings"]["fast_config"]["optimizer"] == "adam"
    run = result["runs"][0]
    peak = f"lr {0.001 * 8**0.5:g} = 0.001 x sqrt(1024/128)"
    assert peak in run["fast_path"]["lr"] and "warm-up" in run["fast_path"]["lr"]
    assert peak in run["linear_scaling_only"]["lr"] and "no warm-up" in run["linear_scaling_only"]["lr"]
    assert run["fast_path"]["optimizer"] == "fused" and run["seed_pipeline"]["status"] == "ok"
    *before, top = [rung for rung in result["ladder"] if not rung["skipped"]]  # the measured rungs
    assert top["key"] == "fast_batch" and top["fast_path"] and top["config"]["optimizer"] == "adam"
    assert "batch 1024 with Adam's recipe" in top["step"] and "fused Adam" in top["description"]
    # the rungs before it stay SGD's, 06's steps
    assert {r["config"]["optimizer"] for r in before} == {"sgd"}


@pytest.mark.parametrize("seeds", ["x", ",", "0,-1"])
def test_the_large_batch_script_refuses_seeds_it_cannot_use(seeds):
    command = [sys.executable, str(ROOT / "scripts" / "large_batch.py"), "--seeds", seeds]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert "--seeds takes whole numbers separated by commas, e.g. 0,1,2" in done.stderr


def _judge(seed_accuracy: float, reached: bool, failures: list[dict]) -> dict:
    bench = _bench_module()
    run = {
        "seed_pipeline": {"test_accuracy": seed_accuracy},
        "fast_path": {"images_per_second": 1000.0},
        "ratio": 2.5,
        "time_to_accuracy": {"seconds": 1.0 if reached else None},
    }
    return bench.judge_targets(torch.device("cpu"), [run], failures)["accuracy"]


def test_the_accuracy_target_is_judged_only_where_the_seed_pipeline_learned():
    assert _judge(0.30, True, [])["met"] is True
    assert _judge(0.30, False, [])["met"] is False
    unjudged = _judge(0.10, True, [])  # reaching chance proves nothing
    assert unjudged["met"] is None and "not judged" in unjudged["text"]
    assert _judge(0.10, True, [{"path": "fast_path", "why": "NaN"}])["met"] is False  # a failure still fails
    from helpers.timing import _targets  # the report's verdict line

    (line,) = _targets({"targets": {"judged_on": "every run", "accuracy": unjudged}})
    assert line.endswith("not judged: the seed pipeline ended below 15% in a run: not judged"), line


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


def test_the_recorded_h100_sweep_is_bound_by_launches_at_the_seed_batch():
    # the claim 06 makes from the first H100 run of make bench, read from the committed file
    result = json.loads((ROOT / "results" / FIRST_H100_BENCH).read_text())
    gpu = [r for r in result["sweep"] if r["device"] != "cpu" and r["model"] == "Tudui"]
    fit = fit_step_time([r["batch_size"] for r in gpu], [r["seconds_per_step_median"] for r in gpu])
    assert fit.fixed_share(64) > 0.8 and fit.fixed_share(512) > 0.5 and fit.fixed_share(8192) < 0.2


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


def ladder_rates(result):
    """A bench result's ladder as {step: images/s}, the steps it skipped left out."""
    return {rung["key"]: rung["images_per_second"] for rung in result["ladder"] if not rung["skipped"]}


def test_the_texts_quote_the_committed_cpu_bench():
    # 06-19a and the README quote make bench's CPU run in results/: after a new run, update them
    result = json.loads((ROOT / "results" / "bench-cpu-amd-epyc.json").read_text())
    ladder = ladder_rates(result)
    notebook = json.loads((ROOT / "notebooks" / "06_performance.ipynb").read_text())
    text = "".join(next(c for c in notebook["cells"] if c.get("id") == "06-19a")["source"])
    assert f"{ladder['workers']:,.0f} images/s against {ladder['seed']:,.0f} without" in " ".join(
        text.split()
    )
    readme = (ROOT / "README.md").read_text()
    first = result["runs"][0]
    row = (
        f"| 1 | {first['seed_pipeline']['images_per_second']:,.0f} images/s, "
        f"{first['seed_pipeline']['test_accuracy']:.1%} | {first['fast_path']['images_per_second']:,.0f} "
        f"images/s, {first['fast_path']['test_accuracy']:.1%} | "
        f"{first['linear_scaling_only']['images_per_second']:,.0f} images/s, "
        f"{first['linear_scaling_only']['test_accuracy']:.1%} | {first['ratio']:.2f}x |"
    )
    assert row in readme
    assert f"fast path at batch {result['settings']['fast_config']['batch_size']}" in readme


def test_the_readme_compares_the_cpu_bench_with_its_earlier_run_as_git_has_it():
    # the README sets the committed CPU bench beside the one committed in c715ff5 (2026-11-22): the same
    # accuracies and losses epoch for epoch, each run's speeds and ratios, and how far they moved
    earlier_commit = "c715ff5"
    shown = subprocess.run(
        ["git", "show", f"{earlier_commit}:results/bench-cpu-amd-epyc.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if shown.returncode != 0:
        pytest.skip(f"git has no commit {earlier_commit} here (a shallow clone?): {shown.stderr.strip()}")
    earlier = json.loads(shown.stdout)
    now = json.loads((ROOT / "results" / "bench-cpu-amd-epyc.json").read_text())
    paths = ("seed_pipeline", "fast_path", "linear_scaling_only")
    assert len(earlier["runs"]) == len(now["runs"]) == 3
    for before, after in zip(earlier["runs"], now["runs"], strict=True):
        for path in paths:
            assert before[path]["epoch_test_accuracy"] == after[path]["epoch_test_accuracy"]
            assert before[path]["epoch_train_loss"] == after[path]["epoch_train_loss"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"the file as of commit `{earlier_commit}`" in readme
    assert earlier["date"][:10] == "2026-11-22" and now["date"][:10] == "2026-11-27"

    def figures(result, path):
        return [f"{run[path]['images_per_second']:,.0f}" for run in result["runs"]]

    def listed(values):
        return f"{values[0]}, {values[1]} and {values[2]}"

    assert f"Then: the seed pipeline {listed(figures(earlier, 'seed_pipeline'))} images/s" in readme
    assert f"the fast path {listed(figures(earlier, 'fast_path'))}" in readme
    assert f"linear scaling only {listed(figures(earlier, 'linear_scaling_only'))};" in readme
    ratios = [[f"{run['ratio']:.2f}x" for run in result["runs"]] for result in (now, earlier)]
    assert f"{listed(ratios[1])}; the seed's accuracy reached after" in readme
    assert f"({listed(ratios[0])} against {listed(ratios[1])})" in readme
    reached = [f"{run['time_to_accuracy']['seconds']:.1f}" for run in earlier["runs"]]
    assert f"reached after {listed(reached)} s of training; {earlier['wall_seconds']:.0f} s in all" in readme
    speed_falls = [
        1 - after[path]["images_per_second"] / before[path]["images_per_second"]
        for before, after in zip(earlier["runs"], now["runs"], strict=True)
        for path in paths
    ]
    ratio_falls = [
        1 - after["ratio"] / before["ratio"]
        for before, after in zip(earlier["runs"], now["runs"], strict=True)
    ]
    assert min(speed_falls) > 0, "the README says every speed was lower"
    assert f"by {min(speed_falls):.0%} to {max(speed_falls):.0%} run for run" in readme
    assert min(ratio_falls) > 0
    assert f"moved less: by {min(ratio_falls):.0%} to {max(ratio_falls):.0%} run for run" in readme
    seed = [run["seed_pipeline"]["images_per_second"] for run in now["runs"]]
    assert seed == sorted(seed, reverse=True), "the README says the speeds fell from run to run"
    for result, date in ((now, "2026-11-27"), (earlier, "2026-11-22")):
        ladder = ladder_rates(result)
        worker = f"{ladder['workers']:,.0f} ({ladder['workers'] / ladder['seed']:.2f}x)"
        assert worker in readme, (date, worker)
    # 06-19a quotes the earlier ladder's worker beside the committed one (the committed one: the test above)
    notebook = json.loads((ROOT / "notebooks" / "06_performance.ipynb").read_text())
    text = " ".join("".join(next(c for c in notebook["cells"] if c.get("id") == "06-19a")["source"]).split())
    ladder = ladder_rates(earlier)
    quoted = f"but {ladder['workers']:,.0f} against {ladder['seed']:,.0f} in the same bench five days before"
    assert quoted in text


def test_the_texts_quote_the_committed_adam_runs():
    # the README, LargeBatchSchedule's docstring and the bench's choice of Adam at batch 2,048 rest on
    # results/large-batch-adam-*.json: after a new run, update them
    result = json.loads((ROOT / "results" / "large-batch-adam-cpu-amd-epyc.json").read_text())
    target = result["seed_pipeline_reference"]["test_accuracy"]
    runs = {(run["config"], run["seed"]): run for run in result["runs"]}
    assert result["settings"]["epochs"] == 15 and sorted(runs) == [
        (config, seed) for config in ("adam@2048", "adam@8192") for seed in (0, 1, 2)
    ]

    def first_reached(run):
        return next((e for e, a in enumerate(run["epoch_test_accuracy"], 1) if a >= target), None)

    at_2048 = [runs["adam@2048", seed] for seed in (0, 1, 2)]
    at_8192 = [runs["adam@8192", seed] for seed in (0, 1, 2)]
    assert [first_reached(run) for run in at_2048] == [6, 6, 6]
    assert all(run["status"] == "ok" and first_reached(run) is None for run in at_8192)

    def listed(values, form="{:.1%}"):
        shown = [form.format(v) for v in values]
        return ", ".join(shown[:-1]) + f" and {shown[-1]}"

    reached = listed([run["epoch_test_accuracy"][5] for run in at_2048])  # after epoch 6
    ended_2048 = listed([run["epoch_test_accuracy"][-1] for run in at_2048])
    ended_8192 = listed([run["epoch_test_accuracy"][-1] for run in at_8192])
    peaks = listed([max(run["epoch_train_loss"]) for run in at_8192], "{:.1f}")
    assert max(max(run["epoch_test_accuracy"][:6]) for run in at_8192) < 0.14
    readme = " ".join((ROOT / "README.md").read_text().split())
    docstring = " ".join((ROOT / "helpers" / "fastpath.py").read_text().split())
    for text in (readme, docstring):
        assert f"52.2% after epoch 6 ({reached}) and ended at {ended_2048}" in text
        assert f"rose to {peaks}" in text and f"ended at {ended_8192}" in text
        assert "below 14% for 6 epochs" in text


def test_the_readme_quotes_the_committed_adam_control():
    result = json.loads((ROOT / "results" / "large-batch-adam-control-cpu-amd-epyc.json").read_text())
    target = result["seed_pipeline_reference"]["test_accuracy"]
    runs = [run for run in result["runs"] if run["config"] == "adamplain@2048"]
    assert [run["seed"] for run in runs] == [0, 1, 2] and all(run["status"] == "ok" for run in runs)
    assert all("no warm-up, then constant" in run["schedule"] for run in runs)
    accuracy = [run["epoch_test_accuracy"] for run in runs]
    loss = [run["epoch_train_loss"] for run in runs]
    reached = [next((e for e, a in enumerate(acc, 1) if a >= target), None) for acc in accuracy]
    assert reached == [None, None, 10]
    readme = " ".join((ROOT / "README.md").read_text().split())
    quoted = (
        f"from {accuracy[0][6]:.1%} to {accuracy[0][7]:.1%} in epoch 8, "
        f"training loss up to {max(loss[0]):.1f}; "
        f"from {accuracy[1][10]:.1%} to {accuracy[1][11]:.1%} in epoch 12, loss up to {max(loss[1]):.1f}), "
        f"ending at {accuracy[0][-1]:.1%} and {accuracy[1][-1]:.1%}; the third reached the seed pipeline's "
        f"accuracy after epoch 10 and ended at {accuracy[2][-1]:.1%}"
    )
    assert quoted in readme


def test_the_fastpath_probe_records_each_variant_it_runs(tmp_path):
    """scripts/fastpath_probe.py (run once on the H100, results/gpu/.../fastpath-probe.json), here on
    the CPU with a few images and the one variant that does not compile: it runs and records."""
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "fastpath_probe.py"),
            "--train-size",
            "512",
            "--epochs",
            "2",
            "--only",
            "not compiled",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "COURSE_DATA": "synthetic"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["train_images"] == 512 and list(record["variants"]) == ["not compiled"]
    variant = record["variants"]["not compiled"]
    assert variant["compile"] is None and variant["batch"] == 2048
    assert len(variant["epoch_images_per_second"]) == 2 and variant["images_per_second"] > 0
    assert "not compiled" in done.stdout and "profile" not in record  # the profile is a GPU's


def test_the_probe_tests_after_every_epoch_as_the_bench_does_and_names_its_variants(tmp_path):
    out = tmp_path / "probe.json"
    command = [sys.executable, str(ROOT / "scripts" / "fastpath_probe.py"), "--train-size", "256"]
    command += ["--test-size", "100", "--epochs", "1", "--out", str(out)]
    env = {**os.environ, "COURSE_DATA": "synthetic"}
    tested, wide = (
        "as the bench: tested after every epoch",
        "first convolution on 8 input channels (zeros added)",
    )
    between, after = (
        "the bench's own code, tested between epochs",
        "the bench's own code, tested after the run",
    )
    done = subprocess.run(
        [*command, "--only", tested, "--only", wide, "--only", between, "--only", after],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    variants = json.loads(out.read_text())["variants"]
    assert variants[tested]["tested_after_every_epoch"] and len(variants[tested]["epoch_test_accuracy"]) == 3
    assert variants[wide]["input_channels"] == 8 and "epoch_test_accuracy" not in variants[wide]
    assert variants[wide]["images_per_second"] > 0 and variants[wide]["added_weights_max"] == 0.0
    # the bench's own Pipeline and train_run, its fast path for this device (here the CPU's), both ways
    assert variants[between]["bench_code"] and not variants[between]["tested_after_the_run"]
    assert variants[after]["bench_code"] and variants[after]["tested_after_the_run"]
    assert (
        variants[between]["config"] == variants[after]["config"]
        and variants[after]["config"]["batch_size"] == 128
    )
    assert (
        len(variants[after]["epoch_test_accuracy"]) == 3
        and len(variants[after]["epoch_images_per_second"]) == 1
    )
    assert variants[after]["epoch_test_accuracy"] == variants[between]["epoch_test_accuracy"]
    wrong = subprocess.run(
        [*command, "--only", "batch 4069"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert wrong.returncode == 2 and "no variant named 'batch 4069'" in wrong.stderr
    assert "batch 4096" in wrong.stderr  # the names it has


def test_the_probe_runs_a_variant_and_profiles_under_the_cudnn_autotuner(tmp_path):
    """The probe's new variants and profiles (for the next GPU session) set the autotuner as they
    say, and a profile records its kernels; here on the CPU, where nothing is compiled for it."""
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fastpath_probe.py"), "--train-size", "512", "--epochs", "1",
         "--only", "not compiled", "--profile", "step-autotuner", "--profile", "loop", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "COURSE_DATA": "synthetic"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["variants"]["not compiled"]["cudnn_benchmark"] is False
    assert list(record["profiles"]) == ["step-autotuner", "loop"] and "profile" not in record
    tuned, loop = record["profiles"]["step-autotuner"], record["profiles"]["loop"]
    assert (tuned["whole_step"], tuned["cudnn_benchmark"]) == (True, True)
    assert (loop["whole_step"], loop["cudnn_benchmark"]) == (False, False)
    # the autotuner's profile in a fresh process (cuDNN keeps a shape's plan for the whole process)
    assert tuned["own_process"] is True and "own_process" not in loop
    for profile in (tuned, loop):
        assert profile["compiled"] is False and profile["steps"] == 1 and profile["wall_ms_per_step"] > 0
        assert profile["top_kernels"] == []  # a CPU runs no device kernels
    assert "profile 'step-autotuner':" in done.stdout and "profile 'loop':" in done.stdout
    # the probe's variant of the whole step under CUDA graphs with the autotuner, at 2,048 images
    probe = _script("fastpath_probe")
    change = probe.VARIANTS["whole step, CUDA graphs, cuDNN autotuner"]
    assert change == {"whole_step": True, "compile": "reduce-overhead", "cudnn_benchmark": True}
    images, labels = torch.rand(256, 3, 32, 32), torch.randint(0, 10, (256,))
    uncompiled = {**change, "compile": None}  # its loop and setting, without compiling on the CPU
    before = torch.backends.cudnn.benchmark
    variant = probe.run_variant("tuned", uncompiled, images, labels, torch.device("cpu"), 1)
    assert variant["cudnn_benchmark"] is True and variant["whole_step"] and variant["images_per_second"] > 0
    assert torch.backends.cudnn.benchmark is before
    assert len(probe.PROFILES) == 3


def test_the_readme_says_what_the_probes_next_set_runs():
    """The README's words for --set next, checked against the set itself."""
    probe = _script("fastpath_probe")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "`--set next` runs what the next GPU session needs (below), in this order: the profile of the whole "
        "step; the whole step under CUDA graphs at 2,048 and 4,096, the same run's baseline; the autotuner's "
        "process (its profile, then the autotuner at 2,048, 4,096 and 8,192 and in NCHW); NCHW, float32, "
        "both; `max-autotune` last, since its compile is the slowest."
    ) in readme
    chosen = {name: probe.VARIANTS[name] for name in probe.SETS["next"]}
    graphs = {
        n: c for n, c in chosen.items() if c.get("compile") == "reduce-overhead" and c.get("whole_step")
    }
    assert len(graphs) == len(chosen) - 1 and chosen[list(chosen)[-1]]["compile"] == "max-autotune"
    plain = [
        c
        for c in graphs.values()
        if set(c) == {"whole_step", "compile"} | ({"batch"} if "batch" in c else set())
    ]
    assert sorted(c.get("batch", 2048) for c in plain) == [2048, 4096]
    tuned = [c for c in graphs.values() if c.get("cudnn_benchmark")]
    assert sorted(c.get("batch", 2048) for c in tuned if "layout" not in c) == [2048, 4096, 8192]
    assert [c.get("layout") for c in tuned if "layout" in c] == ["nchw"]
    others = [(c.get("layout"), c.get("precision")) for c in graphs.values() if c not in plain + tuned]
    assert sorted(others, key=str) == sorted(
        [("nchw", None), (None, "float32"), ("nchw", "float32")], key=str
    )
    assert probe.SET_PROFILES["next"] == ("step", "step-autotuner")
    assert all(probe.PROFILES[name]["whole_step"] for name in probe.SET_PROFILES["next"])


def test_the_probes_next_set_runs_the_autotuners_parts_together_in_one_fresh_process(tmp_path):
    """--set next (the next GPU session's probe): its variants and the two profiles of the whole step;
    the autotuner's parts all in one fresh process (one start, not six), the rest in the probe's, the
    layouts and precisions as named, max-autotune last, each part's seconds recorded. On the CPU,
    uncompiled (--no-compile), so only the plumbing is tested here."""
    probe = _script("fastpath_probe")
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fastpath_probe.py"), "--set", "next", "--no-compile",
         "--train-size", "512", "--epochs", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "COURSE_DATA": "synthetic"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["set"] == "next" and record["compiled"] is False
    assert list(record["variants"]) == list(probe.SETS["next"])  # in the order of VARIANTS, all of them
    assert list(record["profiles"]) == ["step", "step-autotuner"]
    parts = {**record["variants"], **{f"profile {k}": v for k, v in record["profiles"].items()}}
    tuned = {name for name, part in parts.items() if part.get("cudnn_benchmark")}
    assert tuned == {
        "whole step, CUDA graphs, cuDNN autotuner",
        "whole step, CUDA graphs, cuDNN autotuner, batch 4096",
        "whole step, CUDA graphs, cuDNN autotuner, batch 8192",
        "whole step, CUDA graphs, cuDNN autotuner, NCHW",
        "profile step-autotuner",
    }
    processes = {parts[name]["process"] for name in tuned}
    assert len(processes) == 1 and record["process"] not in processes  # one fresh process for them all
    assert all(parts[name]["own_process"] for name in tuned)
    assert not any("own_process" in part for name, part in parts.items() if name not in tuned)
    for name, variant in record["variants"].items():
        assert variant["layout"] == ("nchw" if "NCHW" in name else "channels_last"), name
        assert variant["precision"] == "float32"  # on a CPU; bf16 autocast on a GPU unless "float32"
        assert variant["compile"] is None and variant["images_per_second"] > 0 and variant["seconds"] > 0
        assert variant["batch"] == (4096 if "4096" in name else 8192 if "8192" in name else 2048)
    assert all(profile["seconds"] > 0 for profile in record["profiles"].values())
    mine = sum(part["seconds"] for part in parts.values() if "own_process" not in part)
    assert record["seconds"] >= mine
    assert 0 <= record["setup_seconds"] <= record["seconds"] and record["own_process_seconds"] > 0
    # the order: the whole step's baselines, the autotuner's process, NCHW and float32, max-autotune last
    # (its compile is the slowest and not yet timed)
    printed = done.stdout

    def at(name):
        return printed.index(f"{name} ")

    baselines = [at(n) for n in probe.SETS["next"][:2]]
    autotuner = [at(n) for n in sorted(tuned - {"profile step-autotuner"})]
    after = [at(f"whole step, CUDA graphs, {n}") for n in ("NCHW", "float32", "float32, NCHW")]
    assert max(baselines) < min(autotuner) and max(autotuner) < min(after)
    assert max(after) < at("whole step compiled, mode=max-autotune")
    assert f"the probe took {record['seconds']:.0f} s" in printed


def test_the_probe_keeps_what_the_autotuners_process_finished_and_fails_the_rest():
    """The autotuner's process saves after each part: what it finished is kept when it fails or is
    stopped, the parts it did not finish are recorded as failed with its exit status."""
    probe = _script("fastpath_probe")
    child = {"process": 4242, "variants": {"a": {"images_per_second": 5}}, "profiles": {}}
    found = probe.collect(child, ["a", "b"], ["step-autotuner"], "timeout")
    assert found["variants"]["a"] == {"images_per_second": 5, "own_process": True, "process": 4242}
    assert found["variants"]["b"] == {
        "status": "failed",
        "exit_status": "timeout",
        "own_process": True,
        "process": 4242,
    }
    assert found["profiles"]["step-autotuner"]["status"] == "failed"
    nothing = probe.collect({}, ["a"], [], 1)  # the process wrote nothing
    assert nothing == {
        "variants": {"a": {"status": "failed", "exit_status": 1, "own_process": True}},
        "profiles": {},
    }


def test_a_profile_names_the_operator_and_shapes_behind_each_kernel(tmp_path):
    """kernel_callers: each kernel under the aten operator the profiler lists it under (the innermost
    one running when it was launched), with its input shapes, which say which convolution a cuDNN
    kernel ran; kernels under anything else are left out. The events are built by hand in the shape
    torch's profiler gives them (its _parse_kineto_results), since a CPU launches no device kernels;
    a real CPU profile is read too."""
    from types import SimpleNamespace as Event

    probe = _script("fastpath_probe")

    def event(name, shapes=(), kernels=()):
        return Event(name=name, input_shapes=list(shapes), kernels=[Event(name=k) for k in kernels])

    conv1 = [[2048, 3, 32, 32], [32, 3, 5, 5], []]
    conv2 = [[2048, 32, 16, 16], [32, 32, 5, 5], []]
    events = [
        event("CompiledFunction"),
        event("aten::convolution", conv1),  # launches nothing itself: its innermost operator does
        event("aten::cudnn_convolution", conv1, ["generic"]),
        event("aten::cudnn_convolution", conv2, ["generic", "generic"]),
        event("aten::convolution_backward", [[2048, 32, 32, 32], *conv1[:2]], ["wgrad"]),
        event("aten::add_", [[], []], ["vectorized_add"]),  # 0-d tensors: no shapes to show
        event("triton_poi_fused_max_pool2d_0", (), ["triton_poi_fused_max_pool2d_0"]),  # a compiled graph's
        event("cudaLaunchKernel"),  # the runtime's call: the profiler lists no kernel under it
    ]
    assert probe.kernel_callers(events, steps=2) == {
        "generic": [
            "aten::cudnn_convolution [[2048, 32, 16, 16], [32, 32, 5, 5]]: 1 a step",
            "aten::cudnn_convolution [[2048, 3, 32, 32], [32, 3, 5, 5]]: 0.5 a step",
        ],
        "wgrad": [
            "aten::convolution_backward [[2048, 32, 32, 32], [2048, 3, 32, 32], [32, 3, 5, 5]]: 0.5 a step"
        ],
        "vectorized_add": ["aten::add_ []: 0.5 a step"],
    }
    # a real profile's events, read the same way (a CPU's list no device kernels: nothing to name)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.nn.functional.conv2d(torch.rand(2, 3, 8, 8), torch.rand(4, 3, 5, 5))
    convs = [e for e in prof.events() if e.name == "aten::conv2d"]
    assert convs and convs[0].input_shapes[:2] == [[2, 3, 8, 8], [4, 3, 5, 5]]
    assert probe.kernel_callers(prof.events()) == {}
    # a record cut short reads as nothing, not as an error
    cut = tmp_path / "cut.json"
    cut.write_text('{"variants": {"a": {"images_per')
    assert probe.read_record(cut) == {} and probe.read_record(tmp_path / "absent.json") == {}


def test_the_probe_records_a_fresh_process_that_fails_and_says_so_in_its_exit_status(tmp_path):
    """A fresh process of the autotuner's stopped by --child-timeout: recorded as failed, the next
    part still run, the exit status 1; --same-process runs the same profile in the probe itself."""
    out = tmp_path / "probe.json"
    command = [sys.executable, str(ROOT / "scripts" / "fastpath_probe.py"), "--train-size", "256"]
    command += ["--epochs", "1", "--only", "not compiled", "--profile", "step-autotuner", "--out", str(out)]
    env = {**os.environ, "COURSE_DATA": "synthetic"}
    done = subprocess.run(
        [*command, "--child-timeout", "0.01"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["profiles"]["step-autotuner"] == {
        "own_process": True,
        "status": "failed",
        "exit_status": "timeout",
    }
    assert record["variants"]["not compiled"]["images_per_second"] > 0  # the probe went on
    assert "FAILED: step-autotuner: its process ended with status timeout" in done.stdout
    assert "FAILED in their own processes: step-autotuner" in done.stdout
    same = subprocess.run(
        [*command, "--same-process"], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert same.returncode == 0, same.stdout + same.stderr
    record = json.loads(out.read_text())
    assert list(record["variants"]) == ["not compiled"]  # --same-process keeps the variants asked for
    profile = record["profiles"]["step-autotuner"]
    assert profile["cudnn_benchmark"] is True and "own_process" not in profile


def test_the_recorded_fastpath_probe_counts_each_kernel_once():
    probe = json.loads((ROOT / "results/gpu/nvidia-h100-80gb-hbm3/fastpath-probe.json").read_text())
    log = (ROOT / "results/gpu/nvidia-h100-80gb-hbm3/fastpath-probe.log").read_text()
    total_ms = float(re.search(r"Self CUDA time total: ([\d.]+)ms", log).group(1))
    profile = probe["profile"]
    assert profile["gpu_kernel_ms_per_step"] == round(total_ms / profile["steps"], 3)
    assert profile["gpu_busy_fraction"] < 1  # kernels cannot run longer than the wall clock


@pytest.mark.parametrize(
    ("option", "key", "value", "words", "rung"),
    [
        # the model, the loss and the count of right answers in one LossStep (compiled as one graph
        # where the fast path compiles; here on the CPU, not compiled)
        ("--compile-scope step", "compile_scope", "step",
         "not compiled (model, loss and count in one LossStep)", "the whole step"),
        # the first convolution over 8 input channels, zeros added (helpers.fastpath.widen_first_conv)
        ("--input-channels 8", "input_channels", 8, "first convolution on 8 input channels (zeros added)",
         "first convolution on 8 channels"),
    ],
)  # fmt: skip
def test_the_bench_takes_the_fast_paths_candidates_and_says_so(tmp_path, option, key, value, words, rung):
    # options for the next GPU run, never benched on a GPU yet: on the CPU the runs train, the
    # ladder's top rung is this fast path (and only it has the option), and the words say so
    printed, result = _bench_result(
        tmp_path, "--train-size", "256", "--test-size", "200", "--epochs", "2", "--repeats", "1",
        *option.split(), "--skip", "demo", "--skip", "sweep",
    )  # fmt: skip
    fast = result["settings"]["fast_config"]
    assert fast[key] == value and (key != "compile_scope" or fast["compile"] is None)
    assert result["runs"][0]["fast_path"]["status"] == "ok" and words in printed
    if key == "input_channels":  # the widened network stayed the same network in both of its runs
        assert result["runs"][0]["fast_path"]["added_weights_max"] == 0.0
        assert result["runs"][0]["linear_scaling_only"]["added_weights_max"] == 0.0
        assert "added_weights_max" not in result["runs"][0]["seed_pipeline"]
    *before, top = [r for r in result["ladder"] if not r["skipped"]]  # the measured rungs
    assert top["fast_path"] and top["config"][key] == value and rung in top["step"]
    assert all(key not in r["config"] for r in before)


def test_the_loader_probe_times_each_setting_with_and_without_the_step(tmp_path):
    """scripts/loader_probe.py (for the next GPU run: how fast the notebooks' DataLoaders can feed it),
    here on the CPU with a few images: the settings it names for 16 cores, and three of them run."""
    probe = _script("loader_probe")
    names = list(probe.settings(16))  # the H100 machine's cores
    assert names[:6] == ["no workers", "1 worker", "2 workers", "4 workers", "8 workers", "15 workers"]
    assert "15 workers, persistent, pinned" in names and "Tudui's step, 4 workers" in names
    assert all("4 worker" not in name for name in probe.settings(2))  # 2 cores: 1 worker at most
    out = tmp_path / "loaders.json"
    here = list(probe.settings(probe._cores()))  # the names depend on this machine's cores
    persistent = next(
        n for n in here if n.endswith("workers, persistent") or n.endswith("worker, persistent")
    )
    step = next(n for n in here if n.startswith("Tudui's step") and n.endswith("persistent, pinned"))
    ceiling = "Tudui's step, the data on the device (the ceiling)"
    command = [
        sys.executable,
        str(ROOT / "scripts" / "loader_probe.py"),
        "--train-size",
        "256",
        "--epochs",
        "2",
    ]
    command += ["--only", persistent, "--only", step, "--only", ceiling, "--out", str(out)]
    env = {**os.environ, "COURSE_DATA": "synthetic", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    settings = json.loads(out.read_text())["settings"]
    assert list(settings) == [persistent, step, ceiling]
    assert settings[persistent]["persistent"] and not settings[persistent]["training_step"]
    assert settings[step]["training_step"] and not settings[step]["pin_memory"]  # pinning is CUDA's only
    assert settings[ceiling]["data_on_device"] and settings[ceiling]["workers"] is None
    assert all(len(s["epoch_images_per_second"]) == 2 for s in settings.values())
    wrong = subprocess.run(
        [*command[:2], "--only", "3 workers"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert wrong.returncode == 2 and "no setting named '3 workers'" in wrong.stderr


def test_testing_after_the_run_gives_the_same_accuracies_with_the_epochs_back_to_back(tmp_path):
    # --test-after-the-run (for the next GPU run, where the bench timed 517,000 images/s and the probe,
    # which does not test between epochs, 635,000): each epoch's weights copied and tested at the end
    # must give exactly the accuracies that testing between the epochs gives
    options = ["--train-size", "256", "--test-size", "200", "--epochs", "2", "--repeats", "1"]
    options += ["--skip", "ladder", "--skip", "demo", "--skip", "sweep"]
    _, between = _bench_result(tmp_path / "between", *options)
    printed, after = _bench_result(tmp_path / "after", *options, "--test-after-the-run")
    assert after["settings"]["test_after_the_run"] and not between["settings"]["test_after_the_run"]
    assert "tested after the run" in after["settings"]["timed"]
    assert "(its weights, tested after the run)" in printed
    for path in PATHS:
        tested, deferred = between["runs"][0][path], after["runs"][0][path]
        assert deferred["tested_after_the_run"] and "tested_after_the_run" not in tested
        assert len(deferred["epoch_test_accuracy"]) == len(deferred["epoch_seconds"]) > 1, path
        assert deferred["epoch_test_accuracy"] == tested["epoch_test_accuracy"], path
        assert deferred["epoch_train_loss"] == tested["epoch_train_loss"], path
    assert after["runs"][0]["time_to_accuracy"]["target"] == between["runs"][0]["time_to_accuracy"]["target"]


def test_the_readme_quotes_the_batch_4096_trials_from_their_files():
    """Adam at batch 4,096 on the CPU (results/large-batch-adam4096-*.json): each quoted figure."""
    readme = " ".join((ROOT / "README.md").read_text().split())

    def runs(name):
        result = json.loads((ROOT / "results" / f"large-batch-adam4096-{name}-cpu-amd-epyc.json").read_text())
        assert result["device"]["type"] == "cpu" and result["settings"]["train_size"] == 50_000
        return result["settings"], result["runs"], result["seed_pipeline_reference"]["test_accuracy"]

    settings, (rule,), target = runs("w1")
    # made before --max-lr existed: no cap (the schedule below says the rule's rate)
    assert (settings["epochs"], settings["warmup_epochs"], settings.get("max_lr")) == (15, 1.0, None)
    assert "lr 0.00565685 = 0.001 x sqrt(4096/128)" in rule["schedule"]
    loss, accuracy = rule["epoch_train_loss"], rule["epoch_test_accuracy"]
    assert max(loss[:3]) == loss[2] and f"loss rose from {loss[0]:.2f} to {loss[2]:.2f} by epoch 3" in readme
    assert f"and the run ended at {accuracy[-1]:.1%}; - **the same with a three-epoch" in readme
    settings, (longer,), _ = runs("w3")
    assert (settings["epochs"], settings["warmup_epochs"]) == (15, 3.0)
    loss = longer["epoch_train_loss"]
    assert max(loss) == loss[4] and loss[2] < loss[3] < loss[4]
    assert f"the loss rose to {loss[3]:.2f} and {loss[4]:.2f} in epochs 4 and 5" in readme
    warmup = int(re.search(r"a warm-up from [\d.]+ over (\d+) steps", longer["schedule"]).group(1))
    assert warmup == 3 * 13 and "just after the warm-up reached the peak" in readme  # 13 steps an epoch
    assert f"and the run ended at {longer['epoch_test_accuracy'][-1]:.1%}. The warm-up" in readme
    settings, (short,), _ = runs("cap004")
    assert (settings["epochs"], settings["max_lr"]) == (15, 0.004) and "lr 0.004 (max_lr" in short["schedule"]
    assert (
        max(short["epoch_test_accuracy"]) < target
        and f"15 epochs: {short['epoch_test_accuracy'][-1]:.1%}" in readme
    )
    assert f"below the seed's {target:.1%}" in readme
    steps = re.search(
        r"a warm-up from [\d.]+ over (\d+) steps, then a cosine decay to 0 over (\d+) steps",
        short["schedule"],
    )
    assert f"{int(steps.group(1)) + int(steps.group(2))} steps are too few" in readme
    first, (seed0,), _ = runs("cap004-30ep")
    second, (seed1, seed2), _ = runs("cap004-30ep-seeds12")
    assert first["epochs"] == second["epochs"] == 30 and first["max_lr"] == second["max_lr"] == 0.004
    trio = [seed0, seed1, seed2]
    assert [run["seed"] for run in trio] == [0, 1, 2] and all(run["status"] == "ok" for run in trio)
    reached = [next(e for e, a in enumerate(run["epoch_test_accuracy"], 1) if a >= target) for run in trio]
    ended = ", ".join(f"{run['epoch_test_accuracy'][-1]:.1%}" for run in trio[:2])
    assert (
        f"after epochs {reached[0]}, {reached[1]} and {reached[2]} and ended at {ended} and "
        f"{seed2['epoch_test_accuracy'][-1]:.1%}" in readme
    )
    l0, l2 = seed0["epoch_train_loss"], seed2["epoch_train_loss"]
    assert l0[3] > l0[2] and l2[1] > l2[0]
    rises = f"seed 0: from {l0[2]:.2f} to {l0[3]:.2f} in epoch 4; seed 2: from {l2[0]:.2f} to {l2[1]:.2f}"
    assert f"{rises} in epoch 2" in readme
    # time to accuracy on the GPU at the probe's batch-4,096 rate, the rate quoted from its file
    probe = json.loads(
        (ROOT / "results/gpu/nvidia-h100-80gb-hbm3/fastpath-probe-2026-11-23.json").read_text()
    )
    rate = probe["variants"]["whole step compiled, mode=reduce-overhead, batch 4096"]["images_per_second"]
    seconds = max(reached) * 50_000 / rate
    assert (
        f"near {seconds:.1f} s ({max(reached)} epochs of 50,000 images at {rate:,} images/s, to the CPU's "
        f"{target:.1%})" in readme
    )
    bench = json.loads(
        (ROOT / "results/bench-cuda-nvidia-h100-80gb-hbm3-2026-11-23-whole-step.json").read_text()
    )
    first = bench["runs"][0]["time_to_accuracy"]
    assert (
        f"against {first['seconds']:.2f} s measured for 2,048 in the H100 bench (to that run's seed "
        f"accuracy, {first['target']:.1%})" in readme
    )
    at_2048 = probe["variants"]["whole step compiled, mode=reduce-overhead"]["images_per_second"]
    assert f"at {rate:,} images/s there, against {at_2048:,} at 2,048" in readme
    assert round((rate / at_2048 - 1) * 100) == 4
    assert "twice the epochs while running only 4% faster" in readme
    # the stopped H100 bench at 4,096: its two fast-path runs' last test accuracies
    log = ROOT / "results/gpu/nvidia-h100-80gb-hbm3/bench-2026-11-23-whole-step-batch-4096-stopped.log"
    sections = re.split(r"\n  (run \d, [a-z ]+):\n", log.read_text())
    ends = [
        re.search(r"epoch 15: .* test accuracy ([\d.]+)%", body).group(1)
        for label, body in zip(sections[1::2], sections[2::2], strict=True)
        if label.endswith("fast path")
    ]
    assert f"learned too little there in the stopped H100 bench ({ends[0]}% and {ends[1]}%)" in readme
