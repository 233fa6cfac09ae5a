"""What a GPU printed: helpers.recorded shows a recorded GPU output only for the cell as it is now.
(benchmarks/gpu_check.py writes the recordings; tests/test_benchmarks.py checks its layout.)"""

import ast
import json
import warnings
from pathlib import Path

import pytest
import torch

from helpers.recorded import cell_source_key, find_recording, recordings_root, show_gpu_output

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RUNS = sorted(p for p in (ROOT / "results" / "gpu").iterdir() if p.is_dir())


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _shown_cells():
    return [
        (path, cell)
        for path in NOTEBOOKS
        for cell in _code_cells(path)
        if "show_gpu_output(" in "".join(cell["source"]) and cell["id"] != "colab-setup"
    ]


SHOWN = _shown_cells()


def _call(cell):
    """The cell's show_gpu_output call, as (cell id, depends_on), read from the last statement."""
    last = ast.parse("".join(cell["source"])).body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call), f"{cell['id']}: not a call last"
    call = last.value
    assert ast.unparse(call.func) == "show_gpu_output", f"{cell['id']}: the last line is not the call"
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    return ast.literal_eval(call.args[0]), tuple(keywords.get("depends_on", ()))


def test_cells_that_show_gpu_output_exist_in_every_notebook():
    assert {path.name[:2] for path, _ in SHOWN} == {path.name[:2] for path in NOTEBOOKS}


@pytest.mark.parametrize(("path", "cell"), SHOWN, ids=[cell["id"] for _, cell in SHOWN])
def test_each_call_names_its_own_cell_on_its_last_line(path, cell):
    source = "".join(cell["source"])
    assert source.count("show_gpu_output(") == 1, f"{cell['id']}: one call, at the end"
    shown_id, depends_on = _call(cell)
    assert shown_id == cell["id"], f"{path.name}: cell {cell['id']} shows the output of {shown_id!r}"
    ids = [c["id"] for c in _code_cells(path)]
    for earlier in depends_on:  # cells before this one, in this notebook
        assert earlier in ids[: ids.index(cell["id"])], f"{cell['id']} depends on {earlier!r}, not before it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_imports_it_in_its_setup_cell(path):
    cells = _code_cells(path)
    setup = next(c for c in cells if "describe_devices()" in "".join(c["source"]))
    assert "from helpers.recorded import show_gpu_output" in "".join(setup["source"]).splitlines()


def test_the_comparison_ignores_only_the_added_lines():
    before = "x = torch.ones(2, device=device)\nprint(x)\n"
    after = 'x = torch.ones(2, device=device)\nprint(x)\nshow_gpu_output("00-10")\n'
    assert cell_source_key(before) == cell_source_key(after)
    before = "import torch\n\nfrom helpers.data import load_cifar10\n\nprint(describe_devices())\n"
    after = (
        "import itertools\nimport torch\n\nfrom helpers.data import (\n    expect_accuracy,\n"
        "    load_cifar10,\n)\nfrom helpers.recorded import show_gpu_output\n\n\nprint(describe_devices())\n"
    )
    assert cell_source_key(before) == cell_source_key(after) == "print(describe_devices())"
    assert cell_source_key("print(x)\n") != cell_source_key("print(x + 1)\n")
    assert cell_source_key("%load_ext tensorboard\nprint(1)") == "%load_ext tensorboard\nprint(1)"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_recorded_run_says_what_it_ran_on(run):
    info = json.loads((run / "run.json").read_text())
    for key in ("device", "torch", "date", "commit"):
        assert info.get(key), f"{run.name}/run.json lacks {key!r}"
    notebooks = sorted((run / "notebooks").glob("*.ipynb"))
    assert notebooks, f"{run.name} holds no executed notebooks"
    for path in notebooks:
        meta = json.loads(path.read_text())["metadata"]["gpu_run"]
        assert meta["device"] == info["device"] and meta["torch"] and meta["date"]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_recordings_hold_no_progress_bars(run):
    for path in (run / "notebooks").glob("*.ipynb"):
        for cell in _code_cells(path):
            for output in cell.get("outputs", []):
                text = output.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                assert "\r" not in text and "it/s]" not in text, f"{path.name} {cell['id']}: a progress bar"


