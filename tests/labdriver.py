"""Run notebooks in JupyterLab in headless Chromium, for ``tests/test_browser.py``.

The server is started the way a newcomer starts it, ``make lab``, with the test's options in
``LAB_ARGS``: a free port on 127.0.0.1, a random token, no browser, and a settings folder and a
workspaces folder of its own (so the user's JupyterLab settings are neither used nor changed).
The browser is Debian's ``chromium`` driven by Playwright through ``executable_path``; Playwright
never downloads a browser here.

How JupyterLab 4.6 shows an error in the DOM: an ``error`` output is rendered exactly like text on
stderr (a warning, say), as ``.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]``
with the pink background, so the output node alone cannot tell the two apart. The one element that
does is the notebook minimap (``showMinimap``): its item for a cell whose outputs include an error
carries ``data-output="error"`` and shows ``[!]``. The test's settings turn the minimap on, and a
cell counts as failed when its minimap item says so; stderr text that is not an error (warnings) is
reported but does not fail. Widgets that cannot be displayed ("Error displaying widget: ...") and
outputs that JupyterLab cannot render ("Javascript Error: ...") fail too: only a browser sees those.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "VIEWPORT",
    "LabServer",
    "NotebookRun",
    "View",
    "find_chromium",
    "launch_chromium",
    "run_notebook",
    "write_notebook",
]

ROOT = Path(__file__).resolve().parent.parent

# The settings of the test's JupyterLab, written to its own user-settings folder.
SETTINGS: dict[str, dict[str, Any]] = {
    # Autosave off, and the test never saves: a run leaves the committed notebooks as they are.
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # The minimap is where JupyterLab marks a cell that has an error output (see the docstring).
    "@jupyterlab/notebook-extension/tracker": {"showMinimap": True},
    # Nothing about the Jupyter news prompt: `make lab` turns it off itself (jupyter/), as for students.
}
# A projector's resolution: what the screenshots show, and what the text sizes are checked at.
VIEWPORT = {"width": 1280, "height": 720}

STDERR = "application/vnd.jupyter.stderr"
LOADING_WIDGET = "Loading widget..."  # what ipywidgets shows until it can display a widget


def find_chromium() -> str | None:
    """The Chromium binary: ``COURSE_CHROMIUM`` when set (a name on PATH or a path), else ``chromium``."""
    configured = os.environ.get("COURSE_CHROMIUM", "").strip()
    if configured:
        found = shutil.which(configured)
        if found is None:
            raise FileNotFoundError(
                f"COURSE_CHROMIUM={configured!r} is not an executable file: point it at a Chromium "
                "binary (e.g. /usr/bin/chromium) or unset it to use `chromium` from PATH."
            )
        return found
    return shutil.which("chromium")


def launch_chromium(playwright: Any, executable: str) -> Any:
    """Headless Chromium from ``executable`` (never a browser that Playwright downloads)."""
    return playwright.chromium.launch(
        executable_path=executable,
        headless=True,
        args=["--disable-dev-shm-usage"],  # containers often have a tiny /dev/shm
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) for every process, read from /proc (Linux)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and ')'
        table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def _descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below ``pid``: make, jupyter-lab and the kernels."""
    table = _proc_table()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, (parent, _) in table.items() if parent in frontier}
        found |= {(child, table[child][1]) for child in frontier}
    return found


def _alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    table = _proc_table()
    return {(pid, start) for pid, start in processes if pid in table and table[pid][1] == start}


