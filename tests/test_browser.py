"""Every notebook in a real browser: JupyterLab started by `make lab`, each notebook run in headless Chromium.

For each `notebooks/*.ipynb`: open it at a projector's 1280x720, Run All Cells in quick mode
(`COURSE_QUICK=1`), wait until the kernel is idle, then check that every code cell has an execution
count, that no cell shows an error or prints on stderr (a warning reads as a failure to a student),
and, on three screens a teacher shows (the first screen, the first figure, the exercises), that no
notification covers them and that the notebook's text and the figure's text are large enough to
read; the kernels record the size of every figure's text too (`figure_fonts.py`): none under 10 pt.
It also checks that `make lab` itself asks nothing about Jupyter news and does not list the lessons'
`checkpoints/` and `runs/`. Screenshots of the end of each run and of the three screens go to
`test-output/browser/`, with JupyterLab's log (`lab.log`) and the times and sizes (`summary.txt`).
This file runs every other notebook; `test_browser_second_half.py` runs the rest, with its own
JupyterLab and logs, so that `make test`'s two workers share the notebooks.
Nothing is saved: the notebooks stay as committed. How errors are found is explained in
`labdriver.py`; the first test shows that the checks do fail on a notebook that raises.

Needs Debian's Chromium (`sudo apt-get install chromium`, or `COURSE_CHROMIUM=/path/to/chromium`) and
Playwright (pinned in requirements.txt). Without them the tests skip, except where
`COURSE_REQUIRE_BROWSER=1` (CI), where they fail. Time limits: `COURSE_BROWSER_TIMEOUT` seconds per
notebook (default 300) and `COURSE_BROWSER_TOTAL_TIMEOUT` for the whole file (default 1500).
Run only this file with `.venv/bin/python -m pytest tests/test_browser.py`.
"""

import json
import os
import shutil
import time

import pytest
from figure_fonts import MIN_POINTS, kernel_env, read, too_small
from labdriver import ROOT, VIEWPORT, LabServer, find_chromium, launch_chromium, run_notebook, write_notebook

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OUTPUT = ROOT / "test-output" / "browser"
# The deliberately failing notebook must be under the server's root (notebooks/); this folder is
# git-ignored by the `test-output/` entry of .gitignore, and the test removes it again.
SCRATCH = ROOT / "notebooks" / "test-output"
STARTUP_TIMEOUT = 240.0  # `make lab` reinstalls the pins first when requirements.txt changed
# On a projector at VIEWPORT: the notebook's own text (JupyterLab shows code and outputs at 13 px,
# markdown at 14) and a figure's smallest text as shown (10 pt at 100 dpi, scaled to fit the page).
MIN_TEXT_PX = 13.0
MIN_FIGURE_PX = 10.0


