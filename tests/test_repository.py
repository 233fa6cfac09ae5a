"""Repository hygiene: notebooks stored stripped, pins in step, results that a fresh clone has."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import strip_outputs  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
HAS_GIT = shutil.which("git") is not None and (ROOT / ".git").exists()


def _pins(path: Path) -> dict[str, str]:
    lines = (
        line.split("#")[0].strip().lstrip("- ").strip() for line in path.read_text().splitlines()
    )
    found = (re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==(\S+)", line) for line in lines)
    return {match[1].lower(): match[2] for match in found if match}


def test_environment_yml_pins_match_requirements():
    requirements = _pins(ROOT / "requirements.txt")
    assert requirements and _pins(ROOT / "environment.yml") == requirements
    assert requirements["torch"] == "2.15.0" and requirements["torchvision"] == "0.29.2"
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def _what_git_would_commit(path: Path, objects: Path) -> str:
    """The notebook as `git add` would store it: read through the filters git has for it here (the
    one that strips outputs, once `make setup` has set it up), written to a scratch object store."""
    if not HAS_GIT:
        return path.read_text(encoding="utf-8")  # no git: the file is what would be committed
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(objects)}
    relative = str(path.relative_to(ROOT))
    hashed = ["git", "hash-object", "-w", "--path", relative, relative]
    stored = subprocess.run(hashed, cwd=ROOT, env=env, capture_output=True, text=True)
    assert stored.returncode == 0, stored.stderr
    blob = ["git", "cat-file", "blob", stored.stdout.strip()]
    return subprocess.run(blob, cwd=ROOT, env=env, capture_output=True, check=True).stdout.decode(
        "utf-8"
    )


def test_every_notebook_is_stored_stripped_and_as_jupyter_writes_it(tmp_path):
    """What git would commit, not the file: a lesson run in JupyterLab (autosave) leaves its outputs
    in the file, and git's filter takes them out. Stored as Jupyter writes it, a run shows no
    change."""
    assert len(NOTEBOOKS) >= 3
    for path in NOTEBOOKS:
        text = _what_git_would_commit(path, tmp_path)
        for index, cell in enumerate(json.loads(text)["cells"]):
            assert not cell.get("outputs") and cell.get("execution_count") is None, (
                f"{path.name}, cell {index}: git would commit its outputs. Run `make setup` once "
                "in this clone (it sets up the git filter that strips them), or clear them "
                "(Kernel > Restart & Clear)"
            )
        assert strip_outputs.clean(text) == text, f"run: python3 scripts/strip_outputs.py {path}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_shows_the_hardware_and_checks_its_claims(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "describe_devices()" in code, f"{path.name}: the setup cell should print the hardware"
    assert "sys.path" not in code and "%run" not in code and "import *" not in code
    assert "assert " in code, f"{path.name} checks none of its claims"


@pytest.mark.skipif(not HAS_GIT, reason="needs a git checkout")
def test_results_the_readme_and_notebooks_read_are_not_git_ignored():
    # A results file that is here but git-ignored is missing from every fresh clone (and from CI).
    kept = sorted(ROOT.glob("results/notebook-times-*.json"))
    kept += sorted(path for path in ROOT.glob("results/bench-*") if "-quick" not in path.stem)
    assert kept, "results/ holds no timing or benchmark files"
    relative = [str(path.relative_to(ROOT)) for path in kept]
    check = ["git", "check-ignore", "--no-index", *relative]
    ignored = subprocess.run(check, cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not ignored, f"these results are git-ignored, so a fresh clone lacks them: {ignored}"
