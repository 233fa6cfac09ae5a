"""Cut the release vX.Y.Z: what `make release VERSION=X.Y.Z` runs (see docs/publishing.md).

    python3 scripts/release.py 0.2.0

It refuses a malformed version, a tree with uncommitted changes and an existing tag. Otherwise it
sets the version in ``pyproject.toml`` and ``helpers/course.py``, and points the Colab and Kaggle
links and setup cell of every notebook, and the README's links, at the tag ``vX.Y.Z`` of the
repository that ``REPOSITORY`` in ``helpers/course.py`` names. Then it prints the git commands that
publish the release. It runs no git command that changes anything: look at ``git diff`` first.

The first release of the version the files already name changes no file: it says so and prints
only the commands that tag and push. A notebook without the two cells that
``scripts/colab_cells.py`` writes is refused, with the command that adds them.

Standard library only, as ``scripts/strip_outputs.py``, whose JSON reading and writing it uses: it
runs on the system's python3, in a clone without ``.venv``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "scripts") not in sys.path:  # not there under `python -I`
    sys.path.insert(0, str(ROOT / "scripts"))

from strip_outputs import dumps, parse  # noqa: E402

BADGE_ID = "colab-badge"  # the ids scripts/colab_cells.py gives its two cells
SETUP_ID = "colab-setup"
VERSION = re.compile(r"\d+\.\d+\.\d+")
GITHUB = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?")
# A link that opens a notebook: Colab's or Kaggle's address, then OWNER/NAME/blob/REF/notebooks/.
NOTEBOOK_LINK = re.compile(
    r"(https://colab\.research\.google\.com/github/"
    r"|https://(?:www\.)?kaggle\.com/kernels/welcome\?src=https://github\.com/)"
    r"[\w.-]+/[\w.-]+/blob/[^/\s)]+/notebooks/"
)
COLAB_OPENS = "https://colab.research.google.com/github/"  # as scripts/colab_cells.py writes them
KAGGLE_OPENS = "https://kaggle.com/kernels/welcome?src=https://github.com/"
# In the setup cell: the repository's address, and the tag it fetches.
SETUP_REPOSITORY = re.compile(r'https://github\.com/[\w.-]+/[\w.-]+(?=")')
SETUP_TAG = re.compile(r"(?<![\w.])v\d+\.\d+\.\d+(?![\w.])")
ADD_CELLS = "python scripts/colab_cells.py notebooks/*.ipynb README.md"


def git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def with_value(text: str, name: Path, pattern: str, value: str) -> str:
    """``text`` with the quoted value on the one line that ``pattern`` (up to the quote) starts."""
    line = re.compile("^(" + pattern + ')"[^"]*"', flags=re.M)
    updated, count = line.subn(lambda match: match.group(1) + '"' + value + '"', text)
    if count != 1:
        raise SystemExit(f"{name}: found {count} lines matching {pattern!r} where one was expected")
    return updated


def repository(root: Path) -> str:
    """``REPOSITORY`` from ``helpers/course.py``, read as text (importing helpers imports torch)."""
    path = root / "helpers" / "course.py"
    found = re.findall(r'^REPOSITORY = "([^"]*)"', path.read_text(encoding="utf-8"), flags=re.M)
    if len(found) != 1 or GITHUB.fullmatch(found[0]) is None:
        raise SystemExit(
            f"{path}: REPOSITORY must be one line such as "
            'REPOSITORY = "https://github.com/OWNER/NAME", found ' + repr(found)
        )
    return found[0]


def with_links(text: str, address: str, tag: str) -> str:
    """``text`` with every Colab and Kaggle link of a notebook at ``tag`` of ``address``."""
    match = GITHUB.fullmatch(address)
    blob = f"{match[1]}/{match[2]}/blob/{tag}/notebooks/"
    return NOTEBOOK_LINK.sub(lambda link: opens(link.group(1)) + blob, text)


def opens(prefix: str) -> str:
    return KAGGLE_OPENS if "kaggle.com" in prefix else COLAB_OPENS


def released_notebook(path: Path, address: str, tag: str) -> str:
    """The text of the notebook at ``path`` with its badge and setup cell at ``tag``."""
    text = path.read_text(encoding="utf-8")
    notebook = parse(text)
    if notebook is None:
        raise SystemExit(f"{path}: not a notebook (its JSON does not parse)")
    cells = {cell.get("id"): cell for cell in notebook["cells"]}
    missing = [cell_id for cell_id in (BADGE_ID, SETUP_ID) if cell_id not in cells]
    if missing:
        raise SystemExit(
            f"{path} has no cell {' or '.join(missing)}: add the Colab cells with `{ADD_CELLS}` "
            "(it needs .venv), commit them, then release."
        )
    badge = "".join(cells[BADGE_ID]["source"])
    setup = "".join(cells[SETUP_ID]["source"])
    if SETUP_REPOSITORY.search(setup) is None or SETUP_TAG.search(setup) is None:
        raise SystemExit(
            f"{path}: its setup cell names no repository or tag: rewrite it with `{ADD_CELLS}`."
        )
    cells[BADGE_ID]["source"] = with_links(badge, address, tag).splitlines(keepends=True)
    setup = SETUP_REPOSITORY.sub(address, setup)
    cells[SETUP_ID]["source"] = SETUP_TAG.sub(tag, setup).splitlines(keepends=True)
    return dumps(notebook)


def _check_clone(root: Path, tag: str, version: str) -> None:
    """Stop unless ``root`` is a clone with nothing uncommitted, on a branch, without ``tag``."""
    status = git(root, "status", "--porcelain", "--untracked-files=no")
    if status.returncode != 0:
        raise SystemExit(
            f"{root} is not a git clone ({status.stderr.strip()}): "
            "release from a clone of the course"
        )
    if status.stdout.strip():
        raise SystemExit(
            "The working tree has uncommitted changes (see git status): commit or stash them "
            "first, so that the release commit holds the release alone."
        )
    if git(root, "symbolic-ref", "--quiet", "HEAD").returncode != 0:
        raise SystemExit(
            "HEAD is detached (a checkout of a commit or a tag, as CI makes): `git push origin "
            "HEAD` would push no branch. Switch to the branch you release, e.g. `git switch main`."
        )
    if git(root, "rev-parse", "--quiet", "--verify", f"refs/tags/{tag}").returncode == 0:
        raise SystemExit(f"The tag {tag} exists already: release a higher version than {version}.")


def release(version: str, root: Path = ROOT) -> int:
    """Set the version everywhere and point every link and setup cell at its tag; print the git
    commands. ``root``: the clone to release (this one by default)."""
    if not VERSION.fullmatch(version):
        raise SystemExit(
            f"{version!r} is not a release version: give three numbers without a v, "
            "e.g. make release VERSION=0.2.0"
        )
    tag = f"v{version}"
    _check_clone(root, tag, version)
    address = repository(root)
    updated = {}  # every file is read and checked before any is written
    for name, pattern in (("pyproject.toml", "version = "), ("helpers/course.py", "VERSION = ")):
        path = root / name
        updated[path] = with_value(path.read_text(encoding="utf-8"), path, pattern, version)
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        updated[path] = released_notebook(path, address, tag)
    readme = root / "README.md"
    updated[readme] = with_links(readme.read_text(encoding="utf-8"), address, tag)
    changed = []
    for path, text in updated.items():
        if text != path.read_text(encoding="utf-8"):
            path.write_text(text, encoding="utf-8")
            changed.append(path.relative_to(root).as_posix())
    if changed:
        print(f"Release {tag} of {address} written: " + ", ".join(changed) + ".")
        print("Look at `git diff`, then commit, tag and publish it; the setup cells fetch the tag:")
        print(f'  git commit -am "Release {tag}"')
    else:
        print(f"Every file already names {tag} of {address}: there is nothing to commit.")
        print("Tag this commit and publish it (the setup cells fetch the tag):")
    print(f"  git tag {tag}")
    print(f"  git push origin HEAD {tag}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit("usage: make release VERSION=X.Y.Z  (python3 scripts/release.py X.Y.Z)")
    return release(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