def _seconds(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ValueError(
            f"{name}={value!r} is not a number of seconds above 0: set it to e.g. 600, or unset it."
        )
    return seconds


PER_NOTEBOOK = _seconds("COURSE_BROWSER_TIMEOUT", 300.0)
TOTAL = _seconds("COURSE_BROWSER_TOTAL_TIMEOUT", 1500.0)


def _budget(deadline: float, limit: float) -> float:
    left = deadline - time.monotonic()
    if left < 5:
        pytest.fail(
            f"the browser tests' overall limit (COURSE_BROWSER_TOTAL_TIMEOUT={TOTAL:.0f} s) is used up"
        )
    return min(limit, left)


def _has_outputs(path) -> bool:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code")


@pytest.fixture(scope="module")
def chromium():
    required = os.environ.get("COURSE_REQUIRE_BROWSER", "").strip().lower() in {"1", "true", "yes", "on"}
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append(
            "Playwright is not installed in this environment (`make setup` installs the pinned one)"
        )
    executable = find_chromium()
    if executable is None:
        problems.append(
            "Chromium was not found: install Debian's package with `sudo apt-get install chromium`, "
            "or set COURSE_CHROMIUM to a Chromium binary"
        )
    if problems:
        message = "; ".join(problems) + "."
        if required:
            pytest.fail(f"COURSE_REQUIRE_BROWSER=1, so the browser tests must run: {message}")
        pytest.skip(f"browser tests skipped: {message} CI installs Chromium and runs them.")
    return executable


@pytest.fixture(scope="module")
def deadline(chromium):
    return time.monotonic() + TOTAL


def _part(request) -> str:
    """``""`` for this file, ``"-second-half"`` for test_browser_second_half.py: each has its own logs."""
    return request.module.__name__.removeprefix("test_browser").replace("_", "-")


@pytest.fixture(scope="module")
def summary(chromium, request):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"summary{_part(request)}.txt"
    path.write_text("")

    def write(line: str) -> None:
        with path.open("a") as file:
            file.write(line + "\n")
        print(line)

    return write


@pytest.fixture(scope="module")
def fonts(chromium, tmp_path_factory):
    """Where the kernels record the text sizes of the figures they draw (tests/figure_fonts.py)."""
    return tmp_path_factory.mktemp("figure-fonts")


@pytest.fixture(scope="module")
def lab(chromium, deadline, summary, fonts, tmp_path_factory, request):
    log = OUTPUT / f"lab{_part(request)}.log"
    server = LabServer(tmp_path_factory.mktemp("lab"), log, env=kernel_env(fonts))
    started = time.monotonic()
    try:
        server.start(timeout=_budget(deadline, STARTUP_TIMEOUT))
        summary(f"`make lab` answered on port {server.port} after {time.monotonic() - started:.1f} s")
        # Never save: the server must have autosave off before any notebook is opened.
        docmanager = server.api("GET", "/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
        assert docmanager["settings"]["autosave"] is False, f"autosave is on: {docmanager['settings']}"
        # The same startup as a newcomer's: `make lab` serves notebooks/.
        served = {item["name"] for item in server.api("GET", "/api/contents")["content"]}
        assert {p.name for p in NOTEBOOKS if p.exists()} <= served, (
            f"the server's root holds {sorted(served)}"
        )
        # `make lab`'s own settings (jupyter/), not the test's: no prompt about Jupyter news.
        notification = server.api("GET", "/lab/api/settings/@jupyterlab/apputils-extension:notification")
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false", notification["schema"]
        assert "fetchNews" not in notification["settings"]
        yield server
    finally:
        left = server.stop()
    assert not left, f"processes left running after the server stopped: {sorted(left)}"


@pytest.fixture(scope="module")
def browser(chromium, summary):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = launch_chromium(playwright, chromium)
        summary(f"Chromium {instance.version} ({chromium}), Playwright driving it with executable_path")
        try:
            yield instance
        finally:
            instance.close()


def test_the_checks_fail_on_errors_and_on_cells_never_run(lab, browser, deadline, summary):
    """A notebook that raises: the error is reported, and so are a widget that cannot be displayed and the
    cells that never ran; a warning on stderr and a working progress bar are not."""
    folder = f"browser-{os.getpid()}"  # two runs at once do not share it
    path = SCRATCH / folder / "deliberate_error.ipynb"
    write_notebook(
        path,
        [
            "print('this cell works')",
            "import warnings\n\nwarnings.warn('only a warning: stderr text, not an error')",
            "from tqdm.auto import tqdm\n\nfor _ in tqdm(range(3)):\n    pass",
            "import ipywidgets\nfrom IPython.display import display\n\n"
            "view = {'model_id': 'no-such-model', 'version_major': 2, 'version_minor': 0}\n"
            "display({'application/vnd.jupyter.widget-view+json': view}, raw=True)",
            "raise ValueError('deliberate failure for the browser test')",
            "print('never runs: Run All stops at the error')",
        ],
    )
    try:
        run = run_notebook(
            lab,
            browser,
            f"test-output/{folder}/deliberate_error.ipynb",
            OUTPUT / "check_deliberate_error.png",
            timeout=_budget(deadline, 120),
        )
        # The browser saved nothing; a save through the server is seen by the check the notebooks get.
        assert not [line for line in lab.writes() if path.name in line]
        api_path = f"/api/contents/test-output/{folder}/deliberate_error.ipynb"
        content = lab.api("GET", api_path)["content"]
        lab.api("PUT", api_path, {"type": "notebook", "format": "json", "content": content})
        assert [line for line in lab.writes() if path.name in line]
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)  # with the .ipynb_checkpoints/ of the save above
        if SCRATCH.is_dir() and not any(SCRATCH.iterdir()):
            SCRATCH.rmdir()
    summary(f"check_deliberate_error.ipynb: {run.seconds:.1f} s; problems found: {run.problems()}")
    assert run.finished
    assert run.errors == [
        "cell 4: Error displaying widget: model not found",
        "cell 5: ValueError: deliberate failure for the browser test",
    ]
    assert run.not_run == [6]
    assert len(run.stderr) == 1 and "only a warning" in run.stderr[0], run.stderr
    assert len(run.problems()) == 3
    assert run.screenshot.stat().st_size > 0


def _figure_px(view, figures) -> list[tuple[float, str]]:
    """For each figure shown in ``view``: its smallest text as shown, in px, and what it is."""
    shown = []
    for image in view.images:
        figure = next((f for f in figures if f.get("png") == image["natural"]), None)
        if figure is None:
            continue  # not drawn in this run: a recorded GPU figure, or a PNG from results/
        points, text = min(figure["texts"])
        scale = image["shown"][0] / image["natural"][0]
        shown.append((points * figure["dpi"] / 72 * scale, f"{text!r}, {points:g} pt shown at {scale:.0%}"))
    return shown


@pytest.mark.parametrize("notebook", NOTEBOOKS[0::2], ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(notebook, lab, browser, deadline, summary, fonts):
    check_notebook_in_jupyterlab(notebook, lab, browser, deadline, summary, fonts)


def check_notebook_in_jupyterlab(notebook, lab, browser, deadline, summary, fonts):
    """Run ``notebook`` in JupyterLab and check what a class sees (the module's docstring says what)."""
    if not notebook.exists():
        pytest.skip(f"{notebook.name} was removed while the tests ran")
    had_outputs = _has_outputs(notebook)
    run = run_notebook(
        lab, browser, notebook.name, OUTPUT / f"{notebook.stem}.png", timeout=_budget(deadline, PER_NOTEBOOK)
    )
    figures = read(fonts, notebook.name)
    notes = f"; stderr (not errors): {run.stderr}" if run.stderr else ""
    notes += f"; page errors: {run.page_errors}" if run.page_errors else ""
    for view in run.views:
        smallest, figure = view.smallest_text(), min(_figure_px(view, figures), default=None)
        notes += f"; {view.name}: smallest text {smallest[0]:g} px ({smallest[1]!r})" if smallest else ""
        notes += f", figure text {figure[0]:.1f} px ({figure[1]})" if figure else ""
    summary(
        f"{notebook.name}: {run.seconds:.1f} s, {run.code_cells} code cells, {len(figures)} figures, "
        f"problems: {run.problems()}" + notes
    )
    assert not run.problems(), (
        f"{notebook.name} in JupyterLab: {'; '.join(run.problems())} (see {run.screenshot})"
    )
    assert run.screenshot.stat().st_size > 0
    assert not [line for line in lab.writes() if notebook.name in line], f"the server saved {notebook.name}"
    assert had_outputs or not _has_outputs(notebook), f"the browser run saved outputs into {notebook.name}"

    # What a student reads as a failure: pink text that is no error (a warning, a library's log line).
    assert not run.stderr, f"{notebook.name} prints on stderr, which reads as a failure: {run.stderr}"
    # At a projector's 1280x720: the first screen, a figure and the exercises, each screenshot.
    names = [view.name for view in run.views]
    assert names[0] == "first-screen" and names[-1] == "exercises", names
    for view in run.views:
        assert view.screenshot.stat().st_size > 0
        assert not view.toasts, f"{notebook.name}: a notification covers the {view.name}: {view.toasts}"
        small = {text: px for text, px in view.text_px.items() if px < MIN_TEXT_PX}
        assert not small, (
            f"{notebook.name}, {view.name} at {VIEWPORT}: text below {MIN_TEXT_PX:g} px: {small}"
        )
        for px, what in _figure_px(view, figures):
            assert px >= MIN_FIGURE_PX, (
                f"{notebook.name}: a figure's smallest text, {what}, is {px:.1f} px on a {VIEWPORT} screen "
                f"(see {view.screenshot}); at least {MIN_FIGURE_PX:g} px: larger text or a narrower figure"
            )
    assert not too_small(figures), (
        f"{notebook.name}: figure text below {MIN_POINTS:g} pt: {too_small(figures)}"
    )
    # The lessons' checkpoints/ and runs/ stay on disk but out of the file browser (jupyter/).
    served = {item["name"] for item in lab.api("GET", "/api/contents")["content"]}
    assert not {"checkpoints", "runs"} & served, f"the file browser lists {sorted(served)}"
