"""Run notebooks in JupyterLab in headless Chromium, for ``tests/test_browser.py``.

The server is started as a newcomer starts it, ``make lab``, with the test's options in
``LAB_ARGS``: a port on 127.0.0.1 that the server picks, a random token, and settings and
workspaces folders of its own. The browser is Debian's ``chromium`` driven by Playwright through
``executable_path`` (never a downloaded one).

JupyterLab renders an ``error`` output exactly like stderr text (a warning), so the output alone
cannot tell them apart. The notebook minimap (``showMinimap``) can: its item for a cell with an
error output carries ``data-output="error"``. A cell counts as failed when its minimap item says
so; other stderr text is reported apart. A widget that cannot be displayed and an output JupyterLab
cannot render ("Javascript Error") fail too: only a browser sees those.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Autosave off (the test never saves); the minimap marks the cells with an error output.
SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"showMinimap": True},
}
VIEWPORT = {"width": 1280, "height": 720}  # a projector's: what the text sizes are checked at
STDERR = "application/vnd.jupyter.stderr"
LOADING_WIDGET = "Loading widget..."  # what ipywidgets shows until it can display a widget


def find_chromium() -> str | None:
    """The Chromium binary: ``COURSE_CHROMIUM`` if set (a name on PATH or a path), else chromium."""
    configured = os.environ.get("COURSE_CHROMIUM", "").strip()
    if configured and shutil.which(configured) is None:
        raise FileNotFoundError(
            f"COURSE_CHROMIUM={configured!r} is not an executable file: point it at a Chromium "
            "binary (e.g. /usr/bin/chromium) or unset it to use `chromium` from PATH."
        )
    return shutil.which(configured or "chromium")


def chromium_or_skip(what: str) -> str:
    """The Chromium binary for ``what`` (the tests that need it), after checking Playwright is here.

    Without either, the test skips, or fails when ``COURSE_REQUIRE_BROWSER`` is set (CI)."""
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("Playwright is not installed here (`make setup` installs the pinned one)")
    executable = find_chromium()
    if executable is None:
        problems.append(
            "Chromium was not found: `sudo apt-get install chromium`, or set COURSE_CHROMIUM"
        )
    if not problems:
        return executable
    required = os.environ.get("COURSE_REQUIRE_BROWSER", "").strip().lower()
    if required in {"1", "true", "yes", "on"}:
        pytest.fail(f"COURSE_REQUIRE_BROWSER=1, so {what} must run: {'; '.join(problems)}.")
    pytest.skip(f"{what} skipped: {'; '.join(problems)}. CI installs Chromium and runs them.")


def _server_port(runtime: Path) -> int:
    """The port a Jupyter server started with ``--port=0`` listens on, from the file it writes in
    its runtime folder once it listens (``jpserver-<pid>.json``); 0 before that."""
    for info in runtime.glob("jpserver-*.json"):
        with contextlib.suppress(OSError, ValueError):  # being written
            return int(json.loads(info.read_text())["port"])
    return 0


class LabServer:
    """JupyterLab started by ``make lab`` with ``COURSE_QUICK=1``.

    ``stop()`` ends it and its children."""

    def __init__(self, workdir: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.log_path = log_path
        self.env = dict(env or {})
        self.port = 0  # the server picks a free one: start() reads which
        self.token = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float) -> None:
        """Run ``make lab`` and wait until the server answers (at most ``timeout`` seconds)."""
        for name, values in SETTINGS.items():
            path = self.workdir / "settings" / f"{name}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        settings = self.workdir / "settings"
        workspaces = self.workdir / "workspaces"
        workspaces.mkdir(exist_ok=True)
        # Port 0: the server takes a free port itself, and names it in its runtime folder. A port
        # found free here would stay free only until another program took it, as the tests' own
        # processes do, during the seconds the server takes to start.
        args = [
            "--port=0",
            "--port-retries=0",
            "--ServerApp.ip=127.0.0.1",
            "--no-browser",
        ]
        args += [f"--IdentityProvider.token={self.token}", f"--LabApp.workspaces_dir={workspaces}"]
        lab_args = shlex.join([*args, f"--LabApp.user_settings_dir={settings}"])
        if "$" in lab_args:
            raise ValueError(
                f"make would expand the '$' in LAB_ARGS={lab_args!r}: use another folder"
            )
        drop = (
            "COURSE_DATA",
            "COURSE_DATA_DIR",
            "MAKEFLAGS",
            "MFLAGS",
            "MAKELEVEL",
        )  # not from `make test`
        env = {k: v for k, v in os.environ.items() if k not in drop}
        runtime = self.workdir / "runtime"
        env.update(self.env, COURSE_QUICK="1", JUPYTER_RUNTIME_DIR=str(runtime))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            make = ["make", "--no-print-directory", "-C", str(ROOT), "lab", f"LAB_ARGS={lab_args}"]
            streams = {"stdin": subprocess.DEVNULL, "stdout": log, "stderr": log}
            # a session of its own: out of reach of a Ctrl-C meant for pytest
            self.process = subprocess.Popen(make, env=env, start_new_session=True, **streams)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if not self.port:
                self.port = _server_port(runtime)
            with contextlib.suppress(OSError):  # URLError is one
                if self.port:
                    self.api("GET", "/api/status", timeout=2)
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"JupyterLab did not answer within {timeout:.0f} s.\n{self.log_tail()}"
                )
            time.sleep(0.5)
        raise RuntimeError(
            f"`make lab` exited ({self.process.returncode}) before JupyterLab answered.\n"
            f"{self.log_tail()}"
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self) -> str:
        return f"last lines of {self.log_path}:\n" + "\n".join(self.log().splitlines()[-30:])

    def writes(self) -> list[str]:
        """The lines of the server's log where it wrote a file under its root (it logs each)."""
        markers = ("Saving file at", "Uploading file to", "Creating new", "Copying ")
        return [
            line for line in self.log().splitlines() if any(marker in line for marker in markers)
        ]

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def shut_down_kernels(self, path: str) -> None:
        """Delete the sessions of ``path``: the server answers once their kernels are shut down."""
        for session in self.api("GET", "/api/sessions"):
            if session["path"] == path:
                self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)

    def stop(self) -> list[psutil.Process]:
        """Stop the server, its kernels (in sessions of their own) and make.

        Returns the processes left (none)."""
        if self.process is None:
            return []
        try:
            family = [psutil.Process(self.process.pid)]
            family += family[0].children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        with contextlib.suppress(OSError):
            self.api("POST", "/api/shutdown", timeout=5)  # shuts the kernels down, then the server
        _, alive = psutil.wait_procs(family, timeout=20)
        for end in (psutil.Process.terminate, psutil.Process.kill):
            for process in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    end(process)
            _, alive = psutil.wait_procs(alive, timeout=5)
        self.process.poll()
        return alive


