"""`make test` passes in every clone a contributor or a runner makes, not only in a fresh full one.

A clone holding the release tag (everyone who clones after the first release), one a commit after
it, and a shallow clone of depth 1 on no branch: what GitHub's checkout action makes for a pull
request (for a push it makes the same on a branch, which this checkout and the first two cover).
Each is made here from this repository, with no network, and the tests that read the clone's
commits or tags (those marked ``git_refs``) run in it. The rest of the suite runs here once: what it
reads of git (the files it tracks, its ignore rules) is the same in all of these clones.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.course import TAG

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git clone"
)


def _git(*args: str, cwd: Path | None = None) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def _committed_copy(tmp_path: Path) -> Path:
    """A repository whose last commit is this working tree as it is, uncommitted changes included,
    on top of this clone's history: the clones below are made from it."""
    source = tmp_path / "source"
    _git("clone", "-q", str(ROOT), str(source))
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
        elif not path.exists():  # deleted in the working tree
            (source / name).unlink(missing_ok=True)
    _git("add", "-A", cwd=source)
    _git("commit", "-q", "--allow-empty", "-m", "the working tree", cwd=source)
    return source


def _tagged(source: Path, path: Path) -> Path:
    _git("clone", "-q", str(source), str(path))
    _git("tag", TAG, cwd=path)
    return path


def _after_tag(source: Path, path: Path) -> Path:
    _tagged(source, path)
    _git("commit", "-q", "--allow-empty", "-m", "a commit after the release", cwd=path)
    return path


def _shallow_detached(source: Path, path: Path) -> Path:
    """As GitHub checks out a pull request: one commit deep, on no branch."""
    _git("clone", "-q", "--depth", "1", source.as_uri(), str(path))  # file://: --depth applies
    _git("checkout", "-q", "--detach", cwd=path)
    assert _git("rev-parse", "--is-shallow-repository", cwd=path).strip() == "true"
    assert _git("branch", "--show-current", cwd=path).strip() == ""
    return path


def _files_with_git_refs_tests(clone: Path) -> list[str]:
    """The test files that mark a test ``git_refs``: collecting only them skips importing the
    rest."""
    files = []
    for path in sorted((clone / "tests").glob("test_*.py")):
        if path.name != "test_clones.py" and "mark.git_refs" in path.read_text(encoding="utf-8"):
            files.append(str(path.relative_to(clone)))
    assert files, "no test is marked git_refs: the clones would check nothing"
    return files


CLONES = {
    "with the release tag": _tagged,
    "a commit after it": _after_tag,
    "shallow, on no branch": _shallow_detached,
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return _committed_copy(tmp_path_factory.mktemp("clones"))


@pytest.mark.parametrize("kind", CLONES)
def test_the_tests_that_read_git_pass_in_this_kind_of_clone(source, tmp_path, kind):
    clone = CLONES[kind](source, tmp_path / "clone")
    env = {**os.environ, "PYTHONPATH": str(clone)}  # the clone's helpers, not this checkout's
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-m", "git_refs", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "no:xdist", *_files_with_git_refs_tests(clone)]
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    summary = done.stdout.strip().splitlines()[-1:]
    assert done.returncode == 0, f"in a clone {kind}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert " passed" in summary[0] and "skipped" not in summary[0], summary
