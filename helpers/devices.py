"""Choose a device, describe the hardware, and move data to and from a device (from ``00`` on)."""

import copy
import dataclasses
import numbers
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["as_device", "describe_devices", "pick_device", "to_device", "to_numpy"]

_COLAB = "On Colab: Runtime > Change runtime type > a GPU (e.g. T4), then run the notebook again."
# Set it to choose the device every notebook uses, e.g. COURSE_DEVICE=cpu make lab.
DEVICE_VARIABLE = "COURSE_DEVICE"
_FROM_ENVIRONMENT = f"the environment variable {DEVICE_VARIABLE}"


def pick_device(preferred: str | torch.device | None = None) -> torch.device:
    """``preferred``, after checking that this machine has it, or the best device here: CUDA, Apple
    MPS, another accelerator, the CPU. With its index (``cuda:0``), as tensors made there report.
    The environment variable ``COURSE_DEVICE`` (``cpu``, ``cuda:1``, ``mps``) overrides the best
    device; an empty value counts as unset."""
    if preferred is None:
        preferred = _device_from_environment()
    if preferred is not None:
        device = as_device(preferred, name="preferred", caller="pick_device", check_available=True)
        if device.type == "meta":
            raise ValueError(
                "pick_device: 'meta' has shapes but no values; ask for 'cpu' or a GPU instead."
            )
        return device
    return _best_device()


def _best_device() -> torch.device:
    """The best device this machine has: CUDA, then Apple's MPS or another accelerator, the CPU."""
    if torch.cuda.is_available():  # first, and asked as the .cuda() lessons ask it
        return torch.device("cuda", torch.cuda.current_device())
    if torch.accelerator.is_available():  # Apple's MPS, Intel's XPU, ...
        kind = torch.accelerator.current_accelerator().type
        if kind == "mps":
            return torch.device("mps", 0)  # a Mac has one Apple GPU
        return torch.device(kind, getattr(torch, kind).current_device())
    return torch.device("cpu")


def _device_from_environment() -> torch.device | None:
    """The device ``COURSE_DEVICE`` names, checked as ``pick_device`` checks an argument."""
    value = os.environ.get(DEVICE_VARIABLE, "").strip()
    if not value:
        return None
    device = as_device(value, name=_FROM_ENVIRONMENT, caller="pick_device", check_available=True)
    if device.type == "meta":
        raise ValueError(
            f"pick_device: {DEVICE_VARIABLE}='meta' has shapes but no values; "
            f"set {DEVICE_VARIABLE}=cpu or a GPU, or unset it."
        )
    return device


def _what_this_machine_has() -> str:
    gpus = range(torch.cuda.device_count())
    names = [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in gpus]
    best = _best_device()
    if best.type not in ("cpu", "cuda"):
        names.append(str(best))
    names.append("cpu")
    return ", ".join(names)


def _bad_device(value: Any, problem: str, fix: str, *, name: str, caller: str) -> ValueError:
    """The error for a device: what was asked, why it cannot be had, what there is, what to do."""
    if name == _FROM_ENVIRONMENT:  # what to do is then to change the variable
        fix = f"Set {DEVICE_VARIABLE} to one of these, in lower case, or unset it for the best one."
    return ValueError(
        f"{caller}: {name} {value!r}: {problem}. This machine has {_what_this_machine_has()}. {fix}"
    )


def _is_device_name(text: str) -> bool:
    try:
        torch.device(text)
    except RuntimeError:
        return False
    return True


def _name_problem(text: str) -> str:
    """Why PyTorch refuses the device name ``text``, with the name it probably means."""
    lower = text.lower()
    if not text:
        return "an empty string names no device"
    if "gpu" in lower or "nvidia" in lower:
        return "NVIDIA GPUs are called 'cuda' in PyTorch"
    if lower != text and _is_device_name(lower):
        return f"device names are lower case: {lower!r}"
    if re.fullmatch(r"[a-z]+:-\d+", lower):
        return f"devices are numbered from 0: '{lower.split(':')[0]}:0'"
    numbered = re.fullmatch(r"([a-z]+)[\s_:-]*(\d+)", lower)  # cuda0, "cuda 0", "cuda: 0"
    if numbered and _is_device_name(f"{numbered[1]}:{numbered[2]}"):
        return f"write the number after a colon: '{numbered[1]}:{numbered[2]}'"
    return "not a device name PyTorch knows"