@dataclass
class View:
    """One screen of a notebook after its run, as a projector shows it (``VIEWPORT``)."""

    name: str  # "first-screen", "plot", "exercises"
    screenshot: Path
    text_px: dict[str, float]  # the visible texts (up to 40 characters) -> font size, CSS px
    images: list[
        dict
    ]  # visible output images: natural (PNG) and shown width and height, room (width), px
    toasts: list[str]  # notifications over the page


@dataclass
class NotebookRun:
    """What the browser showed after "Run All Cells" in one notebook."""

    seconds: float = 0.0
    finished: bool = False  # the kernel went idle with no cell queued or running
    code_cells: int = 0
    errors: list[str] = field(default_factory=list)  # "cell 7: ValueError: ..." (1-based)
    not_run: list[int] = field(default_factory=list)  # code cells without an execution count
    stderr: list[str] = field(default_factory=list)  # stderr text that is not an error (warnings)
    page_errors: list[str] = field(default_factory=list)  # uncaught exceptions in JupyterLab's page
    screenshot: Path | None = None
    views: list[View] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = list(self.errors)
        if not self.finished:
            found.append(f"the run did not finish within the time limit ({self.seconds:.0f} s)")
        if self.not_run:
            found.append(f"code cells never run (no execution count): {self.not_run}")
        return found


