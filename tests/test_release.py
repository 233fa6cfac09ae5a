"""`make release`: the first release of an untagged clone, a later one, and what it refuses.

Each test releases a clone of this working tree (committed), made here with no network; its
``origin`` is a bare repository standing in for GitHub, so the printed git commands run for real.
The tests marked ``git_refs`` run again in a tagged, an after-tag and a shallow, detached clone
(tests/test_clones.py). ``scripts/release.py`` is standard library only: the first release runs
on a Python that cannot import nbformat, as on a machine without ``.venv``.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import release as tool  # noqa: E402

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TAG = f"v{VERSION}"
NO_MAKE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # when pytest itself runs under `make test`
pytestmark = [
    pytest.mark.skipif(
        shutil.which("git") is None or shutil.which("make") is None or not (ROOT / ".git").exists(),
        reason="needs git, make and a git clone",
    ),
]


def _git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def _make_release(clone: Path, version: str, python: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in NO_MAKE}
    command = ["make", "-s", "release", f"VERSION={version}", f"PYTHON={python}"]
    return subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=120)


def _run_printed_commands(clone: Path, stdout: str) -> list[str]:
    """The git commands the release printed, run as a maintainer would; returns them."""
    commands = [line.strip() for line in stdout.splitlines() if line.startswith("  git ")]
    for command in commands:
        _git(*shlex.split(command)[1:], cwd=clone)
    return commands


def _colab_cells_check(clone: Path) -> subprocess.CompletedProcess:
    """scripts/colab_cells.py --check, run in the clone with its own helpers/course.py."""
    notebooks = [f"notebooks/{path.name}" for path in sorted(clone.glob("notebooks/*.ipynb"))]
    command = [sys.executable, "scripts/colab_cells.py", "--check", "README.md", *notebooks]
    return subprocess.run(command, cwd=clone, capture_output=True, text=True, timeout=120)


@pytest.fixture
def clone(tmp_path):
    """An untagged clone of this working tree, committed, whose origin is a bare repository."""
    path = tmp_path / "clone"
    _git("clone", "-q", str(ROOT), str(path), cwd=tmp_path)
    # On a branch, as a maintainer releases, even where this checkout is detached (a pull request
    # on GitHub): the clone checks out what this checkout has checked out.
    _git("checkout", "-q", "-B", "main", cwd=path)
    # GitHub holds the history the clone was made from (in a shallow clone, the part it has).
    _git("clone", "-q", "--bare", str(path), str(tmp_path / "github.git"), cwd=tmp_path)
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, path / name)
        elif not (ROOT / name).exists():  # deleted in the working tree
            (path / name).unlink(missing_ok=True)
    _git("add", "-A", cwd=path)
    _git("commit", "-q", "--allow-empty", "-m", "the working tree", cwd=path)
    for tag in _git("tag", "--list", cwd=path).split():  # a clone of a release has its tag
        _git("tag", "-d", tag, cwd=path)
    for tag in _git("tag", "--list", cwd=tmp_path / "github.git").split():
        _git("tag", "-d", tag, cwd=tmp_path / "github.git")
    _git("remote", "set-url", "origin", str(tmp_path / "github.git"), cwd=path)
    return path


@pytest.fixture
def stdlib_python(tmp_path):
    """A python3 without site-packages (-S) or the environment's paths (-I): no nbformat."""
    base = getattr(sys, "_base_executable", sys.executable)
    wrapper = tmp_path / "python-stdlib"
    wrapper.write_text(f'#!/bin/sh\nexec "{base}" -I -S "$@"\n')
    wrapper.chmod(0o755)
    has_nbformat = subprocess.run([str(wrapper), "-c", "import nbformat"], capture_output=True)
    assert has_nbformat.returncode != 0, "the stand-in Python can import nbformat"
    return str(wrapper)


