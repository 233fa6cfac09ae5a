"""The pictures in the notebooks are the ones ``figures/`` draws, and every one is shown by its
cell."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import draw_figures  # noqa: E402

ATTACHMENT = re.compile(r"!\[([^\]]*)\]\(attachment:([^)\s]+)\)")


def test_every_picture_is_up_to_date_with_its_drawing():
    assert draw_figures.main(["--check"]) == 0, "run: python scripts/draw_figures.py"


def test_every_attachment_is_shown_with_a_description():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            shown = dict((name, alt) for alt, name in ATTACHMENT.findall("".join(cell["source"])))
            for name in cell.get("attachments", {}):
                assert name in shown, (
                    f"{path.name} cell {cell.get('id')}: attachment {name} is never shown"
                )
                assert len(shown[name].split()) >= 4, (
                    f"{path.name}: describe {name} in its alt text"
                )
            missing = set(shown) - set(cell.get("attachments", {}))
            assert not missing, (
                f"{path.name} cell {cell.get('id')}: no attachment {sorted(missing)}"
            )
