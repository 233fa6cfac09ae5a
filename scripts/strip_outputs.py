"""Strip outputs from notebooks: the git filter that keeps the lessons clean for git after a run.

JupyterLab autosaves an open notebook every two minutes, outputs included, so trying a lesson
writes its outputs into the tracked file. ``.gitattributes`` gives every notebook in
``notebooks/`` this filter and ``make setup`` (run by ``make lab`` and ``make test``) tells git
the command, so git reads each notebook through this script before it compares, diffs or commits
it: ``git status`` stays clean after a lesson, nothing run is ever committed, and the file itself
keeps its outputs for the student.

    python3 scripts/strip_outputs.py < run.ipynb > stripped.ipynb  # git's clean filter runs this
    python3 scripts/strip_outputs.py notebooks/*.ipynb             # strip files in place
    python3 scripts/strip_outputs.py --check notebooks/*.ipynb     # exit 1, list the unstripped

Removed: the outputs and execution counts of code cells; what a run or the lab's view adds to a
cell's metadata (``execution`` timings, ``ExecuteTime``, ``collapsed``, ``scrolled``, ``trusted``,
and the folding of a cell's code or outputs, ``jupyter.source_hidden`` and ``outputs_hidden``);
what a run adds to the notebook's (widget state, a signature, the kernel's ``language_info`` beyond
its name). Kept: every source, cell id, tag (``nbval-skip``, ``raises-exception``) and other
metadata. Folding is a view a student changes with a click; the cells the course folds, the
Colab setup cell (``scripts/colab_cells.py``, also kept a Colab form) and the proof cells (tagged
``proof``: what proves a lesson right, apart from what it teaches), are stored folded whatever the
student's view was. The notebook is written as Jupyter writes one (keys sorted, one-space indent,
UTF-8, a final newline), so a notebook committed through the filter reads back byte for byte after a
run.

Standard library only, so that git can run it with the Python that ``make setup`` found, whether
or not ``.venv`` exists yet. Input that is not a notebook (a merge conflict, say) passes through
unchanged, with a note on stderr, so that git shows it rather than failing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Cell metadata that records a run or the lab's view of a cell, not the lesson.
RUN_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled", "trusted")
VIEW_METADATA = ("source_hidden", "outputs_hidden")  # under "jupyter": a cell folded in the lab
# The cells stored with their code folded, whatever a student unfolded: the id
# scripts/colab_cells.py gives the Colab setup cell, and the metadata it writes there (SETUP_ID,
# SETUP_METADATA): a form in Colab (cellView), folded in JupyterLab (jupyter.source_hidden).
FOLDED = {"colab-setup": {"cellView": "form", "jupyter": {"source_hidden": True}}}
PROOF_TAG = "proof"  # a proof cell: stored folded, as FOLDED's cells are
# Notebook metadata that records a run.
RUN_NOTEBOOK_METADATA = ("widgets", "signature", "orig_nbformat", "orig_nbformat_minor")


def _lines(source: str | list[str]) -> list[str]:
    """A cell's source as Jupyter stores it: a list of lines, each but the last ending in a
    newline."""
    return source.splitlines(keepends=True) if isinstance(source, str) else source


def _strip_cell(cell: dict) -> None:
    """One cell, changed in place: no outputs, no run's metadata, folded as it is stored."""
    if "source" in cell:
        cell["source"] = _lines(cell["source"])
    if cell.get("cell_type") == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
    metadata = cell.get("metadata", {})
    for key in RUN_CELL_METADATA:
        metadata.pop(key, None)
    view = metadata.get("jupyter")
    if isinstance(view, dict):
        for key in VIEW_METADATA:
            view.pop(key, None)
        if not view:
            del metadata["jupyter"]
    if cell.get("id") in FOLDED:
        folded = FOLDED[cell["id"]]
        metadata["cellView"] = folded["cellView"]
        metadata.setdefault("jupyter", {}).update(folded["jupyter"])
    if PROOF_TAG in metadata.get("tags", []):
        metadata.setdefault("jupyter", {})["source_hidden"] = True


def strip(notebook: dict) -> dict:
    """``notebook`` (parsed JSON, changed in place and returned) without what running it added."""
    for cell in notebook.get("cells", []):
        _strip_cell(cell)
    metadata = notebook.get("metadata", {})
    for key in RUN_NOTEBOOK_METADATA:
        metadata.pop(key, None)
    language = metadata.get("language_info")
    if isinstance(language, dict) and "name" in language:
        metadata["language_info"] = {"name": language["name"]}
    return notebook


def dumps(notebook: dict) -> str:
    """The notebook as Jupyter (nbformat) writes it."""
    return (
        json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False, separators=(",", ": "))
        + "\n"
    )


def parse(text: str) -> dict | None:
    """The notebook in ``text``, or ``None`` when the text is not one."""
    try:
        notebook = json.loads(text)
    except ValueError:
        return None
    return (
        notebook if isinstance(notebook, dict) and isinstance(notebook.get("cells"), list) else None
    )


def clean(text: str) -> str:
    """The text of a notebook file, stripped; text that is not a notebook comes back unchanged."""
    notebook = parse(text)
    return text if notebook is None else dumps(strip(notebook))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks to strip in place; none: stdin to stdout"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any is not stripped"
    )
    args = parser.parse_args(argv)

    if not args.notebooks:
        text = sys.stdin.buffer.read().decode("utf-8")
        if parse(text) is None:
            print("strip_outputs.py: not a notebook; passed through unchanged", file=sys.stderr)
        sys.stdout.buffer.write(clean(text).encode("utf-8"))
        return 0

    unstripped = []
    for path in args.notebooks:
        text = path.read_text(encoding="utf-8")
        if parse(text) is None:
            raise SystemExit(f"{path}: not a notebook (invalid JSON, or no cells)")
        stripped = clean(text)
        if stripped == text:
            continue
        unstripped.append(path)
        if not args.check:
            path.write_text(stripped, encoding="utf-8")
            print(f"stripped {path}")
    if args.check and unstripped:
        print("not stripped, or not written as Jupyter writes notebooks:", *unstripped, sep="\n  ")
        print("Run: python3 scripts/strip_outputs.py " + " ".join(str(p) for p in unstripped))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
