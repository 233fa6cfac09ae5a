"""Build the course's website: `make site`, or `python book/make_site.py --help`.

Three steps, each in its own folder under the output folder (default ``book/_build/``):

1. ``executed/``: every notebook executed as a student runs it, in ``notebooks/`` (default mode;
   ``--quick`` for quick mode). Without a CUDA GPU the course's own extension (``helpers.recorded``)
   prints each GPU cell's recorded output under it. ``--executed FOLDER`` takes copies that were
   executed already (``make test`` keeps nbval's in ``test-output/executed/``) where they are
   complete and their notebook has not changed since; it executes the others.
2. ``source/``: the pages as Sphinx reads them. The README is the home page; the notebooks get
   their Colab (and Kaggle) buttons and a download link; their pictures, cell attachments, become
   files; proof cells fold; progress bars keep their last state (``widget_state.py``); a link to a
   file that is not a page goes to the file on GitHub at the release.
3. ``html/``: the site, built by Sphinx with MyST-NB and sphinx-book-theme (``book/conf.py``),
   with execution off. It loads nothing from the internet.
"""

import argparse
import base64
import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from widget_state import WidgetState, freeze

from helpers.course import REPOSITORY, TAG

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_OUTPUT = BOOK / "_build"
RUN_KEY = "course_run"  # notebook metadata of an executed copy: its mode and the notebook it ran
CELL_TIMEOUT = 600  # seconds, as `make test` gives nbval
# The site's pages besides the notebooks: the repository's file, and the page it becomes.
PAGES = {
    "README.md": "index.md",
    "docs/teaching.md": "docs/teaching.md",
    "docs/data.md": "docs/data.md",
    "docs/publishing.md": "docs/publishing.md",
    "docs/recording-gpu-runs.md": "docs/recording-gpu-runs.md",
    "LICENSE": "licence.md",
}
GUIDES = ["docs/teaching", "docs/data", "docs/publishing", "docs/recording-gpu-runs", "licence"]
# The notebooks that open in Kaggle too: its two free GPUs show them at work.
KAGGLE = ("04_data_parallel.ipynb", "05_distributed_data_parallel.ipynb")
BADGE_ID = "colab-badge"  # scripts/colab_cells.py's cell of links: the site has its own buttons
MINUTES = re.compile(r"^##\s+(?P<title>.+?)\s+\((?P<minutes>\d+) min\)\s*$", re.MULTILINE)
LINK = re.compile(r"(?P<open>!?\[[^\]]*\]\()(?P<target>[^)\s]+)(?P<close>\))")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".gif")


def github_address() -> tuple[str, str]:
    """``(owner, name)`` of ``helpers.course.REPOSITORY``."""
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", REPOSITORY)
    if match is None:
        raise ValueError(
            f"helpers/course.py: REPOSITORY={REPOSITORY!r} is not a GitHub repository: "
            "write https://github.com/OWNER/NAME."
        )
    return match[1], match[2]


def colab_url(notebook: str) -> str:
    owner, name = github_address()
    return (
        f"https://colab.research.google.com/github/{owner}/{name}/blob/{TAG}/notebooks/{notebook}"
    )


def kaggle_url(notebook: str) -> str:
    owner, name = github_address()
    source = f"https://github.com/{owner}/{name}/blob/{TAG}/notebooks/{notebook}"
    return f"https://kaggle.com/kernels/welcome?src={source}"


def file_url(path: str) -> str:
    """The address of a file of the repository (or of a folder, ending in '/') at the release."""
    kind = "tree" if path.endswith("/") or (ROOT / path).is_dir() else "blob"
    return f"{REPOSITORY.rstrip('/')}/{kind}/{TAG}/{path.rstrip('/')}"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# 1. Executing the notebooks


