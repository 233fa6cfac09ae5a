"""Running Python code in a fresh process, for what a running process cannot show: the GPUs a new
process sees (``04``), and errors that break the process they happen in (``07``)."""

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from subprocess import PIPE, Popen
from types import SimpleNamespace
from typing import Any

from helpers import _args

__all__ = ["ScriptRun", "gpus_in_fresh_processes", "run_script"]


def _check_variables(variables: Any, what: str, caller: str) -> dict[str, str]:
    """``variables``, a dict of environment variables: names and values are strings."""
    if variables is None:
        return {}
    strings = isinstance(variables, Mapping) and all(
        isinstance(name, str) and name and isinstance(value, str)
        for name, value in variables.items()
    )
    if not strings:
        raise TypeError(
            f"{caller}: {what} is {_args.shown(variables)}; give a dict of strings, "
            "e.g. {'CUDA_VISIBLE_DEVICES': '0'}."
        )
    return dict(variables)


def _start(code: str, arguments: list[str], env: dict[str, str]) -> Popen:
    """A new Python running ``code`` (``-u``: no output lost), with ``env`` added to this
    process's environment."""
    command = [sys.executable, "-u", "-c", code, *arguments]
    return Popen(command, env={**os.environ, **env}, stdout=PIPE, stderr=PIPE, text=True)


class ScriptRun(subprocess.CompletedProcess):
    """``run_script``'s result: ``returncode``, ``stdout``, ``stderr``, ``source``, and the
    ``error`` that stopped it ("Type: message") at line ``error_line``, or None. ``line(n)`` is
    line ``n`` of the script, ``line_of(text)`` the number of the one line holding ``text``."""

    def line(self, number: int | None) -> str:
        if number is None:
            return ""
        return self.source.splitlines()[number - 1].strip()

    def line_of(self, text: str) -> int:
        numbers = [i for i, line in enumerate(self.source.splitlines(), 1) if text in line]
        if len(numbers) != 1:
            raise ValueError(f"{len(numbers)} lines of the script hold {text!r}, not exactly one.")
        return numbers[0]


def _script_run(code: str, process: Popen, timeout: float) -> ScriptRun:
    stdout, stderr = process.communicate(timeout=timeout)
    run = ScriptRun(process.args, process.returncode, stdout, stderr)
    run.source = code
    run.error = None
    run.error_line = None
    if process.returncode == 0:
        return run
    stack = stderr[stderr.rfind("Traceback (most recent call last)") :]
    lines = re.findall(r'File "<string>", line (\d+)', stack)  # the script's; the last is deepest
    if lines:
        run.error_line = int(lines[-1])
    messages = [line for line in stack.splitlines()[1:] if line[:1].strip()]
    if messages:
        run.error = messages[0]
    return run


def run_script(code: str, *, env: dict[str, str] | None = None) -> ScriptRun:
    """Run ``code`` as a script in a new Python process, with ``env`` added to its environment;
    wait for it (at most 300 s) and return what it did, a ``ScriptRun``."""
    if not isinstance(code, str):
        raise TypeError(f"run_script: code is the script's text, a str, not {_args.shown(code)}.")
    env = _check_variables(env, "env", "run_script")
    return _script_run(code, _start(code, [], env), timeout=300)


_PROBE = """import json, os, sys, torch
how = json.loads(sys.argv[1])
if how.get("after_is_available"):
    torch.cuda.is_available()
os.environ.update(how.get("set_in_code", {}))
found = {"device_count_before": torch.cuda.device_count(), "usable": 0}
found["default_device"] = None
found["error"] = None
try:  # a tensor on "cuda", then on cuda:0, cuda:1, ... until one fails
    found["default_device"] = str(torch.zeros(1, device="cuda").device)
    while found["usable"] < 64:
        torch.zeros(1, device=f"cuda:{found['usable']}")
        found["usable"] += 1
except Exception as error:
    found["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
print(json.dumps(found))"""

_OPTIONS = ("env", "set_in_code", "after_is_available")


def _check_case(name: Any, how: Any) -> None:
    caller = "gpus_in_fresh_processes"
    options = ", ".join(_OPTIONS)
    if not isinstance(name, str) or not isinstance(how, Mapping):
        raise TypeError(
            f"{caller}: cases map names to dicts with some of {options}, e.g. "
            f"{{'hidden': {{'env': {{'CUDA_VISIBLE_DEVICES': ''}}}}}}; got {name!r}: {how!r:.40}."
        )
    unknown = sorted(set(how) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"{caller}: case {name!r} has {unknown}; the options are {options}.")
    _check_variables(how.get("env", {}), f"case {name!r}'s env", caller)
    _check_variables(how.get("set_in_code", {}), f"case {name!r}'s set_in_code", caller)
    _args.boolean(how.get("after_is_available", False), "after_is_available", caller)


def gpus_in_fresh_processes(cases: Mapping[str, Mapping[str, Any]]) -> dict[str, SimpleNamespace]:
    """What a new Python process finds, for each of ``cases``, the processes all started at once.

    ``cases`` maps names to dicts of ``env`` (the variables a process starts with),
    ``set_in_code`` (set in ``os.environ`` after ``import torch`` or, with
    ``after_is_available``, after ``torch.cuda.is_available()``). For each: ``usable``, the GPUs
    a tensor could be made on; ``default_device``, where ``"cuda"`` put one; the
    ``device_count_before`` the first tensor; and the ``error`` that stopped it."""
    if not isinstance(cases, Mapping) or not cases:
        raise TypeError(
            "gpus_in_fresh_processes: cases is a dict of names to cases, e.g. "
            f"{{'hidden': {{'env': {{'CUDA_VISIBLE_DEVICES': ''}}}}}}; got {_args.shown(cases)}."
        )
    for name, how in cases.items():
        _check_case(name, how)
    running = {}
    for name, how in cases.items():
        running[name] = _start(_PROBE, [json.dumps(dict(how))], dict(how.get("env", {})))
    found = {}
    for name, process in running.items():
        run = _script_run(_PROBE, process, timeout=120)
        if run.returncode != 0:
            raise RuntimeError(f"The fresh process of case {name!r} failed:\n{run.stderr[-2000:]}")
        found[name] = SimpleNamespace(**json.loads(run.stdout.splitlines()[-1]))
    return found
