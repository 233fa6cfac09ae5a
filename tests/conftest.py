import shutil
import tempfile
from functools import partial
from pathlib import Path

import pytest

try:
    from executed_copies import keep
    from figure_fonts import MIN_SHOWN_PX, kernel_env, read, shown_px, too_small
except ImportError:  # loaded as `-p tests.conftest` from the repository root
    from tests.executed_copies import keep
    from tests.figure_fonts import MIN_SHOWN_PX, kernel_env, read, shown_px, too_small


@pytest.fixture(autouse=True)
def _clean_course_env(monkeypatch):
    """Each test starts from the defaults; tests that need a variable set it themselves."""
    for name in ("COURSE_DATA", "COURSE_DATA_DIR", "COURSE_QUICK"):
        monkeypatch.delenv(name, raising=False)


NBVAL_OUTPUT_TIMEOUT = 60  # seconds


# The notebook that runs longest (its torchrun demos start processes again and again): started
# first, it ends with the others instead of after them.
LONGEST_NOTEBOOK = "05_distributed_data_parallel.ipynb"


def _run_order(item) -> int:
    """Where ``item``'s file goes in the run. `make test`'s workers (pytest-xdist, ``--dist
    loadfile --no-loadscope-reorder``) take whole files in this order: the notebooks first, the
    longest of them first, then the browser test (the longest file), then the site's test, which
    builds its pages from the notebooks' runs, then the rest."""
    if item.path.name == LONGEST_NOTEBOOK:
        return 0
    if item.path.suffix == ".ipynb":
        return 1
    return {"test_browser.py": 2, "test_site.py": 3}.get(item.path.name, 4)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_run_order)  # a stable sort: each file keeps its own order
    fonts = None
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval cell: after it ran, nbval waits for its last
            item.output_timeout = (
                NBVAL_OUTPUT_TIMEOUT  # outputs 5 s, too short on a busy 2-core machine
            )
            if fonts is None:
                fonts = Path(tempfile.mkdtemp(prefix="course-figure-fonts-"))
                config.add_cleanup(partial(shutil.rmtree, fonts, ignore_errors=True))
            _start_kernel_with(item.parent, fonts)
            _check_as_a_class_sees(item, fonts)
            keep(item)  # the site's test builds its pages from this run (executed_copies.py)


def _start_kernel_with(notebook, fonts: Path) -> None:
    """The notebook's kernel records its figures' text sizes (figure_fonts.py), and its progress
    bars update once a second: nbval reads a cell's messages when it ends, and past ZeroMQ's queues
    (about 2,000) the rest, the last among them, are dropped. A bar sends about 25 a second."""
    if getattr(notebook, "course_fonts", None):
        return
    notebook.course_fonts = fonts
    notebook.course_figures_seen = 0
    start_kernel = notebook.setup

    def setup():
        env = {**kernel_env(fonts), "COURSE_NOTEBOOK": notebook.path.name, "TQDM_MININTERVAL": "1"}
        with pytest.MonkeyPatch.context() as patch:  # the kernel takes this process's environment
            for name, value in env.items():
                patch.setenv(name, value)
            start_kernel()

    notebook.setup = setup


def _check_as_a_class_sees(cell, fonts: Path) -> None:
    """After nbval ran ``cell``, what the browser test checks of a run: no stderr (it reads as a
    failure to a student), no figure text under 10 pt, or under 10 px as JupyterLab shows it at
    1280x720."""
    run_cell = cell.runtest

    def runtest():
        run_cell()
        outputs = cell.test_outputs or []
        stderr = [output.get("text", "") for output in outputs if output.get("name") == "stderr"]
        if stderr:
            cell.raise_cell_error(
                f"the cell prints on stderr, which reads as a failure to a student: {stderr}"
            )
        notebook = cell.parent
        figures = read(fonts, notebook.path.name)
        new = figures[notebook.course_figures_seen :]
        notebook.course_figures_seen = len(figures)
        problems = too_small(new)
        for px, what in filter(None, map(shown_px, new)):
            if px < MIN_SHOWN_PX:
                problems.append(
                    f"a figure's smallest text, {what}, is {px:.1f} px on a 1280x720 screen"
                )
        if problems:
            cell.raise_cell_error(
                f"figure text too small to read: {problems}; larger text or a narrower figure"
            )

    cell.runtest = runtest