@pytest.mark.git_refs
def test_first_release_of_an_untagged_clone_tags_and_pushes_on_the_standard_library(
    clone, stdlib_python
):
    head = _git("rev-parse", "HEAD", cwd=clone).strip()
    done = _make_release(clone, VERSION, stdlib_python)
    assert done.returncode == 0, done.stderr
    assert _git("status", "--porcelain", cwd=clone) == ""  # the files named this version already
    commands = _run_printed_commands(clone, done.stdout)
    assert [command.split()[1] for command in commands] == ["tag", "push"], done.stdout
    pushed = _git("rev-parse", f"refs/tags/{TAG}^{{commit}}", cwd=clone.parent / "github.git")
    assert pushed.strip() == head
    assert _colab_cells_check(clone).returncode == 0


def test_first_release_of_a_fork_points_every_cell_and_link_at_its_address(clone, stdlib_python):
    fork = "https://github.com/my-school/gpu-course"
    course = clone / "helpers" / "course.py"
    text = course.read_text(encoding="utf-8")
    course.write_text(re.sub(r'(?m)^REPOSITORY = "[^"]*"', f'REPOSITORY = "{fork}"', text))
    _git("commit", "-qam", "Publish at my-school", cwd=clone)
    assert _colab_cells_check(clone).returncode == 1  # the cells still name the old address

    done = _make_release(clone, VERSION, stdlib_python)
    assert done.returncode == 0, done.stderr
    commands = _run_printed_commands(clone, done.stdout)
    assert [command.split()[1] for command in commands] == ["commit", "tag", "push"], done.stdout
    assert _git("status", "--porcelain", cwd=clone) == ""
    assert _colab_cells_check(clone).returncode == 0  # as scripts/colab_cells.py writes them
    readme = (clone / "README.md").read_text(encoding="utf-8")
    assert "my-school/gpu-course/blob/" + TAG in readme
    assert "pytorch-gpu-course/pytorch-gpu-course" not in readme


@pytest.mark.git_refs
def test_release_sets_the_version_everywhere_and_refuses_what_it_cannot_release(clone):
    """Refused: a bad version, uncommitted changes, a tag that exists, a detached HEAD."""
    new = "9.8.7"  # a version no test elsewhere uses
    for bad in ("9.8", "v9.8.7", ""):
        with pytest.raises(SystemExit, match=re.escape(repr(bad))):
            tool.release(bad, root=clone)
    assert _git("status", "--porcelain", cwd=clone) == ""  # nothing touched

    done = _make_release(clone, new, sys.executable)  # as a maintainer types it
    assert done.returncode == 0, done.stderr
    assert tomllib.loads((clone / "pyproject.toml").read_text())["project"]["version"] == new
    assert f'VERSION = "{new}"' in (clone / "helpers" / "course.py").read_text()
    assert f"git tag v{new}" in done.stdout and "git push" in done.stdout
    assert _git("tag", "--list", cwd=clone) == ""  # it prints the git commands; runs none
    # the clone's own tool, run afresh with its rewritten helpers/course.py, finds every file at
    # the new tag
    assert _colab_cells_check(clone).returncode == 0

    diff = _git("diff", cwd=clone)
    with pytest.raises(SystemExit, match="git status"):  # its own changes, not committed yet
        tool.release("9.8.8", root=clone)
    assert _git("diff", cwd=clone) == diff
    _run_printed_commands(clone, done.stdout)
    with pytest.raises(SystemExit, match=f"v{new}"):
        tool.release(new, root=clone)
    _git("checkout", "-q", "--detach", cwd=clone)
    with pytest.raises(SystemExit, match="git switch main"):
        tool.release("9.8.8", root=clone)


def test_release_refuses_a_notebook_without_the_colab_cells(clone):
    path = clone / "notebooks" / "00_devices_and_tensors.ipynb"
    notebook = tool.parse(path.read_text(encoding="utf-8"))
    notebook["cells"] = [c for c in notebook["cells"] if c.get("id") != tool.SETUP_ID]
    path.write_text(tool.dumps(notebook), encoding="utf-8")
    _git("commit", "-qam", "a notebook without its setup cell", cwd=clone)
    with pytest.raises(SystemExit, match=re.escape("scripts/colab_cells.py")):
        tool.release("9.8.7", root=clone)
    assert _git("status", "--porcelain", cwd=clone) == ""  # refused before anything was written
