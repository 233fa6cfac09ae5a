"""How the lessons mark their cells: proof cells that every frontend shows folded, and cell ids."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PROOF_TAG = "proof"


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_proof_cell_is_folded_in_jupyterlab_a_form_in_colab_and_titled(path):
    """A proof cell checks that the lesson is right; a student need not read it. JupyterLab shows
    its code folded (source_hidden), Colab as a form (cellView), both under its @title line."""
    for cell in _cells(path):
        metadata = cell.get("metadata", {})
        if PROOF_TAG not in metadata.get("tags", []):
            continue
        where = f"{path.name} {cell.get('id')}"
        assert cell["cell_type"] == "code", where
        assert metadata.get("jupyter", {}).get("source_hidden") is True, where
        assert metadata.get("cellView") == "form", where
        first_line = "".join(cell["source"]).splitlines()[0]
        assert first_line.startswith("# @title "), where
        assert len(first_line) <= 100, where


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_has_its_own_id_named_after_its_notebook(path):
    ids = [cell.get("id") for cell in _cells(path)]
    assert len(ids) == len(set(ids)), path.name
    special = {"colab-badge", "colab-setup"}
    for cell_id in ids:
        assert cell_id in special or cell_id.startswith(path.name[:2] + "-"), (path.name, cell_id)
