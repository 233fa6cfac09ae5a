"""The git filter that strips notebook outputs (scripts/strip_outputs.py), and a lesson run for real.

A student runs a lesson in JupyterLab, whose autosave writes the outputs into the tracked notebook;
then the teacher runs `make test` on that machine. The last tests here do that in a fresh repository
made from this working tree: `make git-filter` (what `make setup` runs), the shortest lesson executed
in place with nbclient and saved with nbformat as Jupyter's autosave saves it, with the checkpoints
and TensorBoard logs lessons write, then git (nothing to commit) and the repository's own checks
(they pass). Whether every lesson runs cleanly, and the size of its figures' text, is the browser
test's (tests/test_browser.py).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FILTER = "strip-notebook-outputs"
LESSON = "00_devices_and_tensors.ipynb"  # the quickest to run
# What other lessons write next to the notebooks, done in the same kernel after the lesson's cells
WRITES = """
import torch
from torch.utils.tensorboard import SummaryWriter

from helpers.checkpoint import save_checkpoint

model = torch.nn.Linear(2, 2)
save_checkpoint("checkpoints/lesson.pt", model, torch.optim.SGD(model.parameters(), lr=0.1), 0)
torch.save(model.state_dict(), "checkpoints/weights.pt")
with SummaryWriter("runs/lesson/1") as writer:
    writer.add_scalar("loss", 1.0, 0)
"""


def _load_tool():
    spec = importlib.util.spec_from_file_location("strip_outputs", ROOT / "scripts" / "strip_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


def _git(*args, cwd=ROOT, check=True, env=None):
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done


def _run_notebook():
    """A notebook as a run leaves it: outputs, counts, timings, the kernel's language_info, view state."""
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 3,
                "id": "a-1",
                "metadata": {
                    "tags": ["raises-exception"],
                    "execution": {"iopub.status.busy": "2026-11-22T10:00:00Z"},
                    "scrolled": True,
                    "collapsed": False,
                    "trusted": True,
                    "jupyter": {"outputs_hidden": True, "source_hidden": True},  # folded by a click
                },
                "outputs": [{"name": "stdout", "output_type": "stream", "text": ["hello\n"]}],
                "source": "print('hello')\nx = 1",
            },
            {
                "cell_type": "code",
                "execution_count": 4,
                "id": "colab-setup",
                "metadata": {},  # unfolded by a student
                "outputs": [],
                "source": ["# Colab only\n"],
            },
            {"cell_type": "markdown", "id": "m-1", "metadata": {}, "source": ["# Título ✓"]},
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"},
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


# --- the filter -------------------------------------------------------------------------------


def test_strip_removes_what_a_run_adds_and_keeps_the_lesson():
    stripped = tool.strip(_run_notebook())
    first, setup, markdown = stripped["cells"]
    assert first["outputs"] == [] and first["execution_count"] is None
    assert first["metadata"] == {"tags": ["raises-exception"]}  # tags stay: nbval reads them
    assert first["source"] == ["print('hello')\n", "x = 1"]  # as Jupyter stores it
    assert setup["metadata"] == {"jupyter": {"source_hidden": True}} and setup["execution_count"] is None
    assert markdown == {"cell_type": "markdown", "id": "m-1", "metadata": {}, "source": ["# Título ✓"]}
    assert stripped["metadata"] == {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }


def test_the_stripped_notebook_is_written_as_jupyter_writes_it():
    text = tool.clean(json.dumps(_run_notebook()))
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"  # the server's own format
    assert "Título ✓" in text  # UTF-8, not \u escapes
    assert tool.clean(text) == text  # stripping twice changes nothing


def test_the_folded_colab_cell_is_the_one_scripts_colab_cells_writes():
    spec = importlib.util.spec_from_file_location("colab_cells", ROOT / "scripts" / "colab_cells.py")
    colab_cells = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(colab_cells)
    written = {colab_cells.SETUP_ID: colab_cells.SETUP_METADATA["jupyter"]}
    assert written == tool.FOLDED


@pytest.mark.parametrize("text", ["", "not json", '{"a": 1}', "<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> x\n"])
def test_what_is_not_a_notebook_passes_through_unchanged(text):
    assert tool.clean(text) == text
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "strip_outputs.py")], input=text.encode(), capture_output=True
    )
    assert done.returncode == 0 and done.stdout == text.encode()
    assert b"not a notebook" in done.stderr  # git shows the text as it is, with a note why


def test_files_in_place_and_the_check(tmp_path, capsys):
    run = tmp_path / "run.ipynb"
    run.write_text(json.dumps(_run_notebook()), encoding="utf-8")
    assert tool.main(["--check", str(run)]) == 1
    assert str(run) in capsys.readouterr().out
    assert tool.main([str(run)]) == 0
    written = run.read_bytes()
    assert json.loads(written)["cells"][0]["outputs"] == []
    assert (
        tool.main(["--check", str(run)]) == 0 and tool.main([str(run)]) == 0 and run.read_bytes() == written
    )
    other = tmp_path / "notes.ipynb"
    other.write_text("not json")
    with pytest.raises(SystemExit, match="not a notebook"):
        tool.main([str(other)])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_is_stored_as_the_filter_writes_it(path):
    """Otherwise a lesson run, which Jupyter saves in its own format, would show up as a change."""
    assert tool.main(["--check", str(path)]) == 0


