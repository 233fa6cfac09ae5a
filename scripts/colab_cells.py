"""Write the Colab (and Kaggle) links and setup cells of the notebooks and the README.

    python scripts/colab_cells.py notebooks/*.ipynb README.md          # update cells and links
    python scripts/colab_cells.py --check notebooks/*.ipynb README.md  # exit 1, list stale files

The repository and the release tag come from ``helpers/course.py``, the one place that names them;
the torch and torchvision floors that the setup cell checks come from ``pyproject.toml``.

In a notebook, the badge is a markdown cell (id ``colab-badge``) at the top, after the same link
as text (an offline classroom cannot load the badge's image), with an "Open in Kaggle" link beside
it in the notebooks of ``KAGGLE_NOTEBOOKS``. The setup cell (id ``colab-setup``) goes just before
the notebook's first code cell, so it runs before anything imports the helpers. Its code is hidden
behind its first line, a ``# @title`` (``SETUP_METADATA``: a form in Colab, folded in JupyterLab).
Each notebook asks Colab for a GPU runtime (``NOTEBOOK_METADATA``). Every other cell, its id and
metadata stay as they are, and running the tool twice changes nothing: a notebook whose two cells
and metadata are already current is not rewritten. In a markdown file (the README) only the
targets of the Colab and Kaggle links of the notebooks change.

`make release` (``scripts/release.py``, standard library only) rewrites the same two cells and
the links for a new tag; ``tests/test_release.py`` checks that this tool then finds them current.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tomllib
from pathlib import Path

try:
    import nbformat
except ImportError:  # e.g. in a clone without .venv, on the system's python3
    raise SystemExit(
        f"{sys.executable} has no nbformat: run `make setup` first, which makes .venv"
    ) from None

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path[:1]:  # this checkout's helpers, whichever copy is installed
    sys.path.insert(0, str(ROOT))

from helpers.course import REPOSITORY, TAG  # noqa: E402
from helpers.paths import CHECKOUT_VARIABLE  # noqa: E402

KAGGLE_NOTEBOOKS = (
    "04_data_parallel.ipynb",
    "05_distributed_data_parallel.ipynb",
)  # two T4 GPUs there
BADGE_ID = "colab-badge"
SETUP_ID = "colab-setup"
# The setup cell's code is hidden behind its first line, a `# @title`: a form in Colab (cellView),
# folded in JupyterLab (jupyter.source_hidden). A student's first screen is the lesson, not 80
# lines that matter only on Colab and Kaggle.
SETUP_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}
# What Colab writes when a notebook's runtime is set to a T4 GPU: Colab opens it on one.
NOTEBOOK_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4"}}
FLOOR_PACKAGES = ("torch", "torchvision")  # their floors in pyproject.toml bound Colab's own
_BADGE_MARK = "colab.research.google.com/assets/colab-badge.svg"
_KAGGLE_BADGE = "kaggle.com/static/images/open-in-kaggle.svg"
BADGE_TEXT = "Run this notebook in Google Colab"
BADGE_NOTE = "on a free GPU (online only):"
KAGGLE_TEXT = "or on Kaggle"
KAGGLE_NOTE = "on two free GPUs:"
_SETUP_MARK = "# @title Colab and Kaggle: install the course's helpers"
_OLD_SETUP_MARKS = (  # cells written by earlier versions
    "# Colab only: install the course's helpers",
    "# Colab and Kaggle only: install the helpers",
)
_GITHUB = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?")
_BLOB = r"[\w.-]+/[\w.-]+/blob/[^/\s)]+/notebooks/([\w.-]+\.ipynb)"  # OWNER/NAME/blob/REF/.../FILE
_KAGGLE_OPENS = r"https://(?:www\.)?kaggle\.com/kernels/welcome\?src=https://github\.com/"


def _blob(notebook: str, repository: str, ref: str) -> str:
    """``OWNER/NAME/blob/REF/notebooks/NOTEBOOK``: where GitHub shows the notebook."""
    for name, value in {"notebook": notebook, "repository": repository, "ref": ref}.items():
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__} {value!r}.")
    if "/" in notebook or not notebook.endswith(".ipynb"):
        raise ValueError(f"expected a notebook file name such as '00_x.ipynb': {notebook!r}")
    match = _GITHUB.fullmatch(repository)
    if match is None:
        raise ValueError(
            f"{repository!r} is not a GitHub repository: write https://github.com/OWNER/NAME."
        )
    return f"{match[1]}/{match[2]}/blob/{ref}/notebooks/{notebook}"


def colab_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at the tag (or branch) ``ref`` in Colab."""
    return f"https://colab.research.google.com/github/{_blob(notebook, repository, ref)}"


