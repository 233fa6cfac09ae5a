"""helpers.recorded shows a cell's recorded GPU output only while the cell is as it was recorded.
(benchmarks/gpu_check.py writes the recordings; tests/test_benchmarks.py checks their layout.)"""

import ast
import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from helpers.course import CHECKOUT_VARIABLE
from helpers.data import STAND_IN_VERSION
from helpers.recorded import cell_source_key, find_recording, recordings_root, show_gpu_output

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RECORDED_00 = next(iter(sorted(ROOT.glob("results/gpu/*/notebooks/00_*.ipynb"))))


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


SHOWN = [
    (p, c) for p in NOTEBOOKS for c in _code_cells(p) if "show_gpu_output(" in "".join(c["source"])
]
SHOWN = [(path, cell) for path, cell in SHOWN if cell["id"] != "colab-setup"]


def _call(cell):
    """The cell's show_gpu_output call, its last statement, as (cell id, depends_on)."""
    call = ast.parse("".join(cell["source"])).body[-1].value
    assert ast.unparse(call.func) == "show_gpu_output", (
        f"{cell['id']}: the last line is not the call"
    )
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    return ast.literal_eval(call.args[0]), tuple(keywords.get("depends_on", ()))


def test_every_notebook_imports_it_and_each_call_names_its_own_cell_last():
    assert {path.name[:2] for path, _ in SHOWN} == {path.name[:2] for path in NOTEBOOKS}
    for path in NOTEBOOKS:
        setup = next(c for c in _code_cells(path) if "describe_devices()" in "".join(c["source"]))
        assert (
            "from helpers.recorded import show_gpu_output" in "".join(setup["source"]).splitlines()
        )
    for path, cell in SHOWN:
        shown_id, depends_on = _call(cell)
        ids = [c["id"] for c in _code_cells(path)]
        assert shown_id == cell["id"] and set(depends_on) <= set(ids[: ids.index(cell["id"])]), (
            cell["id"]
        )


def test_the_comparison_ignores_only_the_added_lines():
    plain = "x = torch.ones(2, device=device)\nprint(x)\n"
    assert cell_source_key(plain) == cell_source_key([plain, 'show_gpu_output("00-10")\n'])
    before = "import torch\n\nfrom helpers.data import load_cifar10\n\nprint(describe_devices())\n"
    after = (
        "import itertools\nimport torch\n\nfrom helpers.data import (\n    expect_accuracy,\n"
        "    load_cifar10,\n)\nfrom helpers.recorded import show_gpu_output\n\nprint(describe_devices())  \n"
    )
    assert cell_source_key(before) == cell_source_key(after) == "print(describe_devices())"
    assert cell_source_key("print(x)\n") != cell_source_key("print(x + 1)\n")
    assert cell_source_key("%load_ext tensorboard\nprint(1)") == "%load_ext tensorboard\nprint(1)"


def test_each_recording_is_shown_only_for_the_cell_as_it_is_now(capsys):
    stale = []
    for _, cell in SHOWN:
        _, depends_on = _call(cell)
        recording, why = find_recording(cell["id"], depends_on=depends_on)
        assert show_gpu_output(cell["id"], depends_on=depends_on, force=True) is None
        out = capsys.readouterr().out
        if recording is not None and recording.current:
            assert out.startswith(f"── what this cell printed on a GPU: {recording.label}")
            for output in recording.outputs:
                first = next(
                    (line for line in "".join(output.get("text", "")).splitlines() if line), ""
                )
                assert first in out, f"{cell['id']}: the recorded line {first!r} was not shown"
        else:
            assert (
                out.startswith(f"[No GPU output to show: {why}. On a machine with a GPU")
                and "──" not in out
            )
            stale += [cell["id"]] if recording else []
    if stale:  # reported, not a failure: the next `make gpu-check` on a GPU records them again
        warnings.warn(
            f"GPU recordings older than their cells (not shown): {', '.join(stale)}", stacklevel=1
        )


