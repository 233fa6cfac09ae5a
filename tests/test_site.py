"""The course's website (`make site`, book/make_site.py), built and read in headless Chromium.

The site is built in quick mode into `test-output/site/`. `make test` runs this file in the same
run as the notebooks, after them (`conftest.py` orders it so): nbval's runs of them are kept in
`test-output/executed/` (`executed_copies.py`). The build waits until each notebook of this run has
run to its end, takes each run that is complete and whose notebook has not changed since, and
executes the others itself (all eight, run alone: about 4 minutes on 2 cores). Then every page is
opened at a phone's width and at a projector's: no console error, no request that leaves the
machine, no page wider than the screen, every internal link and every image resolves. Each notebook
page shows its outputs (and, without a GPU, each GPU cell's recorded output), a picture, its
buttons and minutes at the top, proof cells folded and every other cell's code shown. Screenshots
of each page's first screen go to `test-output/site/screens/`.
"""

import functools
import hashlib
import html.parser
import http.server
import json
import re
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
import torch
from executed_copies import TEST_RUN, ran_in_this_run
from labdriver import chromium_or_skip

from helpers.course import REPOSITORY, TAG
from helpers.recorded import GPU_OUTPUT_TAG, find_recording

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book"))
import make_site  # noqa: E402
from widget_state import VIEW_MIME, WidgetState, freeze  # noqa: E402

OUTPUT = ROOT / "test-output" / "site"
EXECUTED = ROOT / "test-output" / "executed"  # nbval's runs in `make test` (executed_copies.py)
NBVAL_WAIT = 1200.0  # seconds for the notebooks of this run to end, then the build runs them itself
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIEWPORTS = {"phone": {"width": 390, "height": 844}, "projector": {"width": 1280, "height": 800}}
MIN_TEXT_PX = 14.0  # the site's body text, as shown
OWNER, NAME = re.fullmatch(
    r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", REPOSITORY
).groups()
SITE_URL = f"https://{OWNER.lower()}.github.io/{NAME}/"


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _folded(cell: dict) -> bool:
    metadata = cell.get("metadata", {})
    hidden = metadata.get("jupyter", {}).get("source_hidden", False)
    return "proof" in metadata.get("tags", []) or hidden


def _first_line(outputs: list[dict]) -> str:
    """The first line a cell printed (its first stream output, or error), as words; "" if none."""
    for output in outputs:
        if output.get("output_type") == "error":
            return _words(f"{output['ename']}: {output['evalue']}")
        text = "".join(output.get("text") or "")
        for line in text.splitlines():
            if line.strip():
                return _words(line)
    return ""


def _words(text: str) -> str:
    return " ".join(text.split())


# Without a browser: what the site is made of


def test_the_readme_links_the_site_in_its_first_lines():
    first_lines = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:5])
    assert SITE_URL in first_lines, (
        f"README.md's first lines should link the course's site, {SITE_URL} (GitHub Pages' "
        f"address for REPOSITORY={REPOSITORY!r} in helpers/course.py): write it there."
    )


def _bar(model_id: str, left: str, closed: bool) -> list[dict]:
    """The comm messages of one tqdm bar in a notebook, as the kernel sends them."""
    children = {
        "left": ("HTMLModel", left),
        "bar": ("FloatProgressModel", 3),
        "right": ("HTMLModel", "3/3"),
    }
    messages = []
    for suffix, (model, value) in children.items():
        state = {"_model_name": model, "value": value, "max": 3}
        content = {"comm_id": f"{model_id}-{suffix}", "data": {"state": state}}
        messages.append({"msg_type": "comm_open", "content": content})
    ids = [f"IPY_MODEL_{model_id}-{suffix}" for suffix in children]
    box = {"comm_id": model_id, "data": {"state": {"_model_name": "HBoxModel", "children": ids}}}
    messages.append({"msg_type": "comm_open", "content": box})
    update = {
        "comm_id": f"{model_id}-left",
        "data": {"method": "update", "state": {"value": f"{left} 100%"}},
    }
    messages.append({"msg_type": "comm_msg", "content": update})
    if closed:
        messages.append({"msg_type": "comm_close", "content": {"comm_id": model_id, "data": {}}})
    return messages


