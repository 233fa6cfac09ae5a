"""Choosing a device, describing the hardware, and moving data to and from it.

Introduced in ``00_devices_and_tensors``. Nothing here probes the hardware at import time.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import numbers
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

__all__ = [
    "FreshProcessGPUs",
    "as_device",
    "describe_devices",
    "gpus_in_fresh_process",
    "gpus_in_fresh_processes",
    "pick_device",
    "to_device",
    "to_numpy",
]

T = TypeVar("T")

_COLAB_HINT = "On Colab: Runtime > Change runtime type > choose a GPU (e.g. T4), then run the notebook again."


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _accelerator_api() -> Any | None:
    """``torch.accelerator`` (PyTorch 2.6 and later), or ``None`` on an older torch."""
    accel = getattr(torch, "accelerator", None)
    if accel is None or not all(hasattr(accel, name) for name in ("is_available", "current_accelerator")):
        return None
    return accel


def _accelerator_choice() -> torch.device | None:
    """``torch.accelerator``'s device with its index, or ``None`` (no accelerator usable, or no such API).

    PyTorch's tutorials choose ``torch.accelerator.current_accelerator().type if
    torch.accelerator.is_available() else "cpu"``: a type without an index (``cuda``). This is the
    same choice with the index that tensors made there report (``cuda:0``). ``is_available()`` comes
    first: since PyTorch 2.7 ``current_accelerator()`` names the accelerator PyTorch was built for,
    also on a machine that has none (a CUDA build without a GPU), and in 2.6 it raised there.
    """
    accel = _accelerator_api()
    if accel is None or not accel.is_available():
        return None
    current = accel.current_accelerator()
    if current is None:
        return None
    if current.type == "mps":
        return torch.device("mps", 0)  # a Mac has one Apple GPU
    return torch.device(current.type, accel.current_device_index())


def _other_accelerator() -> torch.device | None:
    """A non-CUDA, non-MPS accelerator (Intel XPU, ...) via ``torch.accelerator``, if torch has it."""
    chosen = _accelerator_choice()
    if chosen is None or chosen.type in {"cuda", "mps"}:
        return None
    return chosen


def _what_this_machine_has() -> str:
    parts = []
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        names = ", ".join(f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(n))
        parts.append(f"{n} CUDA GPU{'s' if n != 1 else ''}: {names}")
    if _mps_available():
        parts.append("an Apple GPU: mps")
    other = _other_accelerator()
    if other is not None:
        parts.append(f"an accelerator: {other}")
    if not parts:
        return "no GPU, only the CPU ('cpu')"
    return "; ".join(parts) + "; and the CPU ('cpu')"


def _bad_device(asked: Any, problem: str, fix: str, *, name: str, caller: str) -> ValueError:
    who = "Device" if caller == "pick_device" else f"{caller}: {name}"
    return ValueError(
        f"{who} {asked!r}: {problem}. This machine has {_what_this_machine_has()}. {fix}".strip()
    )


def _hint_for_device_string(text: str) -> str:
    """Why a device string that PyTorch refuses is wrong, in a few words, or ''."""
    lower = text.lower()
    if "gpu" in lower:
        return " (NVIDIA GPUs are called 'cuda' in PyTorch)"
    if lower != text:
        try:
            torch.device(lower)
            return f" (device names are lower case: {lower!r})"
        except RuntimeError:
            pass
    match = re.fullmatch(r"([a-z]+)[\s_-]*(\d+)", lower)
    if match:
        return f" (write the number after a colon: '{match.group(1)}:{match.group(2)}')"
    return ""


_DATA_TYPES = (torch.Tensor, nn.Module, np.ndarray, list, tuple, Mapping)


def as_device(
    value: Any, *, name: str = "device", caller: str = "as_device", check_available: bool = False
) -> torch.device:
    """Read a device argument the one way every helper reads it, and return a ``torch.device``.

    Takes a ``torch.device`` or a device name (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``;
    spaces around it are ignored). Anything else (``None``, a number, a tensor given where the
    device goes) raises a ``TypeError``, and a name PyTorch does not know a ``ValueError``; both
    name the argument (``name``) of the function (``caller``), what was given and what to do.
    With ``check_available=True`` the machine must also have that device (see ``pick_device``).
    """
    if isinstance(value, torch.device):
        device = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            if not text:
                raise RuntimeError("empty")
            device = torch.device(text)
        except RuntimeError:
            raise _bad_device(
                value,
                (
                    "an empty string is no device"
                    if not text
                    else "this is not a device name PyTorch understands"
                )
                + _hint_for_device_string(text),
                "Write 'cpu', 'cuda', 'cuda:N' with N a GPU number from 0, or 'mps'; "
                "or call pick_device() with no argument to get the best device available.",
                name=name,
                caller=caller,
            ) from None
    else:
        if value is None:
            hint = f"Pass the device to use, e.g. {name}=pick_device()."
        elif isinstance(value, bool):
            hint = "Write 'cpu' or 'cuda'."
        elif isinstance(value, int):
            hint = f"Write 'cuda:{value}' for GPU number {value}, or 'cpu'."
        elif isinstance(value, _DATA_TYPES):
            hint = f"This looks like data, not a device: did you swap two arguments of {caller}?"
        else:
            hint = "Write 'cpu', 'cuda', 'cuda:N' or 'mps', or pass a torch.device."
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise TypeError(
            f"{caller} expects {name} to be a device name such as 'cuda:0' or 'cpu', or a torch.device; "
            f"got {type(value).__name__}: {shown}. {hint}"
        )
    return _available(device, value, name=name, caller=caller) if check_available else device


def _available(device: torch.device, asked: Any, *, name: str, caller: str) -> torch.device:
    """``device`` with its index, after checking that this machine has it; else a clear ``ValueError``."""
    kind, index = device.type, device.index
    if kind in {"cpu", "meta"}:
        return torch.device(kind)
    if kind == "cuda":
        if not torch.cuda.is_available():
            reason = (
                "this PyTorch was built without CUDA"
                if torch.version.cuda is None
                else "no CUDA GPU is visible (no NVIDIA driver, no GPU, or CUDA_VISIBLE_DEVICES hides them)"
            )
            raise _bad_device(
                asked,
                reason,
                "Call pick_device() with no argument to fall back to the CPU. " + _COLAB_HINT,
                name=name,
                caller=caller,
            )
        count = torch.cuda.device_count()
        if index is None:
            return torch.device("cuda", torch.cuda.current_device())
        if index >= count:
            raise _bad_device(
                asked,
                f"there is no GPU number {index}, only {count} (numbered 0 to {count - 1})",
                f"Use 'cuda:0' to 'cuda:{count - 1}', or 'cuda' for the current one.",
                name=name,
                caller=caller,
            )
        return device
    if kind == "mps":
        if not _mps_available():
            raise _bad_device(
                asked,
                "Apple's MPS backend is not available here (it needs a Mac with Apple silicon)",
                "Call pick_device() with no argument to get the best device available.",
                name=name,
                caller=caller,
            )
        if index not in (None, 0):
            raise _bad_device(
                asked, "there is only one MPS device, mps:0", "Use 'mps'.", name=name, caller=caller
            )
        return torch.device("mps", 0)
    module = getattr(torch, kind, None)
    if module is not None and hasattr(module, "is_available") and module.is_available():
        count = module.device_count() if hasattr(module, "device_count") else 1
        if index is not None and index >= count:
            raise _bad_device(
                asked, f"there is no {kind} device number {index}, only {count}", "", name=name, caller=caller
            )
        return device if index is not None else torch.device(kind, 0)
    raise _bad_device(
        asked,
        f"this machine has no {kind} device",
        "Call pick_device() with no argument to get the best device available.",
        name=name,
        caller=caller,
    )


def pick_device(preferred: str | torch.device | None = None) -> torch.device:
    """The device to train on.

    With no argument: the best one available, CUDA, then Apple MPS, then another accelerator known
    to ``torch.accelerator``, then the CPU. Accelerators come back with their index (``cuda:0``,
    not ``cuda``) so that ``tensor.device == device`` holds for tensors made on it. Where PyTorch
    has ``torch.accelerator`` (2.6 and later), the choice is its choice, the one PyTorch's
    tutorials make, plus the index; on an older PyTorch each kind is asked in turn.

    With a string or ``torch.device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``): that
    device, after checking that this machine has it; otherwise a ``ValueError`` that says what
    was asked, what the machine has, and what to do. Every helper that takes a device reads it
    with the same parser, ``as_device``.
    """
    if preferred is None:
        chosen = _accelerator_choice()
        # A PyTorch build has one accelerator. Only an out-of-tree backend (PrivateUse1) can stand in
        # torch.accelerator's place beside a usable CUDA GPU: CUDA comes first, as on an older torch.
        if chosen is not None and (chosen.type == "cuda" or not torch.cuda.is_available()):
            return chosen
        return _first_available()
    return as_device(preferred, name="preferred", caller="pick_device", check_available=True)


def _first_available() -> torch.device:
    """CUDA, MPS, another accelerator, the CPU, asked in turn: the choice without torch.accelerator."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if _mps_available():
        return torch.device("mps", 0)
    other = _other_accelerator()
    return other if other is not None else torch.device("cpu")


