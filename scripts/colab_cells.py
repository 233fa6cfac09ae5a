"""Write the Colab (and Kaggle) links and setup cells, and cut a release that updates them all.

    python scripts/colab_cells.py notebooks/*.ipynb README.md          # update the cells and links
    python scripts/colab_cells.py --check notebooks/*.ipynb README.md  # exit 1 and list the stale files
    python scripts/colab_cells.py --release 0.2.0                      # what `make release` runs

The repository and the release tag come from ``helpers/course.py``, the one place that names them.
In a notebook, the badge is a markdown cell (id ``colab-badge``) at the top, after the same link as
text (an offline classroom cannot load the badge's image), with an "Open in Kaggle" link beside it
in the notebooks of ``KAGGLE_NOTEBOOKS``; the setup cell (id ``colab-setup``) goes just before the
notebook's first code cell, so it runs before anything imports the helpers, and its code is hidden
in JupyterLab behind its first line (``jupyter.source_hidden`` in its metadata). Every other cell,
its id and metadata stay as they are, and running the tool twice changes nothing: a notebook whose
two cells are already current is not rewritten. In a markdown file (the README) only the targets
of the Colab and Kaggle links of the notebooks change.

``--release X.Y.Z`` refuses a malformed version, a tree with uncommitted changes and an existing
tag; otherwise it sets the version in ``pyproject.toml`` and ``helpers/course.py``, rewrites every
notebook's cells and the README's links for the tag ``vX.Y.Z``, and prints the git commands that
commit, tag and publish it. It runs no git command that changes anything: the release commit is
made after a look at ``git diff``.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

try:
    import nbformat
except ImportError:  # e.g. `make release` in a clone without .venv, on the system's python3
    raise SystemExit(
        f"{sys.executable} has no nbformat: run `make setup` first, which makes .venv"
    ) from None

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path[:1]:  # this checkout's helpers, whichever copy is installed
    sys.path.insert(0, str(ROOT))

from helpers.course import (  # noqa: E402
    CHECKOUT_VARIABLE,
    KAGGLE_NOTEBOOKS,
    REPOSITORY,
    TAG,
    colab_url,
    kaggle_url,
)

BADGE_ID = "colab-badge"
SETUP_ID = "colab-setup"
# The setup cell's code is hidden in JupyterLab, which shows its first line as a title in its place:
# a student's first screen is the lesson, not 40 lines that matter only on Colab and Kaggle.
SETUP_METADATA = {"jupyter": {"source_hidden": True}}
_BADGE_MARK = "colab.research.google.com/assets/colab-badge.svg"
_KAGGLE_BADGE = "kaggle.com/static/images/open-in-kaggle.svg"
BADGE_TEXT = "Run this notebook in Google Colab"
BADGE_NOTE = "on a free GPU (online only):"
KAGGLE_TEXT = "or on Kaggle"
KAGGLE_NOTE = "on two free GPUs:"
_SETUP_MARK = "# Colab and Kaggle only: install the helpers"
_OLD_SETUP_MARKS = (
    "# Colab only: install the course's helpers",
)  # cells written by earlier versions
_VERSION = re.compile(r"\d+\.\d+\.\d+")
_BLOB = r"[\w.-]+/[\w.-]+/blob/[^/\s)]+/notebooks/([\w.-]+\.ipynb)"  # OWNER/NAME/blob/REF/notebooks/FILE
_KAGGLE_OPENS = r"https://(?:www\.)?kaggle\.com/kernels/welcome\?src=https://github\.com/"
_README_LINKS = (  # (pattern, the address it stands for)
    (re.compile(r"https://colab\.research\.google\.com/github/" + _BLOB), colab_url),
    (re.compile(_KAGGLE_OPENS + _BLOB), kaggle_url),
)

_SETUP_TEMPLATE = """\
{mark}. Elsewhere this does nothing.
# It fetches the course at this notebook's release, {tag}; torch stays as Colab or Kaggle has it.
import os
import sys