def test_progress_bars_keep_their_last_state_and_closed_ones_go():
    """As JupyterLab shows them once the cell ends: a bar kept (leave=True) at its last state, a
    bar closed at its end (leave=False) gone; no widget JavaScript is needed."""
    widgets = WidgetState()
    for message in _bar("kept", "epochs", closed=False) + _bar(
        "gone", "epoch 1 train", closed=True
    ):
        widgets.see(message)
    view = {"model_id": "kept", "version_major": 2, "version_minor": 0}
    outputs = [
        {
            "output_type": "display_data",
            "data": {VIEW_MIME: view, "text/plain": "0%"},
            "metadata": {},
        },
        {
            "output_type": "display_data",
            "data": {VIEW_MIME: {**view, "model_id": "gone"}},
            "metadata": {},
        },
        {"output_type": "stream", "name": "stdout", "text": "done\n"},
    ]
    notebook = {
        "metadata": {"widgets": widgets.metadata()},
        "cells": [{"cell_type": "code", "outputs": outputs}],
    }
    shown = freeze(notebook)["cells"][0]["outputs"]
    assert len(shown) == 2 and shown[1]["text"] == "done\n"
    assert VIEW_MIME not in shown[0]["data"] and "widgets" not in notebook["metadata"]
    page = shown[0]["data"]["text/html"]
    assert "epochs 100%" in page and '<progress value="3" max="3">' in page and "3/3" in page


# The build


def _wait_for_nbval(items: list) -> list[str]:
    """Wait until nbval has run every cell it was given of each notebook in this test run (in
    another worker, under pytest-xdist); returns the notebooks still running at ``NBVAL_WAIT``."""
    cells = {}
    for item in items:
        if item.path.suffix == ".ipynb":
            cells[item.path.name] = cells.get(item.path.name, 0) + 1
    deadline = time.monotonic() + NBVAL_WAIT
    running = sorted(cells)
    while running and time.monotonic() < deadline:
        running = [name for name in running if not ran_in_this_run(EXECUTED / name, cells[name])]
        if running:
            time.sleep(1)
    return running


@pytest.fixture(scope="module")
def site(request):
    started = time.monotonic()
    running = _wait_for_nbval(request.session.items)
    waited = time.monotonic() - started
    html = make_site.build(OUTPUT, quick=True, reuse=EXECUTED, jobs=2)
    reused = [p.name for p in NOTEBOOKS if make_site.reusable(EXECUTED / p.name, p, quick=True)]
    summary = OUTPUT / "summary.txt"
    summary.write_text(
        f"waited {waited:.0f} s for nbval's runs of this test run"
        f"{f' ({len(running)} still running: {running})' if running else ''}; built in "
        f"{time.monotonic() - started - waited:.0f} s; nbval's runs reused for {len(reused)} of "
        f"{len(NOTEBOOKS)} notebooks: {', '.join(reused) or 'none'}\n"
    )
    print(summary.read_text())
    return html


class _Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.assets = []  # (tag, address) of what the page loads

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag in ("script", "img", "iframe", "source", "video", "audio") and attributes.get("src"):
            self.assets.append((tag, attributes["src"]))
        if tag == "link" and attributes.get("href") and attributes.get("rel") != "canonical":
            self.assets.append((tag, attributes["href"]))


@functools.cache
def _parsed(path: Path) -> _Ids:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _pages(html: Path) -> list[str]:
    """The site's pages: its HTML files but the theme's templates in ``_static/``."""
    pages = [p.relative_to(html) for p in html.rglob("*.html")]
    return sorted(str(page) for page in pages if page.parts[0] != "_static")


