"""The generated blocks of the documentation (scripts/update_blocks.py) match the result files."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import update_blocks  # noqa: E402


def test_every_generated_block_is_what_the_results_make_and_every_notebook_was_timed():
    stale, errors = update_blocks.update(ROOT, check=True)
    assert not errors and not stale, (
        f"{errors}; stale: {stale}; run python scripts/update_blocks.py"
    )
    timed = {
        name
        for p in ROOT.glob("results/notebook-times-*.json")
        for name in json.loads(p.read_text())["seconds"]
    }
    untimed = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.stem not in timed]
    assert not untimed, f"{untimed} never timed: run python benchmarks/time_notebooks.py"


def _times(root: Path, seconds: float) -> None:
    machine = {"kind": "cpu-2-cores", "gpus": []}
    record = {
        "machine": machine,
        "date": "2030-01-01",
        "quick": False,
        "seconds": {"00_devices": seconds},
    }
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "notebook-times-cpu-2-cores.json").write_text(json.dumps(record))


def test_a_stale_block_is_named_then_rewritten_and_the_text_around_it_kept(
    tmp_path, monkeypatch, capsys
):
    _times(tmp_path, 3.0)
    start, end = update_blocks.markers("notebook-times")
    (tmp_path / "README.md").write_text(f"before\n{start}\nold table\n{end}\nafter\n")
    monkeypatch.setattr(
        update_blocks, "BLOCKS", {"notebook-times": update_blocks.BLOCKS["notebook-times"]}
    )
    monkeypatch.setattr(update_blocks, "ROOT", tmp_path)
    assert (
        update_blocks.main(["--check"]) == 1
        and "notebook-times in README.md" in capsys.readouterr().err
    )
    assert "old table" in (tmp_path / "README.md").read_text()  # --check changes nothing
    assert update_blocks.main([]) == 0 and update_blocks.main(["--check"]) == 0
    text = (tmp_path / "README.md").read_text()
    assert text.startswith(f"before\n{start}\n| notebook |") and text.endswith(
        f"| 3 s |\n{end}\nafter\n"
    )
    _times(tmp_path, 4.0)  # a new measurement makes the block stale again
    assert update_blocks.update(tmp_path, check=True)[0] == ["notebook-times in README.md"]


@pytest.mark.parametrize(
    ("readme", "words"),
    [
        (None, "README.md is missing"),
        ("no markers here\n", "needs one <!-- notebook-times:start -->"),
        ("<!-- notebook-times:end -->\n<!-- notebook-times:start -->\n", "needs one"),
    ],
)
def test_a_missing_file_or_marker_is_named(tmp_path, readme, words):
    _times(tmp_path, 3.0)
    if readme is not None:
        (tmp_path / "README.md").write_text(readme)
    errors = update_blocks.update(tmp_path, check=False)[1]
    assert any(error.startswith("notebook-times: ") and words in error for error in errors), errors
    assert (
        (tmp_path / "README.md").read_text() == readme
        if readme
        else not (tmp_path / "README.md").exists()
    )