# --- git --------------------------------------------------------------------------------------


needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout"
)


@needs_git
def test_gitattributes_gives_every_lesson_the_filter_and_not_the_recorded_gpu_runs():
    lessons = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]
    recorded = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("results/gpu/*/notebooks/*.ipynb"))]
    assert recorded, "no recorded GPU run to check against"
    out = _git("check-attr", "filter", "--", *lessons, *recorded).stdout.splitlines()
    assert out == [f"{p}: filter: {FILTER}" for p in lessons] + [
        f"{p}: filter: unspecified" for p in recorded
    ]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A fresh git repository of this working tree's files (committed), with `make git-filter` run."""
    if shutil.which("git") is None or shutil.which("make") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git, make and a git checkout")
    repo = tmp_path_factory.mktemp("course") / "course"
    files = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is listed too
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git(
        "-c", "user.name=course", "-c", "user.email=course@example.org", "commit", "-qm", "a clone", cwd=repo
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "git-filter"], cwd=repo, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()
    return repo


def test_make_setup_tells_git_to_strip_notebooks(course):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    for target in ("setup", "lab", "test"):  # `make lab` and `make test` set the filter up too
        planned = subprocess.run(
            ["make", "--no-print-directory", "-n", target],
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
        )
        assert f"filter.{FILTER}.clean" in planned.stdout, f"make {target} does not set up the filter"
    clean = _git("config", "--get", f"filter.{FILTER}.clean", cwd=course).stdout.strip()
    assert clean.endswith("scripts/strip_outputs.py"), clean
    assert _git("config", "--get", f"filter.{FILTER}.smudge", cwd=course).stdout.strip() == "cat"
    assert _git("config", "--get", f"filter.{FILTER}.required", cwd=course).stdout.strip() == "true"
    before = (course / ".git" / "config").read_bytes()
    subprocess.run(
        ["make", "--no-print-directory", "git-filter"], cwd=course, capture_output=True, check=True
    )
    assert (course / ".git" / "config").read_bytes() == before  # run again, it writes nothing


def test_make_git_filter_outside_a_clone_does_nothing(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("needs make")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}  # not the repository around it
    done = subprocess.run(["make", "git-filter"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".git").exists()


def test_a_notebook_run_or_deleted_checks_out_as_committed(course):
    """git writes a notebook back as it was committed (the filter's smudge side: as stored)."""
    name = "notebooks/00_devices_and_tensors.ipynb"
    path, committed = course / name, _git("show", f"HEAD:{name}", cwd=course).stdout
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [nbformat.v4.new_output("stream", text="ran\n")], 1
    nbformat.write(notebook, path)
    _git("checkout", "--", name, cwd=course)
    assert path.read_text(encoding="utf-8") == committed
    path.unlink()
    _git("checkout", "--", name, cwd=course)
    assert path.read_text(encoding="utf-8") == committed


@pytest.fixture(scope="module")
def lesson_run(course):
    """LESSON executed in place in quick mode, then WRITES, and saved as autosave saves it."""
    path = course / "notebooks" / LESSON
    notebook = nbformat.read(path, as_version=4)
    lesson_cells = list(notebook.cells)
    notebook.cells.append(nbformat.v4.new_code_cell(WRITES))
    env = {
        **os.environ,
        "PYTHONPATH": str(course),  # the helpers of the repository under test
        "COURSE_QUICK": "1",
        "COURSE_DATA": "synthetic",
    }
    from nbclient import NotebookClient

    client = NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)
    notebook.cells = lesson_cells  # the lesson's own cells, with their outputs
    nbformat.write(notebook, path)  # what the Jupyter server does on every (auto)save
    return course, path


def test_the_run_left_its_outputs_in_the_file(lesson_run):
    _, path = lesson_run
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert any(cell.get("outputs") for cell in cells) and any(cell.get("execution_count") for cell in cells)
    # and the checkpoints and TensorBoard logs that lessons write are there
    assert (path.parent / "checkpoints" / "lesson.pt").is_file()
    assert any((path.parent / "runs" / "lesson" / "1").iterdir())


def test_make_tests_repository_checks_pass_after_a_lesson_run(lesson_run):
    course, _ = lesson_run
    env = {**os.environ, "PYTHONPATH": str(course)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_repository.py"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_after_a_lesson_run_git_has_nothing_to_commit(lesson_run):
    course, path = lesson_run
    # git compares file sizes first, so `git status` may list the notebook until `git add` refreshes its
    # entry; the content git reads through the filter is what was committed, so nothing is in a diff.
    assert _git("diff", "--exit-code", cwd=course, check=False).returncode == 0
    assert _git("diff", "--exit-code", "HEAD", cwd=course, check=False).returncode == 0
    _git("add", "-A", cwd=course)
    assert _git("status", "--porcelain", "--untracked-files=all", cwd=course).stdout == ""
    assert _git("diff", "--cached", "--exit-code", cwd=course, check=False).returncode == 0
    assert any(cell.get("outputs") for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])
