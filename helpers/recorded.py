"""What a GPU printed: recorded GPU runs of the notebooks, shown where there is no GPU.

Introduced in ``00_devices_and_tensors``. ``make gpu-check`` (``benchmarks/gpu_check.py``) runs every
notebook top to bottom on a GPU machine and keeps the executed copies, with their outputs, in
``results/gpu/<device>/notebooks/``. A notebook cell whose real effect needs a GPU ends with
``show_gpu_output("<its cell id>")``: on a machine with a CUDA GPU that line does nothing (the cell's
own output is the real thing); without one it prints what the same cell printed in the newest
recorded GPU run, labelled with the GPU, the torch version and the date.

A recording is shown only when the recorded cell's source is the cell's current source (the
``show_gpu_output`` line, imports and blank lines aside: see ``cell_source_key``). When the cell has
changed since, the recording is reported as out of date and not shown: it may not be what this code
prints. Nothing here probes the hardware at import time.
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.course import CHECKOUT_VARIABLE

__all__ = ["Recording", "cell_source_key", "find_recording", "recordings_root", "show_gpu_output"]

# The line a cell ends with: left out when two versions of a cell are compared, so that adding it
# keeps the recordings made before valid.
_SHOW_LINE = re.compile(
    r"^\s*show_gpu_output\(.*\)\s*;?\s*$|^from helpers\.recorded import show_gpu_output\s*$"
)
_CELL_ID = re.compile(r"^(\d\d)-[\w.-]+$")


def _is_course(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "notebooks").is_dir()


def _repository() -> Path | None:
    """The course's files: the folder named in ``GPU_COURSE_CHECKOUT`` (where the setup cell on Colab
    and Kaggle fetched the course at the notebook's release), else the repository the helpers were
    installed from (editable install); ``None`` if neither is there."""
    fetched = os.environ.get(CHECKOUT_VARIABLE)
    if fetched and _is_course(Path(fetched)):
        return Path(fetched)
    repo = Path(__file__).resolve().parent.parent
    return repo if _is_course(repo) else None


def recordings_root() -> Path | None:
    """``results/gpu/`` of the repository, where ``make gpu-check`` writes; ``None`` outside one."""
    repo = _repository()
    return None if repo is None else repo / "results" / "gpu"


def cell_source_key(source: str | list[str]) -> str:
    """A cell's source as compared between versions of it: the code that can change what it prints.

    Left out: the ``show_gpu_output`` line, import statements (they print nothing, and adding a
    name to an import must not make a recording look out of date), blank lines and end spaces.
    """
    if isinstance(source, list):
        source = "".join(source)
    skip: set[int] = set()
    try:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    except SyntaxError:  # IPython magics and the like: compare every line
        skip = set()
    lines = [
        line.rstrip()
        for number, line in enumerate(source.splitlines(), start=1)
        if number not in skip and line.strip() and not _SHOW_LINE.match(line)
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Recording:
    """One cell's outputs from one recorded GPU run."""

    cell_id: str
    notebook: str  # file name, e.g. 04_data_parallel.ipynb
    outputs: tuple[dict, ...]
    run: dict  # the run's description: device, torch, date, ...
    path: Path  # the executed notebook it comes from
    current: bool  # whether the recorded source is the cell's current source
    note: str = ""  # what to know about how it was recorded (the cell's metadata "recording_note")

    @property
    def label(self) -> str:
        run = self.run
        gpus = run.get("gpus", 1)
        device = f"{gpus}x {run.get('device', 'an unnamed GPU')}" if gpus != 1 else run.get("device", "a GPU")
        return f"{device}, torch {run.get('torch', '?')}, {run.get('date', 'undated')}"

    @property
    def older_stand_in(self) -> bool:
        """Whether the run trained on an earlier version of the synthetic stand-in than this one."""
        from helpers import data

        if str(self.run.get("data", "")).lower() not in {"synthetic", "synthetic stand-in"}:
            return False
        return self.run.get("stand_in", 1) != getattr(data, "STAND_IN_VERSION", 1)


@functools.lru_cache(maxsize=64)
def _load(path: Path, mtime: float) -> dict:  # mtime: a changed file is read again
    return json.loads(path.read_text(encoding="utf-8"))


def _notebook(path: Path) -> dict:
    return _load(path, path.stat().st_mtime)


def _cell(notebook: dict, cell_id: str) -> dict | None:
    return next((cell for cell in notebook.get("cells", []) if cell.get("id") == cell_id), None)


def _current_notebook(prefix: str, repo: Path) -> Path | None:
    matches = sorted((repo / "notebooks").glob(f"{prefix}_*.ipynb"))
    return matches[0] if matches else None


