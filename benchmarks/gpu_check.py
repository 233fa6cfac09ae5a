"""Check the course on a GPU machine and record what it printed: ``make gpu-check``.

    python benchmarks/gpu_check.py                                # every part, one after the other
    python benchmarks/gpu_check.py --part tests                   # the unit tests
    python benchmarks/gpu_check.py --part tests tests/test_ddp.py # some of them, with their own log
    python benchmarks/gpu_check.py --part notebooks 00 01 02      # some notebooks (default: all)
    python benchmarks/gpu_check.py --part bench --bench-args="--quick"   # make bench

Everything goes to ``results/gpu/<device>/`` (``--out`` for another folder than ``results/gpu``):
``run.json`` (the device, driver, versions, commit and date of every part), ``unit-tests.log``,
``notebooks/*.ipynb`` (each notebook executed in a fresh kernel in default mode, with its outputs,
progress bars removed), ``notebook-seconds.json`` and ``bench.log``. The bench writes its own
``results/bench-cuda-*.json``; the notebook times also go to ``results/notebook-times-*.json``.
Each part adds to the same folder, so the parts can run one at a time. It needs the Jupyter kernel
stack (nbclient, ipykernel) beside torch. Without a CUDA GPU it stops, unless ``--allow-cpu``
is given (the tests use that, with ``--out``, to check the layout on a CPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_OUT = ROOT / "results" / "gpu"
PARTS = ("tests", "notebooks", "bench")
sys.path.insert(0, str(HERE))

from benchlib import slug  # noqa: E402

# A text progress bar as tqdm prints it where no widget can be shown, and the warning that says so.
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+|\|\s*\d+/\d+ \[|\d+(\.\d+)?(it/s|s/it)\]")
_TQDM_NOISE = (
    "TqdmWarning: IProgress not found",
    "from .autonotebook import tqdm as notebook_tqdm",
)


def _clean_stream(text: str) -> str:
    """A stream's text as it finally reads on screen, without progress bars and tqdm's widget
    warning."""
    kept = []
    for line in text.replace("\x1b[A", "").split("\n"):
        line = line.split("\r")[-1]  # a carriage return redraws the line: keep what stays visible
        if not (_BAR.search(line) or any(noise in line for noise in _TQDM_NOISE)):
            kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept))


def _merge_streams(outputs: list[dict]) -> list[dict]:
    """Consecutive outputs of the same stream joined into one."""
    merged: list[dict] = []
    for output in outputs:
        if output.get("output_type") == "stream":
            text = output["text"] if isinstance(output["text"], str) else "".join(output["text"])
            last = merged[-1] if merged else {}
            if last.get("output_type") == "stream" and last.get("name") == output.get("name"):
                last["text"] += text
                continue
            output = {**output, "text": text}
        merged.append(output)
    return merged


def clean_outputs(notebook: dict) -> int:
    """Merge each cell's consecutive stream outputs and drop progress bars; return the outputs
    removed."""
    removed = 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        before = len(cell.get("outputs", []))
        outputs = []
        for output in _merge_streams(cell.get("outputs", [])):
            if output.get("output_type") == "stream":
                output["text"] = _clean_stream(output["text"])
                if not output["text"].strip():
                    continue
            outputs.append(output)
        cell["outputs"] = _merge_streams(outputs)
        removed += before - len(cell["outputs"])
    return removed


def _command(*command: str) -> str | None:
    """A command's output, stripped, or ``None`` when it fails or is missing."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def describe_machine(allow_cpu: bool = False, commit: str | None = None) -> dict:
    """The run's device, versions and commit; stops when there is no CUDA GPU (unless
    ``allow_cpu``)."""
    import torch
    import torchvision

    import helpers.standin

    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    elif allow_cpu:
        names = []
    else:
        sys.exit(
            "gpu-check: this machine has no CUDA GPU that PyTorch can use "
            "(torch.cuda.is_available() is False). Run it on a GPU machine, or add --allow-cpu to "
            "check the layout on a CPU."
        )
    device = names[0] if names else f"cpu-{os.cpu_count()}-cores"
    driver = _command("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    changed = (
        None
        if commit
        else _command("git", "status", "--porcelain", "-uno", "--", ".", ":(exclude)results")
    )
    return {
        "device": device,
        "gpus": len(names),
        "folder": slug(device) if len(names) <= 1 else f"{len(names)}x-{slug(device)}",
        "driver": driver.splitlines()[0] if driver else None,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "commit": commit or _command("git", "rev-parse", "--short", "HEAD"),
        "uncommitted_changes": None
        if commit
        else bool(changed),  # results/ left out: the run writes there
        "date": dt.date.today().isoformat(),
        "data": os.environ.get("COURSE_DATA", "auto"),
        "quick": os.environ.get("COURSE_QUICK", "") not in ("", "0"),
        "stand_in": helpers.standin.STAND_IN_VERSION,
    }