def describe_devices() -> str:
    """What this machine offers PyTorch, in a few lines (every notebook prints it first)."""
    hip = getattr(torch.version, "hip", None)
    cuda_build = torch.version.cuda or (f"none (a ROCm {hip} build)" if hip else "none (a CPU-only build)")
    lines = [f"PyTorch {torch.__version__}, CUDA build {cuda_build}"]
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        lines.append(f"{n} CUDA GPU{'s' if n != 1 else ''}:")
        for i in range(n):
            props = torch.cuda.get_device_properties(i)
            lines.append(
                f"  cuda:{i}  {props.name}, {props.total_memory / 2**30:.1f} GiB, "
                f"compute capability {props.major}.{props.minor}"
            )
    if _mps_available():
        lines.append("Apple GPU (MPS): mps")
    other = _other_accelerator()
    if other is not None:
        lines.append(f"Accelerator: {other}")
    if len(lines) == 1:
        lines.append(f"No GPU: this run uses the CPU. {_COLAB_HINT}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={visible!r}")
    lines.append(f"CPU: {os.cpu_count()} logical cores, PyTorch uses {torch.get_num_threads()} threads")
    return "\n".join(lines)


def to_device(obj: T, device: torch.device | str, *, non_blocking: bool = False) -> T:
    """Move ``obj`` to ``device`` and return the moved object.

    Tensors are copied (``tensor.to`` returns a new tensor unless it is already there), so use the
    return value. Tuples, lists, dicts (``defaultdict`` and ``OrderedDict`` too), named tuples,
    sets and dataclasses are rebuilt with their contents moved, at any depth. Modules are moved in
    place and returned; any other object with a ``.to()`` method (a batch class of its own) is
    moved by calling it. Strings, numbers, ``None``, paths, dtypes and devices pass through
    unchanged. A NumPy array is refused (convert it with ``torch.from_numpy`` first), and so is an
    object this function cannot see into, rather than leaving its tensors behind.
    """
    target = as_device(device, name="device", caller="to_device", check_available=True)
    if not isinstance(non_blocking, bool):
        raise TypeError(f"to_device: non_blocking must be True or False, got {non_blocking!r}")
    return _move(obj, target, non_blocking)