def _fake_run(tmp_path, name, date, edit=None, **run):
    """A copy of a recorded run's 00 notebook in tmp_path/name, dated `date`, one cell edited."""
    notebook = json.loads(RECORDED_00.read_text())
    notebook["metadata"]["gpu_run"].update(date=date, **run)
    for cell in (cell for cell in notebook["cells"] if cell.get("id") == edit):
        cell["source"] = ["x = 1  # another version of the cell\n"]
    (tmp_path / name / "notebooks").mkdir(parents=True)
    (tmp_path / name / "notebooks" / RECORDED_00.name).write_text(json.dumps(notebook))


def test_the_newest_recording_of_the_cell_as_it_is_wins_and_a_stale_one_is_not_shown(
    tmp_path, capsys
):
    _fake_run(tmp_path, "older-gpu", "2026-01-01")
    _fake_run(tmp_path, "newer-gpu", "2026-12-31")
    _fake_run(tmp_path, "newest-but-stale", "2027-06-01", edit="00-04")
    _fake_run(
        tmp_path,
        "newest-on-old-data",
        "2027-07-01",
        data="synthetic",
        stand_in=STAND_IN_VERSION - 1,
    )
    assert (
        find_recording("00-06", root=tmp_path)[0].path.parts[-3] == "newest-but-stale"
    )  # 00-06 unchanged
    recording, why = find_recording("00-06", depends_on=["00-04"], root=tmp_path)
    assert recording.path.parts[-3] == "newer-gpu" and recording.current and why == ""
    shutil.rmtree(tmp_path / "newer-gpu")
    shutil.rmtree(tmp_path / "older-gpu")
    recording, why = find_recording("00-06", depends_on=["00-04"], root=tmp_path)
    assert not recording.current and "older version of this cell or of 00-04" in why
    show_gpu_output("00-04", force=True, root=tmp_path)
    out = capsys.readouterr().out
    assert "No GPU output to show: the GPU run" in out and "older version of this cell" in out
    recording, why = find_recording("00-04", root=tmp_path / "none")
    assert recording is None and why == "no GPU run of this cell is on record yet"


def test_with_a_gpu_it_prints_nothing_the_cell_has_shown_its_own(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    show_gpu_output("00-02")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("cell_id", "depends_on", "words"),
    [("4-19", (), "such as '04-19'"), (None, (), "such as '04-19'"), ("04-nothing", (), "no cell"),
     ("00-06", ("00-99",), "no cell"), ("00-06", "00-04", r"depends_on=\['00-04'\]")],
)  # fmt: skip
def test_a_cell_id_no_notebook_has_is_refused(cell_id, depends_on, words):
    with pytest.raises((ValueError, TypeError), match=words):
        find_recording(cell_id, depends_on=depends_on)


def test_the_recordings_of_a_fetched_course_are_read_there(tmp_path, monkeypatch, capsys):
    assert recordings_root() == ROOT / "results" / "gpu"
    monkeypatch.setenv(
        CHECKOUT_VARIABLE, str(tmp_path / "nothing-here")
    )  # no course: the repository's
    assert recordings_root() == ROOT / "results" / "gpu"
    course = tmp_path / "gpu-course"  # as the setup cell on Colab and Kaggle fetches it
    (course / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", course)
    path = Path(shutil.copy(next(iter(ROOT.glob("notebooks/00_*.ipynb"))), course / "notebooks"))
    _fake_run(course / "results" / "gpu", "some-gpu", "2026-11-22")
    monkeypatch.setenv(CHECKOUT_VARIABLE, str(course))
    recording, _ = find_recording("00-04")
    assert recording.current and recording.path.is_relative_to(course)
    notebook = json.loads(path.read_text())
    next(c for c in notebook["cells"] if c.get("id") == "00-04")["source"] = ["print('changed')\n"]
    path.write_text(json.dumps(notebook))  # the fetched notebook's cell changes: not shown any more
    show_gpu_output("00-04", force=True)
    assert "No GPU output to show" in capsys.readouterr().out