def find_recording(
    cell_id: str, *, depends_on: tuple[str, ...] | list[str] = (), root: Path | None = None
) -> tuple[Recording | None, str]:
    """The newest recorded GPU output of notebook cell ``cell_id`` (such as ``"04-19"``).

    Returns ``(recording, "")`` when a run recorded the cell as it is now; otherwise
    ``(None, why)``, or, when only older versions of the cell were recorded, the newest of those
    with ``current=False`` and the reason. ``depends_on`` names earlier cells of the same notebook
    whose work this cell's output reports (a training run it reads back, say): the recording
    counts as current only if those are unchanged too. ``root`` is the folder of recorded runs
    (default ``results/gpu/`` of the repository).
    """
    match = _CELL_ID.match(cell_id) if isinstance(cell_id, str) else None
    if match is None:
        raise ValueError(
            f"cell_id must be a notebook cell's id such as '04-19' (the notebook's number, a dash, the "
            f"cell's name); got {cell_id!r}"
        )
    repo = _repository()
    if repo is None:
        return None, (
            "the recorded GPU runs are in the course repository's results/gpu/ folder, which is not "
            "here (the helpers were installed without it: run the notebook's setup cell, which fetches "
            "it on Colab and Kaggle)"
        )
    current_path = _current_notebook(match.group(1), repo)
    current_cell = _cell(_notebook(current_path), cell_id) if current_path else None
    if current_cell is None:
        raise ValueError(f"No notebook cell has the id {cell_id!r} in {repo / 'notebooks'}")
    wanted = {cell_id: cell_source_key(current_cell["source"])}
    for other in depends_on:
        earlier = _cell(_notebook(current_path), other)
        if earlier is None:
            raise ValueError(f"depends_on names {other!r}, which is no cell of {current_path.name}")
        wanted[other] = cell_source_key(earlier["source"])

    root = recordings_root() if root is None else Path(root)
    found: list[Recording] = []
    for path in sorted(root.glob(f"*/notebooks/{current_path.name}")) if root and root.is_dir() else []:
        notebook = _notebook(path)
        cell = _cell(notebook, cell_id)
        if cell is None or cell.get("cell_type") != "code" or cell.get("execution_count") is None:
            continue  # not reached in that run (an earlier cell failed) or never executed
        run = notebook.get("metadata", {}).get("gpu_run", {})
        found.append(
            Recording(
                cell_id,
                current_path.name,
                tuple(cell.get("outputs", [])),
                run,
                path,
                all(
                    (recorded := _cell(notebook, name)) is not None
                    and cell_source_key(recorded["source"]) == source
                    for name, source in wanted.items()
                ),
                str(cell.get("metadata", {}).get("recording_note", "")),
            )
        )
    if not found:
        return None, "no GPU run of this cell is on record yet"
    found.sort(key=lambda r: (r.run.get("date", ""), r.run.get("device", "")), reverse=True)
    current = [r for r in found if r.current]
    if current:
        return current[0], ""
    newest = found[0]
    what = "this cell" if not depends_on else f"this cell or of {', '.join(depends_on)}, which it reports on"
    return newest, (
        f"the recorded GPU run ({newest.label}) holds an older version of {what}, so its output is "
        "not shown: it may not be what this code prints"
    )


_TRAINING_WORDS = re.compile(r"accura|loss|correct|mistake|images/s|p = ", re.IGNORECASE)


def _about_the_data(recording: Recording) -> bool:
    """Whether a recorded output reports on training (accuracies, losses, figures of a trained model)."""
    for output in recording.outputs:
        figure = output.get("output_type") != "stream" and output.get("data", {}).get("image/png")
        if figure and not recording.notebook.startswith("00"):  # 00 trains nothing
            return True
        if _TRAINING_WORDS.search(_text(output)):
            return True
    return False


def _text(output: dict) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        return "".join(text) if isinstance(text, list) else text
    if kind == "error":
        return f"{output.get('ename', 'Error')}: {output.get('evalue', '')}\n"
    data = output.get("data", {})
    text = data.get("text/plain", "")
    return ("".join(text) if isinstance(text, list) else text) + "\n"


def _show(output: dict) -> None:
    png = output.get("data", {}).get("image/png") if output.get("output_type") != "stream" else None
    if png:
        try:
            from IPython.display import Image, display
        except ImportError:  # plain Python: say that a figure was there
            print("[a figure]")
            return
        display(Image(data=base64.b64decode("".join(png) if isinstance(png, list) else png)))
        return
    print(_text(output), end="")


def show_gpu_output(
    cell_id: str,
    *,
    depends_on: tuple[str, ...] | list[str] = (),
    force: bool = False,
    root: Path | None = None,
) -> None:
    """Without a CUDA GPU, print what cell ``cell_id`` printed in the newest recorded GPU run.

    On a machine with a CUDA GPU it does nothing (unless ``force=True``): the cell has just
    shown its real output. ``depends_on``: see ``find_recording``. Returns nothing, so that as a
    cell's last line it adds nothing to the cell's output (``find_recording`` gives the recording).
    """
    if not force:
        import torch

        if torch.cuda.is_available():
            return
    recording, why = find_recording(cell_id, depends_on=depends_on, root=root)
    if recording is None or not recording.current:
        print(f"[No GPU output to show: {why}. On a machine with a GPU, the cell shows its own.]")
        return
    folder = recording.path.parent.parent.name
    print(f"── what this cell printed on a GPU: {recording.label} (results/gpu/{folder}) ──")
    if recording.older_stand_in and _about_the_data(recording):
        print(
            "(recorded on an earlier version of the synthetic stand-in data, which was far easier: "
            "its accuracies and losses are not those this version gives)"
        )
    if recording.note:
        print(f"({recording.note})")
    if not recording.outputs:
        print("(it printed nothing)")
    for output in recording.outputs:
        _show(output)
    print("── end of the recorded GPU output ──")