# Values that hold no tensor: to_device returns them as they are.
_LEAVES = (str, bytes, numbers.Number, np.generic, torch.dtype, torch.device, enum.Enum, os.PathLike, range)


def _move(obj: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(obj, torch.Tensor | nn.Module):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, np.ndarray):
        raise TypeError(
            "to_device got a NumPy array; turn it into a tensor first with torch.from_numpy(array) "
            "(which shares its memory) or torch.as_tensor(array)."
        )
    if obj is None or obj is Ellipsis or isinstance(obj, _LEAVES):
        return obj
    method = getattr(obj, "to", None)
    if callable(method) and not isinstance(obj, type):  # a batch class with its own .to(), as torch's
        if non_blocking:
            try:
                moved = method(device, non_blocking=True)
            except TypeError:  # a .to() that takes the device only
                moved = method(device)
        else:
            moved = method(device)
        return obj if moved is None else moved  # some .to() methods move in place and return None
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(_move(item, device, non_blocking) for item in obj))
    if isinstance(obj, list | tuple | set | frozenset):
        return type(obj)(_move(item, device, non_blocking) for item in obj)
    if isinstance(obj, dict):
        moved = copy.copy(obj)  # keeps the type, and a defaultdict's default factory
        for key, value in obj.items():
            moved[key] = _move(value, device, non_blocking)
        return moved
    if isinstance(obj, Mapping):
        items = {key: _move(value, device, non_blocking) for key, value in obj.items()}
        try:
            return type(obj)(items)
        except TypeError:  # a mapping type that cannot be built from a dict
            return items
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {
            f.name: _move(getattr(obj, f.name), device, non_blocking)
            for f in dataclasses.fields(obj)
            if f.init
        }
        return dataclasses.replace(obj, **fields)
    raise TypeError(
        f"to_device cannot move a {type(obj).__name__}: it is not a tensor, module, tuple, list, dict or "
        "dataclass, and it has no .to() method, so its tensors would stay where they are. Give the class "
        "a .to(device) method that returns the moved object, or move its tensors yourself."
    )


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor.detach().cpu().numpy()``: a NumPy array of ``tensor``, wherever it lives.

    For a tensor already on the CPU the array shares its memory (changing one changes the
    other); from any other device it is a copy.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"to_numpy expects a torch.Tensor, got {type(tensor).__name__}. "
            "A Python number or list needs no conversion; np.asarray(...) turns it into an array."
        )
    if tensor.dtype == torch.bfloat16:
        raise TypeError(
            "NumPy has no bfloat16 type: convert first, e.g. to_numpy(tensor.float()), "
            "knowing that float32 takes twice the memory."
        )
    return tensor.detach().cpu().numpy()


