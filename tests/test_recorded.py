"""helpers.recorded shows a cell's recorded GPU output only while the cell is as it was recorded.
(benchmarks/gpu_check.py writes the recordings; tests/test_benchmarks.py checks their layout.)"""

import json
import os
import queue
import re
import shutil
import warnings
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from helpers.paths import CHECKOUT_VARIABLE, course_root
from helpers.recorded import (
    DEPENDS_ON_KEY,
    GPU_OUTPUT_TAG,
    cell_source_key,
    find_recording,
    marked_cells,
    recordings_root,
    show_recording,
)
from helpers.standin import STAND_IN_VERSION

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RECORDED_00 = next(iter(sorted(ROOT.glob("results/gpu/*/notebooks/00_*.ipynb"))))
LOADER = "%load_ext helpers.recorded"


def _code_cells(path):
    cells = json.loads(path.read_text())["cells"]
    return [cell for cell in cells if cell["cell_type"] == "code"]


def _source(cell):
    return "".join(cell["source"])


def _marked(path):
    return [c for c in _code_cells(path) if GPU_OUTPUT_TAG in c["metadata"].get("tags", [])]


def test_every_notebook_loads_the_extension_in_its_setup_cell_and_marks_its_gpu_cells():
    for path in NOTEBOOKS:
        cells = _code_cells(path)
        setup = next(c for c in cells if "describe_devices()" in _source(c))
        assert LOADER in _source(setup).splitlines(), path.name
        assert not any("show_gpu_output" in _source(c) for c in cells), path.name
        marked = _marked(path)
        assert marked, f"{path.name}: no cell tagged {GPU_OUTPUT_TAG}"
        ids = [c["id"] for c in cells]
        for cell in marked:
            earlier = ids[: ids.index(cell["id"])]
            depends_on = cell["metadata"].get(DEPENDS_ON_KEY, [])
            assert set(depends_on) <= set(earlier), (cell["id"], depends_on)


def test_two_marked_cells_never_share_their_code():
    found = marked_cells()
    assert sum(len(cells) for cells in found.values()) == sum(len(_marked(p)) for p in NOTEBOOKS)
    assert all(len(cells) == 1 for cells in found.values())


def test_layout_comments_imports_and_the_loader_do_not_count_the_code_does():
    plain = "x = torch.ones(2, device=device)\nprint(x)\n"
    assert cell_source_key(plain) == cell_source_key([plain, 'show_gpu_output("00-10")\n'])
    before = "import torch\n\nfrom helpers.data import load_cifar10\n\nprint(describe_devices())\n"
    after = (
        "import itertools\nimport torch\n\nfrom helpers.data import (\n    expect_accuracy,\n"
        "    load_cifar10,\n)\n\n# a comment\n%load_ext helpers.recorded\n\n"
        "print(\n    describe_devices()\n)  \n"
    )
    assert cell_source_key(before) == cell_source_key(after)
    assert cell_source_key("print(x)\n") != cell_source_key("print(x + 1)\n")
    assert cell_source_key("%timeit f(x)\n") != cell_source_key("%timeit f(y)\n")
    assert cell_source_key("!nvidia-smi\n") == cell_source_key("!nvidia-smi")
    assert cell_source_key("%load_ext tensorboard\nprint(1)") != cell_source_key("print(1)")
    assert cell_source_key("def f(:\n  pass") == "def f(:\n  pass"  # not Python: its lines


def test_a_default_mode_recording_leaves_out_the_settings_only_a_quick_run_reads():
    cell = (
        "budget = training_budget(device, gpu_epochs=5, cpu_epochs=3, quick_epochs={q})\n"
        "helpers.budget.expect_accuracy(a, budget, testset, full=(0.5, 0.7), quick=({q}, 1))\n"
        "other(quick_epochs={q})\n"
    )
    quick_changed = [
        cell.format(q=1),
        cell.format(q=2).replace("other(quick_epochs=2)", "other(quick_epochs=1)"),
    ]
    assert cell_source_key(quick_changed[0], quick_run=False) == cell_source_key(
        quick_changed[1], quick_run=False
    )
    assert cell_source_key(quick_changed[0]) != cell_source_key(quick_changed[1])
    gpu_changed = cell.format(q=1).replace("gpu_epochs=5", "gpu_epochs=6")
    assert cell_source_key(cell.format(q=1), quick_run=False) != cell_source_key(
        gpu_changed, quick_run=False
    )
    other_changed = cell.format(q=1).replace("other(quick_epochs=1)", "other(quick_epochs=2)")
    assert cell_source_key(cell.format(q=1), quick_run=False) != cell_source_key(
        other_changed, quick_run=False
    )


