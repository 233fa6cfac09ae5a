"""Smoke tests of benchmarks/: each script runs in its quickest form on the CPU, in this process, on
a few hundred synthetic images, and writes what it says into a temporary folder."""

import json
import sys
from pathlib import Path

import pytest

from helpers.recorded import find_recording
from helpers.results import load_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench  # noqa: E402
import benchlib  # noqa: E402
import calibrate_data  # noqa: E402
import gpu_check  # noqa: E402
import large_batch  # noqa: E402
import time_notebooks  # noqa: E402


@pytest.fixture(autouse=True)
def _synthetic_quick(monkeypatch):
    monkeypatch.setenv("COURSE_DATA", "synthetic")
    monkeypatch.setenv("COURSE_QUICK", "1")


def test_the_quick_bench_writes_its_runs_its_ratio_and_its_plot(tmp_path):
    options = ["--train-size", "256", "--test-size", "200", "--repeats", "1", "--fast-batch", "64"]
    result = bench.run(["--quick", "--device", "cpu", "--out", str(tmp_path), *options])
    (json_path,) = tmp_path.glob("bench-cpu-*-quick.json")
    assert json_path.with_suffix(".png").is_file() and not list(tmp_path.glob("*.partial"))
    written = json.loads(json_path.read_text())
    assert written["runs"] == json.loads(json.dumps(result["runs"])) and "incomplete" not in written
    (run,) = written["runs"]
    for path in ("tutorial_loop", "fast_path", "linear_scaling_only"):
        assert len(run[path]["epoch_test_accuracy"]) == 2 and run[path]["images_per_second"] > 0
    speeds = [run[path]["images_per_second"] for path in ("fast_path", "tutorial_loop")]
    assert run["ratio"] == pytest.approx(speeds[0] / speeds[1])
    assert run["time_to_accuracy"]["target"] == run["tutorial_loop"]["test_accuracy"]
    ladder = {rung["key"]: rung for rung in written["ladder"]}
    assert ladder["tutorial"]["images_per_second"] > 0 and ladder["compile"]["skipped"]
    assert [rung["key"] for rung in written["ladder"] if rung["fast_path"]] == ["fast_batch"]
    assert "ratio" in written["targets"]
    assert written["exit_status"] == (1 if bench.failing(written["failures"]) else 0)
    (loaded,) = load_results(tmp_path, quick=True)  # as 06_performance reads a result
    assert "run 1: " in benchlib.describe_result(loaded)
    with pytest.raises(SystemExit, match="2 or more"):  # epochs: the first is warm-up
        bench.run(["--epochs", "1", "--device", "cpu", "--out", str(tmp_path)])


def test_gpu_check_writes_the_layout_that_helpers_recorded_reads(tmp_path):
    assert gpu_check.main(["--allow-cpu", "--out", str(tmp_path), "--part", "notebooks", "00"]) == 0
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    run = json.loads((folder / "run.json").read_text())
    assert run["parts"]["notebooks"]["notebooks"] == {"00_devices_and_tensors": "passed"}
    assert json.loads((folder / "notebook-seconds.json").read_text())["00_devices_and_tensors"] > 0
    recording, why = find_recording("00-02", root=tmp_path)
    assert recording is not None and recording.current, why
    with pytest.raises(SystemExit, match="'42' names no single notebook"):
        gpu_check.main(["--allow-cpu", "--out", str(tmp_path), "--part", "notebooks", "42"])


def test_gpu_check_keeps_the_text_and_drops_progress_bars():
    texts = [
        ("stdout", "epoch 1\n"),
        ("stderr", "\repoch 1:  50%|█    | 1/2 [00:01<00:01]"),
        ("stdout", "accuracy 55.0%\n"),
        ("stderr", "UserWarning: a real warning\n"),
    ]
    outputs = [{"output_type": "stream", "name": n, "text": t} for n, t in texts]
    notebook = {"cells": [{"cell_type": "code", "outputs": outputs}]}
    assert gpu_check.clean_outputs(notebook) == 2
    assert notebook["cells"][0]["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "epoch 1\naccuracy 55.0%\n"},
        {"output_type": "stream", "name": "stderr", "text": "UserWarning: a real warning\n"},
    ]


def test_large_batch_records_every_epoch_of_every_run(tmp_path):
    sizes = [
        "--epochs",
        "2",
        "--train-size",
        "512",
        "--test-size",
        "200",
        "--seeds",
        "0,1",
        "--quick",
    ]
    assert (
        large_batch.main(["--configs", "recipe@128,adamplain@256", *sizes, "--out", str(tmp_path)])
        == 0
    )
    (path,) = tmp_path.glob("large-batch-cpu-*-quick.json")
    runs = json.loads(path.read_text())["runs"]
    assert [(r["config"], r["seed"]) for r in runs] == [
        (c, s) for c in ("recipe@128", "adamplain@256") for s in (0, 1)
    ]
    assert all(r["status"] == "ok" and len(r["epoch_test_accuracy"]) == 2 for r in runs)
    with pytest.raises(SystemExit):
        large_batch.main(["--configs", "sideways@64"])


def test_calibrate_data_and_time_notebooks_parse_their_options_and_the_times_add_up(
    capsys, tmp_path
):
    for script in (calibrate_data, time_notebooks):
        with pytest.raises(SystemExit) as stopped:
            script.main(["--help"])
        assert stopped.value.code == 0 and "--quick" in capsys.readouterr().out
    time_notebooks.record_times(
        {"00_devices_and_tensors": 9.0, "01_cuda_method": 9.0}, tmp_path, quick=True
    )
    path = time_notebooks.record_times({"01_cuda_method": 5.0}, tmp_path, quick=True)
    assert json.loads(path.read_text())["seconds"] == {
        "00_devices_and_tensors": 9.0,
        "01_cuda_method": 5.0,
    }
    with pytest.raises(SystemExit, match="no such notebook: 99_nothing"):
        time_notebooks.main(["99_nothing", "--out", str(tmp_path)])
