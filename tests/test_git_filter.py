"""The notebook-output filter (scripts/strip_outputs.py), and a lesson run for real in a fresh
repository.

As a student's JupyterLab autosave would, the last tests save a lesson run in place (with its
checkpoints and logs); then git has nothing to commit and the repository's own checks pass.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import colab_cells  # noqa: E402
import strip_outputs as tool  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FILTER = "strip-notebook-outputs"
LESSON = "notebooks/00_devices_and_tensors.ipynb"  # the quickest to run
# What other lessons write next to the notebooks, run in the same kernel after the lesson's cells.
WRITES = """
import torch
from torch.utils.tensorboard import SummaryWriter
from helpers.checkpoint import save_checkpoint
model = torch.nn.Linear(2, 2)
save_checkpoint("checkpoints/lesson.pt", model, torch.optim.SGD(model.parameters(), lr=0.1), 0)
with SummaryWriter("runs/lesson/1") as writer:
    writer.add_scalar("loss", 1.0, 0)
"""
NO_MAKE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # when pytest itself runs under `make test`
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
needs_git = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("make") is None or not (ROOT / ".git").exists(),
    reason="needs git, make and a git checkout",
)


def _git(*args, cwd=ROOT, check=True):
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done


def _make(*args, cwd, env=None):
    env = {k: v for k, v in (env or os.environ).items() if k not in NO_MAKE}
    make = ["make", "--no-print-directory", *args]
    return subprocess.run(make, cwd=cwd, env=env, capture_output=True, text=True)


def _run_notebook():
    """A notebook as a run leaves it: outputs, counts, timings, the kernel's language_info, view
    state."""
    view = {
        "jupyter": {"outputs_hidden": True, "source_hidden": True},
        "collapsed": False,
        "scrolled": True,
    }
    ran = {"execution": {"iopub.status.busy": "2026-11-22T10:00:00Z"}, "trusted": True, **view}
    code = {"cell_type": "code", "execution_count": 3}
    output = {"name": "stdout", "output_type": "stream", "text": ["hello\n"]}
    first = {
        **code,
        "id": "a-1",
        "metadata": {"tags": ["raises-exception"], **ran},
        "outputs": [output],
    }
    cells = [
        {**first, "source": "print('hello')\nx = 1"},
        {
            **code,
            "id": colab_cells.SETUP_ID,
            "metadata": {},
            "outputs": [],
            "source": ["#"],
        },  # unfolded
        {"cell_type": "markdown", "id": "m-1", "metadata": {}, "source": ["# Título ✓"]},
        {
            **code,
            "id": "a-2",
            "metadata": {"tags": ["proof"], "cellView": "form"},  # unfolded by a student
            "outputs": [output],
            "source": ["# @title Check: x"],
        },
    ]
    language = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    metadata = {"kernelspec": KERNELSPEC, "language_info": language, "widgets": {"state": {}}}
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def test_strip_removes_what_a_run_adds_and_keeps_the_lesson():
    stripped = tool.strip(_run_notebook())
    first, setup, markdown, proof = stripped["cells"]
    assert first["outputs"] == [] and first["execution_count"] is None
    assert first["metadata"] == {"tags": ["raises-exception"]}  # tags stay: nbval reads them
    assert first["source"] == ["print('hello')\n", "x = 1"]  # as Jupyter stores it
    # the Colab setup cell stays folded, as scripts/colab_cells.py writes it, whatever the student's
    # view
    assert setup["metadata"] == colab_cells.SETUP_METADATA and setup["execution_count"] is None
    assert markdown == {
        "cell_type": "markdown",
        "id": "m-1",
        "metadata": {},
        "source": ["# Título ✓"],
    }
    # a proof cell stays folded too, whatever the student's view, and keeps its Colab form
    proof_view = {"tags": ["proof"], "cellView": "form", "jupyter": {"source_hidden": True}}
    assert proof["metadata"] == proof_view and proof["outputs"] == []
    assert stripped["metadata"] == {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}


@pytest.mark.parametrize(
    "text", ["", "not json", '{"a": 1}', "<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> x\n"]
)
def test_what_is_not_a_notebook_passes_through_unchanged(text):
    script = [sys.executable, str(ROOT / "scripts" / "strip_outputs.py")]
    done = subprocess.run(script, input=text.encode(), capture_output=True)
    assert done.returncode == 0 and done.stdout == text.encode()
    assert b"not a notebook" in done.stderr  # git shows the text as it is, with a note why


def test_files_stripped_in_place_as_jupyter_writes_them_and_the_check(tmp_path, capsys):
    run = tmp_path / "run.ipynb"
    run.write_text(json.dumps(_run_notebook()), encoding="utf-8")
    assert tool.main(["--check", str(run)]) == 1 and str(run) in capsys.readouterr().out
    assert tool.main([str(run)]) == 0
    text = run.read_text(encoding="utf-8")
    assert (
        json.loads(text)["cells"][0]["outputs"] == [] and "Título ✓" in text
    )  # UTF-8, not \u escapes
    assert (
        text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"
    )  # the server's own format
    assert tool.main(["--check", str(run)]) == 0 and tool.main([str(run)]) == 0
    assert run.read_text(encoding="utf-8") == text  # stripping twice changes nothing
    (tmp_path / "notes.ipynb").write_text("not json")
    with pytest.raises(SystemExit, match="not a notebook"):
        tool.main([str(tmp_path / "notes.ipynb")])


@needs_git
def test_gitattributes_gives_every_lesson_the_filter_and_not_the_recorded_gpu_runs():
    lessons = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]
    recorded = [
        str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("results/gpu/*/notebooks/*.ipynb"))
    ]
    assert recorded, "no recorded GPU run to check against"
    out = _git("check-attr", "filter", "--", *lessons, *recorded).stdout.splitlines()
    expected = [f"{p}: filter: {FILTER}" for p in lessons] + [
        f"{p}: filter: unspecified" for p in recorded
    ]
    assert out == expected


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A fresh git repository of this working tree's files (committed), with `make git-filter`
    run."""
    if needs_git.args[0]:
        pytest.skip(needs_git.kwargs["reason"])
    repo = tmp_path_factory.mktemp("course") / "course"
    files = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():  # a file deleted but not yet committed is listed too
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git(
        "-c", "user.name=c", "-c", "user.email=c@example.org", "commit", "-qm", "a clone", cwd=repo
    )
    done = _make("git-filter", cwd=repo)
    assert done.returncode == 0, done.stderr
    return repo