_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# One round trip that reads what the page shows about every cell of the open notebook.
_READ_CELLS = """() => {
  const panel = document.querySelector('PANEL');
  const notebook = panel && panel.querySelector('.jp-Notebook');
  if (!notebook) return null;
  const text = (cell, selector) => (cell.querySelector(selector) || {}).textContent || '';
  const cells = Array.from(notebook.querySelectorAll(':scope .jp-Cell')).map(cell => ({
    code: cell.classList.contains('jp-CodeCell'),
    prompt: text(cell, '.jp-InputArea-prompt'),
    source: text(cell, '.jp-InputArea-editor'),
    outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(out => ({
      mime: out.getAttribute('data-mime-type') || '', text: out.textContent || ''})),
  }));
  const minimap = Array.from(panel.querySelectorAll('.jp-WindowedPanel-scrollbar-item'))
    .map(item => item.dataset.output || '');
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const dialog = document.querySelector('.jp-Dialog');
  return {cells, minimap, status: indicator ? indicator.dataset.status : null,
          dialog: dialog ? dialog.textContent : null};
}""".replace("PANEL", _PANEL)

# What one screen shows: each visible text of the cells (the minimap aside) with its font size, each
# visible output image with its natural and shown size, and any notification.
_MEASURE_VIEW = """() => {
  const width = window.innerWidth, height = window.innerHeight;
  const onScreen = r => r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < height && r.right > 0
    && r.left < width;
  const notebook = document.querySelector('PANEL .jp-Notebook');
  const texts = {};
  const walker = document.createTreeWalker(notebook, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent.trim(), element = node.parentElement;
    if (!text || !element || element.closest('.jp-WindowedPanel-scrollbar')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    if (!Array.from(range.getClientRects()).some(onScreen)) continue;
    const size = parseFloat(getComputedStyle(element).fontSize), key = text.slice(0, 40);
    texts[key] = Math.min(size, texts[key] ?? Infinity);
  }
  const images = Array.from(notebook.querySelectorAll('.jp-OutputArea-output img'))
    .filter(img => onScreen(img.getBoundingClientRect()) && img.naturalWidth > 0)
    .map(img => {
      const box = getComputedStyle(img.parentElement);  // max-width: 100% of this box's content
      const padding = parseFloat(box.paddingLeft) + parseFloat(box.paddingRight);
      const room = img.parentElement.clientWidth - padding;
      const shown = [img.clientWidth, img.clientHeight];
      return {natural: [img.naturalWidth, img.naturalHeight], shown, room};
    });
  const toasts = Array.from(document.querySelectorAll('.Toastify__toast'))
    .map(t => t.textContent.trim());
  return {texts, images, toasts};
}""".replace("PANEL", _PANEL)

# Where each view scrolls to: the top, the first figure, the exercises ("Try it yourself").
_VIEW_TARGETS = {
    "first-screen": f"{_PANEL} .jp-Notebook .jp-Cell >> nth=0",
    "plot": f"{_PANEL} .jp-OutputArea-output img >> nth=0",
    "exercises": f"{_PANEL} .jp-MarkdownOutput h2:has-text('Try it yourself') >> nth=0",
}
_KERNEL_READY = """() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
  .some(item => / \\| Idle$/.test(item.textContent) && !item.textContent.startsWith('No Kernel'))"""


def _no_dialog(state: dict | None) -> dict | None:
    if state and state["dialog"]:
        raise RuntimeError(f"JupyterLab opened a dialog: {' '.join(state['dialog'].split())[:300]}")
    return state


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty error output)"