def _update_run(folder: Path, machine: dict, part: str, record: dict) -> None:
    """Add one part's record to ``run.json``, keeping the other parts'."""
    path = folder / "run.json"
    run = json.loads(path.read_text()) if path.exists() else {}
    run.update({k: v for k, v in machine.items() if k != "folder"})
    run.setdefault("parts", {})[part] = {
        k: machine[k] for k in ("date", "commit", "torch")
    } | record
    path.write_text(json.dumps(run, indent=2) + "\n")


def _logged(command: list[str], log: Path) -> tuple[int, float]:
    """Run ``command`` in the repository with its output in ``log``; its exit status and seconds."""
    print("$ " + " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.perf_counter() - start, 1)
    print("\n".join(log.read_text().strip().splitlines()[-3:]), flush=True)
    return done.returncode, seconds


def part_tests(folder: Path, selection: list[str]) -> dict:
    """The unit tests (without the browser's), or the test files in ``selection`` with a log of
    their own."""
    log = folder / (
        f"unit-tests-{slug(' '.join(selection))}.log" if selection else "unit-tests.log"
    )
    tests = selection or ["tests"]
    command = [
        sys.executable,
        "-m",
        "pytest",
        *tests,
        "--ignore=tests/test_browser.py",
        "-p",
        "no:cacheprovider",
    ]
    code, seconds = _logged([*command, "-rfEs", "--durations=15"], log)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else "no output"
    return {"result": summary, "exit_code": code, "seconds": seconds, "log": log.name}


def part_notebooks(
    folder: Path, machine: dict, names: list[str], timeout: int, times: Path
) -> dict:
    """Execute each notebook in a fresh kernel in default mode and keep the executed copy."""
    import nbformat
    from nbclient import NotebookClient
    from time_notebooks import record_times

    out = folder / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    seconds_file = folder / "notebook-seconds.json"
    seconds = json.loads(seconds_file.read_text()) if seconds_file.exists() else {}
    status = {}
    quick_before = os.environ.get("COURSE_QUICK")
    if not machine["quick"]:
        os.environ.pop("COURSE_QUICK", None)  # default mode: what a student runs
    try:
        for path in _notebook_paths(names):
            notebook = nbformat.read(path, as_version=4)
            client = NotebookClient(
                notebook, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}
            )
            start = time.perf_counter()
            try:
                client.execute()
                status[path.stem] = "passed"
            except Exception as error:  # a failed cell, a dead kernel, a timeout: record it, go on
                failing = next(
                    (
                        c.get("id")
                        for c in notebook.cells
                        if any(o.get("output_type") == "error" for o in c.get("outputs", []))
                    ),
                    "?",
                )
                last_line = (str(error).strip().splitlines() or [""])[-1][:300]
                status[path.stem] = f"failed at cell {failing}: {type(error).__name__}: {last_line}"
            seconds[path.stem] = round(time.perf_counter() - start, 1)
            executed = json.loads(nbformat.writes(notebook))
            clean_outputs(executed)
            executed["metadata"]["gpu_run"] = {
                k: v for k, v in machine.items() if k != "folder"
            } | {
                "seconds": seconds[path.stem],
                "status": status[path.stem],
            }
            text = json.dumps(executed, indent=1, ensure_ascii=False) + "\n"
            (out / path.name).write_text(text, encoding="utf-8")
            print(f"{path.stem:40} {seconds[path.stem]:7.1f} s  {status[path.stem]}", flush=True)
            # after each notebook, so that a run stopped by a time limit keeps what finished
            seconds_file.write_text(json.dumps(seconds, indent=2) + "\n")
            _update_run(
                folder,
                machine,
                "notebooks",
                {"notebooks": status, "seconds": {k: seconds[k] for k in status}},
            )
    finally:
        if quick_before is not None:
            os.environ["COURSE_QUICK"] = quick_before
    if machine["gpus"] and all(s == "passed" for s in status.values()):
        record_times({k: seconds[k] for k in status}, times, quick=machine["quick"])
    return {"notebooks": status, "seconds": {k: seconds[k] for k in status}}


