"""The notebooks in a real browser: JupyterLab started by `make lab`, each notebook in Chromium.

One notebook is run here (Run All Cells, `COURSE_QUICK=1`): 01, which shows progress bars, a figure
scaled down to fit and the exercises' checks. A small notebook written here adds an error, a
warning, a widget that cannot be displayed and a figure narrower than the output area. Every code
cell must have run, and no cell may show an error or print on stderr (a warning reads as a failure
to a student). The other notebooks are opened as a class first sees them, not run: nbval runs
every notebook, and `conftest.py` checks there, from the kernel, what this test checks of the runs
here (stderr, and the figures' text as shown, with the output width measured here). All eight open
one after the other in one JupyterLab page, from its file browser. On three screens a teacher shows
(the first screen, the first figure, the exercises) no notification may cover the page and the
text, the notebook's and the figures', must be large enough to read. The kernels record every
figure's text size too (`figure_fonts.py`): none under 10 pt. Nothing is saved. Screenshots,
JupyterLab's log and `summary.txt` go to `test-output/browser/`.

Needs Debian's Chromium (or `COURSE_CHROMIUM=/path/to/chromium`) and Playwright; without them the
tests skip, unless `COURSE_REQUIRE_BROWSER=1` (CI). Time limits: `COURSE_BROWSER_TIMEOUT` seconds
per notebook (default 300), `COURSE_BROWSER_TOTAL_TIMEOUT` for the file (default 1500).
"""

import json
import os
import shutil
import time

import pytest
from figure_fonts import (
    MIN_POINTS,
    MIN_SHOWN_PX,
    OUTPUT_WIDTH_PX,
    kernel_env,
    read,
    too_small,
)
from labdriver import (
    ROOT,
    VIEWPORT,
    LabServer,
    chromium_or_skip,
    open_lab,
    run_notebook,
    write_notebook,
)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RUN_HERE = {"01_cuda_method.ipynb"}
OUTPUT = ROOT / "test-output" / "browser"
SCRATCH = (
    ROOT / "notebooks" / "test-output"
)  # under the server's root, git-ignored; removed after use
STARTUP_TIMEOUT = 240.0  # `make lab` reinstalls the pins first when requirements.txt changed
# At VIEWPORT, the notebook's own text: JupyterLab shows code at 13 px, markdown at 14.
MIN_TEXT_PX = 13.0