def open_lab(server: LabServer, browser: Any, path: str = "") -> Any:
    """A new page of JupyterLab, in a fresh workspace (it reopens no earlier tab), showing ``path``
    (relative to the server's root: a notebook, or a folder in the file browser)."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    workspace = "browser-test-" + secrets.token_hex(4)
    url = f"{server.base_url}/lab/workspaces/{workspace}"
    if path:
        url += f"/tree/{urllib.parse.quote(path)}"
    page.goto(f"{url}?token={server.token}", wait_until="domcontentloaded", timeout=120_000)
    return page


def run_notebook(
    server: LabServer,
    browser: Any,
    path: str,
    screenshot: Path,
    timeout: float,
    run_cells: bool = True,
    lab_page: Any = None,
) -> NotebookRun:
    """Open ``path`` (relative to the server's root), run all cells, read the result, screenshot it.

    With ``run_cells=False`` the notebook is only opened, as a class first sees it: its screens are
    measured and nothing runs. Given ``lab_page`` (``open_lab``'s, on the server's root), the
    notebook opens there from the file browser, as a student opens one, and its tab is closed at
    the end; otherwise in a page of its own, closed at the end. The kernel is shut down and nothing
    is saved on every exit, failures included.
    """
    run = NotebookRun()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + timeout
    page = lab_page or open_lab(server, browser, path)

    def page_error(error):
        run.page_errors.append(str(error))

    page.on("pageerror", page_error)

    def left_ms() -> float:
        return max(1000.0, (deadline - time.monotonic()) * 1000)

    try:
        _show(page, path, from_file_browser=lab_page is not None, timeout_ms=left_ms())
        if run_cells:
            page.get_by_role("menuitem", name="Run", exact=True).click(timeout=left_ms())
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=left_ms())

        seen_running = False
        quiet_polls = 0 if run_cells else 3
        while time.monotonic() < deadline and quiet_polls < 3:  # idle, nothing queued, for a second
            state = _no_dialog(page.evaluate(_READ_CELLS))
            prompts = [c["prompt"] for c in state["cells"] if c["code"]]
            running = any("*" in p for p in prompts)
            seen_running |= running
            counted = any(
                p.strip("[]: ").isdigit() for p in prompts
            )  # ran, even if it stopped at an error
            quiet = not running and state["status"] == "idle" and (seen_running or counted)
            quiet_polls = quiet_polls + 1 if quiet else 0
            time.sleep(0.5)
        run.finished = quiet_polls >= 3
        run.seconds = time.monotonic() - start
        for _ in range(
            20
        ):  # widgets render after their output arrives, the minimap after the page: a moment
            state = page.evaluate(_READ_CELLS)
            loading = any(o["text"] == LOADING_WIDGET for c in state["cells"] for o in c["outputs"])
            if not loading and (len(state["minimap"]) == len(state["cells"]) or not run_cells):
                break
            time.sleep(0.5)
        _read_result(run, state, run_cells)
        run.views = _look(page, screenshot)
        if "error" in state["minimap"]:
            first = state["minimap"].index("error")
            page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(
                first
            ).scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot))
        run.screenshot = screenshot
    finally:
        run.seconds = run.seconds or time.monotonic() - start
        if run.screenshot is None:  # a failure on the way: show where it stopped
            with contextlib.suppress(Exception):  # the error that got us here matters more
                page.screenshot(path=str(screenshot))
                run.screenshot = screenshot
        page.remove_listener("pageerror", page_error)
        _leave(server, path, page, shared=lab_page is not None, timeout_ms=left_ms())
    return run


# JupyterLab adds a long notebook's cells to the page a few at a time, while the browser is idle.
_ALL_CELLS_SHOWN = (
    f"(count) => document.querySelectorAll('{_PANEL} .jp-Notebook .jp-Cell').length >= count"
)


def _show(page: Any, path: str, from_file_browser: bool, timeout_ms: float) -> None:
    """Wait until the notebook is shown, every cell of it, with its kernel ready; first open it
    from the file browser (a double click on its name) if ``from_file_browser``."""
    cells = len(json.loads((ROOT / "notebooks" / path).read_text(encoding="utf-8"))["cells"])
    if from_file_browser:
        listed = page.locator(".jp-DirListing-item", has_text=Path(path).name)
        listed.first.dblclick(timeout=timeout_ms)
    page.wait_for_function(_ALL_CELLS_SHOWN, arg=cells, timeout=timeout_ms, polling=250)
    page.wait_for_function(_KERNEL_READY, timeout=timeout_ms, polling=250)
    _no_dialog(page.evaluate(_READ_CELLS))


def _leave(server: LabServer, path: str, page: Any, shared: bool, timeout_ms: float) -> None:
    """Close the notebook without saving it (its tab in a ``shared`` page, else the page) and shut
    its kernel down."""
    try:
        if shared:
            _close_tab(page, timeout_ms)
    finally:
        try:
            server.shut_down_kernels(path)
        finally:
            if not shared:
                page.context.close()  # closes without saving


def _close_tab(page: Any, timeout_ms: float) -> None:
    """Close the notebook's tab as a student does, with its close button, and discard any change
    (opening a notebook can update its metadata): nothing is saved."""
    page.locator(
        ".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon"
    ).click(timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    while page.locator(_PANEL).count():  # the notebook is still shown
        if page.locator(".jp-Dialog").count():
            page.locator(".jp-Dialog").get_by_role("button", name="Discard").click(
                timeout=timeout_ms
            )
        if time.monotonic() > deadline:
            raise TimeoutError("the notebook's tab did not close")
        time.sleep(0.2)


# Resolves once the browser has drawn two more frames: what a scroll brought into view is drawn.
_TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def _look(page: Any, screenshot: Path) -> list[View]:
    """Scroll to each of ``_VIEW_TARGETS`` there is, screenshot it beside ``screenshot``, measure
    it."""
    views = []
    for name, selector in _VIEW_TARGETS.items():
        target = page.locator(selector)
        if target.count() == 0:
            continue  # a notebook without a figure
        target.first.evaluate("element => element.scrollIntoView({block: 'start'})")
        page.evaluate(_TWO_FRAMES)  # the browser draws what came into view
        path = screenshot.with_name(f"{screenshot.stem}-{name}.png")
        page.screenshot(path=str(path))
        seen = page.evaluate(_MEASURE_VIEW)
        views.append(View(name, path, seen["texts"], seen["images"], seen["toasts"]))
    return views


def _read_result(run: NotebookRun, state: dict, ran: bool = True) -> None:
    cells = state["cells"]
    minimap = state["minimap"]
    run.code_cells = sum(c["code"] for c in cells)
    if not ran:  # opened only: no cell has run, and the minimap may not be drawn yet
        minimap = [""] * len(cells)
    if len(minimap) != len(cells):
        raise RuntimeError(
            f"the notebook minimap lists {len(minimap)} cells for {len(cells)} cells: errors "
            "cannot be told from stderr text (has JupyterLab changed its minimap markup?)"
        )
    for index, (cell, mark) in enumerate(zip(cells, minimap, strict=True), start=1):
        stderr = [o["text"] for o in cell["outputs"] if o["mime"] == STDERR]
        if mark == "error":
            run.errors.append(f"cell {index}: {_last_line(stderr[-1] if stderr else '')}")
        else:
            run.stderr += [f"cell {index}: {_last_line(text)}" for text in stderr]
        for output in cell["outputs"]:
            text = output["text"].strip()
            if text.startswith(("Error displaying widget", "Javascript Error")):
                run.errors.append(f"cell {index}: {text[:300]}")
            elif text == LOADING_WIDGET:
                run.errors.append(
                    f"cell {index}: a widget was never displayed ({LOADING_WIDGET!r})"
                )
        if (
            ran
            and cell["code"]
            and cell["source"].strip()
            and not cell["prompt"].strip("[]: ").isdigit()
        ):
            run.not_run.append(index)


def write_notebook(path: Path, sources: list[str]) -> None:
    """A notebook of code cells, each tagged ``nbval-skip``.

    The tag keeps nbval off it, should a crashed run leave it in notebooks/."""
    cells = [
        nbformat.v4.new_code_cell(source, metadata={"tags": ["nbval-skip"]}) for source in sources
    ]
    kernelspec = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