class _Client(NotebookClient):
    """nbclient's executor that also follows the widgets (``WidgetState``), dropping closed ones."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.widgets = WidgetState()

    def handle_comm_msg(self, outs, msg, cell_index):
        self.widgets.see(msg)
        super().handle_comm_msg(outs, msg, cell_index)


def execute(path: Path, target: Path, quick: bool, threads: int) -> float:
    """Run notebook ``path`` top to bottom in a fresh kernel started in ``notebooks/``, as
    JupyterLab runs it, and write it with its outputs to ``target``. Returns the seconds it took."""
    started = time.monotonic()
    notebook = nbformat.read(path, as_version=4)
    env = dict(os.environ)
    env.pop("COURSE_QUICK", None)
    if quick:
        env["COURSE_QUICK"] = "1"
    env["OMP_NUM_THREADS"] = str(threads)
    env["TQDM_MININTERVAL"] = "1"  # a progress bar updates once a second, as in `make test`
    env["JPY_SESSION_NAME"] = str(path)  # as JupyterLab names the notebook to its kernel
    client = _Client(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(env=env)
    notebook.metadata["widgets"] = client.widgets.metadata()
    notebook.metadata[RUN_KEY] = {"quick": quick, "notebook": digest(path), "complete": True}
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return time.monotonic() - started


def reusable(copy_path: Path, notebook: Path, quick: bool) -> bool:
    """Whether ``copy_path`` is ``notebook`` as it is now, run to its end in the wanted mode."""
    if not copy_path.is_file():
        return False
    run = json.loads(copy_path.read_text(encoding="utf-8"))["metadata"].get(RUN_KEY, {})
    wanted = {"quick": quick, "notebook": digest(notebook), "complete": True}
    return all(run.get(key) == value for key, value in wanted.items())


def executed_notebooks(folder: Path, reuse: Path | None, quick: bool, jobs: int) -> list[Path]:
    """Every notebook executed, in ``folder``: copied from ``reuse`` where current, else run."""
    folder.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    to_run = []
    for notebook in notebooks:
        target = folder / notebook.name
        if reuse is not None and reusable(reuse / notebook.name, notebook, quick):
            if reuse.resolve() != folder.resolve():
                shutil.copyfile(reuse / notebook.name, target)
            print(f"reused {reuse / notebook.name}")
        else:
            to_run.append(notebook)
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    mode = "quick mode" if quick else "default mode"
    spawn = multiprocessing.get_context("spawn")  # a fresh process: the caller may hold threads
    with concurrent.futures.ProcessPoolExecutor(max(1, jobs), mp_context=spawn) as pool:
        runs = {
            pool.submit(execute, notebook, folder / notebook.name, quick, threads): notebook
            for notebook in to_run
        }
        for run in concurrent.futures.as_completed(runs):
            print(f"executed {runs[run].name} in {mode}: {run.result():.0f} s", flush=True)
    return [folder / notebook.name for notebook in notebooks]


# 2. The pages as Sphinx reads them


def rewrite_links(text: str, at: str, page: str, pages: dict[str, str], source: Path) -> str:
    """Relative links in markdown ``text`` of the repository file ``at``, for its page ``page``: a
    page of the site stays a link to it; a picture is copied into ``source``; any other file or
    folder becomes its address on GitHub at the release."""

    def replace(match: re.Match) -> str:
        target = match["target"]
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return match[0]  # an address, a cell attachment, or a place on the same page
        path, _, anchor = target.partition("#")
        base = Path(at).parent
        resolved = os.path.normpath(base / path).replace(os.sep, "/")
        if path.endswith("/"):
            resolved += "/"
        if resolved.startswith("../"):
            raise ValueError(f"{at}: the link {target!r} leaves the repository")
        on_site = pages.get(resolved)
        if on_site is None and resolved.lower().endswith(IMAGE_SUFFIXES):
            copied = source / resolved
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / resolved, copied)
            on_site = resolved
        if on_site is None:
            if not (ROOT / resolved.rstrip("/")).exists():
                raise ValueError(f"{at}: the link {target!r} names nothing in the repository")
            new = file_url(resolved) + (f"#{anchor}" if anchor else "")
        else:
            new = os.path.relpath(on_site, Path(page).parent).replace(os.sep, "/")
            new += f"#{anchor}" if anchor else ""
        return f"{match['open']}{new}{match['close']}"

    return LINK.sub(replace, text)


def _home_page(text: str, notebooks: list[str]) -> str:
    """The README, with each notebook's name in its table a link to its page, and the sidebar."""
    for name in notebooks:
        text = text.replace(f"| `{name}` ", f"| [`{name}`](notebooks/{name}.ipynb) ")
    listed = "\n".join(f"notebooks/{name}" for name in notebooks)
    guides = "\n".join(GUIDES)
    return (
        f"{text.rstrip()}\n\n"
        f"```{{toctree}}\n:hidden:\n:caption: Notebooks\n\n{listed}\n```\n\n"
        f"```{{toctree}}\n:hidden:\n:caption: Guides\n\n{guides}\n```\n"
    )


def _licence_page(text: str) -> str:
    return f"# Licence\n\n```{{code-block}} text\n:class: course-licence\n\n{text.rstrip()}\n```\n"


def _buttons(name: str) -> str:
    """The buttons under a notebook's title: Colab, Kaggle for some, and the download."""
    links = [f'<a class="course-button" href="{colab_url(name)}">Open in Colab</a>']
    if name in KAGGLE:
        links.append(f'<a class="course-button" href="{kaggle_url(name)}">Open in Kaggle</a>')
    links.append(f'<a class="course-button" href="{name}" download>Download the notebook</a>')
    return (
        f'<div class="course-header">\n<p class="course-buttons">{" ".join(links)}</p>\n'
        f'<p class="course-release">Colab, Kaggle and the download give the notebook as it is at '
        f"release {TAG}, without outputs.</p>\n</div>\n"
    )


def _minutes(cells: list[dict]) -> str | None:
    """The sections' minutes, from headings such as ``## Setup (2 min)``; ``None`` if none has."""
    sections = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            sections += MINUTES.findall("".join(cell["source"]))
    if not sections:
        return None
    total = sum(int(minutes) for _, minutes in sections)
    items = "".join(f"<li>{_inline(title)}: {minutes} min</li>" for title, minutes in sections)
    return (
        f'<details class="course-minutes" open>\n<summary>{total} minutes in all</summary>\n'
        f"<ul>{items}</ul>\n</details>\n"
    )


