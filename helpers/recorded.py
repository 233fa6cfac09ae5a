"""What a GPU printed, shown under a cell on a machine without one (from ``00`` on).

``make gpu-check`` keeps every notebook as a GPU ran it, in ``results/gpu/<device>/notebooks/``.
Each notebook's setup cell loads this module as an IPython extension::

    %load_ext helpers.recorded

From then on, on a machine without a CUDA GPU, a cell of the course tagged ``gpu-output`` prints
under its own output what the same cell printed on a GPU, and on which GPU. It does so only while
the cell's code is the code that ran there: a cell you have edited shows only its own output. With
a CUDA GPU the extension does nothing, since the cell shows its own GPU output.
"""

import ast
import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from IPython.core.inputtransformer2 import TransformerManager
from IPython.display import Image, display

from helpers.paths import course_root
from helpers.standin import STAND_IN_VERSION

GPU_OUTPUT_TAG = "gpu-output"
# A cell whose output reports on what earlier cells did lists their ids under this metadata key:
# its recording is shown only while those cells are unchanged too.
DEPENDS_ON_KEY = "gpu_output_depends_on"
# A line that never changes what a cell prints: the old way of showing a recording.
_OLD_CALL = "show_gpu_output"
# `%load_ext helpers.recorded`, as IPython turns it into Python.
_LOADER = ("load_ext", "helpers.recorded")
# Settings that only a quick run (COURSE_QUICK=1, as the tests run the notebooks) reads: the
# keyword arguments of these functions that start so. A run in default mode never uses them.
_QUICK_ONLY = {"training_budget": "quick_", "expect_accuracy": "quick"}


def recordings_root() -> Path | None:
    """``results/gpu/`` of the course (``helpers.paths.course_root``), or ``None``."""
    root = course_root()
    if root is None:
        return None
    return root / "results" / "gpu"


def _is_not_code(node: ast.stmt) -> bool:
    """An import, a ``show_gpu_output(...)`` call or ``%load_ext helpers.recorded``: nothing that
    changes what a cell prints."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    if isinstance(call.func, ast.Name):
        return call.func.id == _OLD_CALL
    arguments = tuple(arg.value for arg in call.args if isinstance(arg, ast.Constant))
    return arguments == _LOADER  # get_ipython().run_line_magic('load_ext', 'helpers.recorded')


def _is_quick_only(call: ast.Call, keyword: ast.keyword) -> bool:
    """Whether ``keyword`` of ``call`` is a setting that only a quick run reads."""
    name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
    prefix = _QUICK_ONLY.get(name)
    return prefix is not None and keyword.arg is not None and keyword.arg.startswith(prefix)


def cell_source_key(source: str | list[str], *, quick_run: bool = True) -> str:
    """A cell's code as compared between versions: its syntax tree, so that layout, comments and
    imports do not count, nor a ``show_gpu_output`` call or ``%load_ext`` line. With
    ``quick_run=False`` (a recording made in default mode), neither do the settings that only a
    quick run reads: ``training_budget``'s ``quick_*`` arguments and ``expect_accuracy``'s
    ``quick=``."""
    text = "".join(source)
    python = TransformerManager().transform_cell(text)  # IPython's %magics and !commands as calls
    try:
        tree = ast.parse(python)
    except SyntaxError:  # not Python: every non-blank line counts
        return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
    tree.body = [node for node in tree.body if not _is_not_code(node)]
    if not quick_run:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                node.keywords = [k for k in node.keywords if not _is_quick_only(node, k)]
    return ast.dump(tree)


@dataclass
class Recording:
    """One cell as a GPU ran it: its ``outputs``, the ``run``'s metadata, the recorded notebook's
    ``path``, a ``label`` naming the GPU, and whether it is ``current`` (same code, same data)."""

    outputs: list[dict[str, Any]]
    run: dict[str, Any]
    path: Path
    label: str
    current: bool


def _notebook_of(cell_id: Any, root: Path) -> Path:
    """The course's notebook of cell ``cell_id``: ``"04-19"`` is in ``04_*.ipynb``."""
    if not isinstance(cell_id, str) or len(cell_id) < 4 or not cell_id[:2].isdigit():
        raise ValueError(f"There is no cell {cell_id!r}: give an id such as '04-19'.")
    notebooks = sorted((root / "notebooks").glob(f"{cell_id[:2]}_*.ipynb"))
    if not notebooks:
        raise ValueError(f"There is no cell {cell_id!r}: no notebook {cell_id[:2]}_*.ipynb.")
    return notebooks[0]


def _cells(path: Path) -> dict[str, dict[str, Any]]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return {cell.get("id"): cell for cell in notebook["cells"]}


def _label(run: dict[str, Any]) -> str:
    device = run["device"]
    if run["gpus"] != 1:
        device = f"{run['gpus']}x {device}"
    return f"{device}, torch {run['torch']}, {run['date']}"


def _same_data(run: dict[str, Any]) -> bool:
    """Whether the run trained on the data this course has today."""
    return run["data"] != "synthetic" or run["stand_in"] == STAND_IN_VERSION


