"""Draw the course's pictures and embed each in its notebook, as a markdown cell's attachment.

    python scripts/draw_figures.py                 # every notebook's pictures
    python scripts/draw_figures.py --notebook 04   # only 04's
    python scripts/draw_figures.py --check         # change nothing; exit 1 if a picture is stale

Each notebook's pictures are drawn by ``figures/nbNN.py``, whose ``FIGURES`` table maps an
attachment's file name to the id of the markdown cell that shows it and a function returning a
matplotlib ``Figure``. An attachment shows in JupyterLab, Colab and on GitHub alike, with no file
beside the notebook. A copy of each PNG is written to ``/tmp/figures/`` to look at.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREVIEW = Path("/tmp/figures")


def figure_tables(only: str | None = None) -> dict[str, dict]:
    """``{"04": FIGURES of figures/nb04.py, ...}``, for every notebook that has pictures."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    tables = {}
    for path in sorted((ROOT / "figures").glob("nb[0-9][0-9].py")):
        number = path.stem[2:]
        if only is None or number == only:
            tables[number] = importlib.import_module(f"figures.{path.stem}").FIGURES
    return tables


def render(draw) -> bytes:
    """The PNG of ``draw()``'s figure, the same bytes on every run (no timestamp, no software
    tag)."""
    buffer = io.BytesIO()
    draw().savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def notebook_path(number: str) -> Path:
    matches = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    if len(matches) != 1:
        raise SystemExit(
            f"figures/nb{number}.py: expected one notebooks/{number}_*.ipynb, found {len(matches)}"
        )
    return matches[0]


def embed(number: str, table: dict, *, check: bool) -> list[str]:
    """Embed ``table``'s pictures in notebook ``number``; return what was (or, checking, would be)
    changed."""
    path = notebook_path(number)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = {cell.get("id"): cell for cell in notebook["cells"]}
    changed = []
    wanted = {}
    for name, (cell_id, draw) in table.items():
        cell = cells.get(cell_id)
        if cell is None or cell["cell_type"] != "markdown":
            raise SystemExit(
                f"{path.name}: no markdown cell has the id {cell_id!r} for the picture {name}"
            )
        if f"attachment:{name}" not in "".join(cell["source"]):
            raise SystemExit(
                f"{path.name}, cell {cell_id}: add ![what it shows](attachment:{name}) to its text"
            )
        png = render(draw)
        if not check:
            PREVIEW.mkdir(exist_ok=True)
            (PREVIEW / name).write_bytes(png)
        wanted.setdefault(cell_id, {})[name] = {"image/png": base64.b64encode(png).decode("ascii")}
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        new = wanted.get(cell.get("id"), {})
        if cell.get("attachments", {}) != new:
            changed.append(f"{path.name} cell {cell.get('id')}")
            if new:
                cell["attachments"] = new
            else:
                cell.pop("attachments", None)
    if changed and not check:
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notebook", help="a notebook's number, such as 04")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a picture is stale"
    )
    args = parser.parse_args(argv)
    changed = []
    for number, table in figure_tables(args.notebook).items():
        changed += embed(number, table, check=args.check)
    if args.check and changed:
        print(
            "stale pictures: " + "; ".join(changed) + ". Run: python scripts/draw_figures.py",
            file=sys.stderr,
        )
        return 1
    print(("would change: " if args.check else "embedded: ") + (", ".join(changed) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
