"""Rewrite every generated block of the documentation from the result files in ``results/``.

    python scripts/update_blocks.py          # rewrite the blocks
    python scripts/update_blocks.py --check  # exit 1 and name the blocks that are stale

A block is the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in a Markdown file.
Each block is made from result files only, so a figure quoted there is always the recorded one:

- ``notebook-times`` in ``README.md``: the notebooks' times, from ``results/notebook-times-*.json``;
- ``bench-results`` in ``benchmarks/README.md``: every committed ``results/bench-*.json``;
- ``data-calibration`` in ``docs/data.md``: the stand-in's calibration, from
  ``results/data-calibration.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(paths: list[Path]) -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) | {"file": path.name} for path in paths]


def notebook_times(root: Path) -> str:
    """The README's timing table: a row per notebook, a column per ``notebook-times-*.json``."""
    results = _load(sorted((root / "results").glob("notebook-times-*.json")))
    if not results:
        raise BlockError(
            "results/ holds no notebook-times-*.json: run python benchmarks/time_notebooks.py"
        )
    columns = sorted(
        results, key=lambda r: (bool(r["machine"]["gpus"]), r["machine"]["kind"], r["quick"])
    )
    names = sorted({name for r in columns for name in r["seconds"]})
    titles = [
        f"{r['machine']['kind']}, {'quick mode' if r['quick'] else 'default'} ({r['date']})"
        for r in columns
    ]
    lines = ["| notebook | " + " | ".join(titles) + " |", "| --- |" + " --- |" * len(columns)]
    for name in names:
        cells = [
            f"{r['seconds'][name]:.0f} s" if name in r["seconds"] else "not run" for r in columns
        ]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _each(values: list, pattern: str, unit: str = "") -> str:
    """Every run's value, formatted, in run order ("none" for a run without one)."""
    return "; ".join("none" if v is None else format(v, pattern) + unit for v in values)


def bench_results(root: Path) -> str:
    """One row per committed bench result: each run's images/s, ratio and test accuracy."""
    paths = [
        p for p in sorted((root / "results").glob("bench-*.json")) if not p.stem.endswith("-quick")
    ]
    if not paths:
        raise BlockError("results/ holds no bench-*.json: run make bench")
    titles = [
        "file",
        "device",
        "date",
        "training images",
        "tutorial's loop, images/s",
        "fast path, images/s",
        "fast path / tutorial's loop",
        "test accuracy: tutorial's loop",
        "test accuracy: fast path",
    ]
    lines = ["| " + " | ".join(titles) + " |", "|" + " --- |" * len(titles)]
    for result in sorted(_load(paths), key=lambda r: r["date"]):
        speed = result["summary"]["images_per_second"]
        accuracy = result["summary"]["test_accuracy"]
        cells = [
            f"`{result['file']}`",
            f"{result['device']['name']} ({result['device']['type']})",
            result["date"][:10],
            _data(result["settings"]),
            _each(speed["tutorial_loop"]["runs"], ",.0f"),
            _each(speed["fast_path"]["runs"], ",.0f"),
            _each(result["summary"]["ratio"]["runs"], ".2f", "x"),
            _each(accuracy["tutorial_loop"]["runs"], ".1%"),
            _each(accuracy["fast_path"]["runs"], ".1%"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _data(settings: dict) -> str:
    """How many training images, and which data: CIFAR-10 or the stand-in's version."""
    data = settings.get("data", "?")
    if data == "synthetic stand-in":
        data = (
            f"stand-in v{settings.get('stand_in', 1)}"  # results from before the field: version 1
        )
    return f"{settings['train_size']:,}, {data}"


# The calibration's rows: its key in the file, the recipe in words, the target in words.
CALIBRATION_ROWS = {
    "cifarnet_tutorial": (
        "`CifarNet`, the PyTorch tutorial's recipe",
        "{target} (CIFAR-10: about 55%)",
    ),
    "tudui_tutorial": ("`Tudui`, the tutorial's recipe", "{target}"),
    "cifarnet_better_recipe": (
        "`CifarNet`, a better recipe",
        "10 points above the tutorial's, or more",
    ),
    "wide_convnet": (
        "a bigger model: three 3x3 conv blocks (32, 64, 128 channels) with batch norm",
        "10 points above the tutorial's, or more",
    ),
    "linear_on_pixels": ("logistic regression on the raw pixels", "much worse"),
    "linear_on_colour": ("logistic regression on colour histograms alone", "much worse"),
}


def data_calibration(root: Path) -> str:
    """The calibration table: each recipe, its target and the stand-in's test accuracy."""
    path = root / "results" / "data-calibration.json"
    if not path.is_file():
        raise BlockError(
            "results/data-calibration.json is missing: run python benchmarks/calibrate_data.py"
        )
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    size = next(iter(runs.values()))["train_size"]
    lines = [
        f"| recipe, on the {size:,} training images | target | stand-in |",
        "| --- | --- | --- |",
    ]
    for key, (words, target) in CALIBRATION_ROWS.items():
        run = runs[key]
        if "batch_size" in run:
            momentum = f"momentum {run['momentum']:g}" if run.get("momentum") else "no momentum"
            words += (
                f": batch {run['batch_size']}, lr {run['lr']:g}, {momentum}, {run['epochs']} epochs"
            )
        goal = run.get("target")
        span = f"{goal[0] * 100:.0f}-{goal[1]:.0%}" if isinstance(goal, list) else ""
        lines.append(f"| {words} | {target.format(target=span)} | {run['test_accuracy']:.1%} |")
    return "\n".join(lines)


BLOCKS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "notebook-times": ("README.md", notebook_times),
    "bench-results": ("benchmarks/README.md", bench_results),
    "data-calibration": ("docs/data.md", data_calibration),
}


class BlockError(Exception):
    """A block that cannot be made: its file, its markers or its results are missing."""


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_block(text: str, name: str, content: str, where: str) -> str:
    """``text`` with the block ``name`` holding ``content``; ``BlockError`` when its markers are
    missing."""
    start, end = markers(name)
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise BlockError(
            f"{where} needs one {start} and, after it, one {end} around the block; add them"
        )
    before, rest = text.split(start, 1)
    return f"{before}{start}\n{content}\n{end}{rest.split(end, 1)[1]}"


def update(root: Path, *, check: bool) -> tuple[list[str], list[str]]:
    """Rewrite (or with ``check`` only compare) every block under ``root``: (stale blocks,
    errors)."""
    stale = []
    errors = []
    for name, (relative, make) in BLOCKS.items():
        path = root / relative
        try:
            if not path.is_file():
                raise BlockError(f"{relative} is missing: the block {name} goes there")
            text = path.read_text(encoding="utf-8")
            new = replace_block(text, name, make(root), relative)
        except BlockError as error:
            errors.append(f"{name}: {error}")
            continue
        if new != text:
            stale.append(f"{name} in {relative}")
            if not check:
                path.write_text(new, encoding="utf-8")
    return stale, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a block is stale"
    )
    args = parser.parse_args(argv)
    stale, errors = update(ROOT, check=args.check)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if args.check and stale:
        print(
            "stale: " + "; ".join(stale) + ". Run: python scripts/update_blocks.py", file=sys.stderr
        )
    elif stale:
        print("rewrote: " + "; ".join(stale))
    return 1 if errors or (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
