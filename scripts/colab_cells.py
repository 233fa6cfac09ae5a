"""Insert or refresh the "Open in Colab" badge and the Colab setup cell of notebooks.

    python scripts/colab_cells.py notebooks/*.ipynb          # add or update the two cells
    python scripts/colab_cells.py --check notebooks/*.ipynb  # exit 1 and list the stale notebooks

The repository and branch come from ``helpers/course.py``, the one place that names them. The
badge is a markdown cell (id ``colab-badge``) at the top, after the same link as text (an offline
classroom cannot load the badge's image); the setup cell (id ``colab-setup``) goes just
before the notebook's first code cell, so it runs before anything imports the helpers, and its code
is hidden in JupyterLab behind its first line (``jupyter.source_hidden`` in its metadata). Every
other cell, its id and metadata stay as they are, and running the tool twice changes nothing:
a notebook whose two cells are already current is not rewritten.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import nbformat

from helpers.course import colab_install_command, colab_url

BADGE_ID = "colab-badge"
SETUP_ID = "colab-setup"
# The setup cell's code is hidden in JupyterLab, which shows its first line as a title in its place:
# a student's first screen is the lesson, not 25 lines that matter only on Colab.
SETUP_METADATA = {"jupyter": {"source_hidden": True}}
_BADGE_MARK = "colab.research.google.com/assets/colab-badge.svg"
BADGE_TEXT = "Run this notebook in Google Colab"
BADGE_NOTE = "on a free GPU (online only):"
_SETUP_MARK = "# Colab only: install the course's helpers"
_PYTHON = "<python>"  # placeholder for sys.executable in the rendered command

_SETUP_TEMPLATE = """\
{mark}. Elsewhere this does nothing.
# torch stays as Colab has it.
import os
import sys

if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ:
    import importlib
    import subprocess

    command = [
{items}
    ]
    installed = subprocess.run(command, capture_output=True, text=True)
    if installed.returncode != 0:
        raise RuntimeError(f"Installing the course's helpers failed:\\n{{installed.stderr}}")
    importlib.invalidate_caches()  # let the import system see the new package
    import torch

    from helpers.course import colab_gpu_hint

    hint = colab_gpu_hint(on_colab=True, has_gpu=torch.cuda.is_available())
    if hint:
        print(hint)"""


def badge_source(notebook_name: str) -> str:
    """The badge cell's markdown for ``notebooks/<notebook_name>``: the link as text, then the badge;
    offline, where the badge's image cannot load, the text still says where the link goes."""
    url = colab_url(notebook_name)
    return f"[{BADGE_TEXT}]({url}) {BADGE_NOTE} [![Open In Colab](https://{_BADGE_MARK})]({url})"


def setup_source() -> str:
    """The setup cell's code: on Colab, the command of ``helpers.course.colab_install_command``."""
    command = colab_install_command(on_colab=True, python=_PYTHON)
    # json.dumps writes a double-quoted Python string literal, as ruff format wants it
    items = "\n".join(
        f"        {'sys.executable' if arg == _PYTHON else json.dumps(arg)}," for arg in command
    )
    return _SETUP_TEMPLATE.format(mark=_SETUP_MARK, items=items)


def _is_colab_cell(cell: dict) -> bool:
    source = "".join(cell.get("source", ""))
    return (
        cell.get("id") in {BADGE_ID, SETUP_ID}
        or (cell["cell_type"] == "markdown" and _BADGE_MARK in source and len(source.splitlines()) == 1)
        or (cell["cell_type"] == "code" and source.startswith(_SETUP_MARK))
    )


def with_colab_cells(notebook: nbformat.NotebookNode, notebook_name: str) -> nbformat.NotebookNode:
    """A copy of ``notebook`` with the badge first and the setup cell before the first code cell."""
    result = copy.deepcopy(notebook)
    cells = [cell for cell in result.cells if not _is_colab_cell(cell)]
    for cell in cells:  # a notebook from before cell ids (nbformat 4.4) gets ids, as 4.5 requires
        if "id" not in cell:
            cell["id"] = nbformat.v4.new_code_cell().id
    badge = nbformat.v4.new_markdown_cell(badge_source(notebook_name), id=BADGE_ID)
    setup = nbformat.v4.new_code_cell(setup_source(), id=SETUP_ID, metadata=SETUP_METADATA)
    first_code = next((i for i, cell in enumerate(cells) if cell["cell_type"] == "code"), len(cells))
    result.cells = [badge, *cells[:first_code], setup, *cells[first_code:]]
    result.nbformat, result.nbformat_minor = 4, max(5, result.get("nbformat_minor", 5))
    return result


def _comparable(notebook: nbformat.NotebookNode) -> list[tuple]:
    return [
        (c["cell_type"], c.get("id"), "".join(c["source"]), c.get("metadata", {}), c.get("outputs"))
        for c in notebook.cells
    ]


def _read(path: Path) -> nbformat.NotebookNode:
    if path.suffix != ".ipynb":
        raise SystemExit(f"{path}: not a notebook (.ipynb); pass notebooks, e.g. notebooks/*.ipynb")
    if not path.is_file():
        raise SystemExit(f"{path}: no such notebook")
    return nbformat.read(path, as_version=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="the .ipynb files to update or check")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any is stale")
    args = parser.parse_args(argv)

    stale = []
    for path in args.notebooks:
        notebook = _read(path)
        updated = with_colab_cells(notebook, path.name)
        if _comparable(updated) == _comparable(notebook):
            continue
        stale.append(path)
        if not args.check:
            nbformat.write(updated, path)
            print(f"updated the Colab cells of {path}")
    if args.check and stale:
        print("Colab cells missing or out of date in:", *stale, sep="\n  ")
        print("Run: python scripts/colab_cells.py " + " ".join(str(p) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