def test_make_setup_tells_git_to_strip_notebooks(course):
    for target in ("lab", "test"):  # through `make setup`
        assert f"filter.{FILTER}.clean" in _make("-n", target, cwd=course).stdout, (
            f"make {target}: no filter"
        )
    found = _git("config", "--get-regexp", f"^filter\\.{FILTER}\\.", cwd=course).stdout.splitlines()
    config = dict(line.removeprefix(f"filter.{FILTER}.").split(" ", 1) for line in found)
    assert config.pop("clean").endswith("scripts/strip_outputs.py"), found
    assert config == {"smudge": "cat", "required": "true"}
    before = (course / ".git" / "config").read_bytes()
    assert _make("git-filter", cwd=course).returncode == 0
    assert (course / ".git" / "config").read_bytes() == before  # run again, it writes nothing


def test_the_filter_names_no_interpreter_path_so_a_python_upgrade_keeps_git_add_working(
    course, tmp_path
):
    clean = _git("config", "--get", f"filter.{FILTER}.clean", cwd=course).stdout.split()
    assert clean[0] in {"python3", Path(sys.executable).name} and "/" not in clean[0], clean
    # After an upgrade: the Python that ran `make setup` is gone, python3 is another interpreter.
    (tmp_path / "bin").mkdir()
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    (tmp_path / "bin" / clean[0]).symlink_to(base)
    git_dir = Path(shutil.which("git")).parent
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{git_dir}"}
    path = course / "notebooks" / "scratch.ipynb"  # a run notebook, under the filter
    notebook = json.loads((course / LESSON).read_text(encoding="utf-8"))
    code = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    code["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["ran\n"]}]
    path.write_text(json.dumps(notebook), encoding="utf-8")
    try:
        added = subprocess.run(["git", "add", str(path)], cwd=course, env=env, capture_output=True)
        assert added.returncode == 0, added.stderr
        staged = json.loads(_git("show", ":notebooks/scratch.ipynb", cwd=course).stdout)
        assert all(not cell.get("outputs") for cell in staged["cells"])
    finally:
        _git("rm", "-q", "--cached", "--ignore-unmatch", "notebooks/scratch.ipynb", cwd=course)
        path.unlink()


def test_make_git_filter_outside_a_clone_does_nothing(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    env = {
        **os.environ,
        "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
    }  # not the repository around it
    done = _make("git-filter", cwd=tmp_path, env=env)
    assert done.returncode == 0 and not (tmp_path / ".git").exists(), done.stderr


def test_a_notebook_run_or_deleted_checks_out_as_committed(course):
    """git writes a notebook back as it was committed (the filter's smudge side: as stored)."""
    path = course / LESSON
    committed = _git("show", f"HEAD:{LESSON}", cwd=course).stdout
    notebook = nbformat.read(path, as_version=4)
    for cell in (cell for cell in notebook.cells if cell.cell_type == "code"):
        cell.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
        cell.execution_count = 1
    nbformat.write(notebook, path)
    _git("checkout", "--", LESSON, cwd=course)
    assert path.read_text(encoding="utf-8") == committed
    path.unlink()
    _git("checkout", "--", LESSON, cwd=course)
    assert path.read_text(encoding="utf-8") == committed


@pytest.fixture(scope="module")
def lesson_run(course):
    """LESSON executed in place in quick mode, then WRITES, and saved as autosave saves it."""
    from nbclient import NotebookClient

    path = course / LESSON
    notebook = nbformat.read(path, as_version=4)
    lesson_cells = notebook.cells
    notebook.cells = [*lesson_cells, nbformat.v4.new_code_cell(WRITES)]
    env = {**os.environ, "PYTHONPATH": str(course), "COURSE_QUICK": "1", "COURSE_DATA": "synthetic"}
    NotebookClient(
        notebook, timeout=600, resources={"metadata": {"path": str(path.parent)}}
    ).execute(env=env)
    notebook.cells = lesson_cells  # the lesson's own cells, with their outputs
    nbformat.write(notebook, path)  # what the Jupyter server does on every (auto)save
    assert (path.parent / "checkpoints" / "lesson.pt").is_file()
    assert any((path.parent / "runs" / "lesson").iterdir())
    return course, path


def test_after_a_lesson_run_git_has_nothing_to_commit(lesson_run):
    course, path = lesson_run
    assert any(
        cell.get("outputs") for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
    )
    # `git status` may list the notebook until `git add`, but what git reads through the filter is
    # unchanged
    assert _git("diff", "--exit-code", cwd=course, check=False).returncode == 0
    assert _git("diff", "--exit-code", "HEAD", cwd=course, check=False).returncode == 0
    _git("add", "-A", cwd=course)
    assert _git("status", "--porcelain", "--untracked-files=all", cwd=course).stdout == ""
    assert _git("diff", "--cached", "--exit-code", cwd=course, check=False).returncode == 0


def test_make_tests_repository_checks_pass_after_a_lesson_run(lesson_run):
    course, _ = lesson_run
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"} | {
        "PYTHONPATH": str(course)
    }
    pytest = ["pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "tests/test_repository.py"]
    command = [sys.executable, "-m", *pytest]  # no conftest: no torch to import
    done = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
