"""Choose a device, describe the hardware, and move data to and from a device (from ``00`` on)."""

import json
import numbers
import os
import sys
from collections.abc import Mapping
from subprocess import PIPE, Popen
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

_COLAB = "On Colab: Runtime > Change runtime type > a GPU (e.g. T4), then run the notebook again."


def pick_device(preferred: str | torch.device | None = None) -> torch.device:
    """``preferred``, after checking that this machine has it, or the best device here: CUDA, Apple
    MPS, another accelerator, the CPU. With its index (``cuda:0``), as tensors made there report it."""
    if preferred is not None:
        device = as_device(preferred, name="preferred", caller="pick_device", check_available=True)
        if device.type == "meta":
            raise ValueError(
                "pick_device: 'meta' has shapes but no values; ask for 'cpu' or a GPU instead."
            )
        return device
    if torch.cuda.is_available():  # first, and asked as the .cuda() lessons ask it
        return torch.device("cuda", torch.cuda.current_device())
    if torch.accelerator.is_available():  # Apple's MPS, Intel's XPU, ...
        kind = torch.accelerator.current_accelerator().type
        return torch.device(kind, 0 if kind == "mps" else getattr(torch, kind).current_device())
    return torch.device("cpu")


def as_device(
    value: Any, *, name: str = "device", caller: str = "as_device", check_available: bool = False
):
    """``value`` (a ``torch.device`` or a name such as ``"cuda:1"``) as a ``torch.device``, which the
    machine must have if ``check_available``. A wrong one raises an error naming ``name`` of ``caller``."""
    if not isinstance(value, str | torch.device):
        raise TypeError(
            f"{caller}: {name} must be a device, e.g. pick_device(), not {type(value).__name__}."
        )
    try:
        device = torch.device(value.strip() if isinstance(value, str) else value)
    except RuntimeError:
        hint = " (NVIDIA GPUs are called 'cuda' in PyTorch)" * ("gpu" in value.lower())
        problem, fix = (
            f"no device name{hint}",
            "Write 'cpu', 'cuda', 'cuda:N' or 'mps', in lower case.",
        )
    else:
        kind, index = device.type, device.index
        if not check_available or kind in ("cpu", "meta"):
            return torch.device(kind) if check_available else device
        count = getattr(getattr(torch, kind, None), "device_count", lambda: 0)()
        if count and index is None:  # "cuda" alone: the current GPU
            index = torch.cuda.current_device() if kind == "cuda" else 0
        if count and index < count:
            return torch.device(kind, index)
        problem = (
            f"there is no {device}, only {count}" if count else f"there is no {kind.upper()} device"
        )
        fix = "Call pick_device() for the best device here." + f" {_COLAB}" * (kind == "cuda")
    gpus = [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(torch.cuda.device_count())]
    here = ", ".join(
        gpus + [str(pick_device())] * (pick_device().type not in ("cpu", "cuda")) + ["cpu"]
    )
    raise ValueError(f"{caller}: {name} {value!r}: {problem}. This machine has {here}. {fix}")