_PROBE_GPUS = """
import json, os, sys
import torch
if sys.argv[1] == "1":
    torch.cuda.is_available()  # the first CUDA call (unless PYTORCH_NVML_BASED_CUDA_CHECK=1)
for assignment in sys.argv[2:]:
    name, _, value = assignment.partition("=")
    os.environ[name] = value
report = {"device_count": torch.cuda.device_count(), "allocated_on": [], "error": None}
try:  # what CUDA really has: where tensors can be made
    report["default_device"] = str(torch.zeros(1, device="cuda").device)
    while len(report["allocated_on"]) < 64:
        index = len(report["allocated_on"])
        report["allocated_on"].append(str(torch.zeros(1, device=f"cuda:{index}").device))
except Exception as error:  # no driver, no visible GPU, or one past the last GPU
    report["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
report["device_count_after"] = torch.cuda.device_count()
print(json.dumps(report))
"""


@dataclass(frozen=True)
class FreshProcessGPUs:
    """What a new Python process could use: see ``gpus_in_fresh_process``."""

    usable: int  # GPUs a tensor could be made on: cuda:0, cuda:1, ... until the first failure
    default_device: str | None  # where torch.zeros(1, device="cuda") landed; None if it failed
    device_count_before: int  # torch.cuda.device_count() before PyTorch's CUDA state is set up
    device_count_after: int  # ... and after it
    error: str | None  # the first line of the error that stopped the allocations, if any


def _check_variables(*groups: Mapping[str, str] | None) -> None:
    for group in groups:
        if group is not None and not isinstance(group, Mapping):
            raise TypeError(
                f"Environment variables are given as a dict of name/value strings, e.g. "
                f"{{'CUDA_VISIBLE_DEVICES': '0,1'}}; got {type(group).__name__} {group!r}."
            )
    for name, value in [item for group in groups for item in (group or {}).items()]:
        if not isinstance(name, str) or not isinstance(value, str) or not name or "=" in name:
            raise ValueError(
                f"Environment variables are name/value strings, e.g. {{'CUDA_VISIBLE_DEVICES': '0,1'}}; "
                f"got {name!r}: {value!r}."
            )