def kaggle_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at ``ref`` in Kaggle."""
    blob = _blob(notebook, repository, ref)
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{blob}"


_README_LINKS = (  # (pattern, the address it stands for)
    (re.compile(r"https://colab\.research\.google\.com/github/" + _BLOB), colab_url),
    (re.compile(_KAGGLE_OPENS + _BLOB), kaggle_url),
)

# The cell as a student reads it in Colab's form or unfolded in JupyterLab. Doubled braces are
# the cell's own; single ones are filled in by setup_source().
_SETUP_TEMPLATE = """\
{mark} (elsewhere, a check)
# On Colab and Kaggle it fetches the course at this notebook's release, {tag}, and installs its
# helpers beside the platform's own torch. Elsewhere it checks that the helpers are installed.
import importlib.metadata
import importlib.util
import os
import re
import sys

repository = {repository}
tag = {tag_literal}
on_colab = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
on_kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ
on_your_own = not on_colab and not on_kaggle
if on_your_own and importlib.util.find_spec("helpers") is None:
    raise RuntimeError(
        "This Jupyter is neither Colab nor Kaggle and has no course helpers: on your own machine, "
        "start it with `make lab` in the course's folder; on another hosted Jupyter, run "
        f"`%pip install git+{{repository}}@{{tag}}` in a cell, then this cell again."
    )
if on_colab or on_kaggle:
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    floors = {floors}  # the course's floors, from its pyproject.toml
    for package, floor in floors.items():
        found = importlib.metadata.version(package)
        numbers = [int(number) for number in re.match(r"(\\d+)\\.(\\d+)", found).groups()]
        if numbers < [int(number) for number in floor.split(".")]:
            wanted = " ".join(f"'{{name}}>={{version}}'" for name, version in floors.items())
            raise RuntimeError(
                f"This runtime has {{package}} {{found}}, older than the course's floor {{floor}}: "
                f"run `%pip install {{wanted}}` in a cell, restart the session, then run all cells."
            )

    checkout = Path.home() / "gpu-course" / tag  # fetched once per runtime
    if not (checkout / "pyproject.toml").is_file():
        no_prompt = {{**os.environ, "GIT_TERMINAL_PROMPT": "0"}}  # no login prompt: fail at once
        listing = ["git", "ls-remote", "--tags", repository, f"refs/tags/{{tag}}"]
        listed = subprocess.run(listing, capture_output=True, text=True, env=no_prompt)
        offline = ("Could not resolve host", "Failed to connect", "Couldn't connect", "timed out")
        if listed.returncode != 0 and any(words in listed.stderr for words in offline):
            how = "check its connection"
            if on_kaggle:
                how = "turn on Settings > Internet (Kaggle allows it to phone-verified accounts)"
            raise RuntimeError(
                f"This runtime has no internet to fetch {{repository}}: {{how}}, "
                "then run this cell again."
            )
        if listed.returncode != 0:
            raise RuntimeError(
                f"There is no public repository at {{repository}}: open this notebook from the "
                "repository that publishes the course, or see docs/publishing.md there."
            )
        if not listed.stdout.strip():
            raise RuntimeError(
                f"{{repository}} has no tag {{tag}}: the release was not pushed; whoever publishes "
                f"the course runs `git push origin {{tag}}` (docs/publishing.md)."
            )
        checkout.parent.mkdir(parents=True, exist_ok=True)
        partial = tempfile.mkdtemp(dir=checkout.parent)  # renamed once complete
        clone = ["git", "clone", "--quiet", "--depth", "1", "--branch", tag, repository, partial]
        fetched = subprocess.run(clone, capture_output=True, text=True, env=no_prompt)
        if fetched.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            said = fetched.stderr
            raise RuntimeError(f"git could not clone {{repository}} at {{tag}}:\\n{{said}}")
        shutil.rmtree(checkout, ignore_errors=True)
        os.replace(partial, checkout)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(checkout)]
    installed = subprocess.run(command, capture_output=True, text=True)
    if installed.returncode != 0:
        said = installed.stderr
        raise RuntimeError(f"Installing the helpers from {{checkout}} failed:\\n{{said}}")
    # helpers.recorded reads the recorded GPU runs there
    os.environ[{variable}] = str(checkout)
    importlib.invalidate_caches()  # let the import system see the new package
    import torch

    if not torch.cuda.is_available():
        how = "Runtime > Change runtime type > T4 GPU > Save"
        if on_kaggle:
            how = "Settings > Accelerator > GPU T4 x2"
        print(f"No GPU here: {{how}}, then run all. On the CPU it runs on a subset of the data.")"""


def badge_source(notebook_name: str, tag: str = TAG) -> str:
    """The badge cell's markdown for ``notebooks/<notebook_name>``: the link as text, then the badge
    (offline, where the badge's image cannot load, the text still says where the link goes); the
    same for Kaggle in the notebooks of ``KAGGLE_NOTEBOOKS``."""
    url = colab_url(notebook_name, ref=tag)
    badge = f"[![Open In Colab](https://{_BADGE_MARK})]({url})"
    source = f"[{BADGE_TEXT}]({url}) {BADGE_NOTE} {badge}"
    if notebook_name in KAGGLE_NOTEBOOKS:
        url = kaggle_url(notebook_name, ref=tag)
        badge = f"[![Open In Kaggle](https://{_KAGGLE_BADGE})]({url})"
        source += f", [{KAGGLE_TEXT}]({url}) {KAGGLE_NOTE} {badge}"
    return source


def floors(root: Path = ROOT) -> dict[str, str]:
    """The lowest version of each of ``FLOOR_PACKAGES`` that ``pyproject.toml`` allows."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([\w-]+)\s*>=\s*(\d+\.\d+)", requirement)
        if match is not None and match[1] in FLOOR_PACKAGES:
            found[match[1]] = match[2]
    if set(found) != set(FLOOR_PACKAGES):
        raise SystemExit(
            f"pyproject.toml: expected a floor such as 'torch>=2.8' for each of {FLOOR_PACKAGES}"
        )
    return found