def test_the_site_has_every_page_and_loads_nothing_from_outside(site):
    pages = _pages(site)
    wanted = ["index.html", "licence.html", "search.html"]
    wanted += [f"docs/{name}.html" for name in ("teaching", "data", "publishing")]
    wanted += [f"notebooks/{path.stem}.html" for path in NOTEBOOKS]
    assert not set(wanted) - set(pages), f"pages missing from the site: {set(wanted) - set(pages)}"
    outside = []
    for page in pages:
        for tag, address in _parsed(site / page).assets:
            if re.match(r"(https?:)?//", address):
                outside.append(f"{page}: <{tag}> {address}")
    for stylesheet in site.rglob("*.css"):
        for address in re.findall(
            r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", stylesheet.read_text()
        ):
            outside.append(f"{stylesheet.relative_to(site)}: {address}")
    assert not outside, f"the site would load these from the internet: {outside}"


def test_the_home_page_is_the_readme(site):
    readme_title = (
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    )
    home = (site / "index.html").read_text(encoding="utf-8")
    heading = re.search(r"<h1>([^<]*)<a class=\"headerlink\"", home)
    assert heading and heading[1].strip() == readme_title


# In the browser


@pytest.fixture(scope="module")
def browser():
    executable = chromium_or_skip("the site's browser test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=executable, args=["--disable-dev-shm-usage"]
        )
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def server(site):
    """The site over HTTP on 127.0.0.1, as GitHub Pages serves it; every answer is logged."""
    answers = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, code="-", size="-"):
            answers.append((self.path, int(code) if str(code).isdigit() else 0))

        def log_message(self, format, *args):
            pass

    handler = functools.partial(Handler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.answers = answers
    httpd.base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


# What a page reports of itself, measured in the browser.
_MEASURE = """async () => {
  const article = document.querySelector("article.bd-article") || document.body;
  const box = article.getBoundingClientRect();
  const paragraph = article.querySelector("p");
  const images = [...document.querySelectorAll("img")];
  const decoded = await Promise.all(images.map(async (img) => {
    const probe = new Image();
    probe.src = img.currentSrc || img.src;
    try { await probe.decode(); return [probe.src, probe.naturalWidth]; }
    catch (e) { return [probe.src, 0]; }
  }));
  return {
    pageWidth: document.documentElement.scrollWidth,
    screenWidth: document.documentElement.clientWidth,
    articleLeft: box.left, articleWidth: box.width,
    textPx: paragraph ? parseFloat(getComputedStyle(paragraph).fontSize) : 0,
    images: decoded,
    articleImages: decoded.filter((_, i) => article.contains(images[i])).length,
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
  };
}"""


def _resolve(site: Path, base: str, address: str) -> tuple[Path, str]:
    """The file and the fragment that an address on the site (under ``base``) names."""
    parsed = urllib.parse.urlsplit(address)
    path = urllib.parse.unquote(parsed.path).removeprefix(urllib.parse.urlsplit(base).path)
    if path == "" or path.endswith("/"):
        path += "index.html"
    return site / path, parsed.fragment


class _Tab:
    """One browser page at one screen size, on which page after page of the site is opened: the
    console errors, failed answers and requests that leave the machine go into ``problems``, each
    named by the page that was showing."""

    def __init__(self, browser, server, viewport: dict, problems: list):
        self.page = browser.new_page(viewport=viewport)
        self.server = server
        self.problems = problems
        self.showing = ""
        self.page.on("request", self._request)
        self.page.on("console", self._console)
        self.page.on("pageerror", self._page_error)

    def _request(self, sent) -> None:
        if not sent.url.startswith((self.server.base, "data:")):
            self.problems.append(f"{self.showing}: a request to {sent.url}")

    def _console(self, message) -> None:
        if message.type == "error":
            self.problems.append(f"{self.showing}: console: {message.text}")

    def _page_error(self, error) -> None:
        self.problems.append(f"{self.showing}: page error: {error}")

    def go(self, page_path: str):
        """Open ``page_path`` of the site and wait for it to load; returns the page."""
        self.showing = f"{page_path} at {self.page.viewport_size['width']} px"
        response = self.page.goto(self.server.base + page_path, wait_until="load")
        if response is None or response.status != 200:
            self.problems.append(f"{self.showing}: answered {response and response.status}")
        return self.page


def _screenshot(page, page_path: str, viewport: dict) -> None:
    screens = OUTPUT / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    shot = page_path.replace("/", "_").removesuffix(".html")
    page.screenshot(path=str(screens / f"{shot}-{viewport['width']}.png"))


def _layout_problems(where: str, seen: dict, viewport: dict) -> list[str]:
    """What makes a page hard to read on this screen: wider than it, a narrow text column, small
    text, or an image that does not load."""
    problems = []
    if seen["pageWidth"] > seen["screenWidth"] + 1:
        problems.append(f"{where}: the page is {seen['pageWidth']} px wide")
    if seen["articleLeft"] < 0 or seen["articleWidth"] < 0.8 * min(viewport["width"], 800):
        problems.append(f"{where}: the text column is {seen['articleWidth']:.0f} px wide")
    if seen["textPx"] and seen["textPx"] < MIN_TEXT_PX:
        problems.append(f"{where}: the text is {seen['textPx']} px")
    for address, width in seen["images"]:
        if not width:
            problems.append(f"{where}: the image {address} does not load")
    return problems


def _link_problem(site: Path, page_path: str, address: str, base: str) -> str | None:
    """Why an internal link of ``page_path`` leads nowhere; ``None`` when it resolves."""
    path, fragment = _resolve(site, base, address)
    if not path.is_file():
        return f"{page_path}: the link {address} finds no file"
    if fragment and path.suffix == ".html" and fragment not in _parsed(path).ids:
        return f"{page_path}: the link {address} finds no #{fragment}"
    return None


# The top of a notebook's page, its navigation, and the sections' minutes.
_TOP = """() => {
  const article = document.querySelector("article.bd-article");
  const first = article.querySelector("h2");
  const all = (selector, root = article) => [...root.querySelectorAll(selector)];
  const follows = Node.DOCUMENT_POSITION_FOLLOWING;
  const before = (element) => !first || element.compareDocumentPosition(first) & follows;
  const summary = article.querySelector(".course-minutes summary");
  return {
    pictures: all("img").length,
    buttons: all(".course-buttons a").map((a) => a.getAttribute("href")),
    buttonsTop: article.querySelector(".course-buttons").getBoundingClientRect().top,
    objectives: all("ol").some(before),
    minutes: all(".course-minutes li").map((li) => li.textContent),
    total: summary ? summary.textContent : "",
    headings: all("h2").map((h) => h.textContent),
    copyButtons: all("button.copybtn", document).length,
    previousNext: all(".prev-next-area a", document).length,
    sidebar: all(".bd-docs-nav a", document).map((a) => a.href),
  };
}"""


def _page_cells(page) -> list[dict]:
    return page.evaluate(
        """() => [...document.querySelectorAll("article div.cell")].map((cell) => {
          const input = cell.querySelector(".cell_input");
          const output = cell.querySelector(".cell_output");
          return {
            inputShown: !!input && input.checkVisibility(),
            output: output ? output.innerText : "",
            outputShown: !!output && output.checkVisibility(),
            failed: !!cell.querySelector(".output.stderr, .output.error, .output.traceback"),
          };
        })"""
    )


@pytest.fixture(scope="module")
def visits(site, server, browser):
    """Every page, opened at a phone's width and at a projector's: what each showed, and the
    problems met on the way. A notebook's page is read at the projector's width too."""
    seen = {}
    problems = []
    tabs = {
        screen: _Tab(browser, server, viewport, problems) for screen, viewport in VIEWPORTS.items()
    }
    for page_path in _pages(site):
        seen[page_path] = {}
        for screen, viewport in VIEWPORTS.items():
            page = tabs[screen].go(page_path)
            seen[page_path][screen] = page.evaluate(_MEASURE)
            _screenshot(page, page_path, viewport)
            if screen == "projector" and page_path.startswith("notebooks/"):
                seen[page_path]["cells"] = _page_cells(page)
                seen[page_path]["top"] = page.evaluate(_TOP)
    for tab in tabs.values():
        tab.page.close()
    return seen, problems


def test_every_page_reads_on_a_phone_and_a_projector(site, server, visits):
    seen, problems = visits
    problems = list(problems)
    internal = set()
    for page_path, screens in seen.items():
        for screen, viewport in VIEWPORTS.items():
            where = f"{page_path} on a {screen} ({viewport['width']} px)"
            problems += _layout_problems(where, screens[screen], viewport)
            links = screens[screen]["links"]
            internal.update((page_path, a) for a in links if a.startswith(server.base))
    for page_path, address in sorted(internal):
        problems.append(_link_problem(site, page_path, address, server.base))
    failed = [f"{path} ({code})" for path, code in server.answers if code >= 400]
    assert not failed, f"the server could not answer: {failed}"
    problems = [problem for problem in problems if problem]
    assert not problems, "\n".join(problems)
    assert internal, "no internal link was checked"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_page_shows_what_a_student_sees(site, visits, notebook):
    pages, problems = visits
    page_path = f"notebooks/{notebook.stem}.html"
    assert not [problem for problem in problems if problem.startswith(page_path)], problems
    code = [cell for cell in _cells(notebook) if cell["cell_type"] == "code"]
    shown = _cells(OUTPUT / "source" / "notebooks" / notebook.name)  # as the page was built
    shown = [cell for cell in shown if cell["cell_type"] == "code"]
    cells = pages[page_path]["cells"]
    assert len(cells) == len(code) == len(shown), (len(cells), len(code), len(shown))

    # Outputs: every output the run made, on the page; no error, no stderr
    for index, (cell, built, seen) in enumerate(zip(code, shown, cells, strict=True)):
        where = f"{notebook.name}, code cell {index} ({cell.get('id')})"
        assert not seen["failed"], f"{where} shows an error or stderr"
        if built["outputs"]:
            assert seen["outputShown"], f"{where}: its output is not shown"
            printed = _first_line(built["outputs"])
            assert printed in _words(seen["output"]), f"{where}: {printed!r} not shown"
        if _folded(cell):
            assert not seen["inputShown"], f"{where} is a proof cell: its code should be folded"
        else:
            assert seen["inputShown"], f"{where}: its code should be shown"
    assert sum(bool(c["output"].strip()) for c in cells) >= 1

    # Without a GPU, each GPU cell shows its recorded output, labelled with its GPU
    if not torch.cuda.is_available():
        for cell, seen in zip(code, cells, strict=True):
            if GPU_OUTPUT_TAG not in cell["metadata"].get("tags", []):
                continue
            depends_on = cell["metadata"].get("gpu_output_depends_on", ())
            recording, _ = find_recording(cell["id"], depends_on=depends_on)
            if recording is None or not recording.current:
                continue
            output = _words(seen["output"])
            assert _words(recording.label) in output, f"{cell['id']}: no {recording.label!r}"
            recorded = _first_line(recording.outputs)
            assert recorded in output, f"{cell['id']}: the recorded {recorded!r} is not shown"

    # A picture, and the buttons, objectives and minutes at the top
    top = pages[page_path]["top"]
    assert top["pictures"] >= 1, f"{notebook.name}: no picture on its page"
    assert top["buttonsTop"] < VIEWPORTS["projector"]["height"], (
        "the buttons are below the first screen"
    )
    assert top["objectives"], f"{notebook.name}: no list of objectives before the first section"
    blob = f"{OWNER}/{NAME}/blob/{TAG}/notebooks/{notebook.name}"
    hrefs = top["buttons"]
    assert f"https://colab.research.google.com/github/{blob}" in hrefs
    badge = "".join(
        next((c["source"] for c in _cells(notebook) if c.get("id") == "colab-badge"), "")
    )
    kaggle = f"https://kaggle.com/kernels/welcome?src=https://github.com/{blob}"
    assert (kaggle in hrefs) == ("kaggle.com" in badge), f"{notebook.name}: Kaggle {hrefs}"
    download = site / "notebooks" / notebook.name
    assert notebook.name in hrefs and download.read_bytes() == notebook.read_bytes()
    timed = [re.fullmatch(r"(.*) \((\d+) min\)#?", heading.strip()) for heading in top["headings"]]
    timed = [match for match in timed if match]
    assert len(top["minutes"]) == len(timed), (top["minutes"], top["headings"])
    if timed:
        assert str(sum(int(match[2]) for match in timed)) in top["total"]
    assert top["copyButtons"] >= 1 and top["previousNext"] >= 1
    listed = {Path(urllib.parse.urlsplit(href).path).name for href in top["sidebar"]}
    assert {f"{path.stem}.html" for path in NOTEBOOKS} <= listed, f"sidebar: {sorted(listed)}"


def test_search_finds_a_notebook(site, server, browser):
    title = next(
        c
        for c in _cells(NOTEBOOKS[-1])
        if c["cell_type"] == "markdown" and c.get("id") != "colab-badge"
    )
    word = max(re.findall(r"[A-Za-z]{5,}", "".join(title["source"]).splitlines()[0]), key=len)
    problems = []
    page = _Tab(browser, server, VIEWPORTS["projector"], problems).go(f"search.html?q={word}")
    page.wait_for_selector("#search-results li a", timeout=30_000)
    found = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.href)")
    page.close()
    assert not problems, problems
    assert any(NOTEBOOKS[-1].stem in address for address in found), (word, found)


