"""Run the notebooks as a student would (top to bottom, default settings) and record how long each
takes.

    python benchmarks/time_notebooks.py                    # every notebook, in default mode
    python benchmarks/time_notebooks.py 04_data_parallel   # some of them
    python benchmarks/time_notebooks.py --quick            # in quick mode (COURSE_QUICK=1)

Each notebook runs in a fresh kernel in ``notebooks/``, as ``make lab`` runs it. The times go to
``results/notebook-times-<machine>[-quick].json`` (``--out`` for another folder), added to the
times already there. ``python scripts/update_blocks.py`` then rewrites the README's table. A
notebook that fails is reported, nothing is written, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def machine() -> dict:
    """What this run measured on: the GPUs if any, else the CPU, and the CPU's name and cores."""
    cpu = platform.processor() or platform.machine()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(
            (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), cpu
        )
    except OSError:
        pass
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    kind = f"{len(gpus)}x {gpus[0]}" if gpus else f"cpu-{os.cpu_count()}-cores"
    return {"kind": kind, "gpus": gpus, "cpu": cpu, "cpu_cores": os.cpu_count()}


def record_times(seconds: dict[str, float], folder: Path, *, quick: bool) -> Path:
    """Add ``seconds`` (notebook name -> seconds) to this machine's times file in ``folder``; its
    path."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchlib import slug

    info = machine()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"notebook-times-{slug(info['kind'])}{'-quick' if quick else ''}.json"
    previous = json.loads(path.read_text())["seconds"] if path.exists() else {}
    record = {
        "machine": info,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "quick": quick,
        "seconds": {**previous, **seconds},
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def run(path: Path, timeout: int) -> float:
    """Execute one notebook in a fresh kernel; its seconds. Raises ``CellExecutionError`` on a
    failure."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    from nbclient.exceptions import CellExecutionError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    parser.add_argument("--quick", action="store_true", help="run in quick mode (COURSE_QUICK=1)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="folder for the times")
    args = parser.parse_args(argv)
    paths = [NOTEBOOKS / f"{name}.ipynb" for name in args.names] or sorted(
        NOTEBOOKS.glob("*.ipynb")
    )
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        available = ", ".join(p.stem for p in sorted(NOTEBOOKS.glob("*.ipynb")))
        sys.exit(f"time_notebooks: no such notebook: {', '.join(missing)}. Available: {available}")
    if args.quick:
        os.environ["COURSE_QUICK"] = "1"
    else:
        os.environ.pop("COURSE_QUICK", None)
    print(f"machine: {machine()['kind']}; torch {torch.__version__}; quick={args.quick}")
    seconds = {}
    failed = []
    for path in paths:
        try:
            seconds[path.stem] = round(run(path, args.timeout), 1)
            print(f"{path.stem:40} {seconds[path.stem]:7.1f} s", flush=True)
        except CellExecutionError as error:
            failed.append(path.stem)
            print(f"{path.stem:40} FAILED\n{str(error)[-2000:]}", flush=True)
    if failed:
        return 1
    print(f"wrote {record_times(seconds, args.out, quick=args.quick)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