def test_a_recording_in_default_mode_stays_current_when_only_the_quick_settings_change(tmp_path):
    """01-02 sets 01's training budget. Recorded with other ``quick_*`` numbers, a default-mode
    run is still the run of this cell; a quick run is not."""
    recorded = next(iter(sorted(ROOT.glob("results/gpu/*/notebooks/01_*.ipynb"))))
    today = {
        c.get("id"): c
        for c in json.loads((ROOT / "notebooks" / recorded.name).read_text())["cells"]
    }
    for quick in (False, True):
        notebook = json.loads(recorded.read_text())
        notebook["metadata"]["gpu_run"].update(quick=quick)
        for cell in notebook["cells"]:
            if cell.get("id") == "01-02":
                source = _source(today["01-02"])
                edited = re.sub(r"quick_epochs=\d+", "quick_epochs=99", source)
                assert edited != source, "01-02 no longer sets quick_epochs: pick another cell"
                cell["source"] = edited
        folder = tmp_path / f"quick-{quick}"
        (folder / "gpu" / "notebooks").mkdir(parents=True)
        (folder / "gpu" / "notebooks" / recorded.name).write_text(json.dumps(notebook))
        recording, _ = find_recording("01-02", root=folder)
        assert recording is not None and recording.current is not quick, quick


def test_each_marked_cell_shows_its_recording_only_while_it_is_as_recorded(capsys):
    stale = []
    for path in NOTEBOOKS:
        for cell in _marked(path):
            depends_on = cell["metadata"].get(DEPENDS_ON_KEY, [])
            recording, _ = find_recording(cell["id"], depends_on=depends_on)
            show_recording(cell["id"], depends_on=depends_on)
            out = capsys.readouterr().out
            if recording is not None and recording.current:
                assert out.startswith(f"── On a GPU ({recording.label}), this cell printed: ──")
                for output in recording.outputs:
                    lines = "".join(output.get("text", "")).splitlines()
                    first = next((line for line in lines if line), "")
                    assert first in out, f"{cell['id']}: the recorded line {first!r} is missing"
            else:
                assert "next GPU run" in out and "printed:" not in out, cell["id"]
                stale.append(cell["id"])
    if stale:  # reported, not a failure: the next `make gpu-check` on a GPU records them again
        stale_ids = ", ".join(stale)
        warnings.warn(
            f"GPU recordings older than their cells (not shown): {stale_ids}", stacklevel=1
        )


def _fake_run(tmp_path, name, date, edit=None, **run):
    """A copy of a recorded run's 00 notebook in tmp_path/name, dated `date`, with cells 00-04 and
    00-06 as they are today (whatever the lesson's later edits), and the cell `edit` edited."""
    notebook = json.loads(RECORDED_00.read_text())
    notebook["metadata"]["gpu_run"].update(date=date, **run)
    today = json.loads((ROOT / "notebooks" / RECORDED_00.name).read_text())
    today_sources = {cell.get("id"): cell["source"] for cell in today["cells"]}
    for cell in notebook["cells"]:
        if cell.get("id") in ("00-04", "00-06"):
            cell["source"] = today_sources[cell["id"]]  # recorded as the cells are today
        if cell.get("id") == edit:
            cell["source"] = ["x = 1  # another version of the cell\n"]
    (tmp_path / name / "notebooks").mkdir(parents=True)
    (tmp_path / name / "notebooks" / RECORDED_00.name).write_text(json.dumps(notebook))