def test_a_notebook_changed_since_its_run_is_not_reused(tmp_path):
    notebook = NOTEBOOKS[0]
    run = {
        "quick": True,
        "notebook": hashlib.sha256(notebook.read_bytes()).hexdigest(),
        "complete": True,
    }
    kept = tmp_path / notebook.name
    for metadata, reused in [
        (run, True),
        ({**run, "test_run": TEST_RUN, "cells_run": 3}, True),  # as executed_copies.py writes it
        ({**run, "complete": False}, False),
        ({**run, "quick": False}, False),
        ({**run, "notebook": "0" * 64}, False),
    ]:
        kept.write_text(json.dumps({"metadata": {make_site.RUN_KEY: metadata}, "cells": []}))
        assert make_site.reusable(kept, notebook, quick=True) is reused, metadata


def test_the_build_waits_for_this_runs_copy_of_every_cell(tmp_path):
    kept = tmp_path / "copy.ipynb"
    run = {"quick": True, "notebook": "0" * 64, "complete": False}
    for metadata, over in [
        ({**run, "test_run": TEST_RUN, "cells_run": 3}, True),
        ({**run, "test_run": TEST_RUN, "cells_run": 4}, True),
        ({**run, "test_run": TEST_RUN, "cells_run": 2}, False),  # a cell still to run
        ({**run, "test_run": "an-earlier-run", "cells_run": 3}, False),
        (run, False),  # written before copies said which run wrote them
    ]:
        kept.write_text(json.dumps({"metadata": {make_site.RUN_KEY: metadata}, "cells": []}))
        assert ran_in_this_run(kept, cells=3) is over, metadata
    kept.write_text('{"metadata": {"cour')  # half written
    assert not ran_in_this_run(kept, cells=3)
    assert not ran_in_this_run(tmp_path / "none.ipynb", cells=3)


def test_the_site_test_runs_after_every_notebook():
    """`make test`'s workers take files in the order conftest.py sorts them: the site's test builds
    from the notebooks' runs, so it comes after each of them."""
    from conftest import _run_order

    files = [ROOT / "tests" / "test_site.py", ROOT / "tests" / "test_data.py", *NOTEBOOKS]
    files.append(ROOT / "tests" / "test_browser.py")
    ordered = [item.path for item in sorted(map(_Item, files), key=_run_order)]
    site_at = ordered.index(ROOT / "tests" / "test_site.py")
    assert set(ordered[:site_at]) >= set(NOTEBOOKS), ordered


class _Item:
    def __init__(self, path: Path):
        self.path = path
