"""Open in Colab: the configured repository, the badge and setup cell of every notebook, the tool.

The setup cell is run for real twice: here, where it must do nothing, and with a stand-in for
Colab's detection (the ``COLAB_RELEASE_TAG`` variable Colab sets), where it runs its real pip
command in ``--dry-run`` mode against a local git copy of this repository (git's ``insteadOf``
points the GitHub address at it), so the exact command line a Colab runtime would run is checked
by pip itself without the network.
"""

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from helpers.course import (
    BRANCH,
    DISTRIBUTION,
    REPOSITORY,
    colab_gpu_hint,
    colab_install_command,
    colab_url,
    helpers_requirement,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OWNER_AND_NAME = REPOSITORY.removeprefix("https://github.com/").strip("/")


def _load_tool():
    spec = importlib.util.spec_from_file_location("colab_cells", ROOT / "scripts" / "colab_cells.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


def _command_in(source: str) -> list[str]:
    """The list assigned to ``command`` in the cell, with ``sys.executable`` written as such."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["command"]:
            return [
                ast.unparse(e) if isinstance(e, ast.Attribute) else ast.literal_eval(e)
                for e in node.value.elts
            ]
    raise AssertionError("the setup cell assigns no `command` list")


# --- the configuration ------------------------------------------------------------------------


def test_the_configured_repository_is_on_github_and_names_the_package_of_pyproject():
    assert REPOSITORY.startswith("https://github.com/") and OWNER_AND_NAME.count("/") == 1
    assert BRANCH and " " not in BRANCH
    name = re.search(r'^name = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert name is not None and name.group(1) == DISTRIBUTION
    assert helpers_requirement() == f"{DISTRIBUTION} @ git+{REPOSITORY}@{BRANCH}"


def test_colab_url_and_its_errors():
    assert colab_url("00_x.ipynb") == (
        f"https://colab.research.google.com/github/{OWNER_AND_NAME}/blob/{BRANCH}/notebooks/00_x.ipynb"
    )
    assert colab_url("a.ipynb", repository="https://github.com/o/n.git", branch="dev") == (
        "https://colab.research.google.com/github/o/n/blob/dev/notebooks/a.ipynb"
    )
    with pytest.raises(ValueError, match="not a GitHub repository"):
        colab_url("a.ipynb", repository="https://gitlab.com/o/n")
    with pytest.raises(ValueError, match="notebook file name"):
        colab_url("notebooks/a.ipynb")


def test_install_command_is_empty_off_colab_and_leaves_torch_alone_on_colab():
    assert colab_install_command(on_colab=False) == []
    command = colab_install_command(on_colab=True, python="/usr/bin/python3")
    assert command == [
        "/usr/bin/python3",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        f"{DISTRIBUTION} @ git+{REPOSITORY}@{BRANCH}",
    ]
    # nothing that would reinstall or upgrade what Colab has, and torch is never named
    assert not {"-U", "--upgrade", "--force-reinstall", "--ignore-installed"} & set(command)
    assert not any(re.match(r"torch(vision|audio)?\b", arg) for arg in command)


def test_gpu_hint_only_on_a_colab_cpu_runtime():
    assert colab_gpu_hint(on_colab=False, has_gpu=False) is None
    assert colab_gpu_hint(on_colab=True, has_gpu=True) is None
    hint = colab_gpu_hint(on_colab=True, has_gpu=False)
    assert "Runtime > Change runtime type" in hint and "GPU" in hint


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: colab_gpu_hint(on_colab="False", has_gpu=False), "on_colab must be True or False"),
        (lambda: colab_gpu_hint(on_colab=True, has_gpu=0), "has_gpu must be True or False"),
        (lambda: colab_install_command(on_colab="no"), "on_colab must be True or False"),
        (lambda: colab_install_command(on_colab=True, python=None), "python must be a string"),
        (lambda: colab_url(0), "notebook must be a string"),
        (lambda: colab_url("a.ipynb", branch=None), "branch must be a string"),
        (lambda: helpers_requirement(repository=None), "repository must be a string"),
    ],
)
def test_course_helpers_name_a_wrong_argument(call, words):
    with pytest.raises(TypeError, match=words):
        call()


# --- every notebook ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_an_up_to_date_badge_and_setup_cell(path):
    cells = nbformat.read(path, as_version=4).cells
    badge = cells[0]
    assert badge.cell_type == "markdown" and badge.get("id") == tool.BADGE_ID, (
        f"{path.name}: the first cell is not the Colab badge; run python scripts/colab_cells.py {path}"
    )
    expected_url = (
        f"https://colab.research.google.com/github/{OWNER_AND_NAME}/blob/{BRANCH}/notebooks/{path.name}"
    )
    assert f"]({expected_url})" in badge.source, f"{path.name}: the badge does not link to {expected_url}"
    assert "colab-badge.svg" in badge.source

    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    assert cells[code[0]].get("id") == tool.SETUP_ID, (
        f"{path.name}: the setup cell must be the first code cell"
    )
    assert cells[code[0]].source == tool.setup_source(), f"{path.name}: the setup cell is out of date"
    assert _command_in(cells[code[0]].source) == colab_install_command(on_colab=True, python="sys.executable")
    assert tool.main(["--check", str(path)]) == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_screen_has_a_text_link_and_the_setup_cell_folded_to_one_line(path):
    """Offline the badge's image cannot load, so the link is there as text too; and in JupyterLab the
    setup cell shows one line, its first, instead of 25 lines that matter only on Colab."""
    cells = nbformat.read(path, as_version=4).cells
    text_links = re.findall(r"(?<!!)\[([^\[\]]+)\]\(([^)]+)\)", cells[0].source)  # not the image
    assert [url for _, url in text_links] == [colab_url(path.name)], cells[0].source
    assert "Colab" in text_links[0][0]
    setup = next(cell for cell in cells if cell.cell_type == "code")
    assert setup.metadata.get("jupyter", {}).get("source_hidden") is True, f"{path.name}: not folded"
    title = setup.source.splitlines()[0]
    assert title.startswith("# Colab only") and "Elsewhere this does nothing" in title and len(title) <= 80


def test_setup_cell_does_nothing_on_this_machine():
    source = tool.setup_source()
    env = {k: v for k, v in os.environ.items() if k != "COLAB_RELEASE_TAG"}
    probe = source + "\nimport sys\nprint('torch imported:', 'torch' in sys.modules)"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout == "torch imported: False\n" and done.stderr == ""  # silent, installs nothing
    assert elapsed < 10


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to stand in for GitHub")
def test_setup_cell_on_a_colab_stand_in_runs_a_valid_pip_command(tmp_path):
    """The cell's real command, with pip in --dry-run and a local git copy standing in for GitHub."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout: no commit to stand in for the published branch")
    remote = tmp_path / "remote"  # a repository whose branch BRANCH is this checkout's last commit
    subprocess.run(["git", "init", "-q", str(remote)], check=True)
    fetched = subprocess.run(
        ["git", "-C", str(remote), "fetch", "-q", str(ROOT), f"{head.stdout.strip()}:refs/heads/{BRANCH}"],
        capture_output=True,
        text=True,
    )
    if fetched.returncode != 0:  # e.g. a copy of the working tree whose .git lacks the commit's objects
        pytest.skip(f"this checkout's git history cannot be fetched from: {fetched.stderr.strip()[:200]}")
    log = tmp_path / "pip.log"
    env = {
        **os.environ,
        "COLAB_RELEASE_TAG": "stand-in",  # what Colab sets; the cell's detection reads it
        "PIP_DRY_RUN": "1",  # resolve and build, install nothing
        "PIP_NO_INDEX": "1",  # no network: --no-deps needs none
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads this as "no build isolation": setuptools from .venv
        "PIP_LOG": str(log),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{remote.as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": REPOSITORY,
    }
    done = subprocess.run(
        [sys.executable, "-c", tool.setup_source()], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert f"Cloning {REPOSITORY} (to revision {BRANCH})" in text
    assert f"Would install {DISTRIBUTION}-" in text
    assert "Collecting torch" not in text  # --no-deps: nothing else is even looked at
    # the cell went on past the install: on a CPU "Colab" it prints how to switch to a GPU
    expected = colab_gpu_hint(on_colab=True, has_gpu=_has_cuda())
    assert done.stdout == (expected + "\n" if expected else "")


def test_what_colab_installs_holds_every_helpers_module(tmp_path):
    """The wheel pip builds from the repository has every module of helpers (torchrun -m helpers.X)."""
    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "--quiet"]
        + ["--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob(f"{DISTRIBUTION.replace('-', '_')}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.endswith(".py")}
    modules = {p.relative_to(source).as_posix() for p in (source / "helpers").rglob("*.py")}
    assert modules <= packed, f"not in the wheel Colab installs: {sorted(modules - packed)}"


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# --- the tool ---------------------------------------------------------------------------------


def _notebook(tmp_path, cells, name="07_example.ipynb"):
    path = tmp_path / name
    notebook = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(notebook, path)
    return path


def test_tool_adds_the_cells_keeps_the_others_and_is_idempotent(tmp_path, capsys):
    cells = [
        nbformat.v4.new_markdown_cell("# Title", id="t-0"),
        nbformat.v4.new_markdown_cell("## Setup", id="t-1"),
        nbformat.v4.new_code_cell("import torch", id="t-2", metadata={"tags": ["keep-me"]}),
        nbformat.v4.new_code_cell("x = 1", id="t-3"),
    ]
    path = _notebook(tmp_path, cells)
    assert tool.main(["--check", str(path)]) == 1
    assert str(path) in capsys.readouterr().out

    assert tool.main([str(path)]) == 0
    after = nbformat.read(path, as_version=4).cells
    assert [c.id for c in after] == [tool.BADGE_ID, "t-0", "t-1", tool.SETUP_ID, "t-2", "t-3"]
    assert after[4].metadata == {"tags": ["keep-me"]} and after[4].source == "import torch"
    assert colab_url("07_example.ipynb") in after[0].source

    written = path.read_bytes()
    assert tool.main([str(path)]) == 0 and path.read_bytes() == written  # a second run writes nothing
    assert tool.main(["--check", str(path)]) == 0


def test_tool_refreshes_stale_cells_in_place_without_duplicating_them(tmp_path):
    old_badge = (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://x/old.ipynb)"
    )
    cells = [
        nbformat.v4.new_markdown_cell("# Title", id="t-0"),
        nbformat.v4.new_code_cell("import torch", id="t-1"),
        nbformat.v4.new_markdown_cell(old_badge, id="t-2"),  # a badge without the id, in the wrong place
        nbformat.v4.new_code_cell(tool._SETUP_MARK + " (old)\nprint('old')", id=tool.SETUP_ID),
    ]
    path = _notebook(tmp_path, cells)
    assert tool.main(["--check", str(path)]) == 1
    tool.main([str(path)])
    after = nbformat.read(path, as_version=4).cells
    assert [c.id for c in after] == [tool.BADGE_ID, "t-0", tool.SETUP_ID, "t-1"]
    assert after[2].source == tool.setup_source() and "old.ipynb" not in after[0].source


def test_tool_handles_a_notebook_without_code_and_refuses_other_files(tmp_path):
    path = _notebook(tmp_path, [nbformat.v4.new_markdown_cell("# Only text", id="t-0")])
    tool.main([str(path)])
    assert [c.id for c in nbformat.read(path, as_version=4).cells] == [tool.BADGE_ID, "t-0", tool.SETUP_ID]
    with pytest.raises(SystemExit, match="not a notebook"):
        tool.main([str(tmp_path / "script.py")])
    with pytest.raises(SystemExit, match="no such notebook"):
        tool.main([str(tmp_path / "missing.ipynb")])
