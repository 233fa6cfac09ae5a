"""Run the notebooks as a student would (top to bottom, default settings) and record how long each takes.

    python scripts/time_notebooks.py                    # every notebook, full (not quick) mode
    python scripts/time_notebooks.py 04_data_parallel   # some of them
    python scripts/time_notebooks.py --update-readme    # also write the times into README.md
    python scripts/time_notebooks.py --readme-only      # only rewrite README's table from results/

Writes ``results/notebook-times-<machine>[-quick].json`` (one file per kind of machine and mode,
so a CPU run never overwrites a GPU one) with the machine, the versions, the date and the seconds
per notebook. The README's table is filled from these files, and ``tests/test_repository.py``
checks that it matches them. Each notebook runs in a fresh kernel in the ``notebooks/`` folder,
like ``make lab``; a notebook that fails is reported and the run exits non-zero.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "results"
README = ROOT / "README.md"
START, END = "<!-- notebook-times:start -->", "<!-- notebook-times:end -->"


def machine() -> dict:
    """What this run measured on: the GPUs if any, else the CPU."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    kind = f"{len(gpus)}x {gpus[0]}" if gpus else f"cpu-{os.cpu_count()}-cores"
    return {"kind": kind, "gpus": gpus, "cpu": cpu, "cpu_cores": os.cpu_count()}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def run(path: Path, timeout: int) -> float:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def readme_table(results: list[dict]) -> str:
    """The README's timing table: one column per results file."""
    columns = sorted(results, key=lambda r: (bool(r["machine"]["gpus"]), r["machine"]["kind"], r["quick"]))
    names = sorted({name for r in columns for name in r["seconds"]})
    titles = [
        f"{r['machine']['kind']}, {'quick mode' if r['quick'] else 'default'} ({r['date']})" for r in columns
    ]
    header = "| notebook | " + " | ".join(titles) + " |"
    lines = [header, "| --- |" + " --- |" * len(columns)]
    for name in names:
        cells = [f"{r['seconds'][name]:.0f} s" if name in r["seconds"] else "not run" for r in columns]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_results() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(RESULTS.glob("notebook-times-*.json"))]


def update_readme() -> None:
    text = README.read_text()
    if START not in text or END not in text:
        sys.exit(f"README.md lacks the markers {START} and {END} around the timing table; add them first.")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    README.write_text(f"{before}{START}\n{readme_table(load_results())}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    parser.add_argument("--quick", action="store_true", help="run in quick mode (COURSE_QUICK=1) instead")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--update-readme", action="store_true", help="write the table into README.md")
    parser.add_argument("--readme-only", action="store_true", help="only rewrite README's table")
    args = parser.parse_args(argv)
    if args.readme_only:
        update_readme()
        print("updated README.md from results/")
        return 0

    paths = [NOTEBOOKS / f"{name}.ipynb" for name in args.names] or sorted(NOTEBOOKS.glob("*.ipynb"))
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        available = ", ".join(p.stem for p in sorted(NOTEBOOKS.glob("*.ipynb")))
        sys.exit(f"No such notebook: {', '.join(missing)}. Available: {available}")
    if args.quick:
        os.environ["COURSE_QUICK"] = "1"
    else:
        os.environ.pop("COURSE_QUICK", None)

    info = machine()
    print(f"machine: {info['kind']} ({info['cpu']}); torch {torch.__version__}; quick={args.quick}")
    seconds, failed = {}, []
    for path in paths:
        try:
            seconds[path.stem] = round(run(path, args.timeout), 1)
            print(f"{path.stem:40} {seconds[path.stem]:7.1f} s", flush=True)
        except CellExecutionError as error:
            failed.append(path.stem)
            print(f"{path.stem:40} FAILED\n{str(error)[-2000:]}", flush=True)

    if not failed:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"notebook-times-{slug(info['kind'])}{'-quick' if args.quick else ''}.json"
        previous = json.loads(out.read_text())["seconds"] if out.exists() else {}
        record = {
            "machine": info,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
            "quick": args.quick,
            "seconds": {**previous, **seconds},
        }
        out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
        if args.update_readme:
            update_readme()
            print("updated README.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
