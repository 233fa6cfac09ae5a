"""What a GPU printed: ``make gpu-check`` keeps the notebooks as a GPU ran them, in ``results/gpu/``;
``show_gpu_output("<cell id>")`` prints a cell's output there, without a GPU, while its code is the same."""

import ast
import base64
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import torch
from IPython.display import Image, display

from helpers.course import CHECKOUT_VARIABLE
from helpers.data import STAND_IN_VERSION

_SHOW_LINE = re.compile(
    r"\s*show_gpu_output\(.*\)\s*;?\s*|from helpers\.recorded import show_gpu_output\s*"
)


def recordings_root() -> Path | None:
    """``results/gpu/`` of the course in ``GPU_COURSE_CHECKOUT`` (Colab), else of this repository, or None."""
    for repo in (os.environ.get(CHECKOUT_VARIABLE), Path(__file__).resolve().parent.parent):
        if (
            repo
            and (Path(repo) / "pyproject.toml").is_file()
            and (Path(repo) / "notebooks").is_dir()
        ):
            return Path(repo) / "results" / "gpu"
    return None


def cell_source_key(source: str | list[str]) -> str:
    """A cell's code as compared between versions: no ``show_gpu_output`` line, imports, blank lines."""
    source = "".join(source)
    try:
        imports = [n for n in ast.parse(source).body if isinstance(n, ast.Import | ast.ImportFrom)]
    except SyntaxError:  # IPython magics: every line counts
        imports = []
    skip = {i for n in imports for i in range(n.lineno, n.end_lineno + 1)}
    lines = [
        s.rstrip() for i, s in enumerate(source.splitlines(), 1) if i not in skip and s.strip()
    ]
    return "\n".join(s for s in lines if not _SHOW_LINE.fullmatch(s))


def find_recording(cell_id: str, *, depends_on=(), root=None) -> tuple[SimpleNamespace | None, str]:
    """``(recording, "")``: the newest recording (``.outputs``, ``.label``, ``.path``) of cell ``cell_id``
    ("04-19") made with today's data and code of it and of ``depends_on``; else ``(None or older, why)``."""
    if isinstance(depends_on, str):
        raise TypeError(
            f"depends_on is a list of cell ids, e.g. depends_on=[{depends_on!r}], not a string."
        )
    if (recorded := recordings_root()) is None:
        return (
            None,
            "the recorded GPU runs are in the course's results/gpu/, not here: run the setup cell",
        )
    notebooks = sorted((recorded.parent.parent / "notebooks").glob(f"{str(cell_id)[:2]}_*.ipynb"))
    cells = (
        {c.get("id"): c for c in json.loads(notebooks[0].read_text())["cells"]} if notebooks else {}
    )
    if not (isinstance(cell_id, str) and {cell_id, *depends_on} <= set(cells)):
        raise ValueError(
            f"There is no cell {cell_id!r} (or of {depends_on}): give an id such as '04-19'."
        )
    wanted = {name: cell_source_key(cells[name]["source"]) for name in (cell_id, *depends_on)}
    found = []
    for path in sorted(Path(root or recorded).glob(f"*/notebooks/{notebooks[0].name}")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = {c.get("id"): c for c in notebook["cells"]}
        if (cell := cells.get(cell_id, {})).get("execution_count") is None:
            continue  # not reached in that run
        run = notebook["metadata"]["gpu_run"]  # as benchmarks/gpu_check.py writes it
        label = f"{run['gpus']}x {run['device']}" if run["gpus"] != 1 else run["device"]
        label += f", torch {run['torch']}, {run['date']}"
        ok = all(
            n in cells and cell_source_key(cells[n]["source"]) == key for n, key in wanted.items()
        )
        ok &= run["data"] != "synthetic" or run["stand_in"] == STAND_IN_VERSION  # today's data
        found.append(
            SimpleNamespace(outputs=cell["outputs"], run=run, path=path, label=label, current=ok)
        )
    best = max(found, key=lambda r: (r.current, r.run["date"], r.run["device"]), default=None)
    if best is None or best.current:
        return best, "" if best else "no GPU run of this cell is on record yet"
    what = (
        f"this cell or of {', '.join(depends_on)}, which it reports on"
        if depends_on
        else "this cell"
    )
    return best, f"the GPU run ({best.label}) recorded an older version of {what} (or older data)"


def show_gpu_output(cell_id: str, *, depends_on=(), force: bool = False, root=None) -> None:
    """Without a CUDA GPU (or with ``force``), print what cell ``cell_id`` printed on one (find_recording)."""
    if torch.cuda.is_available() and not force:
        return
    rec, why = find_recording(cell_id, depends_on=depends_on, root=root)
    if rec is None or not rec.current:
        return print(
            f"[No GPU output to show: {why}. On a machine with a GPU, the cell shows its own.]"
        )
    print(f"── what this cell printed on a GPU: {rec.label} (results/gpu/{rec.path.parts[-3]}) ──")
    for output in rec.outputs or [{"text": "(it printed nothing)"}]:
        data = output.get("data", {})
        text = (
            output.get("text") or data.get("text/plain") or f"{output['ename']}: {output['evalue']}"
        )
        if "image/png" in data:
            display(Image(data=base64.b64decode("".join(data["image/png"]))))
        else:
            print("".join(text).rstrip("\n"))
    print("── end of the recorded GPU output ──")