def test_each_recording_is_shown_only_for_the_cell_as_it_is_now(capsys):
    """Every cell that shows GPU output: a current recording is printed whole; any other is reported."""
    stale = []
    for _, cell in SHOWN:
        _, depends_on = _call(cell)
        recording, why = find_recording(cell["id"], depends_on=depends_on)
        assert show_gpu_output(cell["id"], depends_on=depends_on, force=True) is None  # nothing to display
        out = capsys.readouterr().out
        if recording is not None and recording.current:
            assert recording.label in out and out.startswith("── what this cell printed on a GPU")
            for output in recording.outputs:
                text = output.get("text") or output.get("evalue") or ""
                first = next((line for line in text.splitlines() if line.strip()), "")
                assert first in out, f"{cell['id']}: the recorded line {first!r} was not shown"
        else:
            assert "No GPU output to show" in out and "──" not in out
            assert out.count("\n") == 1, f"{cell['id']}: one line, not {out!r}"
            assert why and why in out
            if recording is not None:
                stale.append(cell["id"])
    if stale:  # reported, not a failure: the next `make gpu-check` on a GPU records them again
        warnings.warn(f"GPU recordings older than their cells (not shown): {', '.join(stale)}", stacklevel=1)


def _fake_run(tmp_path, name, date, edit=None):
    """A copy of a recorded run's 00 notebook under tmp_path/name, dated `date`, optionally edited."""
    source = next(iter(sorted((RUNS[0] / "notebooks").glob("00_*.ipynb"))))
    notebook = json.loads(source.read_text())
    notebook["metadata"]["gpu_run"]["date"] = date
    if edit:
        cell = next(c for c in notebook["cells"] if c.get("id") == edit)
        cell["source"] = ["x = 1  # another version of the cell\n"]
    folder = tmp_path / name / "notebooks"
    folder.mkdir(parents=True)
    (folder / source.name).write_text(json.dumps(notebook))
    return notebook


def test_the_note_on_the_earlier_stand_in_comes_only_with_figures_of_training(tmp_path, capsys):
    """A run on stand-in version 1 (the first H100 run's): its accuracies say nothing today, its
    device names do. Made from today's recordings of 00 and 01, marked as trained on version 1."""
    folder = tmp_path / "old-gpu" / "notebooks"
    folder.mkdir(parents=True)
    for pattern in ("00_*.ipynb", "01_*.ipynb"):
        source = next(iter(sorted((RUNS[0] / "notebooks").glob(pattern))))
        notebook = json.loads(source.read_text())
        notebook["metadata"]["gpu_run"]["stand_in"] = 1
        (folder / source.name).write_text(json.dumps(notebook))
    show_gpu_output("00-02", force=True, root=tmp_path)  # describe_devices(): no data involved
    out = capsys.readouterr().out
    assert "what this cell printed on a GPU" in out and "earlier version of the synthetic stand-in" not in out
    show_gpu_output("01-13", force=True, root=tmp_path)  # ten epochs of training on the old data
    out = capsys.readouterr().out
    assert "earlier version of the synthetic stand-in" in out and "test accuracy" in out
    show_gpu_output("01-13", force=True)  # the recording in the repository: today's stand-in
    out = capsys.readouterr().out
    assert "test accuracy" in out and "earlier version of the synthetic stand-in" not in out


def test_a_stale_recording_is_reported_not_shown(tmp_path, capsys):
    _fake_run(tmp_path, "some-gpu", "2026-11-22", edit="00-04")
    recording, why = find_recording("00-04", root=tmp_path)
    assert recording is not None and not recording.current and "older version" in why
    show_gpu_output("00-04", force=True, root=tmp_path)
    out = capsys.readouterr().out
    assert "older version of this cell" in out and "CUDA available" not in out


def test_a_recording_whose_earlier_cell_changed_is_not_shown(tmp_path, capsys):
    """A cell that reports on an earlier cell's work is current only while that cell is unchanged."""
    _fake_run(tmp_path, "some-gpu", "2026-11-22", edit="00-04")
    assert find_recording("00-06", root=tmp_path)[0].current
    recording, why = find_recording("00-06", depends_on=["00-04"], root=tmp_path)
    assert not recording.current and "of this cell or of 00-04, which it reports on" in why
    with pytest.raises(ValueError, match="no cell of"):
        find_recording("00-06", depends_on=["00-99"], root=tmp_path)


def test_the_newest_current_recording_wins(tmp_path):
    _fake_run(tmp_path, "older-gpu", "2026-01-01")
    _fake_run(tmp_path, "newer-gpu", "2026-12-31")
    _fake_run(tmp_path, "newest-but-stale", "2027-06-01", edit="00-06")
    assert find_recording("00-06", root=tmp_path)[0].path.parent.parent.name == "newer-gpu"
    assert find_recording("00-04", root=tmp_path)[0].path.parent.parent.name == "newest-but-stale"


def test_nothing_recorded_says_so(tmp_path, capsys):
    assert find_recording("00-04", root=tmp_path) == (None, "no GPU run of this cell is on record yet")
    show_gpu_output("00-04", force=True, root=tmp_path)
    out = capsys.readouterr().out
    assert "No GPU output to show: no GPU run of this cell is on record yet" in out
    assert "On a machine with a GPU, the cell shows its own." in out


