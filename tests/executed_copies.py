"""Each notebook as nbval ran it, kept for the site's test: `make test` runs the notebooks once.

`conftest.py` calls ``keep`` for every notebook cell that nbval runs. After each cell, the copy of
its notebook in ``test-output/executed/`` gets the cell's outputs. Its metadata says whether every
cell so far ran (``complete``), in which mode, which notebook file ran (its SHA-256), which test
run wrote it and how many cells that run has run. The site's build (``book/make_site.py
--executed``) takes a copy only when it is complete and the notebook is unchanged; it runs the
others itself. `test_site.py` runs beside nbval in `make test`: ``ran_in_this_run`` tells it when a
notebook's run is over. nbval keeps no widget state, so the kernel's comm
messages are followed here (``book/widget_state.py``), and a progress bar shows its last state.
"""

import copy
import hashlib
import json
import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "test-output" / "executed"
sys.path.insert(0, str(ROOT / "book"))
from widget_state import WidgetState  # noqa: E402

RUN_KEY = "course_run"  # as book/make_site.py reads it
# The test run: pytest-xdist's id, the same in every worker; without xdist, one made here, kept in
# the environment so that every import of this module in this process agrees.
TEST_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.environ.setdefault(
    "COURSE_TEST_RUN", uuid.uuid4().hex
)


class _Copy:
    """One notebook's copy while nbval runs it."""

    def __init__(self, notebook) -> None:
        self.notebook = copy.deepcopy(notebook.nb)
        for cell in self.notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        self.path = FOLDER / notebook.path.name
        self.digest = hashlib.sha256(notebook.path.read_bytes()).hexdigest()
        self.widgets = WidgetState()
        self.cells = 0  # nbval's cells of this notebook
        self.passed = 0
        self.count = 0
        self.quick = os.environ.get("COURSE_QUICK", "").strip() == "1"  # as collected, run

    def save(self) -> None:
        complete = self.passed == self.cells
        self.notebook.metadata["widgets"] = self.widgets.metadata()
        self.notebook.metadata[RUN_KEY] = {
            "quick": self.quick,
            "notebook": self.digest,
            "complete": complete,
            "test_run": TEST_RUN,
            "cells_run": self.count,
        }
        FOLDER.mkdir(parents=True, exist_ok=True)
        # Written whole, then renamed: the site's test may read it at any moment.
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text(json.dumps(self.notebook, ensure_ascii=False), encoding="utf-8")
        partial.replace(self.path)


def ran_in_this_run(path: Path, cells: int) -> bool:
    """Whether this test run has run ``cells`` cells of the notebook whose copy is ``path``
    (failed ones included): its nbval run is over."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))["metadata"][RUN_KEY]
    except (OSError, ValueError, KeyError):
        return False
    return run.get("test_run") == TEST_RUN and run.get("cells_run", 0) >= cells


def keep(cell) -> None:
    """After nbval runs ``cell``, put its outputs in its notebook's copy and write the copy."""
    notebook = cell.parent
    kept = getattr(notebook, "course_copy", None)
    if kept is None:
        kept = notebook.course_copy = _Copy(notebook)
        get_message = notebook.get_kernel_message

        def get_kernel_message(*args, **kwargs):
            message = get_message(*args, **kwargs)
            kept.widgets.see(message)
            return message

        notebook.get_kernel_message = get_kernel_message
    kept.cells += 1
    index = next(i for i, c in enumerate(notebook.nb.cells) if c is cell.cell)
    run_cell = cell.runtest

    def runtest():
        passed = False
        try:
            run_cell()
            passed = True
        finally:
            target = kept.notebook.cells[index]
            target.outputs = copy.deepcopy(getattr(cell, "test_outputs", None) or [])
            kept.count += 1
            target.execution_count = kept.count
            for output in target.outputs:
                if output.output_type == "execute_result":
                    output.execution_count = kept.count
            kept.passed += passed
            kept.save()

    cell.runtest = runtest