def _type_hint(value: Any, name: str, caller: str) -> str:
    """What to write instead of ``value``, which is neither a device name nor a torch.device."""
    if value is None:
        return f"Pass the device to use, e.g. {name}=pick_device()."
    if isinstance(value, bool):
        return "Write 'cpu' or 'cuda'."
    if isinstance(value, int):
        return f"Write 'cuda:{value}' for GPU number {value}, or 'cpu'."
    if isinstance(value, torch.Tensor | nn.Module | np.ndarray | list | tuple | Mapping):
        return f"That looks like data, not a device: did you swap two arguments of {caller}?"
    return "Write 'cpu', 'cuda', 'cuda:N' or 'mps', or pass a torch.device."


def _available(device: torch.device, value: Any, *, name: str, caller: str) -> torch.device:
    """``device`` with its index, after checking that this machine has it."""
    kind = device.type
    index = device.index
    if kind in ("cpu", "meta"):
        return torch.device(kind)
    if kind == "cuda" and not torch.cuda.is_available():
        if torch.version.cuda is None:
            problem = "this PyTorch was built without CUDA"
        else:
            problem = (
                "no CUDA GPU is visible (no NVIDIA driver, no GPU, or CUDA_VISIBLE_DEVICES "
                "hides it)"
            )
        fix = f"Call pick_device() with no argument to use the CPU. {_COLAB}"
        raise _bad_device(value, problem, fix, name=name, caller=caller)
    if kind == "mps" and not torch.backends.mps.is_available():
        problem = "Apple's MPS is not available here (it needs a Mac with Apple silicon)"
        fix = "Call pick_device() with no argument for the best device here."
        raise _bad_device(value, problem, fix, name=name, caller=caller)
    count = getattr(getattr(torch, kind, None), "device_count", lambda: 0)()
    if count == 0:
        problem = f"there is no {kind.upper()} device"
        fix = "Call pick_device() with no argument for the best device here."
        raise _bad_device(value, problem, fix, name=name, caller=caller)
    if index is None:  # "cuda" alone: the current GPU
        index = torch.cuda.current_device() if kind == "cuda" else 0
    if index >= count:
        last = f"{kind}:{count - 1}"
        problem = f"there is no {kind} number {index}, only {count} ({kind}:0 to {last})"
        fix = f"Use '{kind}:0' to '{last}', or '{kind}' for the current one."
        raise _bad_device(value, problem, fix, name=name, caller=caller)
    return torch.device(kind, index)


def as_device(
    value: Any, *, name: str = "device", caller: str = "as_device", check_available: bool = False
) -> torch.device:
    """``value`` (a ``torch.device`` or a name such as ``"cuda:1"``) as a ``torch.device``, which
    the machine must have if ``check_available``. An error names the argument ``name`` of the
    function ``caller``, what was given and what to give."""
    if not isinstance(value, str | torch.device):
        raise TypeError(
            f"{caller}: {name} must be a device, e.g. pick_device(), not {type(value).__name__} "
            f"{_shown(value)}. {_type_hint(value, name, caller)}"
        )
    if isinstance(value, torch.device):
        device = value
    else:
        text = value.strip()
        try:
            if not text:
                raise RuntimeError("empty")
            device = torch.device(text)
        except RuntimeError:
            problem = _name_problem(text)
            fix = "Write 'cpu', 'cuda', 'cuda:N' or 'mps', or call pick_device() with no argument."
            raise _bad_device(value, problem, fix, name=name, caller=caller) from None
    if not check_available:
        return device
    return _available(device, value, name=name, caller=caller)