def describe_devices() -> str:
    """What this machine offers PyTorch, in a few lines (every notebook prints it first)."""
    lines = [f"PyTorch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"]
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gib = p.total_memory / 2**30
        lines.append(f"  cuda:{i}  {p.name}, {gib:.1f} GiB, compute capability {p.major}.{p.minor}")
    if (best := pick_device()).type != "cuda":
        lines.append(
            f"Accelerator: {best}" if best.type != "cpu" else f"No GPU, only the CPU. {_COLAB}"
        )
    if (visible := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={visible!r}")
    lines.append(
        f"CPU: {os.cpu_count()} logical cores, PyTorch uses {torch.get_num_threads()} threads"
    )
    return "\n".join(lines)


def to_device(obj: Any, device: torch.device | str) -> Any:
    """Return ``obj`` moved to ``device``: tensors, modules (in place), and tuples, lists and dicts of
    them at any depth. Strings, numbers and ``None`` pass through; a NumPy array raises a ``TypeError``."""
    device = as_device(device, caller="to_device", check_available=True)
    if (
        isinstance(obj, nn.Module)
        and device.type == "meta"
        and not all(p.is_meta for p in obj.parameters())
    ):
        raise ValueError(
            "to_device: on 'meta' a model keeps its shapes, not its weights; use pick_device()."
        )
    if isinstance(obj, torch.Tensor | nn.Module):
        return obj.to(device)
    if obj is None or isinstance(obj, str | bytes | numbers.Number | torch.dtype | torch.device):
        return obj
    if isinstance(obj, list | tuple):
        items = [to_device(item, device) for item in obj]
        return (
            type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        )  # a named tuple, or not
    if isinstance(obj, dict):
        return {key: to_device(value, device) for key, value in obj.items()}
    fix = (
        "make it a tensor: torch.from_numpy(array)"
        if isinstance(obj, np.ndarray)
        else "move its tensors"
    )
    raise TypeError(f"to_device cannot move a {type(obj).__name__}: {fix}.")


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor.detach().cpu().numpy()`` on any device (bfloat16 as float32); on the CPU it shares memory."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"to_numpy expects a torch.Tensor, got {type(tensor).__name__}; use np.asarray(...)."
        )
    if tensor.is_meta:
        raise NotImplementedError("to_numpy cannot be called on meta tensors: they have no values.")
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).detach().cpu().numpy()


_PROBE = """import json, os, sys, torch
how = json.loads(sys.argv[1])
torch.cuda.is_available() if how.get("after_is_available") else None
os.environ.update(how.get("set_in_code", {}))
found = dict(device_count_before=torch.cuda.device_count(), usable=0, default_device=None, error=None)
try:  # a tensor on "cuda", then on cuda:0, cuda:1, ... until one fails
    found["default_device"] = str(torch.zeros(1, device="cuda").device)
    while found["usable"] < 64:
        found["usable"] += torch.zeros(1, device=f"cuda:{found['usable']}").numel()
except Exception as error:
    found["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
print(json.dumps(found))"""


def _is_case(
    how: Any,
) -> bool:  # a dict of env and set_in_code (dicts of strings) and after_is_available
    groups = (
        [how.get("env", {}), how.get("set_in_code", {})] if isinstance(how, Mapping) else [None]
    )
    ok = all(
        isinstance(g, Mapping) and all(isinstance(t, str) for i in g.items() for t in i)
        for g in groups
    )
    return ok and not set(how) - {"env", "set_in_code", "after_is_available"}


def gpus_in_fresh_processes(cases: Mapping[str, Mapping[str, Any]]) -> dict[str, SimpleNamespace]:
    """For each of ``cases`` (names of dicts of ``env``, the variables a new Python process starts with,
    ``set_in_code``, set after ``import torch`` or, if ``after_is_available``, after ``is_available()``), at
    once: the GPUs it can use (``usable``), its ``default_device``, ``device_count_before`` and ``error``."""
    if not (isinstance(cases, Mapping) and cases and all(map(_is_case, cases.values()))):
        raise TypeError(
            "gpus_in_fresh_processes: cases must map names to dicts of env and set_in_code (dicts of "
            "strings) and after_is_available, e.g. {'hidden': {'env': {'CUDA_VISIBLE_DEVICES': ''}}}."
        )
    probe, running = [sys.executable, "-c", _PROBE], {}
    for name, how in cases.items():
        env = {**os.environ, **how.get("env", {})}
        running[name] = Popen(
            [*probe, json.dumps(dict(how))], env=env, text=True, stdout=PIPE, stderr=PIPE
        )
    outputs = {name: process.communicate(timeout=120) for name, process in running.items()}
    if failed := next((name for name, process in running.items() if process.returncode != 0), None):
        raise RuntimeError(
            f"The fresh process of case {failed!r} failed:\n{outputs[failed][1][-2000:]}"
        )
    return {
        name: SimpleNamespace(**json.loads(out.splitlines()[-1]))
        for name, (out, _) in outputs.items()
    }