def _inline(markdown: str) -> str:
    """A heading's text as HTML: escaped, with its `code` spans kept."""
    escaped = markdown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _title(source: str) -> str | None:
    """A proof cell's title, its first line ``# @title ...``."""
    first = source.split("\n", 1)[0]
    if first.startswith("# @title "):
        return first.removeprefix("# @title ").strip()
    return None


def notebook_page(executed: Path, source: Path, pages: dict[str, str]) -> None:
    """The page of one executed notebook, written to ``source/notebooks/``."""
    name = executed.name
    notebook = freeze(json.loads(executed.read_text(encoding="utf-8")))
    notebook["metadata"].pop(RUN_KEY, None)
    pictures = source / "notebooks" / "pictures"
    cells = []
    for cell in notebook["cells"]:
        if cell.get("id") == BADGE_ID:
            continue
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            text = rewrite_links(text, f"notebooks/{name}", f"notebooks/{name}", pages, source)
        for picture, data in cell.pop("attachments", {}).items():
            mime, encoded = next(iter(data.items()))
            if not mime.startswith("image/"):
                raise ValueError(f"{name}: attachment {picture!r} is {mime}, not a picture")
            pictures.mkdir(parents=True, exist_ok=True)
            (pictures / picture).write_bytes(base64.b64decode(encoded))
            text = text.replace(f"attachment:{picture}", f"pictures/{picture}")
        metadata = cell.setdefault("metadata", {})
        folded = metadata.get("jupyter", {}).get("source_hidden", False)
        if cell["cell_type"] == "code" and ("proof" in metadata.get("tags", []) or folded):
            metadata["tags"] = [*metadata.get("tags", []), "hide-input"]
            title = _title(text)
            prompt = f"{title} (show the code)" if title else "Show the code"
            metadata["mystnb"] = {"code_prompt_show": prompt, "code_prompt_hide": "Hide the code"}
        cell["source"] = text
        cells.append(cell)
    titled = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown")
    title, _, rest = cells[titled]["source"].partition("\n")
    cells[titled]["source"] = f"{title}\n\n{_buttons(name)}\n{rest.lstrip()}"
    minutes = _minutes(cells)
    if minutes is not None:
        cells.insert(titled + 1, {"cell_type": "markdown", "id": "site-minutes", "metadata": {}})
        cells[titled + 1]["source"] = minutes
    notebook["cells"] = cells
    target = source / "notebooks" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")
    download = source / "_extra" / "notebooks" / name
    download.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(NOTEBOOKS / name, download)  # as the repository holds it: no outputs


def source_folder(executed: list[Path], source: Path) -> None:
    """Every page as Sphinx reads it, in ``source`` (emptied first)."""
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    pages = dict(PAGES)
    for path in executed:
        pages[f"notebooks/{path.name}"] = f"notebooks/{path.name}"
    for repository_path, page in PAGES.items():
        text = (ROOT / repository_path).read_text(encoding="utf-8")
        if repository_path == "LICENSE":
            text = _licence_page(text)
        else:
            text = rewrite_links(text, repository_path, page, pages, source)
        if page == "index.md":
            text = _home_page(text, [path.stem for path in executed])
        (source / page).parent.mkdir(parents=True, exist_ok=True)
        (source / page).write_text(text, encoding="utf-8")
    for path in executed:
        notebook_page(path, source, pages)


# 3. The site


def sphinx(source: Path, html: Path, doctrees: Path) -> None:
    """Sphinx's HTML build of ``source`` into ``html``; any warning fails it."""
    shutil.rmtree(html, ignore_errors=True)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(BOOK)]
    command += ["-d", str(doctrees), "-W", "--keep-going", "-q", "-E", str(source), str(html)]
    if subprocess.run(command).returncode != 0:
        raise SystemExit(f"Sphinx could not build the site from {source}: see its messages above.")


def build(output: Path, quick: bool, reuse: Path | None, jobs: int) -> Path:
    """The whole build; returns the site's folder."""
    started = time.monotonic()
    executed = executed_notebooks(output / "executed", reuse, quick, jobs)
    executed_at = time.monotonic()
    source_folder(executed, output / "source")
    sphinx(output / "source", output / "html", output / "doctrees")
    done = time.monotonic()
    print(
        f"site built in {output / 'html'}: notebooks {executed_at - started:.0f} s, "
        f"pages {done - executed_at:.0f} s"
    )
    return output / "html"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="default book/_build")
    parser.add_argument("--quick", action="store_true", help="execute in quick mode")
    parser.add_argument(
        "--executed", type=Path, help="a folder of executed notebooks to reuse where current"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="notebooks executed at once (default 2)"
    )
    arguments = parser.parse_args(argv)
    if arguments.jobs < 1:
        parser.error(f"--jobs {arguments.jobs}: give 1 or more notebooks at once")
    build(arguments.output.resolve(), arguments.quick, arguments.executed, arguments.jobs)


if __name__ == "__main__":
    main()
