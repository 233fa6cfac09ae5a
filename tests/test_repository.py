"""Repository hygiene: stripped notebooks, pins in step, the notebook skeleton."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==(\S+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_environment_yml_pins_match_requirements():
    requirements = _pins((ROOT / "requirements.txt").read_text().splitlines())
    environment = _pins((ROOT / "environment.yml").read_text().splitlines())
    assert requirements, "requirements.txt pins nothing"
    assert environment == requirements
    assert requirements["torch"] == "2.15.0" and requirements["torchvision"] == "0.29.2"
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


def _what_git_would_commit(path: Path, objects: Path) -> str:
    """The notebook as `git add` would store it: read through the filters git has for it here (the
    one that strips outputs, once `make setup` has set it up), written to a scratch object store."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return path.read_text(encoding="utf-8")  # no git: the file is what would be committed
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(objects)}
    relative = str(path.relative_to(ROOT))
    stored = subprocess.run(
        ["git", "hash-object", "-w", "--path", relative, relative], cwd=ROOT, env=env, capture_output=True
    )
    assert stored.returncode == 0, stored.stderr.decode()
    blob = subprocess.run(
        ["git", "cat-file", "blob", stored.stdout.decode().strip()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    )
    return blob.stdout.decode("utf-8")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_outputs_are_stripped(path, tmp_path):
    # What git would commit, not the file: a lesson run in JupyterLab (autosave) leaves its outputs
    # in the file, and git's filter (.gitattributes, scripts/strip_outputs.py) takes them out.
    notebook = json.loads(_what_git_would_commit(path, tmp_path))
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, (
                f"{path.name}, cell {index}: git would commit its outputs. Run `make setup` once in this "
                "clone (it sets up the git filter that strips them), or clear them (Kernel > Restart & Clear)"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_skeleton(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    markdown = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    for heading in ("Learning objectives", "Prerequisites", "Hardware", "Try it yourself", "Summary"):
        assert heading in markdown, f"{path.name} lacks '{heading}'"
    assert "describe_devices()" in code, f"{path.name}: the setup cell should print the hardware"
    assert "sys.path" not in code and "%run" not in code and "import *" not in code
    assert "assert " in code, f"{path.name} checks none of its claims"


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_results_the_readme_and_notebooks_read_are_not_git_ignored():
    # A results file that exists here but is ignored by git is missing from every fresh clone (and
    # from CI), so the README table and notebook 06 would read something else there.
    kept = sorted(ROOT.glob("results/notebook-times-*.json")) + sorted(
        path for path in ROOT.glob("results/bench-*") if "-quick" not in path.stem
    )
    assert kept, "results/ holds no timing or benchmark files"
    relative = [str(path.relative_to(ROOT)) for path in kept]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *relative], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert not ignored, f"these results are git-ignored, so a fresh clone lacks them: {ignored}"