def test_on_this_machine_it_shows_only_without_a_gpu(capsys):
    show_gpu_output("00-02")
    out = capsys.readouterr().out
    if torch.cuda.is_available():
        assert out == ""
    else:
        assert "what this cell printed on a GPU" in out or "No GPU output to show" in out


@pytest.mark.parametrize("bad", ["4-19", "04_19", "", None, 419])
def test_a_bad_cell_id_is_refused_with_an_example(bad):
    with pytest.raises(ValueError, match="such as '04-19'"):
        find_recording(bad)


def test_a_cell_id_no_notebook_has_is_refused():
    with pytest.raises(ValueError, match="No notebook cell has the id '04-nothing'"):
        find_recording("04-nothing")


def test_the_recordings_live_in_the_repository():
    assert recordings_root() == ROOT / "results" / "gpu"


def test_a_note_on_how_a_cell_was_recorded_is_shown_with_it(tmp_path, capsys):
    notebook = _fake_run(tmp_path, "busy-gpu", "2026-11-22")
    path = tmp_path / "busy-gpu" / "notebooks" / "00_devices_and_tensors.ipynb"
    cell = next(c for c in notebook["cells"] if c.get("id") == "00-02")
    cell.setdefault("metadata", {})["recording_note"] = "recorded beside another job"
    path.write_text(json.dumps(notebook))
    show_gpu_output("00-02", force=True, root=tmp_path)
    out = capsys.readouterr().out
    assert "(recorded beside another job)" in out and "PyTorch" in out
    show_gpu_output("00-04", force=True, root=tmp_path)  # a cell without a note shows none
    assert "recorded beside another job" not in capsys.readouterr().out


def test_the_disturbed_cells_of_the_h100_run_say_so():
    """06's H100 recording ran beside the unit tests for its first 70 s: those cells carry a note."""
    recording, why = find_recording("06-15")
    assert recording is not None, why
    if recording.run.get("device") == "NVIDIA H100 80GB HBM3" and recording.run.get("commit") == "fc2b93a":
        assert "unit tests ran on the same machine" in recording.note
        later, _ = find_recording("06-26")
        assert later is not None and later.note == ""


# --- where the recordings are: a course fetched by the Colab and Kaggle setup cell -----------------


def _fetched_course(tmp_path):
    """A folder laid out as the setup cell fetches the course: 00's notebook and its recorded runs."""
    import shutil

    from helpers.course import CHECKOUT_VARIABLE

    folder = tmp_path / "gpu-course" / "v0.0.0"
    (folder / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", folder)
    (source,) = (ROOT / "notebooks").glob("00_*.ipynb")
    shutil.copy(source, folder / "notebooks")
    for run in RUNS:
        for recorded in (run / "notebooks").glob("00_*.ipynb"):
            (folder / "results" / "gpu" / run.name / "notebooks").mkdir(parents=True)
            shutil.copy(recorded, folder / "results" / "gpu" / run.name / "notebooks")
    return folder, CHECKOUT_VARIABLE


def test_the_recordings_of_a_fetched_course_are_found_and_still_refused_once_its_cell_changed(
    tmp_path, monkeypatch, capsys
):
    import os

    current = [
        cell["id"]
        for path, cell in SHOWN
        if path.name.startswith("00") and (found := find_recording(cell["id"])[0]) and found.current
    ]
    if not current:
        pytest.skip("no recording of 00 is current in this repository")
    folder, variable = _fetched_course(tmp_path)
    monkeypatch.setenv(variable, str(folder))
    assert recordings_root() == folder / "results" / "gpu"
    recording, why = find_recording(current[0])
    assert recording is not None and recording.current, why
    assert recording.path.is_relative_to(folder)
    show_gpu_output(current[0], force=True)
    assert capsys.readouterr().out.startswith("── what this cell printed on a GPU")

    # the fetched notebook's cell changes: its recording is reported, not shown
    path = folder / "notebooks" / recording.notebook
    notebook = json.loads(path.read_text())
    cell = next(c for c in notebook["cells"] if c["id"] == current[0])
    cell["source"] = ["print('another version of the cell')\n"]
    path.write_text(json.dumps(notebook))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # read afresh, not cached
    show_gpu_output(current[0], force=True)
    out = capsys.readouterr().out
    assert "No GPU output to show" in out and "──" not in out


def test_a_variable_naming_no_course_leaves_the_repository_in_use(tmp_path, monkeypatch):
    from helpers.course import CHECKOUT_VARIABLE

    monkeypatch.setenv(CHECKOUT_VARIABLE, str(tmp_path / "nothing-here"))
    assert recordings_root() == ROOT / "results" / "gpu"