def find_recording(
    cell_id: str, *, depends_on=(), root: Path | None = None
) -> tuple[Recording | None, str]:
    """``(recording, "")``: the newest recording of cell ``cell_id`` (such as ``"04-19"``) made
    with today's data and today's code of it and of the cells in ``depends_on``. Otherwise
    ``(None, why)`` or ``(an older recording, why)``. ``root`` is a folder of runs (default:
    ``results/gpu/``)."""
    if isinstance(depends_on, str):
        raise TypeError(
            f"depends_on is a list of cell ids, e.g. depends_on=[{depends_on!r}], not a string."
        )
    recorded = recordings_root()
    if recorded is None:
        return None, "the recorded GPU runs are in the course's results/gpu/: run the setup cell"
    notebook = _notebook_of(cell_id, recorded.parent.parent)
    cells = _cells(notebook)
    wanted_ids = [cell_id, *depends_on]
    missing = [name for name in wanted_ids if name not in cells]
    if missing:
        raise ValueError(f"There is no cell {missing[0]!r} in {notebook.name}.")

    found = []
    for path in sorted(Path(root or recorded).glob(f"*/notebooks/{notebook.name}")):
        recorded_cells = _cells(path)
        cell = recorded_cells.get(cell_id, {})
        if cell.get("execution_count") is None:
            continue  # the run never reached this cell
        run = json.loads(path.read_text(encoding="utf-8"))["metadata"]["gpu_run"]
        quick_run = run.get("quick", True)  # a run that does not say: every setting counts
        same_code = all(
            name in recorded_cells
            and cell_source_key(recorded_cells[name]["source"], quick_run=quick_run)
            == cell_source_key(cells[name]["source"], quick_run=quick_run)
            for name in wanted_ids
        )
        current = same_code and _same_data(run)
        found.append(Recording(cell["outputs"], run, path, _label(run), current))
    if not found:
        return None, "no GPU run of this cell is on record yet"
    best = max(found, key=lambda r: (r.current, r.run["date"], r.run["device"]))
    if best.current:
        return best, ""
    return best, f"the GPU run ({best.label}) ran an older version of this cell or of its data"


def _print_outputs(outputs: list[dict[str, Any]]) -> None:
    if not outputs:
        print("(nothing)")
    for output in outputs:
        data = output.get("data", {})
        if "image/png" in data:
            display(Image(data=base64.b64decode("".join(data["image/png"]))))
            continue
        if output.get("output_type") == "error":
            text = f"{output['ename']}: {output['evalue']}"
        else:
            text = "".join(output.get("text") or data.get("text/plain") or "")
        print(text.rstrip("\n"))


def show_recording(cell_id: str, *, depends_on=(), root: Path | None = None) -> None:
    """Print what cell ``cell_id`` printed on a GPU, between two marked lines, whatever this machine
    has. A cell whose code changed since its GPU run says its GPU output comes with the next run."""
    recording, _ = find_recording(cell_id, depends_on=depends_on, root=root)
    if recording is None:
        print("── This cell has not run on a GPU yet: what it prints there will be shown here ──")
        print("── after the course's next GPU run. ──")
        return
    if not recording.current:
        print("── This cell has changed since the course last ran on a GPU: what it prints ──")
        print("── there will be shown here after the next GPU run. ──")
        return
    print(f"── On a GPU ({recording.label}), this cell printed: ──")
    _print_outputs(recording.outputs)
    print("── end of the GPU output ──")


@dataclass
class _Marked:
    """A course cell tagged ``gpu-output``: its id and the ids of the cells it reports on."""

    cell_id: str
    depends_on: tuple[str, ...]


def marked_cells(root: Path | None = None) -> dict[str, list[_Marked]]:
    """The cells tagged ``gpu-output`` in the course's notebooks, by ``cell_source_key``."""
    root = root or course_root()
    if root is None:
        return {}
    index: dict[str, list[_Marked]] = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in _cells(path).values():
            metadata = cell.get("metadata", {})
            if GPU_OUTPUT_TAG not in metadata.get("tags", []):
                continue
            key = cell_source_key(cell["source"])
            marked = _Marked(cell["id"], tuple(metadata.get(DEPENDS_ON_KEY, ())))
            index.setdefault(key, []).append(marked)
    return index


class RecordedOutputs:
    """The extension: after each cell, if it is a cell of the course tagged ``gpu-output`` and this
    machine has no CUDA GPU, print its recorded GPU output (``show_recording``)."""

    def __init__(self, has_gpu: bool, course: Path | None = None):
        self.has_gpu = has_gpu
        self.course = course
        self.index: dict[str, list[_Marked]] | None = None
        self.notebook = os.environ.get("JPY_SESSION_NAME", "")  # JupyterLab names the notebook

    def _choose(self, candidates: list[_Marked]) -> _Marked:
        """The cell of this notebook when the same code is in several notebooks."""
        for marked in candidates:
            prefix = marked.cell_id[:2] + "_"
            if Path(self.notebook).name.startswith(prefix):
                return marked
        return candidates[0]

    def post_run_cell(self, result) -> None:
        if self.has_gpu or result.error_in_exec is not None:
            return
        if self.index is None:
            self.index = marked_cells(self.course)
        candidates = self.index.get(cell_source_key(result.info.raw_cell or ""), [])
        if not candidates:
            return  # not a cell of the course, or one the student has changed
        marked = self._choose(candidates)
        self.notebook = marked.cell_id[:2] + "_"  # the next cells come from the same notebook
        show_recording(marked.cell_id, depends_on=marked.depends_on)


def load_ipython_extension(ipython) -> None:
    """``%load_ext helpers.recorded``: register ``RecordedOutputs`` once in this kernel."""
    for callback in ipython.events.callbacks["post_run_cell"]:
        if isinstance(getattr(callback, "__self__", None), RecordedOutputs):
            return
    shower = RecordedOutputs(has_gpu=torch.cuda.is_available())
    ipython.events.register("post_run_cell", shower.post_run_cell)
