"""Find, show and launch ``notebooks/ddp_train.py``, the DistributedDataParallel script of ``05``."""

import ast
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import torch

from helpers import _args
from helpers.course import CHECKOUT_VARIABLE


def choose_backend(local_world_size: int) -> tuple[str, str]:
    """``(backend, device type)`` as ``ddp_train.py`` picks them for ``local_world_size`` processes here:
    NCCL on the GPUs when each process on this machine can have one of its own, else Gloo on the CPU."""
    n = _args.integer(local_world_size, "local_world_size", "choose_backend", minimum=1)
    device_type = "cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= n else "cpu"
    return torch.distributed.get_default_backend_for_device(device_type), device_type


def script_path() -> Path:
    """``ddp_train.py`` next to the notebook, else in the course's ``notebooks/`` (on Colab, Kaggle)."""
    courses = [os.environ.get(CHECKOUT_VARIABLE), Path(__file__).parents[1]]
    for path in [
        Path("ddp_train.py"),
        *(Path(c) / "notebooks" / "ddp_train.py" for c in courses if c),
    ]:
        if path.is_file():
            return path
    raise FileNotFoundError(
        "ddp_train.py is in the course's notebooks/: run this notebook from there."
    )


def show(path, name: str | None = None) -> str:
    """Print the top-level function ``name`` of file ``path`` (all of it for None), with line numbers."""
    lines = Path(path).read_text().splitlines()
    found = [
        node for node in ast.parse("\n".join(lines)).body if getattr(node, "name", None) == name
    ]
    if name is not None and not found:
        raise ValueError(f"show: {path} defines no {name!r} at its top level.")
    first, last = (found[0].lineno, found[0].end_lineno) if name else (1, len(lines))
    text = "\n".join(f"{number:3}  {lines[number - 1]}" for number in range(first, last + 1))
    print(text)
    return text


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
    """Run ``torchrun --nproc-per-node=<nproc> <launcher_args> <script or ddp_train.py> <script_args>``;
    return its output, printed as it comes if ``echo``. A failure or a run past ``timeout`` s raises."""
    nproc = _args.integer(nproc, "nproc", "launch", minimum=1, meaning="the number of processes")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(
            f"launch: timeout must be a number of seconds above 0, got {_args.shown(timeout)}."
        )
    for name, seq in (("launcher_args", launcher_args), ("script_args", script_args)):
        if not (
            isinstance(seq, list | tuple)
            and all(isinstance(w, str | int | float | Path) for w in seq)
        ):
            raise TypeError(
                f"launch: {name} must be a list of words, e.g. ['--epochs', 2], not {seq!r:.30}"
            )
    if not (script := Path(script or script_path())).is_file():
        raise FileNotFoundError(
            f"launch: {script} is not a file: give the path of a Python script."
        )
    env = {} if env is None else env
    if not isinstance(env, dict) or not all(
        isinstance(word, str) for word in [*env, *env.values()]
    ):
        raise TypeError(
            f"launch: env is a dict of strings, e.g. {{'NCCL_DEBUG': 'INFO'}}, not {env!r:.30}"
        )
    args = [f"--nproc-per-node={nproc}", *map(str, [*launcher_args, script, *script_args])]
    if echo:
        print("$ torchrun " + shlex.join(args), flush=True)
    env = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc)), **os.environ, **env}
    process = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines = []

    def read() -> None:  # in a thread, so that a run that hangs silently still times out
        for line in process.stdout:
            lines.append(line)
            if echo:
                print(line, end="", flush=True)

    (reader := threading.Thread(target=read, daemon=True)).start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"torchrun stopped after {timeout:g} s:\n{''.join(lines)[-4000:]}"
        ) from None
    finally:  # past the timeout, or stopped by Jupyter's stop button: torchrun stops its workers
        process.terminate()
        process.wait(timeout=30)
    reader.join(timeout=10)  # the last lines
    if process.returncode != 0:
        raise RuntimeError(
            f"torchrun exited with {process.returncode}; its end:\n{''.join(lines)[-4000:]}"
        )
    return "".join(lines)