def test_the_newest_recording_of_the_cell_as_it_is_wins_and_a_stale_one_is_not_shown(
    tmp_path, capsys
):
    _fake_run(tmp_path, "older-gpu", "2026-01-01")
    _fake_run(tmp_path, "newer-gpu", "2026-12-31")
    _fake_run(tmp_path, "newest-but-stale", "2027-06-01", edit="00-04")
    old_stand_in = STAND_IN_VERSION - 1
    _fake_run(tmp_path, "newest-old-data", "2027-07-01", data="synthetic", stand_in=old_stand_in)

    unchanged, _ = find_recording("00-12", root=tmp_path)
    assert unchanged.path.parts[-3] == "newest-but-stale"
    recording, why = find_recording("00-12", depends_on=["00-04"], root=tmp_path)
    assert recording.path.parts[-3] == "newer-gpu" and recording.current and why == ""

    shutil.rmtree(tmp_path / "newer-gpu")
    shutil.rmtree(tmp_path / "older-gpu")
    recording, why = find_recording("00-12", depends_on=["00-04"], root=tmp_path)
    assert not recording.current and "older version" in why
    show_recording("00-04", root=tmp_path)
    out = capsys.readouterr().out
    assert "changed since" in out and "printed:" not in out

    recording, why = find_recording("00-04", root=tmp_path / "none")
    assert recording is None and why
    show_recording("00-04", root=tmp_path / "none")
    assert "not run on a GPU yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cell_id", "depends_on", "words"),
    [
        ("4-19", (), "such as '04-19'"),
        (None, (), "such as '04-19'"),
        ("04-nothing", (), "no cell '04-nothing'"),
        ("00-06", ("00-99",), "no cell '00-99'"),
        ("00-06", "00-04", r"depends_on=\['00-04'\]"),
        ("99-01", (), "99_"),
    ],
)
def test_a_cell_id_no_notebook_has_is_refused(cell_id, depends_on, words):
    with pytest.raises((ValueError, TypeError), match=words):
        find_recording(cell_id, depends_on=depends_on)


def test_the_recordings_of_a_fetched_course_are_read_there(tmp_path, monkeypatch, capsys):
    assert course_root() == ROOT and recordings_root() == ROOT / "results" / "gpu"
    monkeypatch.setenv(CHECKOUT_VARIABLE, str(tmp_path / "nothing-here"))  # no course there
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        recordings_root()
    course = tmp_path / "gpu-course"  # as the setup cell on Colab and Kaggle fetches it
    (course / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", course)
    path = Path(shutil.copy(NOTEBOOKS[0], course / "notebooks"))
    _fake_run(course / "results" / "gpu", "some-gpu", "2026-11-22")
    monkeypatch.setenv(CHECKOUT_VARIABLE, str(course))
    recording, _ = find_recording("00-04")
    assert recording.current and recording.path.is_relative_to(course)

    notebook = json.loads(path.read_text())
    changed = next(c for c in notebook["cells"] if c.get("id") == "00-04")
    changed["source"] = ["print('changed')\n"]
    path.write_text(json.dumps(notebook))  # the fetched notebook's cell changes: not shown any more
    show_recording("00-04")
    assert "changed since" in capsys.readouterr().out


class _Kernel:
    """A real IPython kernel, as JupyterLab and nbval run one, in notebooks/, with ``env``."""

    def __init__(self, env):
        self.manager, self.client = start_new_kernel(
            kernel_name="python3", cwd=str(ROOT / "notebooks"), env=env
        )

    def run(self, code: str) -> str:
        """Run ``code``; the text it printed (stdout, stream and plain-text display)."""
        msg_id = self.client.execute(code)
        texts = []
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=120)
            except queue.Empty:
                pytest.fail(f"the kernel did not finish running:\n{code}")
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            content = msg["content"]
            if kind == "stream":
                texts.append(content["text"])
            elif kind == "error":
                pytest.fail(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(texts)

    def stop(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def test_in_a_kernel_without_a_gpu_a_marked_cell_prints_its_recording_after_its_own_output():
    cells = {c["id"]: _source(c) for c in _code_cells(NOTEBOOKS[0])}
    recording, why = find_recording("00-04")
    assert recording is not None and recording.current, why
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COURSE_QUICK": "1"}  # no GPU, even on one
    kernel = _Kernel(env)
    try:
        kernel.run(cells["00-02"])  # the setup cell: imports, and %load_ext helpers.recorded
        kernel.run(LOADER)  # loading it twice shows each recording once
        out = kernel.run(cells["00-04"])
        own, _, shown = out.partition(f"── On a GPU ({recording.label}), this cell printed: ──")
        assert own.startswith("CUDA build: ") and "GPUs: 0" in own
        recorded_text = "".join(recording.outputs[0]["text"]).strip()
        assert shown.count("GPUs: ") == 1 and recorded_text in shown
        assert shown.rstrip().endswith("── end of the GPU output ──")

        edited = cells["00-04"] + "\nprint('edited')"
        assert "On a GPU" not in kernel.run(edited)  # the student's own code: only its own output
        assert kernel.run("print(1 + 1)") == "2\n"  # not a cell of the course
    finally:
        kernel.stop()
