"""Find, show and launch ``ddp_train.py``, the DistributedDataParallel script of ``05``."""

import ast
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import torch

from helpers import _args
from helpers.paths import course_root

__all__ = ["choose_backend", "launch", "script_path", "show"]


def choose_backend(local_world_size: int) -> tuple[str, str]:
    """``(backend, device type)`` as ``ddp_train.py`` picks them for ``local_world_size``
    processes here: NCCL on the GPUs when each process on this machine can have one of its own,
    else Gloo on the CPU."""
    n = _args.integer(local_world_size, "local_world_size", "choose_backend", minimum=1)
    device_type = "cpu"
    if torch.cuda.is_available() and torch.cuda.device_count() >= n:
        device_type = "cuda"
    return torch.distributed.get_default_backend_for_device(device_type), device_type


def script_path() -> Path:
    """``ddp_train.py`` next to the notebook, else in the course's ``notebooks/``."""
    here = Path("ddp_train.py")
    if here.is_file():
        return here
    root = course_root()
    if root is not None and (root / "notebooks" / "ddp_train.py").is_file():
        return root / "notebooks" / "ddp_train.py"
    raise FileNotFoundError(
        "ddp_train.py is in the course's notebooks/: run this notebook from there."
    )


def show(path, name: str | None = None) -> str:
    """Print the top-level function ``name`` of the file ``path`` (all of the file for None), with
    line numbers; return what it printed."""
    if not isinstance(path, str | os.PathLike) or not Path(path).is_file():
        raise FileNotFoundError(f"show: {path!r} is not a file; give the path of a Python script.")
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    first = 1
    last = len(lines)
    if name is not None:
        found = [n for n in ast.parse("\n".join(lines)).body if getattr(n, "name", None) == name]
        if not found:
            raise ValueError(f"show: {path} defines no {name!r} at its top level.")
        first = found[0].lineno
        last = found[0].end_lineno
    text = "\n".join(f"{number:3}  {lines[number - 1]}" for number in range(first, last + 1))
    print(text)
    return text


def _check_words(name: str, words) -> list[str]:
    """``words``, a list of command-line words (numbers and paths too), as strings."""
    kinds = str | int | float | os.PathLike
    if not isinstance(words, list | tuple) or not all(isinstance(w, kinds) for w in words):
        raise TypeError(
            f"launch: {name} must be a list of words, e.g. ['--epochs', 2], not {words!r:.30}."
        )
    return [os.fspath(w) if isinstance(w, os.PathLike) else str(w) for w in words]


def _check_launch(nproc, script, timeout, env) -> Path:
    """Check ``launch``'s arguments; return the script's path."""
    _args.integer(nproc, "nproc", "launch", minimum=1, meaning="the number of processes")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(
            f"launch: timeout must be a number of seconds above 0, got {_args.shown(timeout)}."
        )
    strings = isinstance(env, dict) and all(isinstance(w, str) for w in [*env, *env.values()])
    if not strings:
        raise TypeError(
            f"launch: env is a dict of strings, e.g. {{'NCCL_DEBUG': 'INFO'}}, not {env!r:.30}."
        )
    script = Path(script_path() if script is None else script)
    if not script.is_file():
        raise FileNotFoundError(
            f"launch: {script} is not a file: give the path of a Python script."
        )
    return script


def _run(command: list[str], env: dict[str, str], timeout: float, echo: bool) -> str:
    """Run ``command``, its output printed as it comes if ``echo``; return the output."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []

    def read() -> None:  # in a thread, so that a run that hangs silently still times out
        for line in process.stdout:
            lines.append(line)
            if echo:
                print(line, end="", flush=True)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        output = "".join(lines)[-4000:]
        raise RuntimeError(
            f"torchrun was stopped after {timeout:g} s: it was still running.\n"
            f"The end of its output:\n{output}"
        ) from None
    finally:  # past the timeout, or stopped by Jupyter's stop button: torchrun stops its workers
        process.terminate()
        process.wait(timeout=30)
    reader.join(timeout=10)  # the last lines
    output = "".join(lines)
    if process.returncode != 0:
        raise RuntimeError(
            f"torchrun exited with status {process.returncode}.\n"
            f"The end of its output:\n{output[-4000:]}"
        )
    return output


def launch(
    script_args=(),
    *,
    nproc,
    script=None,
    launcher_args=("--standalone",),
    env=None,
    timeout=1800,
    echo=True,
) -> str:
    """Run ``torchrun --nproc-per-node=<nproc> <launcher_args> <script or ddp_train.py>
    <script_args>``; return its output, printed as it comes if ``echo``. A failure or a run past
    ``timeout`` seconds raises a RuntimeError holding the end of the output."""
    env = {} if env is None else env
    script = _check_launch(nproc, script, timeout, env)
    echo = _args.boolean(echo, "echo", "launch")
    words = [
        f"--nproc-per-node={nproc}",
        *_check_words("launcher_args", launcher_args),
        str(script),
        *_check_words("script_args", script_args),
    ]
    if echo:
        print("$ torchrun " + shlex.join(words), flush=True)
    threads = str(max(1, (os.cpu_count() or 1) // nproc))
    env = {"OMP_NUM_THREADS": threads, **os.environ, **env}
    command = [sys.executable, "-m", "torch.distributed.run", *words]
    return _run(command, env, timeout, echo)