on_colab = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
on_kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ
if on_colab or on_kaggle:
    import importlib
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    repository, tag = {repository}, {tag_literal}
    checkout = Path.home() / "gpu-course" / tag  # fetched once per runtime
    if not (checkout / "pyproject.toml").is_file():
        checkout.parent.mkdir(parents=True, exist_ok=True)
        partial = tempfile.mkdtemp(dir=checkout.parent)  # renamed once complete
        clone = ["git", "clone", "--quiet", "--depth", "1", "--branch", tag, repository, partial]
        no_prompt = {{**os.environ, "GIT_TERMINAL_PROMPT": "0"}}  # a missing repository fails at once
        fetched = subprocess.run(clone, capture_output=True, text=True, env=no_prompt)
        if fetched.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            said = " ".join(fetched.stderr.strip().splitlines()[-1:])
            kaggle = "; on Kaggle, turn Internet on in Settings" if on_kaggle else ""
            raise RuntimeError(
                f"The course's release {{tag}} could not be fetched from {{repository}} (git: {{said}}): "
                f"open this notebook from the repository where the course is published, or see "
                f"docs/publishing.md there{{kaggle}}"
            )
        shutil.rmtree(checkout, ignore_errors=True)
        os.replace(partial, checkout)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(checkout)]
    installed = subprocess.run(command, capture_output=True, text=True)
    if installed.returncode != 0:
        raise RuntimeError(f"Installing the helpers from {{checkout}} failed:\\n{{installed.stderr}}")
    # helpers.recorded reads the recorded GPU runs there
    os.environ[{variable}] = str(checkout)
    importlib.invalidate_caches()  # let the import system see the new package
    import torch

    from helpers.course import setup_hint

    hint = setup_hint("kaggle" if on_kaggle else "colab", has_gpu=torch.cuda.is_available())
    if hint:
        print(hint)"""


def badge_source(notebook_name: str, tag: str = TAG) -> str:
    """The badge cell's markdown for ``notebooks/<notebook_name>``: the link as text, then the badge
    (offline, where the badge's image cannot load, the text still says where the link goes); the
    same for Kaggle in the notebooks of ``KAGGLE_NOTEBOOKS``."""
    url = colab_url(notebook_name, ref=tag)
    source = f"[{BADGE_TEXT}]({url}) {BADGE_NOTE} [![Open In Colab](https://{_BADGE_MARK})]({url})"
    if notebook_name in KAGGLE_NOTEBOOKS:
        url = kaggle_url(notebook_name, ref=tag)
        source += f", [{KAGGLE_TEXT}]({url}) {KAGGLE_NOTE} [![Open In Kaggle](https://{_KAGGLE_BADGE})]({url})"
    return source


def setup_source(tag: str = TAG) -> str:
    """The setup cell's code, which fetches the course at ``tag`` and installs its helpers."""
    return _SETUP_TEMPLATE.format(  # json.dumps writes a double-quoted literal, as ruff format wants it
        mark=_SETUP_MARK,
        tag=tag,
        repository=json.dumps(REPOSITORY),
        tag_literal=json.dumps(tag),
        variable=json.dumps(CHECKOUT_VARIABLE),
    )


def _is_colab_cell(cell: dict) -> bool:
    source = "".join(cell.get("source", ""))
    return (
        cell.get("id") in {BADGE_ID, SETUP_ID}
        or (
            cell["cell_type"] == "markdown"
            and _BADGE_MARK in source
            and len(source.splitlines()) == 1
        )
        or (cell["cell_type"] == "code" and source.startswith((_SETUP_MARK, *_OLD_SETUP_MARKS)))
    )


def with_colab_cells(
    notebook: nbformat.NotebookNode, notebook_name: str, tag: str = TAG
) -> nbformat.NotebookNode:
    """A copy of ``notebook`` with the badge first and the setup cell before the first code cell."""
    result = copy.deepcopy(notebook)
    cells = [cell for cell in result.cells if not _is_colab_cell(cell)]
    for cell in cells:  # a notebook from before cell ids (nbformat 4.4) gets ids, as 4.5 requires
        if "id" not in cell:
            cell["id"] = nbformat.v4.new_code_cell().id
    badge = nbformat.v4.new_markdown_cell(badge_source(notebook_name, tag), id=BADGE_ID)
    setup = nbformat.v4.new_code_cell(setup_source(tag), id=SETUP_ID, metadata=SETUP_METADATA)
    first_code = next(
        (i for i, cell in enumerate(cells) if cell["cell_type"] == "code"), len(cells)
    )
    result.cells = [badge, *cells[:first_code], setup, *cells[first_code:]]
    result.nbformat, result.nbformat_minor = 4, max(5, result.get("nbformat_minor", 5))
    return result


def with_current_links(text: str, tag: str = TAG) -> str:
    """``text`` (markdown) with every Colab and Kaggle link of a notebook pointing at ``tag``."""
    for pattern, address in _README_LINKS:
        text = pattern.sub(lambda match, address=address: address(match.group(1), ref=tag), text)
    return text


def _comparable(notebook: nbformat.NotebookNode) -> list[tuple]:
    return [
        (c["cell_type"], c.get("id"), "".join(c["source"]), c.get("metadata", {}), c.get("outputs"))
        for c in notebook.cells
    ]


def _update(path: Path, check: bool, tag: str) -> bool:
    """Whether ``path`` was stale; rewritten unless ``check``."""
    if path.suffix not in {".ipynb", ".md"}:
        raise SystemExit(
            f"{path}: not a notebook (.ipynb) or markdown file (.md); pass e.g. notebooks/*.ipynb"
        )
    if not path.is_file():
        raise SystemExit(f"{path}: no such file")
    if path.suffix == ".md":
        text = path.read_text(encoding="utf-8")
        updated = with_current_links(text, tag)
        if updated != text and not check:
            path.write_text(updated, encoding="utf-8")
        return updated != text
    notebook = nbformat.read(path, as_version=4)
    updated = with_colab_cells(notebook, path.name, tag)
    if _comparable(updated) == _comparable(notebook):
        return False
    if not check:
        nbformat.write(updated, path)
    return True


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def _with_value(path: Path, pattern: str, value: str) -> str:
    """The text of ``path`` with the quoted value of the one line that ``pattern`` (group 1: up to the
    quote) matches set to ``value``."""
    text = path.read_text(encoding="utf-8")
    updated, count = re.subn(
        pattern + r'"[^"]*"', lambda m: f'{m.group(1)}"{value}"', text, flags=re.M
    )
    if count != 1:
        raise SystemExit(f"{path}: found {count} lines matching {pattern!r} where one was expected")
    return updated


def release(version: str, root: Path = ROOT) -> int:
    """Set the version everywhere and rewrite every cell and link for its tag; print the git commands.

    ``root``: the clone to release (this one by default)."""
    if not _VERSION.fullmatch(version):
        raise SystemExit(
            f"{version!r} is not a release version: give three numbers without a v, "
            "e.g. make release VERSION=0.2.0"
        )
    tag = f"v{version}"
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    if status.returncode != 0:
        raise SystemExit(
            f"{root} is not a git clone ({status.stderr.strip()}): release from a clone of the course"
        )
    if status.stdout.strip():
        raise SystemExit(
            "The working tree has uncommitted changes (see git status): commit or stash them first, "
            "so that the release commit holds the release alone."
        )
    if _git(root, "rev-parse", "--quiet", "--verify", f"refs/tags/{tag}").returncode == 0:
        raise SystemExit(f"The tag {tag} exists already: release a higher version than {version}.")
    versions = {  # both read before either is written
        path: _with_value(path, pattern, version)
        for path, pattern in (
            (root / "pyproject.toml", r"^(version = )"),
            (root / "helpers" / "course.py", r"^(VERSION = )"),
        )
    }
    for path, text in versions.items():
        path.write_text(text, encoding="utf-8")
    files = [*sorted((root / "notebooks").glob("*.ipynb")), root / "README.md"]
    changed = [path.relative_to(root).as_posix() for path in files if _update(path, False, tag)]
    print(f"Release {tag} written: pyproject.toml, helpers/course.py, " + ", ".join(changed) + ".")
    print("Look at `git diff`, then commit, tag and publish it (the setup cells fetch the tag):")
    print(f'  git commit -am "Release {tag}"')
    print(f"  git tag {tag}")
    print(f"  git push origin HEAD {tag}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "paths", nargs="*", type=Path, help="the .ipynb and .md files to update or check"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any is stale"
    )
    parser.add_argument(
        "--release", metavar="X.Y.Z", help="cut release vX.Y.Z (see the module's help)"
    )
    args = parser.parse_args(argv)
    if args.release is not None:
        if args.paths or args.check:
            parser.error(
                "--release takes no files and no --check: it updates every notebook and README.md"
            )
        return release(args.release)
    if not args.paths:
        parser.error("give the files to update, e.g. notebooks/*.ipynb README.md")

    stale = [path for path in args.paths if _update(path, args.check, TAG)]
    if args.check and stale:
        print(f"Colab links or cells missing or not at {TAG} in:", *stale, sep="\n  ")
        print("Run: python scripts/colab_cells.py " + " ".join(str(p) for p in stale))
        return 1
    for path in stale:
        print(f"updated the Colab links and cells of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