def _shown(value: Any) -> str:
    text = repr(value)
    if isinstance(value, torch.Tensor | np.ndarray):
        text = f"of shape {tuple(value.shape)}"
    if len(text) > 60:
        return text[:57] + "..."
    return text


def describe_devices() -> str:
    """What this machine offers PyTorch, in a few lines (every notebook prints it first)."""
    lines = [f"PyTorch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"]
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gib = p.total_memory / 2**30
        lines.append(f"  cuda:{i}  {p.name}, {gib:.1f} GiB, compute capability {p.major}.{p.minor}")
    best = pick_device()
    chosen = os.environ.get(DEVICE_VARIABLE, "").strip()
    if chosen:
        lines.append(f"{DEVICE_VARIABLE}={chosen!r}: the notebooks use {best}")
    elif best.type == "cpu":
        lines.append(f"No GPU, only the CPU. {_COLAB}")
    elif best.type != "cuda":
        lines.append(f"Accelerator: {best}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={visible!r}")
    threads = torch.get_num_threads()
    threads_used = f"{threads} thread" if threads == 1 else f"{threads} threads"
    lines.append(f"CPU: {os.cpu_count()} logical cores, PyTorch uses {threads_used}")
    return "\n".join(lines)


# Values that hold no tensor: to_device returns them as they are.
_LEAVES = (str, bytes, numbers.Number, np.generic, torch.dtype, torch.device, os.PathLike, range)


def _move(obj: Any, device: torch.device) -> Any:
    """``obj`` with every tensor in it on ``device``; modules are moved in place."""
    if isinstance(obj, torch.Tensor | nn.Module):
        return obj.to(device)
    if obj is None or isinstance(obj, _LEAVES):
        return obj
    if isinstance(obj, np.ndarray):
        raise TypeError(
            "to_device cannot move a NumPy array: make it a tensor first, torch.from_numpy(array)."
        )
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*[_move(item, device) for item in obj])
    if isinstance(obj, list | tuple | set | frozenset):
        return type(obj)(_move(item, device) for item in obj)
    if isinstance(obj, dict):
        moved = copy.copy(obj)  # the same type, and a defaultdict's default
        for key, value in obj.items():
            moved[key] = _move(value, device)
        return moved
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [field.name for field in dataclasses.fields(obj) if field.init]
        return dataclasses.replace(obj, **{f: _move(getattr(obj, f), device) for f in fields})
    if callable(getattr(obj, "to", None)) and not isinstance(obj, type):
        return obj.to(device)  # a batch class with a .to() of its own
    raise TypeError(
        f"to_device cannot move a {type(obj).__name__}: it is no tensor, module, tuple, list, dict "
        "or dataclass and has no .to() method. Move its tensors yourself, or give it a .to(device)."
    )


def to_device(obj: Any, device: torch.device | str) -> Any:
    """``obj`` moved to ``device``: tensors, modules (in place), and tuples, lists, dicts, sets and
    dataclasses of them at any depth, or anything with a ``.to()``. Strings, numbers and ``None``
    pass through; a NumPy array raises a ``TypeError``."""
    device = as_device(device, caller="to_device", check_available=True)
    weights = isinstance(obj, nn.Module) and not all(p.is_meta for p in obj.parameters())
    if weights and device.type == "meta":
        raise ValueError(
            "to_device: on 'meta' a model keeps its shapes, not its weights; use pick_device()."
        )
    return _move(obj, device)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor.detach().cpu().numpy()`` on any device (bfloat16 as float32, which NumPy lacks).
    On the CPU the array shares the tensor's memory."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"to_numpy expects a torch.Tensor, got {type(tensor).__name__}; "
            "np.asarray(...) makes an array of a number or a list."
        )
    if tensor.is_meta:
        raise NotImplementedError("to_numpy cannot be called on meta tensors: they have no values.")
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.detach().cpu().numpy()
