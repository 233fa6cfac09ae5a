"""Run and read ``notebooks/ddp_train.py``, the DistributedDataParallel script, from a notebook.

Introduced in ``05_distributed_data_parallel``. The training itself is in that script, which a
student reads top to bottom; this module only finds it, prints its parts with line numbers, and
launches it (or another script) under ``torchrun`` with real processes.
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from queue import Empty, Queue

import torch

from helpers import _args
from helpers.course import CHECKOUT_VARIABLE

__all__ = ["choose_backend", "launch", "script_path", "show"]


def choose_backend(local_world_size: int) -> tuple[str, str]:
    """What ``ddp_train.py`` picks with ``local_world_size`` processes here: ``(backend, device type)``.

    NCCL on the GPUs when each process on this machine can have one of its own, else Gloo on the CPU.
    """
    own_gpu = torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size
    device_type = "cuda" if own_gpu else "cpu"
    return torch.distributed.get_default_backend_for_device(device_type), device_type


def script_path() -> Path:
    """``notebooks/ddp_train.py``: next to the notebook, else in the course's checkout (Colab, Kaggle)."""
    here = Path("ddp_train.py")
    if here.is_file():
        return here
    roots = [os.environ.get(CHECKOUT_VARIABLE), Path(__file__).resolve().parent.parent]
    for root in roots:
        if root and (Path(root) / "notebooks" / "ddp_train.py").is_file():
            return Path(root) / "notebooks" / "ddp_train.py"
    raise FileNotFoundError(
        "ddp_train.py is neither in this folder nor in the course's notebooks/ folder: run this "
        "notebook from the course's notebooks/ folder."
    )


def show(path: str | os.PathLike, name: str | None = None) -> str:
    """Print the function ``name`` of the file at ``path`` (the whole file if ``None``) with its line
    numbers, and return the text printed."""
    lines = Path(path).read_text().splitlines()
    first, last = 1, len(lines)
    if name is not None:
        found = [n for n in ast.parse("\n".join(lines)).body if getattr(n, "name", None) == name]
        if not found:
            raise ValueError(f"show: {path} defines no {name!r} at its top level")
        first, last = found[0].lineno, found[0].end_lineno or found[0].lineno
    text = "\n".join(f"{number:3}  {lines[number - 1]}" for number in range(first, last + 1))
    print(text)
    return text


def _words(values: object, name: str) -> list[str]:
    """``values`` as command-line words: a list or tuple of strings, numbers and paths, not one string."""
    if isinstance(values, str | bytes) or not isinstance(values, list | tuple):
        raise TypeError(
            f"launch: {name} must be a list of words, e.g. ['--epochs', 2], got {_args.shown(values)}; "
            "for one string of words use shlex.split(...)."
        )
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, str | int | float | os.PathLike):
            raise TypeError(
                f"launch: {name}[{index}] is {_args.shown(value)}; give a string, number or path."
            )
    return [os.fspath(value) if isinstance(value, os.PathLike) else str(value) for value in values]


def _stop(process: subprocess.Popen) -> None:
    """Stop torchrun, which stops its workers (SIGTERM; SIGKILL if it has not ended after 30 s)."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def launch(
    script_args: Sequence[object] = (),
    *,
    nproc: int,
    script: str | os.PathLike | None = None,
    launcher_args: Sequence[object] = ("--standalone",),
    env: Mapping[str, str] | None = None,
    timeout: float = 1800,
    echo: bool = True,
) -> str:
    """Run ``torchrun --nproc-per-node=<nproc> <launcher_args> <script> <script_args>``; return its output.

    ``script`` defaults to ``ddp_train.py``. torchrun is run as ``python -m torch.distributed.run``
    (the same program) with this Python. The output of all processes (both streams) is printed as
    it comes when ``echo`` is true. A run that fails raises ``RuntimeError`` with the end of its
    output; one that runs past ``timeout`` seconds is stopped, with its workers, and raises too.
    """
    nproc = _args.integer(nproc, "nproc", "launch", minimum=1, meaning="the number of processes")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"launch: timeout must be a number of seconds above 0, got {_args.shown(timeout)}.")
    script = os.fspath(script) if script is not None else str(script_path())
    args = [f"--nproc-per-node={nproc}", *_words(launcher_args, "launcher_args"), script]
    args += _words(script_args, "script_args")
    if echo:
        print("$ torchrun " + shlex.join(args), flush=True)
    # torchrun sets OMP_NUM_THREADS=1 (with a warning) when it is unset; share the cores out instead
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
    process = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *args],
        env={**threads, **os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    queue: Queue[str | None] = Queue()

    def read() -> None:  # in a thread, so that a silent hang still times out
        assert process.stdout is not None
        for line in process.stdout:
            queue.put(line)
        queue.put(None)  # every process writing to the pipe has exited

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while (line := queue.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            lines.append(line)
            if echo:
                print(line, end="", flush=True)
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except (Empty, subprocess.TimeoutExpired):
        _stop(process)
        raise RuntimeError(
            f"torchrun ran longer than {timeout:g} s and was stopped; the end of its output:\n"
            f"{''.join(lines)[-4000:]}"
        ) from None
    except BaseException:  # e.g. KeyboardInterrupt from Jupyter's stop button
        _stop(process)
        raise
    output = "".join(lines)
    if process.returncode != 0:
        raise RuntimeError(
            f"torchrun exited with {process.returncode}; the end of its output:\n{output[-4000:]}"
        )
    return output