class LabServer:
    """JupyterLab started by ``make lab`` with ``COURSE_QUICK=1``; ``stop()`` ends it and its children."""

    def __init__(self, workdir: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.log_path = log_path
        self.env = dict(env or {})  # more variables for the server and so for its kernels
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._children: set[tuple[int, str]] = set()

    def command(self) -> list[str]:
        settings, workspaces = self.workdir / "settings", self.workdir / "workspaces"
        lab_args = [
            f"--port={self.port}",
            "--port-retries=0",  # fail rather than drift to another port
            "--ServerApp.ip=127.0.0.1",
            "--no-browser",
            f"--IdentityProvider.token={self.token}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}",
        ]
        joined = shlex.join(lab_args)
        if "$" in joined:
            raise ValueError(f"make would expand the '$' in LAB_ARGS={joined!r}: use another folder")
        return ["make", "--no-print-directory", "-C", str(ROOT), "lab", f"LAB_ARGS={joined}"]

    def start(self, timeout: float) -> None:
        """Run ``make lab`` and wait until the server answers (at most ``timeout`` seconds)."""
        for name, values in SETTINGS.items():
            path = self.workdir / "settings" / f"{name}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        (self.workdir / "workspaces").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_DATA", "COURSE_DATA_DIR")}
        for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # when pytest itself runs under `make test`
            env.pop(name, None)
        env.update(self.env)
        env["COURSE_QUICK"] = "1"
        env["JUPYTER_RUNTIME_DIR"] = str(self.workdir / "runtime")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so that stop() reaches make and jupyter
            )
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"`make lab` exited with status {code} before JupyterLab answered.\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout=2)
                return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not answer within {timeout:.0f} s.\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"last lines of {self.log_path}:\n" + "\n".join(text.splitlines()[-lines:])

    def writes(self) -> list[str]:
        """The lines of the server's log where it wrote a file under its root (it logs each at INFO level)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        markers = ("Saving file at", "Uploading file to", "Creating new", "Copying ")
        return [line for line in text.splitlines() if any(marker in line for marker in markers)]

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

    def notebook_url(self, path: str, workspace: str) -> str:
        return (
            f"{self.base_url}/lab/workspaces/{workspace}/tree/{urllib.parse.quote(path)}?token={self.token}"
        )

    def shut_down_kernels(self, path: str, timeout: float = 20) -> None:
        """Delete the sessions of ``path`` (which shuts their kernels down) and wait until they are gone."""
        kernels = set()
        for session in self.api("GET", "/api/sessions"):
            if session["path"] == path:
                kernels.add(session["kernel"]["id"])
                self.api("DELETE", f"/api/sessions/{session['id']}", timeout=timeout)
        deadline = time.monotonic() + timeout
        while kernels & {k["id"] for k in self.api("GET", "/api/kernels")}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the kernel of {path} was still running {timeout} s after its shutdown")
            time.sleep(0.25)

    def stop(self) -> set[tuple[int, str]]:
        """Stop the server, its kernels and make; returns the processes that would not die (none)."""
        if self.process is None:
            return set()
        self._children = _descendants(self.process.pid)
        if self.process.poll() is None:
            try:
                self.api("POST", "/api/shutdown", timeout=5)  # shuts the kernels down, then the server
                self.process.wait(timeout=20)
            except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
                pass
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=wait)
        # Kernels run in sessions of their own, out of reach of killpg: end any that is left.
        deadline = time.monotonic() + 5
        while (left := _alive(self._children)) and time.monotonic() < deadline:
            for pid, _ in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL if time.monotonic() > deadline - 3 else signal.SIGTERM)
            time.sleep(0.25)
        return _alive(self._children)


@dataclass
class View:
    """One screen of a notebook after its run, as a projector shows it (``VIEWPORT``)."""

    name: str  # "first-screen", "plot", "exercises"
    screenshot: Path
    text_px: dict[str, float]  # the notebook's visible texts (up to 40 characters) -> font size, CSS px
    images: list[dict]  # visible output images: natural (PNG) and shown width and height, in px
    toasts: list[str]  # notifications over the page (JupyterLab's toasts)

    def smallest_text(self) -> tuple[float, str] | None:
        return min(((size, text) for text, size in self.text_px.items()), default=None)


@dataclass
class NotebookRun:
    """What the browser showed after "Run All Cells" in one notebook."""

    path: str
    seconds: float = 0.0
    finished: bool = False  # the kernel went idle with no cell queued or running
    cells: int = 0
    code_cells: int = 0
    errors: list[str] = field(default_factory=list)  # "cell 7: ValueError: ..." (1-based, as the status bar)
    not_run: list[int] = field(default_factory=list)  # code cells without an execution count
    stderr: list[str] = field(default_factory=list)  # stderr text that is not an error (warnings)
    page_errors: list[str] = field(default_factory=list)  # uncaught exceptions in JupyterLab's page
    screenshot: Path | None = None
    views: list[View] = field(default_factory=list)  # the first screen, a plot, the exercises

    def problems(self) -> list[str]:
        found = list(self.errors)
        if not self.finished:
            found.append(f"the run did not finish within the time limit ({self.seconds:.0f} s)")
        if self.not_run:
            found.append(f"code cells never run (no execution count): {self.not_run}")
        return found


# One round trip that reads what the page shows about every cell of the open notebook.
_READ_CELLS = """() => {
  const notebook = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!notebook) return null;
  const cells = Array.from(notebook.querySelectorAll(':scope .jp-Cell')).map(cell => ({
    code: cell.classList.contains('jp-CodeCell'),
    prompt: (cell.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
    source: (cell.querySelector('.jp-InputArea-editor') || {}).textContent || '',
    outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(out => ({
      mime: out.getAttribute('data-mime-type') || '',
      text: out.textContent || '',
    })),
  }));
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const minimap = Array.from(panel.querySelectorAll('.jp-WindowedPanel-scrollbar-item'))
    .map(item => item.dataset.output || '');
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const dialog = document.querySelector('.jp-Dialog');
  return {cells, minimap, status: indicator ? indicator.dataset.status : null,
          dialog: dialog ? dialog.textContent : null};
}"""

# What one screen shows of the open notebook: each visible text of its cells (the minimap aside) with
# its font size, each visible output image with its natural and shown size, and any notification.
_MEASURE_VIEW = """() => {
  const width = window.innerWidth, height = window.innerHeight;
  const onScreen = r => r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < height && r.right > 0
    && r.left < width;
  const notebook = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const texts = {};
  const walker = document.createTreeWalker(notebook, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent.trim();
    const element = node.parentElement;
    if (!text || !element || element.closest('.jp-WindowedPanel-scrollbar')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    if (!Array.from(range.getClientRects()).some(onScreen)) continue;
    const size = parseFloat(getComputedStyle(element).fontSize), key = text.slice(0, 40);
    texts[key] = Math.min(size, texts[key] ?? Infinity);
  }
  const images = Array.from(notebook.querySelectorAll('.jp-OutputArea-output img'))
    .filter(img => onScreen(img.getBoundingClientRect()) && img.naturalWidth > 0)
    .map(img => ({natural: [img.naturalWidth, img.naturalHeight],
                  shown: [img.clientWidth, img.clientHeight]}));
  const toasts = Array.from(document.querySelectorAll('.Toastify__toast')).map(t => t.textContent.trim());
  return {texts, images, toasts};
}"""

# Where each view scrolls to: the top, the first figure, the "Try it yourself" heading.
_VIEW_TARGETS = {
    "first-screen": ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell >> nth=0",
    "plot": ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img >> nth=0",
    "exercises": ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownOutput h2:has-text('Try it yourself')",
}

_KERNEL_READY = """() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
  .some(item => / \\| Idle$/.test(item.textContent) && !item.textContent.startsWith('No Kernel'))"""


def _shown(state: dict) -> None:
    if state and state["dialog"]:
        raise RuntimeError(f"JupyterLab opened a dialog: {' '.join(state['dialog'].split())[:300]}")


def _error_summary(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty error output)"


def run_notebook(server: LabServer, browser: Any, path: str, screenshot: Path, timeout: float) -> NotebookRun:
    """Open ``path`` (relative to the server's root), run all cells, read the result, screenshot it.

    The kernel is shut down and the page closed (never saved) on every exit, failures included.
    """
    run = NotebookRun(path=path)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + timeout
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.on("pageerror", lambda error: run.page_errors.append(str(error)))
    try:

        def left_ms() -> float:
            return max(1000.0, (deadline - time.monotonic()) * 1000)

        workspace = "browser-test-" + secrets.token_hex(4)  # a fresh workspace reopens no earlier tab
        page.goto(server.notebook_url(path, workspace), wait_until="domcontentloaded", timeout=left_ms())
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=left_ms())
        page.wait_for_function(_KERNEL_READY, timeout=left_ms(), polling=250)
        _shown(page.evaluate(_READ_CELLS))
        page.get_by_role("menuitem", name="Run", exact=True).click(timeout=left_ms())
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=left_ms())

        seen_running, quiet_polls, state = False, 0, None
        while time.monotonic() < deadline:
            state = page.evaluate(_READ_CELLS)
            _shown(state)
            prompts = [c["prompt"] for c in state["cells"] if c["code"]]
            running = any("*" in p for p in prompts)
            seen_running |= running
            counted = all(p.strip("[]: ").isdigit() for p in prompts)
            quiet = not running and state["status"] == "idle" and (seen_running or counted)
            quiet_polls = quiet_polls + 1 if quiet else 0
            if quiet_polls >= 3:  # idle and nothing queued for a second: the run is over
                run.finished = True
                break
            time.sleep(0.5)
        run.seconds = time.monotonic() - start
        # Widgets render after their output arrives: give a "Loading widget..." a moment to resolve.
        for _ in range(20):
            state = page.evaluate(_READ_CELLS)
            if not any(o["text"] == LOADING_WIDGET for c in state["cells"] for o in c["outputs"]):
                break
            time.sleep(0.5)
        _read_result(run, state)
        run.views = _look(page, screenshot)
        first_problem = next((i for i, e in enumerate(state["minimap"]) if e == "error"), None)
        if first_problem is not None:
            page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(
                first_problem
            ).scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot))
        run.screenshot = screenshot
    finally:
        run.seconds = run.seconds or time.monotonic() - start
        if run.screenshot is None:  # a failure on the way: show where it stopped
            with contextlib.suppress(Exception):  # the error that got us here matters more
                page.screenshot(path=str(screenshot))
                run.screenshot = screenshot
        try:
            server.shut_down_kernels(path)
        finally:
            context.close()  # closes without saving; beforeunload handlers are not run
    return run


def _look(page: Any, screenshot: Path) -> list[View]:
    """Scroll to each of ``_VIEW_TARGETS`` there is, screenshot it beside ``screenshot``, measure it."""
    views = []
    for name, selector in _VIEW_TARGETS.items():
        target = page.locator(selector)
        if target.count() == 0:
            continue  # a notebook without a figure
        target.first.evaluate("element => element.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)  # let the windowed notebook render what came into view
        path = screenshot.with_name(f"{screenshot.stem}-{name}.png")
        page.screenshot(path=str(path))
        seen = page.evaluate(_MEASURE_VIEW)
        views.append(View(name, path, seen["texts"], seen["images"], seen["toasts"]))
    return views


def _read_result(run: NotebookRun, state: dict) -> None:
    cells, minimap = state["cells"], state["minimap"]
    run.cells = len(cells)
    run.code_cells = sum(c["code"] for c in cells)
    if len(minimap) != len(cells):
        raise RuntimeError(
            f"the notebook minimap lists {len(minimap)} cells for {len(cells)} cells: errors cannot be told "
            "from stderr text (has JupyterLab changed its minimap markup?)"
        )
    for index, (cell, mark) in enumerate(zip(cells, minimap, strict=True), start=1):
        stderr = [o["text"] for o in cell["outputs"] if o["mime"] == STDERR]
        if mark == "error":
            run.errors.append(f"cell {index}: {_error_summary(stderr[-1] if stderr else '')}")
        else:
            run.stderr += [f"cell {index}: {_error_summary(text)}" for text in stderr]
        for output in cell["outputs"]:
            text = output["text"].strip()
            if text.startswith(("Error displaying widget", "Javascript Error")):
                run.errors.append(f"cell {index}: {text[:300]}")
            elif text == LOADING_WIDGET:
                run.errors.append(f"cell {index}: a widget was never displayed ({LOADING_WIDGET!r})")
        if cell["code"] and cell["source"].strip() and not cell["prompt"].strip("[]: ").isdigit():
            run.not_run.append(index)


def write_notebook(path: Path, sources: list[str]) -> None:
    """A minimal nbformat 4.5 notebook of code cells (for the test that the checks can fail).

    Its cells are tagged ``nbval-skip``: JupyterLab ignores the tag, and should a crashed run leave
    the file behind, `make test` (nbval collects notebooks/ recursively) skips it instead of failing.
    """
    cells = [
        {
            "cell_type": "code",
            "id": f"cell-{i}",
            "metadata": {"tags": ["nbval-skip"]},
            "source": src,
            "outputs": [],
            "execution_count": None,
        }
        for i, src in enumerate(sources)
    ]
    kernelspec = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    notebook = {"cells": cells, "metadata": {"kernelspec": kernelspec}, "nbformat": 4, "nbformat_minor": 5}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1) + "\n")