def setup_source(tag: str = TAG) -> str:
    """The setup cell's code, which fetches the course at ``tag`` and installs its helpers."""
    return _SETUP_TEMPLATE.format(  # json.dumps writes double-quoted literals, as ruff formats them
        mark=_SETUP_MARK,
        tag=tag,
        repository=json.dumps(REPOSITORY),
        tag_literal=json.dumps(tag),
        floors=json.dumps(floors()),
        variable=json.dumps(CHECKOUT_VARIABLE),
    )


def _is_colab_cell(cell: dict) -> bool:
    source = "".join(cell.get("source", ""))
    return (
        cell.get("id") in {BADGE_ID, SETUP_ID}
        or (
            cell["cell_type"] == "markdown"
            and _BADGE_MARK in source
            and len(source.splitlines()) == 1
        )
        or (cell["cell_type"] == "code" and source.startswith((_SETUP_MARK, *_OLD_SETUP_MARKS)))
    )


def with_colab_cells(
    notebook: nbformat.NotebookNode, notebook_name: str, tag: str = TAG
) -> nbformat.NotebookNode:
    """A copy of ``notebook`` with the badge first, the setup cell before the first code cell and
    ``NOTEBOOK_METADATA``, which asks Colab for a GPU runtime."""
    result = copy.deepcopy(notebook)
    cells = [cell for cell in result.cells if not _is_colab_cell(cell)]
    for cell in cells:  # a notebook from before cell ids (nbformat 4.4) gets ids, as 4.5 requires
        if "id" not in cell:
            cell["id"] = nbformat.v4.new_code_cell().id
    badge = nbformat.v4.new_markdown_cell(badge_source(notebook_name, tag), id=BADGE_ID)
    metadata = copy.deepcopy(SETUP_METADATA)
    setup = nbformat.v4.new_code_cell(setup_source(tag), id=SETUP_ID, metadata=metadata)
    first_code = next(
        (i for i, cell in enumerate(cells) if cell["cell_type"] == "code"), len(cells)
    )
    result.cells = [badge, *cells[:first_code], setup, *cells[first_code:]]
    for key, value in NOTEBOOK_METADATA.items():
        if isinstance(value, dict):
            result.metadata.setdefault(key, {}).update(value)  # Colab's other keys stay
        else:
            result.metadata[key] = value
    result.nbformat = 4
    result.nbformat_minor = max(5, result.get("nbformat_minor", 5))
    return result


def with_current_links(text: str, tag: str = TAG) -> str:
    """``text`` (markdown) with every Colab and Kaggle link of a notebook pointing at ``tag``."""
    for pattern, address in _README_LINKS:
        text = pattern.sub(lambda match, address=address: address(match.group(1), ref=tag), text)
    return text


def _comparable(notebook: nbformat.NotebookNode) -> tuple:
    cells = [
        (c["cell_type"], c.get("id"), "".join(c["source"]), c.get("metadata", {}), c.get("outputs"))
        for c in notebook.cells
    ]
    return (notebook.get("metadata", {}), cells)


def _update(path: Path, check: bool, tag: str) -> bool:
    """Whether ``path`` was stale; rewritten unless ``check``."""
    if path.suffix not in {".ipynb", ".md"}:
        raise SystemExit(
            f"{path}: not a notebook (.ipynb) or markdown file (.md); pass e.g. notebooks/*.ipynb"
        )
    if not path.is_file():
        raise SystemExit(f"{path}: no such file")
    if path.suffix == ".md":
        text = path.read_text(encoding="utf-8")
        updated = with_current_links(text, tag)
        if updated != text and not check:
            path.write_text(updated, encoding="utf-8")
        return updated != text
    notebook = nbformat.read(path, as_version=4)
    updated = with_colab_cells(notebook, path.name, tag)
    if _comparable(updated) == _comparable(notebook):
        return False
    if not check:
        nbformat.write(updated, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "paths", nargs="*", type=Path, help="the .ipynb and .md files to update or check"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any is stale"
    )
    args = parser.parse_args(argv)
    if not args.paths:
        parser.error("give the files to update, e.g. notebooks/*.ipynb README.md")

    stale = [path for path in args.paths if _update(path, args.check, TAG)]
    if args.check and stale:
        print(f"Colab links or cells missing or not at {TAG} in:", *stale, sep="\n  ")
        print("Run: python scripts/colab_cells.py " + " ".join(str(p) for p in stale))
        return 1
    for path in stale:
        print(f"updated the Colab links and cells of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