def _seconds(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    try:
        seconds = float(value) if value else default
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ValueError(
            f"{name}={value!r} is not a number of seconds above 0: set e.g. 600, or unset it."
        )
    return seconds


PER_NOTEBOOK = _seconds("COURSE_BROWSER_TIMEOUT", 300.0)
TOTAL = _seconds("COURSE_BROWSER_TOTAL_TIMEOUT", 1500.0)


def _budget(deadline: float, limit: float) -> float:
    left = deadline - time.monotonic()
    if left < 5:
        pytest.fail(
            f"the browser tests' limit, COURSE_BROWSER_TOTAL_TIMEOUT={TOTAL:.0f} s, is used up"
        )
    return min(limit, left)


def _has_outputs(path) -> bool:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(
        c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"
    )


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip("the browser tests")


@pytest.fixture(scope="module")
def deadline(chromium):
    return time.monotonic() + TOTAL


@pytest.fixture(scope="module")
def summary(chromium):
    """Writes a line to summary.txt and prints it."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / "summary.txt"
    path.write_text("")

    def write(line: str) -> None:
        with path.open("a") as file:
            file.write(line + "\n")
        print(line)

    return write


@pytest.fixture(scope="module")
def lab(chromium, deadline, summary, tmp_path_factory):
    fonts = tmp_path_factory.mktemp(
        "figure-fonts"
    )  # where the kernels record their figures' text sizes
    server = LabServer(tmp_path_factory.mktemp("lab"), OUTPUT / "lab.log", env=kernel_env(fonts))
    server.fonts = fonts
    started = time.monotonic()
    try:
        server.start(timeout=_budget(deadline, STARTUP_TIMEOUT))
        summary(
            f"`make lab` answered on port {server.port} after {time.monotonic() - started:.1f} s"
        )
        docmanager = server.api("GET", "/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
        assert docmanager["settings"]["autosave"] is False, (
            f"autosave is on: {docmanager['settings']}"
        )
        served = {item["name"] for item in server.api("GET", "/api/contents")["content"]}
        assert {p.name for p in NOTEBOOKS if p.exists()} <= served, (
            f"`make lab` serves {sorted(served)}"
        )
        # `make lab`'s own settings (jupyter/), not the test's: no prompt about Jupyter news.
        notification = server.api(
            "GET", "/lab/api/settings/@jupyterlab/apputils-extension:notification"
        )
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false", (
            notification["schema"]
        )
        assert "fetchNews" not in notification["settings"]
        yield server
    finally:
        left = server.stop()
    assert not left, f"processes left running after the server stopped: {left}"


@pytest.fixture(scope="module")
def browser(chromium, summary):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # never a browser Playwright downloads; containers often have a tiny /dev/shm
        instance = playwright.chromium.launch(
            executable_path=chromium, args=["--disable-dev-shm-usage"]
        )
        summary(f"Chromium {instance.version} ({chromium}), driven by Playwright")
        yield instance  # closed with Playwright


def test_the_checks_fail_on_errors_and_on_cells_never_run(lab, browser, deadline, summary):
    """An error, a widget that cannot be displayed and the cells never run are reported; a warning
    on stderr, a working progress bar and a figure are not. The figure, narrower than the output
    area, is shown at its own width (01's, wider, is scaled down to the area)."""
    folder = f"browser-{os.getpid()}"  # two runs at once do not share it
    path = SCRATCH / folder / "deliberate_error.ipynb"
    widget = {"model_id": "no-such-model", "version_major": 2, "version_minor": 0}
    write_notebook(
        path,
        [
            "print('this cell works')",
            "import warnings\n\nwarnings.warn('only a warning: stderr text, not an error')",
            "from tqdm.auto import tqdm\n\nfor _ in tqdm(range(3)):\n    pass",
            "import matplotlib.pyplot as plt\n\nplt.figure(figsize=(4, 2.5), dpi=100)\n"
            "plt.plot([0, 1], [0, 1])\nplt.show()",
            f"import ipywidgets\nfrom IPython.display import display\n\n"
            f"display({{'application/vnd.jupyter.widget-view+json': {widget!r}}}, raw=True)",
            "raise ValueError('deliberate failure for the browser test')",
            "print('never runs: Run All stops at the error')",
        ],
    )
    try:
        relative = f"test-output/{folder}/{path.name}"
        png = OUTPUT / "check_deliberate_error.png"
        run = run_notebook(lab, browser, relative, png, _budget(deadline, 120))
        assert not [line for line in lab.writes() if path.name in line]
        # a save through the server is what the notebooks' check would see
        content = lab.api("GET", f"/api/contents/{relative}")["content"]
        lab.api(
            "PUT",
            f"/api/contents/{relative}",
            {"type": "notebook", "format": "json", "content": content},
        )
        assert [line for line in lab.writes() if path.name in line]
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
        if SCRATCH.is_dir() and not any(SCRATCH.iterdir()):
            SCRATCH.rmdir()
    summary(f"check_deliberate_error.ipynb: {run.seconds:.1f} s; problems found: {run.problems()}")
    assert run.finished
    assert run.errors == [
        "cell 5: Error displaying widget: model not found",
        "cell 6: ValueError: deliberate failure for the browser test",
    ]
    assert run.not_run == [7] and len(run.problems()) == 3
    assert len(run.stderr) == 1 and "only a warning" in run.stderr[0], run.stderr
    assert run.screenshot.stat().st_size > 0
    (image,) = next(view for view in run.views if view.name == "plot").images
    natural = image["natural"][0]
    shown = image["shown"][0]
    room = image["room"]
    assert natural < room and abs(shown - natural) <= 1, f"a {natural} px figure, shown {image}"
    assert abs(room - OUTPUT_WIDTH_PX) <= 1, (
        f"the output area is {room:g} px; figure_fonts.OUTPUT_WIDTH_PX is {OUTPUT_WIDTH_PX:g}"
    )


def _figure_px(view, figures) -> list[tuple[float, str]]:
    """For each figure drawn in this run and shown in ``view``: its smallest text as shown (px), and
    what it says."""
    shown = []
    for image in view.images:
        figure = next((f for f in figures if f.get("png") == image["natural"]), None)
        if figure is not None:  # else a recorded GPU figure, or a PNG from results/
            points, text = min(figure["texts"])
            scale = image["shown"][0] / image["natural"][0]
            what = f"{text!r}, {points:g} pt shown at {scale:.0%}"
            shown.append((points * figure["dpi"] / 72 * scale, what))
    return shown


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    """JupyterLab in one page, on the notebooks' folder: every notebook opens there, one after the
    other, from the file browser (one page load instead of one each)."""
    page = open_lab(lab, browser)
    page.wait_for_selector(".jp-DirListing-item", timeout=120_000)
    yield page
    page.context.close()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(notebook, lab, browser, lab_page, deadline, summary):
    """Run ``notebook`` in JupyterLab, or open it, and check what a class sees.

    What is checked is in the module's docstring."""
    if not notebook.exists():
        pytest.skip(f"{notebook.name} was removed while the tests ran")
    had_outputs = _has_outputs(notebook)
    png = OUTPUT / f"{notebook.stem}.png"
    ran = notebook.name in RUN_HERE
    run = run_notebook(
        lab,
        browser,
        notebook.name,
        png,
        _budget(deadline, PER_NOTEBOOK),
        run_cells=ran,
        lab_page=lab_page,
    )
    figures = read(lab.fonts, notebook.name)
    notes = f"; stderr (not errors): {run.stderr}" if run.stderr else ""
    notes += f"; page errors: {run.page_errors}" if run.page_errors else ""
    for view in run.views:
        smallest = min(((px, text) for text, px in view.text_px.items()), default=None)
        figure = min(_figure_px(view, figures), default=None)
        notes += (
            f"; {view.name}: smallest text {smallest[0]:g} px ({smallest[1]!r})" if smallest else ""
        )
        notes += f", figure text {figure[0]:.1f} px ({figure[1]})" if figure else ""
    for view in run.views:
        notes += "".join(
            f"; image {i['natural'][0]} px shown at {i['shown'][0]} in {i['room']:g}"
            for i in view.images
        )
    summary(
        f"{notebook.name}: {'run' if ran else 'opened, not run'}, {run.seconds:.1f} s, "
        f"{run.code_cells} code cells, {len(figures)} figures, problems: {run.problems()}" + notes
    )
    assert not run.problems(), (
        f"{notebook.name} in JupyterLab: {'; '.join(run.problems())} (see {png})"
    )
    assert not [line for line in lab.writes() if notebook.name in line], (
        f"the server saved {notebook.name}"
    )
    assert had_outputs or not _has_outputs(notebook), (
        f"the browser run saved outputs into {notebook.name}"
    )
    assert not run.stderr, (
        f"{notebook.name} prints on stderr, which reads as a failure: {run.stderr}"
    )
    names = [view.name for view in run.views]
    assert (
        names[0] == "first-screen" and names[-1] == "exercises" and run.screenshot.stat().st_size
    ), names
    for view in run.views:
        assert view.screenshot.stat().st_size > 0
        assert not view.toasts, (
            f"{notebook.name}: a notification covers the {view.name}: {view.toasts}"
        )
        small = {text: px for text, px in view.text_px.items() if px < MIN_TEXT_PX}
        assert not small, f"{notebook.name}, {view.name}: text under {MIN_TEXT_PX:g} px: {small}"
        for px, what in _figure_px(view, figures):
            assert px >= MIN_SHOWN_PX, (
                f"{notebook.name}: a figure's smallest text, {what}, is {px:.1f} px on a "
                f"{VIEWPORT} screen (see {view.screenshot}); at least {MIN_SHOWN_PX:g} px: larger "
                "text or a narrower figure"
            )
        for image in view.images:  # what conftest.py assumes of the notebooks not run here
            natural = image["natural"][0]
            shown = image["shown"][0]
            room = image["room"]
            assert abs(room - OUTPUT_WIDTH_PX) <= 1 and abs(shown - min(natural, room)) <= 1, (
                f"{notebook.name}: an image {natural} px wide is shown {shown} px wide in "
                f"{room:g} px; figure_fonts.OUTPUT_WIDTH_PX is {OUTPUT_WIDTH_PX:g}: set it to what "
                "JupyterLab gives now"
            )
    assert not too_small(figures), (
        f"{notebook.name}: text under {MIN_POINTS:g} pt: {too_small(figures)}"
    )
    # The lessons' checkpoints/ and runs/ stay on disk but out of the file browser (jupyter/).
    served = {item["name"] for item in lab.api("GET", "/api/contents")["content"]}
    assert not {"checkpoints", "runs"} & served, f"the file browser lists {sorted(served)}"
