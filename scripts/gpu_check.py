"""Check the whole course on a GPU machine and record what it printed: ``make gpu-check``.

    python scripts/gpu_check.py                              # every part, one after the other
    python scripts/gpu_check.py --part tests                 # the unit tests
    python scripts/gpu_check.py --part tests tests/test_ddp.py   # some of them, with their own log
    python scripts/gpu_check.py --part notebooks 00 01 02    # some notebooks (default: all)
    python scripts/gpu_check.py --part bench                 # make bench
    python scripts/gpu_check.py --part probe                 # scripts/fastpath_probe.py
    python scripts/gpu_check.py --part loaders               # scripts/loader_probe.py
    python scripts/gpu_check.py --import-run DIR ...         # store a run recorded elsewhere

Everything goes to ``results/gpu/<device>/`` (``<device>`` from the GPU's name, with the count when
there are several): ``run.json`` (the device, driver, versions, commit and date of every part that
ran), ``unit-tests.log``, ``notebooks/*.ipynb`` (each notebook executed top to bottom in a fresh
kernel, in default mode, with its outputs, progress bars removed), ``notebook-seconds.json``, and
``bench.log`` beside ``make bench``'s own ``results/bench-cuda-*.json``. The notebook times also go to
``results/notebook-times-<machine>.json``, the file the README's timing table is made from. The
probe of the fast path's step (``scripts/fastpath_probe.py``) writes ``fastpath-probe-<date>.json``
and ``.log``, dated so that a new probe never replaces one that the course's texts quote; the probe
of the notebooks' DataLoaders (``scripts/loader_probe.py``), ``loader-probe-<date>.json`` and ``.log``.

Each part adds to the same folder, so the parts can run in separate sessions: on a machine that
allows only short commands (10 minutes), run ``--part tests``, then ``--part notebooks`` for a few
notebooks at a time, then ``--part bench``. A notebook run replaces that notebook's earlier recording.

It needs the Jupyter kernel stack (nbclient, ipykernel) beside torch. On a machine that has torch
but no package registry, install the wheels of ``../shared/device-wheels`` into a folder and put it
on the path (see the README). Without a CUDA GPU it stops, unless ``--allow-cpu`` is given (the
tests use that, with ``--out``, to check the layout on a CPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT / "scripts"))  # time_notebooks, next to this file

PARTS = ("tests", "notebooks", "bench", "probe", "loaders")
DEFAULT_OUT = ROOT / "results" / "gpu"


def times_folder(out: Path) -> Path:
    """Where the notebook times go: ``results/`` (the README table's source) for the default ``--out``,
    else the ``--out`` folder itself, so that a run elsewhere (the tests', say) leaves ``results/`` alone."""
    return ROOT / "results" if Path(out).resolve() == DEFAULT_OUT.resolve() else Path(out)


# A text progress bar as tqdm prints it where no widget can be shown, and the warning that says so.
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+|\|\s*\d+/\d+ \[|\d+(\.\d+)?(it/s|s/it)\]")
_TQDM_NOISE = ("TqdmWarning: IProgress not found", "from .autonotebook import tqdm as notebook_tqdm")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _clean_stream(text: str) -> str:
    """A stream's text as it finally reads on screen, without progress bars and tqdm's widget warning."""
    text = text.replace("\x1b[A", "")
    kept = []
    for line in text.split("\n"):
        line = line.split("\r")[-1]  # a carriage return redraws the line: keep what stays visible
        if _BAR.search(line) or any(noise in line for noise in _TQDM_NOISE):
            continue
        kept.append(line)
    cleaned = "\n".join(kept)
    return re.sub(r"\n{3,}", "\n\n", cleaned)


def _merge_streams(outputs: list[dict]) -> list[dict]:
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
    """Merge each cell's consecutive stream outputs and drop progress bars; return the outputs removed."""
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


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _driver() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def describe_machine(allow_cpu: bool = False, commit: str | None = None) -> dict:
    """The run's device, versions and commit; stops when there is no CUDA GPU (unless ``allow_cpu``)."""
    import torch
    import torchvision

    import helpers.data

    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    elif allow_cpu:
        names = []
    else:
        sys.exit(
            "gpu-check: this machine has no CUDA GPU that PyTorch can use (torch.cuda.is_available() is "
            "False). Run it on a GPU machine; the CPU is checked by `make test`."
        )
    device = names[0] if names else f"cpu-{os.cpu_count()}-cores"
    folder = slug(device) if len(names) <= 1 else f"{len(names)}x-{slug(device)}"
    return {
        "device": device,
        "gpus": len(names),
        "folder": folder,
        "driver": _driver(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "commit": commit or _git("rev-parse", "--short", "HEAD"),
        # changes to tracked files, the run's own outputs in results/ aside (a bench or a notebook
        # recorded by an earlier part of the same session would count otherwise)
        "uncommitted_changes": None
        if commit
        else bool(_git("status", "--porcelain", "-uno", "--", ".", ":(exclude)results")),
        "date": dt.date.today().isoformat(),
        "data": os.environ.get("COURSE_DATA", "auto"),
        "quick": os.environ.get("COURSE_QUICK", "") not in ("", "0"),
        "stand_in": getattr(helpers.data, "STAND_IN_VERSION", 1),  # the synthetic data's version
    }


def _update_run(folder: Path, machine: dict, part: str, record: dict) -> None:
    path = folder / "run.json"
    run = json.loads(path.read_text()) if path.exists() else {}
    run.update({k: v for k, v in machine.items() if k != "folder"})
    run.setdefault("parts", {})[part] = {
        "date": machine["date"],
        "commit": machine["commit"],
        "torch": machine["torch"],
        **record,
    }
    path.write_text(json.dumps(run, indent=2) + "\n")


def part_tests(folder: Path, machine: dict, selection: list[str]) -> dict:
    """The unit tests, or the test files in ``selection`` (the whole suite needs more than the 10
    minutes a GPU machine's command may take: run it in pieces, each with its own log)."""
    log = folder / (f"unit-tests-{slug(' '.join(selection))}.log" if selection else "unit-tests.log")
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(selection or ["tests"]),
        "--ignore=tests/test_browser.py",
        "-p",
        "no:cacheprovider",
        "-rfEs",
        "--durations=15",  # the slowest tests: what to split off when a command's time runs short
    ]
    print("$ " + " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.perf_counter() - start, 1)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else "no output"
    print(f"unit tests: {summary} ({seconds} s); log in {log.relative_to(ROOT)}", flush=True)
    return {"result": summary, "exit_code": done.returncode, "seconds": seconds, "log": log.name}


def part_notebooks(
    folder: Path, machine: dict, names: list[str], timeout: int, times: Path | None = None
) -> dict:
    import nbformat
    import time_notebooks
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    paths = _notebook_paths(names)
    out = folder / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    seconds_file = folder / "notebook-seconds.json"
    seconds = json.loads(seconds_file.read_text()) if seconds_file.exists() else {}
    status = {}
    env_before = os.environ.get("COURSE_QUICK")
    if not machine["quick"]:
        os.environ.pop("COURSE_QUICK", None)  # default mode: what a student runs
    try:
        for path in paths:
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
                        if c.get("cell_type") == "code"
                        and any(o.get("output_type") == "error" for o in c.get("outputs", []))
                    ),
                    "?",
                )
                last_line = (str(error).strip().splitlines() or [""])[-1][:300]
                if not isinstance(error, CellExecutionError):
                    last_line = f"{type(error).__name__}: {last_line}"  # the kernel died, say
                status[path.stem] = f"failed at cell {failing}: {last_line}"
            elapsed = round(time.perf_counter() - start, 1)
            executed = json.loads(nbformat.writes(notebook))
            clean_outputs(executed)
            executed["metadata"]["gpu_run"] = {k: v for k, v in machine.items() if k != "folder"}
            executed["metadata"]["gpu_run"].update({"seconds": elapsed, "status": status[path.stem]})
            _write_notebook(executed, out / path.name)
            seconds[path.stem] = elapsed
            print(f"{path.stem:40} {elapsed:7.1f} s  {status[path.stem]}", flush=True)
            # after each notebook, so that a command stopped at its time limit keeps what finished
            seconds_file.write_text(json.dumps(seconds, indent=2) + "\n")
            _update_run(
                folder,
                machine,
                "notebooks",
                {"notebooks": status, "seconds": {k: seconds[k] for k in status}},
            )
    finally:
        if env_before is not None:
            os.environ["COURSE_QUICK"] = env_before
    seconds_file.write_text(json.dumps(seconds, indent=2) + "\n")
    if machine["gpus"] and all(s == "passed" for s in status.values()):
        _record_times(time_notebooks, machine, {k: seconds[k] for k in status}, times or ROOT / "results")
    return {"notebooks": status, "seconds": {k: seconds[k] for k in status}}


def _record_times(time_notebooks, machine: dict, seconds: dict, folder: Path) -> Path:
    """Add the times to ``<folder>/notebook-times-<machine>.json`` (``results/``: the README table's)."""
    info = time_notebooks.machine()
    path = folder / f"notebook-times-{slug(info['kind'])}{'-quick' if machine['quick'] else ''}.json"
    previous = json.loads(path.read_text())["seconds"] if path.exists() else {}
    record = {
        "machine": info,
        "torch": machine["torch"],
        "cuda": machine["cuda"],
        "python": machine["python"],
        "date": machine["date"],
        "quick": machine["quick"],
        "seconds": {**previous, **seconds},
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def part_bench(folder: Path, machine: dict, bench_args: list[str]) -> dict:
    log = folder / "bench.log"
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), *bench_args]
    print("$ " + " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.perf_counter() - start, 1)
    tail = log.read_text().strip().splitlines()[-3:]
    print("\n".join(tail), flush=True)
    return {"exit_code": done.returncode, "seconds": seconds, "args": bench_args}


def part_script(folder: Path, machine: dict, script: str, stem: str, script_args: list[str]) -> dict:
    """``scripts/<script>`` with ``--out <stem>-<date>.json``, its printout in ``<stem>-<date>.log``: dated,
    so that a probe never replaces one of an earlier day (``fastpath-probe.json`` is the first, quoted by
    the course's texts); a second run on the same day replaces the first."""
    stem = f"{stem}-{machine['date']}"
    log, out = folder / f"{stem}.log", folder / f"{stem}.json"
    command = [sys.executable, str(ROOT / "scripts" / script), "--out", str(out), *script_args]
    print("$ " + " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    with log.open("w") as printed:
        done = subprocess.run(command, cwd=ROOT, stdout=printed, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.perf_counter() - start, 1)
    print("\n".join(log.read_text().strip().splitlines()[-3:]), flush=True)
    return {"exit_code": done.returncode, "seconds": seconds, "args": script_args, "file": out.name}


# the probes, each a script of its own: part -> (script, file stem)
PROBES = {"probe": ("fastpath_probe.py", "fastpath-probe"), "loaders": ("loader_probe.py", "loader-probe")}


def _notebook_paths(names: list[str]) -> list[Path]:
    available = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return available
    chosen = []
    for name in names:
        matches = [p for p in available if p.stem == name or p.stem.startswith(f"{name}_")]
        if len(matches) != 1:
            listed = ", ".join(p.stem for p in available)
            sys.exit(
                f"gpu-check: {name!r} names no single notebook; choose from {listed} (or their numbers)."
            )
        chosen.append(matches[0])
    return chosen


def _write_notebook(notebook: dict, path: Path) -> None:
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def import_run(source: Path, out_root: Path, run: dict) -> Path:
    """Store the executed notebooks of a run recorded elsewhere, cleaned, under ``out_root/<device>``."""
    folder = (
        out_root / slug(run["device"])
        if run.get("gpus", 1) <= 1
        else out_root / (f"{run['gpus']}x-{slug(run['device'])}")
    )
    (folder / "notebooks").mkdir(parents=True, exist_ok=True)
    for path in sorted((source / "notebooks").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        clean_outputs(notebook)
        notebook.setdefault("metadata", {})["gpu_run"] = run
        _write_notebook(notebook, folder / "notebooks" / path.name)
    for name in ("unit-tests.log", "bench.log", "notebook-seconds.json", "machine.txt"):
        if (source / name).exists():
            shutil.copyfile(source / name, folder / name)
    (folder / "run.json").write_text(json.dumps({**run, "imported_from": source.name}, indent=2) + "\n")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=(*PARTS, "all"), default="all")
    parser.add_argument(
        "names",
        nargs="*",
        help="notebooks for --part notebooks: names or numbers (default all); "
        "test files for --part tests (default: all of tests/)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default results/gpu")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per notebook cell")
    parser.add_argument("--bench-args", default="", help="arguments for scripts/bench.py, in one string")
    parser.add_argument(
        "--probe-args", default="", help="arguments for scripts/fastpath_probe.py, in one string"
    )
    parser.add_argument(
        "--loaders-args", default="", help="arguments for scripts/loader_probe.py, in one string"
    )
    parser.add_argument(
        "--commit", help="the commit checked, where this copy is not a git checkout (default: git's HEAD)"
    )
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (to test the layout)")
    parser.add_argument("--import-run", type=Path, help="a folder of executed notebooks recorded elsewhere")
    parser.add_argument("--run-info", help="with --import-run: the run's description as JSON")
    args = parser.parse_args(argv)

    if args.import_run is not None:
        if not args.run_info:
            sys.exit(
                'gpu-check: --import-run needs --run-info \'{"device": ..., "torch": ..., "date": ...}\''
            )
        folder = import_run(args.import_run, args.out, json.loads(args.run_info))
        print(f"stored {args.import_run} in {folder}")
        return 0

    for module in ("nbclient", "ipykernel", "nbformat"):
        try:
            __import__(module)
        except ImportError:
            sys.exit(
                f"gpu-check needs the Jupyter kernel stack ({module} is missing). With a package registry: "
                "pip install -r requirements.txt. Without one, install the wheels of ../shared/device-wheels "
                "into a folder and put it on PYTHONPATH (see the README's 'gpu-check' section)."
            )
    machine = describe_machine(args.allow_cpu, args.commit)
    folder = args.out / machine["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"gpu-check on {machine['gpus'] or 'no'} GPU(s) ({machine['device']}), torch {machine['torch']}, "
        f"commit {machine['commit']}; results in {folder}",
        flush=True,
    )
    parts = PARTS if args.part == "all" else (args.part,)
    failed = False
    for part in parts:
        if part == "tests":
            record = part_tests(folder, machine, args.names if args.part == "tests" else [])
            failed |= record["exit_code"] != 0
        elif part == "notebooks":
            record = part_notebooks(folder, machine, args.names, args.timeout, times_folder(args.out))
            failed |= any(s != "passed" for s in record["notebooks"].values())
        elif part == "bench":
            record = part_bench(folder, machine, args.bench_args.split())
            failed |= record["exit_code"] != 0
        else:
            script, stem = PROBES[part]
            given = args.probe_args if part == "probe" else args.loaders_args
            record = part_script(folder, machine, script, stem, shlex.split(given))
            failed |= record["exit_code"] != 0
        key = (
            f"tests {' '.join(args.names)}"
            if part == "tests" and args.part == "tests" and args.names
            else part
        )
        _update_run(folder, machine, key, record)
    print(f"gpu-check: {'some parts failed' if failed else 'everything passed'}; see {folder}/run.json")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