_FRESH_PROCESS_OPTIONS = ("env", "set_in_code", "after_is_available")


def gpus_in_fresh_processes(cases: Mapping[str, Mapping[str, Any]]) -> dict[str, FreshProcessGPUs]:
    """``gpus_in_fresh_process`` for every case, the processes all started at once.

    ``cases`` maps a name to the keyword arguments of one ``gpus_in_fresh_process`` call
    (``env``, ``set_in_code``, ``after_is_available``); the answer maps the same names, in the same
    order, to what each process found. The processes are independent, so they run side by side:
    each spends seconds importing PyTorch and starting CUDA, and they overlap that wait. Every case
    is checked before any process starts. Introduced in ``04_data_parallel``.
    """
    if not isinstance(cases, Mapping) or not cases:
        raise TypeError(
            "gpus_in_fresh_processes: cases must be a non-empty dict of name -> keyword arguments, e.g. "
            f"{{'hidden': {{'env': {{'CUDA_VISIBLE_DEVICES': ''}}}}}}; got {type(cases).__name__}."
        )
    for name, how in cases.items():
        options = ", ".join(_FRESH_PROCESS_OPTIONS)
        if not isinstance(how, Mapping):
            raise TypeError(
                f"gpus_in_fresh_processes: case {name!r} must be a dict with some of {options}; "
                f"got {type(how).__name__} {how!r}."
            )
        unknown = sorted(set(how) - set(_FRESH_PROCESS_OPTIONS))
        if unknown:
            raise TypeError(
                f"gpus_in_fresh_processes: case {name!r} has {unknown}; the options are {options}."
            )
        _check_variables(how.get("env"), how.get("set_in_code"))
    from concurrent.futures import ThreadPoolExecutor  # threads: each only waits for its process

    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        running = {name: pool.submit(gpus_in_fresh_process, **how) for name, how in cases.items()}
        return {name: future.result() for name, future in running.items()}


def gpus_in_fresh_process(
    *,
    env: Mapping[str, str] | None = None,
    set_in_code: Mapping[str, str] | None = None,
    after_is_available: bool = False,
) -> FreshProcessGPUs:
    """How many CUDA GPUs a new Python process can really use, found by making tensors on them.

    ``env`` is added to the environment the process starts with (as ``VAR=... python`` in a shell
    does); ``set_in_code`` is assigned to ``os.environ`` inside the process after ``import torch``:
    before any CUDA call, or, with ``after_is_available=True``, after ``torch.cuda.is_available()``,
    which starts the CUDA driver (unless ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` is set: then it asks
    NVML and starts nothing). Then the process makes a one-number tensor on ``"cuda"`` and on
    ``cuda:0``, ``cuda:1``, ... until one fails: ``usable`` is how many worked. It also reports
    ``torch.cuda.device_count()`` before and after: until PyTorch's own CUDA state is set up (by the
    first call that needs the GPU: a first tensor there, ``current_device()``,
    ``get_device_properties()``, ``set_device()``; not ``device_count()`` or ``is_available()``),
    ``device_count()`` counts from the variable as it is *now*, so after a late
    change it can disagree with what CUDA has. The caller's variables, ``CUDA_VISIBLE_DEVICES``
    included, are inherited unless ``env`` overrides them. Introduced in ``04_data_parallel``.
    """
    _check_variables(env, set_in_code)
    child_env = {**os.environ, **(env or {})}
    assignments = [f"{name}={value}" for name, value in (set_in_code or {}).items()]
    result = subprocess.run(
        [sys.executable, "-c", _PROBE_GPUS, "1" if after_is_available else "0", *assignments],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"The child process failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return FreshProcessGPUs(
        usable=len(report["allocated_on"]),
        default_device=report.get("default_device"),
        device_count_before=report["device_count"],
        device_count_after=report["device_count_after"],
        error=report["error"],
    )