def _notebook_paths(names: list[str]) -> list[Path]:
    """The notebooks named by name or number (all of them for none); stops naming an unknown one."""
    available = sorted(NOTEBOOKS.glob("*.ipynb"))
    chosen = []
    for name in names:
        matches = [p for p in available if p.stem == name or p.stem.startswith(f"{name}_")]
        if len(matches) != 1:
            listed = ", ".join(p.stem for p in available)
            sys.exit(
                f"gpu-check: {name!r} names no single notebook; choose from {listed} "
                "(or their numbers)."
            )
        chosen.append(matches[0])
    return chosen or available


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=(*PARTS, "all"), default="all")
    parser.add_argument(
        "names",
        nargs="*",
        help="notebooks (names or numbers) for --part notebooks; test files for --part tests",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default results/gpu")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per notebook cell")
    parser.add_argument(
        "--bench-args", default="", help="arguments for benchmarks/bench.py, in one string"
    )
    parser.add_argument(
        "--commit", help="the commit checked, where this copy is not a git checkout"
    )
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run without a GPU (to test the layout)"
    )
    args = parser.parse_args(argv)
    for module in ("nbclient", "ipykernel", "nbformat"):
        try:
            __import__(module)
        except ImportError:
            sys.exit(
                f"gpu-check needs the Jupyter kernel stack ({module} is missing): "
                "pip install -r requirements.txt, or put nbclient, nbformat and ipykernel on "
                "PYTHONPATH."
            )
    machine = describe_machine(args.allow_cpu, args.commit)
    folder = args.out / machine["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    # the notebook times go to results/ (the README's table) only from a run into the default folder
    times = ROOT / "results" if args.out.resolve() == DEFAULT_OUT.resolve() else args.out
    print(
        f"gpu-check on {machine['gpus'] or 'no'} GPU(s) ({machine['device']}); results in {folder}",
        flush=True,
    )
    failed = False
    for part in PARTS if args.part == "all" else (args.part,):
        names = args.names if args.part == part else []
        if part == "tests":
            record = part_tests(folder, names)
            failed |= record["exit_code"] != 0
        elif part == "notebooks":
            record = part_notebooks(folder, machine, names, args.timeout, times)
            failed |= any(s != "passed" for s in record["notebooks"].values())
        else:
            command = [sys.executable, str(HERE / "bench.py"), *args.bench_args.split()]
            code, seconds = _logged(command, folder / "bench.log")
            record = {"exit_code": code, "seconds": seconds, "args": args.bench_args.split()}
            failed |= code != 0
        _update_run(
            folder,
            machine,
            f"tests {' '.join(names)}" if part == "tests" and names else part,
            record,
        )
    verdict = "some parts failed" if failed else "everything passed"
    print(f"gpu-check: {verdict}; see {folder}/run.json")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
