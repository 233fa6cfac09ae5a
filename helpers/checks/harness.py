"""The harness every exercise check runs on (introduced with the exercises of ``00_devices_and_tensors``).

A check is a function decorated with ``@exercise(task)``. The decorator shows a wrong answer as
a sentence in Jupyter (``helpers.checks.show_failures_briefly``), answers a stub (a function whose
body does nothing) with "not answered yet" and the task, and turns an exception in the check's
own code into ``CheckBug``, so that no answer can make a check raise anything but ``CheckFailed``.

The learner's code runs only through ``Machine.run``, on one of these machines:

``Machine.cpu()``
    The function is given the CPU. PyTorch says that a GPU exists (``torch.cuda.is_available()``
    is ``True``, ``pick_device()`` gives ``cuda:0``), but any use of it (a move or a factory to
    ``"cuda"``, ``torch.cuda.synchronize()``, ...) is refused: a hard-coded ``"cuda"`` or a
    device chosen inside the function is caught on every machine, with or without a GPU.
``Machine.stand_in()``
    The same, but the function is given PyTorch's ``meta`` device, which stands in for a GPU:
    like a GPU it is not the CPU, and tensors on it have shapes and dtypes but no values. The
    harness makes it behave as CUDA does where ``meta`` alone would not: mixing it with CPU
    tensors fails (CPU scalars and CPU indices aside), a CPU generator cannot draw on it, and
    ``.numpy()`` refuses it. Reading a value back (``.item()``, ``.tolist()``, ``.cpu()``,
    ``float()``, ``print``) gives a placeholder (1) and is recorded in ``machine.reads``: a check
    knows that the values of such a run mean nothing, and some checks (no sync per step) refuse
    the read itself.
``Machine.gpu()``
    This machine's own accelerator (``pick_device()``), when it has one: nothing is changed,
    calls are only recorded. Values are brought to the CPU by the check to be compared.
``Machine.without_gpu()`` and ``Machine.with_stand_in_gpu()``
    For the ``.cuda()`` exercises of ``01``: a machine on which ``torch.cuda`` reports no GPU and
    every use of CUDA fails as it does without a driver, and one on which it reports one GPU
    (``get_device_name``, ``get_device_properties``, ``synchronize``, ``Event``, ``memory_*``,
    random state, ``torch.accelerator``...) whose tensors live on ``meta``.

Any exception from the learner's code becomes a ``CheckFailed`` (``LearnerError``) whose sentence
names the exception and its likely cause, with the learner's line below it. What the stand-in
cannot do (an operator ``meta`` lacks, values that depend on a placeholder) is not blamed on the
learner: ``Machine.tried()`` skips that machine, and the success line says what was not tried.
"""

from __future__ import annotations

import contextlib
import contextvars
import dis
import functools
import inspect
import itertools
import linecache
import os
import re
import sys
import sysconfig
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from helpers.checks import CheckBug, CheckFailed, correct, fail, not_answered, show_failures_briefly
from helpers.devices import pick_device

__all__ = [
    "LearnerError",
    "Machine",
    "a_gpu",
    "StandInCannot",
    "describe",
    "device_machines",
    "exercise",
    "full_float32",
    "is_stub",
    "short",
    "where",
]

STAND_IN_GPU_NAME = "Stand-in GPU (the check's meta device)"
_NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver (the check is playing a machine without a GPU)"
)
_MIXED = "Expected all tensors to be on the same device, but found at least two devices, {} and {}!"
_MAX_READS = 100_000


# ---- describing values and places -------------------------------------------------------------


def short(text: object, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    one_line = " ".join(str(text).split()).rstrip(":")
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _is_bound_method(value: Any) -> bool:
    owner = getattr(value, "__self__", None)
    if inspect.ismethod(value):
        return True
    return (
        isinstance(value, types.BuiltinMethodType)
        and owner is not None
        and not isinstance(owner, types.ModuleType | type)
    )


def describe(value: Any) -> str:
    """What ``value`` is, in a few words, for a message: "a list of 3 items", "the method Tudui.cuda"."""
    if value is None:
        return "None"
    if _is_bound_method(value):
        method = f"{type(value.__self__).__name__}.{value.__name__}"
        return f"the method {method} itself (without the () that call it)"
    if isinstance(value, bool):
        return f"the bool {value}"
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"a {dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array ({value.dtype}) of shape {value.shape}"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | functools.partial):
        return f"the function {getattr(value, '__name__', 'partial')}"
    if isinstance(value, nn.Module):
        return f"a {type(value).__name__} module"
    if isinstance(value, str):
        return f"the string {short(repr(value), 40)}"
    if isinstance(value, int | float | complex | np.number):
        return f"the {type(value).__name__} {short(repr(value), 30)}"
    if isinstance(value, list | tuple | set):
        n = len(value)
        return f"a {type(value).__name__} of {n} item{'s' if n != 1 else ''}"
    if isinstance(value, Mapping):
        n = len(value)
        return f"a {type(value).__name__} of {n} key{'s' if n != 1 else ''}"
    if isinstance(value, types.GeneratorType):
        return "a generator"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def a_gpu(device: torch.device) -> str:
    """How a message names the GPU ``device`` plays: "a GPU (here meta, the check's stand-in)"."""
    return "a GPU (here meta, the check's stand-in)" if device.type == "meta" else str(device)


def where(device: torch.device) -> str:
    """How a message names ``device``: ``meta`` is said to stand in for a GPU."""
    if device.type == "meta":
        return "meta (the check's stand-in for a GPU)"
    return str(device)


def _library_dirs() -> tuple[str, ...]:
    dirs = {Path(torch.__file__).parent, Path(np.__file__).parent, Path(__file__).resolve().parent.parent}
    paths = sysconfig.get_paths()
    dirs.update(Path(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths)
    dirs.update(Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


_LIBRARY_DIRS = _library_dirs()


@functools.lru_cache(maxsize=512)
def _is_learner_file(filename: str) -> bool:
    """Whether code in ``filename`` is the learner's (a notebook cell, a test, a solution)."""
    if not filename or filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):  # <ipython-input-...>, <string>
        return True
    return not (os.path.realpath(filename) + os.sep).startswith(_LIBRARY_DIRS)


@dataclass(frozen=True)
class Place:
    """A line of the learner's code."""

    function: str
    lineno: int
    text: str

    def __str__(self) -> str:
        function = "a lambda" if self.function == "<lambda>" else self.function
        return f"in {function}, line {self.lineno}: {short(self.text, 100)}"


def _place(code: types.CodeType, lineno: int | None) -> Place:
    lineno = lineno or code.co_firstlineno
    return Place(code.co_name, lineno, linecache.getline(code.co_filename, lineno).strip())


def _place_in_traceback(tb: types.TracebackType | None) -> Place | None:
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        if _is_learner_file(frame.f_code.co_filename):
            found = _place(frame.f_code, lineno)
    return found


def _place_in_stack() -> Place | None:
    """The innermost line of learner code on the stack, inside ``Machine.run``."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not _CALL_LEARNER_CODE:
        if _is_learner_file(frame.f_code.co_filename):
            return _place(frame.f_code, frame.f_lineno)
        frame = frame.f_back
    return None


# ---- stubs and the exercise decorator ---------------------------------------------------------

_QUIET_OPS = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "RETURN_VALUE", "POP_TOP", "NOT_TAKEN"}
_RAISE_OPS = {"LOAD_GLOBAL", "LOAD_NAME", "PUSH_NULL", "PRECALL", "CALL", "RAISE_VARARGS", "LOAD_CONST"}


def is_stub(function: Any) -> bool:
    """Whether ``function`` is an exercise's stub: its body does nothing (``...``, ``pass``, a docstring)."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType) or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE):
        return False
    try:
        instructions = list(dis.get_instructions(code))
    except Exception:  # an unusual code object: treat it as an answer
        return False
    if code.co_names == ("NotImplementedError",):  # `raise NotImplementedError`, a stub too
        return all(i.opname in _QUIET_OPS | _RAISE_OPS | {"RETURN_CONST"} for i in instructions)
    for instruction in instructions:
        if instruction.opname in _QUIET_OPS:
            continue
        if instruction.opname in {"LOAD_CONST", "RETURN_CONST"} and instruction.argval in (None, Ellipsis):
            continue
        return False
    return True


_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("check_notes", default=None)
_STAND_IN_NOTE = (
    "no GPU here: meta stood in for one; it has no values, so the numbers were checked on the CPU"
)


def exercise(task: str) -> Callable[[Callable[[Callable], str]], Callable[[Callable], bool]]:
    """Make ``check(answer) -> success text`` an exercise check; ``task`` restates the exercise.

    The check returned takes the learner's function, prints ``not answered yet: <task>`` and
    returns ``False`` for a stub, prints ``correct: <text>`` and returns ``True`` when the body
    returns, and lets the body's ``CheckFailed`` through; any other exception from the body is
    the check's own bug and becomes ``CheckBug``.
    """

    def decorate(body: Callable[[Callable], str]) -> Callable[[Callable], bool]:
        exercise_name = body.__name__.removeprefix("check_")

        @functools.wraps(body)
        def check(answer: Any = None, /) -> bool:
            show_failures_briefly()
            if answer is None:
                fail(
                    f"check_{exercise_name} was given None, not your function",
                    f"pass the function itself, check_{exercise_name}({exercise_name})",
                )
            if not callable(answer):
                fail(
                    f"check_{exercise_name} was given {describe(answer)}, not a function",
                    f"pass the function itself, without calling it: check_{exercise_name}({exercise_name})",
                )
            if is_stub(answer):
                return not_answered(task)
            notes: list[str] = []
            token = _NOTES.set(notes)
            try:
                text = body(answer)
            except CheckFailed:
                raise
            except Exception as error:
                raise _bug(error) from error
            finally:
                _NOTES.reset(token)
            if notes:
                text += " (" + "; ".join(dict.fromkeys(notes)) + ")"
            return correct(text)

        check.task = task  # type: ignore[attr-defined]
        return check

    return decorate


def _bug(error: BaseException) -> CheckBug:
    inside = f"{os.sep}checks{os.sep}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if inside in f.filename]
    here = f"{Path(frames[-1].filename).name}, line {frames[-1].lineno}" if frames else "the check"
    return CheckBug(
        "The check itself failed, which is a bug in the course and not in your answer",
        "please report it, with the lines below",
        (f"in {here}: {type(error).__name__}: {short(error, 160)}",),
    )


# ---- errors from the learner's code -----------------------------------------------------------


class StandInCannot(Exception):
    """The stand-in GPU cannot run this code (a ``meta`` limit, or values it does not have)."""


class LearnerError(CheckFailed):
    """An exception from the learner's code: ``kind`` is its likely cause, ``error`` the exception."""

    def __init__(
        self,
        mistake: str,
        fix: str,
        details: Sequence[str],
        *,
        kind: str,
        error: BaseException,
        place: Place | None,
    ) -> None:
        super().__init__(mistake, fix, details)
        self.kind, self.error, self.place = kind, error, place

    def instead(self, mistake: str, fix: str) -> CheckFailed:
        """The same failure told by the check in its own words (the detail lines are kept)."""
        return CheckFailed(mistake, fix, self.details)


class _CudaRefused(RuntimeError):
    """Raised inside the learner's code for a use of CUDA that the played machine refuses."""


@dataclass(frozen=True)
class CudaUse:
    how: str  # ".to('cuda')", "torch.cuda.synchronize()", ...
    place: Place | None


@dataclass(frozen=True)
class Read:
    how: str  # ".item()", ".cpu()", "print", ...
    place: Place | None


@dataclass(frozen=True)
class Move:
    method: str
    source: torch.device
    destination: torch.device
    tensor: torch.Tensor


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    if isinstance(error, KeyError) and error.args:
        text = repr(error.args[0])
    return text.splitlines()[0] if text else ""


_CUDA_MISSING = (
    "NVIDIA driver",
    "not compiled with CUDA",
    "CUDA driver",
    "no CUDA GPUs",
    "CUDA-capable device",
    "deserialize object on a CUDA device",
    "cuda runtime error",
    "Cannot access accelerator device when none is available",
)


def _explain(error: BaseException, name: str) -> tuple[str, str, str]:
    """(kind, mistake, fix) for an exception from the learner's function ``name``."""
    message = _first_line(error)
    kind = type(error).__name__
    if any(s in message for s in _CUDA_MISSING):
        return "cuda", f"{name} used CUDA on a machine without a GPU, where that fails", ""
    mixed = re.search(r"found at least two devices, (\S+) and (\S+?)!", message) or re.search(
        r"Tensor on device (\S+) is not on the expected device (\S+?)!", message
    )
    if mixed or "same device" in message or "indices should be either on" in message:
        first, second = mixed.groups() if mixed else ("one device", "another")
        return (
            "devices",
            f"{name} combined tensors on two devices, {first} and {second}",
            "move them to the same device first, with .to(device)",
        )
    if "device type for generator" in message:
        return (
            "generator",
            f"{name} drew random numbers on one device with a generator of another ({short(message, 70)})",
            "draw them where the generator is, device=generator.device, then move the result",
        )
    if "device type tensor to numpy" in message:
        return (
            "numpy-device",
            f"{name} called .numpy() on a tensor that is not on the CPU",
            "bring it to the CPU first, .cpu().numpy()",
        )
    if "numpy() on Tensor that requires grad" in message:
        return (
            "numpy-grad",
            f"{name} called .numpy() on a tensor that requires grad",
            "take it out of the graph first, .detach().numpy()",
        )
    if "requires_grad flags of leaf variables" in message:
        return (
            "requires-grad",
            f"{name} tried to switch off requires_grad of a tensor computed by a model",
            "use .detach(), which gives a copy out of the graph and leaves the tensor alone",
        )
    if "converted to Scalar" in message or "only one element tensors" in message:
        return (
            "item-many",
            f"{name} called .item() (or float()) on a tensor of several numbers",
            "use .tolist() for several numbers (.item() reads exactly one)",
        )
    if isinstance(error, AttributeError | TypeError) and re.search(
        r"'(method|builtin_function_or_method|method-wrapper)' object", message
    ):
        return (
            "method",
            f"{name} used a method where its result belongs (like model.cuda instead of model.cuda())",
            "add the () that call it",
        )
    has_no = re.search(r"'(list|tuple|dict|numpy\.ndarray)' object has no attribute '(\w+)'", message)
    if isinstance(error, AttributeError) and has_no:
        container, attribute = has_no.groups()
        if container == "numpy.ndarray":
            return (
                "numpy-array",
                f"{name} called .{attribute}() on a NumPy array, which has no such method",
                "make it a tensor first, torch.from_numpy(array)",
            )
        return (
            "container",
            f"{name} called .{attribute}() on a {container}, which has no such method",
            f"call it on each tensor in the {container}",
        )
    buffer = re.search(r"cannot assign '(\w+)' object to buffer '(\w+)'", message)
    if buffer:
        given, attribute = buffer.groups()
        return (
            "buffer",
            f"{name} gave a module's {attribute} a {given}, not a tensor",
            "make it a tensor first",
        )
    dtypes = re.search(r"expected scalar type (\w+) but found (\w+)", message)
    if dtypes or "same dtype" in message or "found dtype" in message:
        return (
            "dtype",
            f"{name} combined tensors of different dtypes ({short(message, 70)})",
            "convert them to the one that is expected, with .float() or .long()",
        )
    if "does not require grad and does not have a grad_fn" in message:
        return (
            "no-grad",
            f"{name} called backward() on a loss computed without gradients (under no_grad, or detached)",
            "compute the loss with gradients on, and detach only what you keep",
        )
    if isinstance(error, NameError):
        return (
            "name",
            f"{name} uses {short(message, 60)}",
            "define it inside the function, or use the argument that holds it",
        )
    if isinstance(error, RecursionError):
        return "recursion", f"{name} calls itself without end", "call the function you mean instead"
    if isinstance(error, SystemExit):
        return "exit", f"{name} called exit()", "return the answer instead"
    return "other", f"{name} raised {kind}: {short(message, 110)}", "fix the line shown below and check again"


_META_LIMITS = (
    "meta tensor",
    "meta tensors",
    "'Meta' backend",
    "register_meta",
    "Cannot copy out of meta",
    "data-dependent",
    "Meta",
)


# ---- the machines -------------------------------------------------------------------------------


class _NullContext:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _NullContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _StandInEvent:
    """``torch.cuda.Event`` on the stand-in GPU: it records nothing, and no time passes on it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


class _StandInStream(_NullContext):
    def synchronize(self) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def query(self) -> bool:
        return True


def _as_device(value: Any) -> torch.device | None:
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value.strip())
        except (RuntimeError, ValueError):
            return None
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.device("cuda", value)
    return None


def _is_cuda(value: Any) -> bool:
    device = _as_device(value)
    return device is not None and device.type == "cuda"


def _shown(value: Any) -> str:
    return repr(str(value)) if isinstance(value, torch.device) else repr(value)


def _tensors_in(values: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(values, torch.Tensor):
        yield values
    elif depth < 3 and isinstance(values, list | tuple):
        for value in values:
            yield from _tensors_in(value, depth + 1)
    elif depth < 3 and isinstance(values, dict):
        for value in values.values():
            yield from _tensors_in(value, depth + 1)


_SCALAR_READS = {
    "item": ".item()",
    "__bool__": "an if or bool() on a tensor",
    "__float__": "float()",
    "__int__": "int()",
    "__index__": "a tensor used as an index",
    "__complex__": "complex()",
}
_NOT_DEVICE_CHECKED = {
    "to",
    "cuda",
    "cpu",
    "copy_",
    "__getitem__",
    "__setitem__",
    "__repr__",
    "__format__",
    "numpy",
    "__array__",
    "tolist",
    "item",
    "__get__",
    "__set__",
    "__reduce_ex__",
    "__deepcopy__",
    "set_",
    "detach",
    "detach_",
    "requires_grad_",
    "backward",
    "_has_compatible_shallow_copy_type",
}
_IN_PLACE_DUNDERS = {
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
    "__ifloordiv__",
    "__imod__",
    "__ipow__",
    "__iand__",
    "__ior__",
    "__ixor__",
    "__imatmul__",
}


def _placeholder_scalar(tensor: torch.Tensor, name: str) -> Any:
    if name == "__bool__":
        return False
    if name in {"__int__", "__index__"}:
        return 1
    if name == "__float__":
        return 1.0
    if name == "__complex__":
        return complex(1.0)
    if tensor.dtype == torch.bool:
        return False
    if tensor.is_floating_point():
        return 1.0
    if tensor.is_complex():
        return complex(1.0)
    return 1


def _placeholder_tensor(tensor: torch.Tensor) -> torch.Tensor:
    copy = torch.ones(tensor.shape, dtype=tensor.dtype)
    if tensor.requires_grad and (tensor.is_floating_point() or tensor.is_complex()):
        copy = copy * torch.ones((), dtype=tensor.dtype, requires_grad=True)  # a non-leaf, as .cpu() gives
    return copy


def _import_dynamo_first() -> None:
    """Import ``torch._dynamo`` before ``torch.cuda`` is patched.

    Some ``meta`` kernels import it on first use, and on import it files every function of
    ``torch.cuda`` in a table it keeps: it must see PyTorch's own, not the played machine's.
    """
    with contextlib.suppress(Exception):
        import torch._dynamo  # noqa: F401


class _Recorder(TorchFunctionMode):
    """Sees every PyTorch call of the learner's code, and plays the machine's CUDA and stand-in rules."""

    def __init__(self, machine: Machine) -> None:
        super().__init__()
        self.machine = machine

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        m = self.machine
        name = getattr(func, "__name__", "")
        m.names.append(name)
        if name == "__getitem__" and len(args) > 1 and isinstance(args[1], list | range):
            m.list_indexes += 1
        if m.cuda != "real" and not name.startswith("_"):
            func, args, kwargs = self._cuda_destinations(name, func, args, kwargs)
            if name in {"pin_memory", "is_pinned"} and args and isinstance(args[0], torch.Tensor):
                return args[0] if name == "pin_memory" else False  # no page-locked memory without a GPU
        tensors = [*_tensors_in(args), *_tensors_in(kwargs)]
        if any(t.is_meta for t in tensors):
            read = self._read(name, args, kwargs)
            if read is not _NO_READ:
                return read
            self._device_rules(name, args, kwargs, tensors)
        elif "generator" in kwargs:
            self._device_rules(name, args, kwargs, tensors)
        result = func(*args, **kwargs)
        moved = isinstance(result, torch.Tensor) and args and isinstance(args[0], torch.Tensor)
        if name in {"to", "cuda", "cpu"} and moved and result.device != args[0].device:
            m.moves.append(Move(name, args[0].device, result.device, args[0]))
        return result

    # -- CUDA on a machine that refuses it, lacks it, or plays it with meta
    def _cuda_destinations(self, name: str, func: Callable, args: tuple, kwargs: dict) -> tuple:
        m = self.machine
        asked = None
        if name == "cuda":
            asked = kwargs.get("device", args[1] if len(args) > 1 else None)
            asked = "cuda" if asked is None else asked
            how = ".cuda()"
        elif name == "to":
            for value in (*args[1:], kwargs.get("device")):
                if _is_cuda(value):
                    asked = value
            how = f".to({_shown(asked)})"
        elif _is_cuda(kwargs.get("device")):
            asked = kwargs["device"]
            how = f"{name}(..., device={_shown(asked)})"
        if asked is None:
            return func, args, kwargs
        if m.cuda != "meta":
            m.use_cuda(how)
        meta = torch.device("meta")
        if name == "cuda":
            kept = {k: v for k, v in kwargs.items() if k == "non_blocking"}
            return torch.Tensor.to, (args[0], meta), kept
        if name == "to":
            args = tuple(meta if i > 0 and _is_cuda(a) else a for i, a in enumerate(args))
        if _is_cuda(kwargs.get("device")):
            kwargs = {**kwargs, "device": meta}
        return func, args, kwargs

    # -- reading values back from the stand-in
    def _read(self, name: str, args: tuple, kwargs: dict) -> Any:
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if source is None or not source.is_meta:
            from_meta = len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].is_meta
            if name == "copy_" and from_meta and source is not None:
                self.machine.read(".copy_()")
                return source
            return _NO_READ
        if name in _SCALAR_READS:
            self.machine.read(_SCALAR_READS[name])
            return _placeholder_scalar(source, name)
        if name == "tolist":
            self.machine.read(".tolist()")
            return _placeholder_tensor(source).detach().tolist()
        if name == "__format__":
            if source.dim() == 0:
                self.machine.read("a format string")
                spec = args[1] if len(args) > 1 else ""
                return format(_placeholder_scalar(source, "item"), spec)
            return _NO_READ
        if name == "__repr__":
            self.machine.read("print or repr")
            return _NO_READ
        if name == "numpy" and (kwargs.get("force") or (len(args) > 1 and args[1])):
            self.machine.read(".numpy(force=True)")
            return _placeholder_tensor(source).detach().numpy()
        destination = None
        if name == "cpu":
            destination = torch.device("cpu")
        elif name == "to":
            try:
                destination = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
            except Exception:
                return _NO_READ
        if destination is not None and destination.type != "meta":
            self.machine.read(f".{name}({'' if name == 'cpu' else repr(str(destination))})")
            copy = _placeholder_tensor(source)
            if name == "to":
                copy = copy.to(*args[1:], **kwargs)
            return copy
        return _NO_READ

    # -- what CUDA refuses and meta would let through
    def _device_rules(self, name: str, args: tuple, kwargs: dict, tensors: list[torch.Tensor]) -> None:
        generator = kwargs.get("generator")
        if isinstance(generator, torch.Generator):
            device = _as_device(kwargs.get("device"))
            if device is None and args and isinstance(args[0], torch.Tensor):
                device = args[0].device
            if device is not None and device.type == "meta" and generator.device.type != "meta":
                raise RuntimeError(
                    f"Expected a 'meta' device type for generator but found '{generator.device.type}' "
                    "(as on a GPU, where a CPU generator cannot draw)"
                )
        _index_rules(name, args)
        if name in _NOT_DEVICE_CHECKED or not tensors or all(t.is_meta for t in tensors):
            return
        if not any(t.is_meta for t in tensors) or (name.startswith("_") and not name.endswith("__")):
            return
        self_tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
        in_place = name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.startswith("_"))
        if in_place and self_tensor is not None and not self_tensor.is_meta:
            raise RuntimeError(_MIXED.format("meta", self_tensor.device))
        for t in tensors:
            if not t.is_meta and t.dim() > 0:
                raise RuntimeError(_MIXED.format("meta", t.device))


_NO_READ = object()


def _index_rules(name: str, args: tuple) -> None:
    """Indexing a CPU tensor with a stand-in index fails, as with a CUDA index; the other way works."""
    indexed = args[0] if name in {"__getitem__", "__setitem__"} and args else None
    on_cpu = isinstance(indexed, torch.Tensor) and not indexed.is_meta
    if on_cpu and any(t.is_meta for t in _tensors_in(args[1:])):
        raise RuntimeError(
            f"indices should be either on cpu or on the same device as the indexed tensor ({indexed.device})"
        )


class Machine:
    """One machine a check runs the learner's code on (see the module's docstring).

    ``device`` is what a function that takes a device is given; ``gpu`` is what plays the GPU
    (``meta``, the real one, or ``None``). After ``run``: ``names`` (every PyTorch function and
    method called), ``moves``, ``reads`` (values read back from the stand-in), ``cuda_uses`` and
    ``list_indexes`` (how often a tensor was indexed with a Python list).
    """

    def __init__(
        self, kind: str, device: torch.device, gpu: torch.device | None, cuda: str, label: str
    ) -> None:
        self.kind, self.device, self.gpu, self.cuda, self.label = kind, device, gpu, cuda, label
        self.names: list[str] = []
        self.moves: list[Move] = []
        self.reads: list[Read] = []
        self.cuda_uses: list[CudaUse] = []
        self.list_indexes = 0  # tensors indexed with a Python list of indices
        self.cuda_fix = "use the device it is given, so that the same code runs on every machine"

    def __repr__(self) -> str:
        return f"Machine({self.kind!r}, device={self.device})"

    @classmethod
    def cpu(cls) -> Machine:
        """Given the CPU; a GPU is said to exist, but using it is refused."""
        return cls("cpu", torch.device("cpu"), None, "refused", "the CPU")

    @classmethod
    def stand_in(cls) -> Machine:
        """Given ``meta``, standing in for a GPU; ``"cuda"`` itself is refused."""
        meta = torch.device("meta")
        return cls("stand-in", meta, meta, "refused", where(meta))

    @classmethod
    def gpu(cls, device: torch.device | None = None) -> Machine:
        """This machine's own accelerator, as it is."""
        device = device or pick_device()
        return cls("gpu", device, device, "real", str(device))

    @classmethod
    def as_is(cls) -> Machine:
        """This machine as it is, GPU or not, given its best device."""
        device = pick_device()
        return cls("as-is", device, device if device.type != "cpu" else None, "real", str(device))

    @classmethod
    def without_gpu(cls) -> Machine:
        """A machine without a GPU: ``torch.cuda`` says so, and any use of CUDA fails without a driver."""
        return cls("no-gpu", torch.device("cpu"), None, "absent", "a machine without a GPU")

    @classmethod
    def with_stand_in_gpu(cls) -> Machine:
        """A machine with one GPU, played by ``meta``: ``.cuda()`` and ``"cuda"`` lead there."""
        meta = torch.device("meta")
        return cls("stand-in-gpu", meta, meta, "meta", "a machine with a GPU (meta stands in for it)")

    @property
    def has_stand_in(self) -> bool:
        return self.device.type == "meta"

    # -- recording (called from the learner's code, through the recorder and torch.cuda)
    def use_cuda(self, how: str) -> None:
        self.cuda_uses.append(CudaUse(how, _place_in_stack()))
        if self.cuda == "absent":
            raise RuntimeError(_NO_DRIVER)
        raise _CudaRefused(f"{how}: this check does not let the code use the GPU itself")

    def read(self, how: str) -> None:
        self.reads.append(Read(how, _place_in_stack()))
        if len(self.reads) > _MAX_READS:
            raise StandInCannot("it reads values back over and over, which the stand-in has none of")

    # -- torch.cuda as this machine shows it
    def _cuda_module(self) -> dict[str, Any]:
        if self.cuda == "real":
            return {}

        def use(what: str, result: Any = None) -> Callable:
            def call(*args: Any, **kwargs: Any) -> Any:
                if self.cuda == "meta":
                    return result() if callable(result) else result
                self.use_cuda(f"torch.cuda.{what}()")
                return None

            return call

        def none(*args: Any, **kwargs: Any) -> None:
            return None

        def zero(*args: Any, **kwargs: Any) -> int:
            return 0

        if self.cuda == "absent":
            replaced = {
                "is_available": lambda: False,
                "device_count": lambda: 0,
                "is_initialized": lambda: False,
                "manual_seed": none,
                "manual_seed_all": none,
                "seed": none,
                "seed_all": none,
            }
            for what in (
                "current_device",
                "get_device_name",
                "get_device_capability",
                "get_device_properties",
                "set_device",
                "device",
                "synchronize",
                "Event",
                "Stream",
                "current_stream",
                "default_stream",
                "stream",
                "memory_allocated",
                "max_memory_allocated",
                "memory_reserved",
                "max_memory_reserved",
                "reset_peak_memory_stats",
                "mem_get_info",
                "empty_cache",
                "get_rng_state",
                "set_rng_state",
                "is_bf16_supported",
                "init",
            ):
                replaced[what] = use(what)
            return replaced
        gib = 16 * 2**30
        properties = types.SimpleNamespace(
            name=STAND_IN_GPU_NAME,
            total_memory=gib,
            major=8,
            minor=0,
            multi_processor_count=80,
            is_integrated=False,
            is_multi_gpu_board=False,
        )
        return {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "is_initialized": lambda: True,
            "init": none,
            "get_device_name": lambda device=None: STAND_IN_GPU_NAME,
            "get_device_capability": lambda device=None: (8, 0),
            "get_device_properties": lambda device=None: properties,
            "is_bf16_supported": lambda *a, **k: True,
            "set_device": none,
            "device": _NullContext,
            "memory_allocated": zero,
            "max_memory_allocated": zero,
            "memory_reserved": zero,
            "max_memory_reserved": zero,
            "reset_peak_memory_stats": none,
            "empty_cache": none,
            "mem_get_info": lambda device=None: (gib, gib),
            "memory_summary": lambda *a, **k: "",
            "manual_seed": none,
            "manual_seed_all": none,
            "seed": none,
            "seed_all": none,
            "initial_seed": zero,
            "get_rng_state": lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
            "set_rng_state": none,
            "get_rng_state_all": lambda: [torch.zeros(16, dtype=torch.uint8)],
            "set_rng_state_all": none,
            "synchronize": use("synchronize"),
            "Event": use("Event", _StandInEvent),
            "Stream": use("Stream", _StandInStream),
            "current_stream": use("current_stream", _StandInStream),
            "default_stream": use("default_stream", _StandInStream),
            "stream": use("stream", _NullContext),
        }

    def _accelerator_module(self) -> dict[str, Any]:
        if self.cuda == "real" or not hasattr(torch, "accelerator"):
            return {}
        present = self.cuda != "absent"

        def synchronize(*args: Any, **kwargs: Any) -> None:
            if self.cuda == "meta":
                return None
            self.use_cuda("torch.accelerator.synchronize()")
            return None

        return {
            "is_available": lambda: present,
            "current_accelerator": lambda check_available=False: torch.device("cuda") if present else None,
            "device_count": lambda: int(present),
            "current_device_index": lambda: 0,
            "current_device_idx": lambda: 0,
            "set_device_index": lambda device: None,
            "set_device_idx": lambda device: None,
            "synchronize": synchronize,
        }

    @contextlib.contextmanager
    def patches(self) -> Iterator[None]:
        """``torch.cuda`` and ``torch.accelerator`` as this machine shows them, while the block runs."""
        saved: list[tuple[Any, str, Any]] = []
        if self.cuda != "real":
            _import_dynamo_first()
        try:
            for module, replaced in (
                (torch.cuda, self._cuda_module()),
                (getattr(torch, "accelerator", None), self._accelerator_module()),
            ):
                for attribute, value in replaced.items():
                    if module is not None and hasattr(module, attribute):
                        saved.append((module, attribute, getattr(module, attribute)))
                        setattr(module, attribute, value)
            yield
        finally:
            for module, attribute, value in reversed(saved):
                setattr(module, attribute, value)

    # -- running the learner's code
    def run(self, function: Callable, *args: Any, consume: int | None = None, **kwargs: Any) -> Any:
        """Call the learner's ``function`` on this machine; its errors become ``LearnerError``.

        With ``consume=n`` an iterable result (a generator) is read into a list here, at most
        ``n`` items (more is an error: it never ends). Raises ``StandInCannot`` where the stand-in
        cannot run the code. A refused use of CUDA fails even if the code caught the error.
        """
        name = getattr(function, "__name__", None) or type(function).__name__
        name = "your function" if name == "<lambda>" else name
        reads_before = len(self.reads)
        notes = _NOTES.get()
        if self.has_stand_in and notes is not None and real_gpu() is None:
            notes.append(_STAND_IN_NOTE)
        try:
            with self.patches(), _Recorder(self):
                result = _call_learner(function, args, kwargs, consume, name)
        except CheckFailed:
            raise
        except StandInCannot:
            raise
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as error:  # SystemExit too: a learner's exit() must not end the kernel
            raise self._learner_error(error, name, read_before_error=len(self.reads) > reads_before) from None
        if self.cuda_uses and self.cuda == "refused":
            raise self._cuda_error(name)
        return result

    def _cuda_error(self, name: str, error: BaseException | None = None) -> LearnerError:
        use = self.cuda_uses[0] if self.cuda_uses else None
        how = use.how if use else "'cuda'"
        place = use.place if use else None
        if self.cuda == "absent":
            mistake = f"{name} used CUDA ({how}) on a machine without a GPU, where that fails"
        else:
            mistake = f"{name} used the GPU itself, {how}"
        details = [str(place) if place else ""]
        if self.kind == "stand-in":
            details.append("(the check gave it meta, which stands in for a GPU, and says that a GPU exists)")
        elif self.kind == "cpu":
            details.append("(the check plays a machine with a GPU, which this code must not choose itself)")
        return LearnerError(
            mistake,
            self.cuda_fix,
            details,
            kind="cuda",
            error=error or RuntimeError(how),
            place=place,
        )

    def _learner_error(self, error: BaseException, name: str, read_before_error: bool) -> Exception:
        place = _place_in_traceback(error.__traceback__)
        message = _first_line(error)
        if isinstance(error, _CudaRefused) or (self.cuda_uses and self.cuda != "meta"):
            return self._cuda_error(name, error)
        kind, mistake, fix = _explain(error, name)
        if place is None and isinstance(error, TypeError) and re.search(r"argument|takes \d", message):
            kind, mistake = (
                "signature",
                f"{name} does not take the arguments the check gives it ({short(message, 80)})",
            )
            fix = "keep the first line of the stub, its def and arguments, as it is"
        elif place is None and kind == "other":
            fix = "read the error below and fix the function"
        if self.has_stand_in and kind not in {"devices", "generator", "numpy-device", "numpy-grad"}:
            if kind == "cuda" and self.cuda == "meta":
                return StandInCannot(f"it uses a CUDA feature the stand-in lacks ({short(message, 60)})")
            if read_before_error:
                return StandInCannot("it went on with values read back from the stand-in, which has none")
            if any(s in message for s in _META_LIMITS) or isinstance(error, NotImplementedError):
                return StandInCannot(f"meta cannot run it ({short(message, 60)})")
        if kind == "cuda":
            self.cuda_uses.append(CudaUse("a CUDA call", place))
            return self._cuda_error(name, error)
        details = [str(place) if place else "", f"{type(error).__name__}: {short(message, 150)}"]
        if self.has_stand_in and kind == "devices":
            details.append(f"(the check gave it {self.label})")
        return LearnerError(mistake, fix, details, kind=kind, error=error, place=place)

    @contextlib.contextmanager
    def tried(self) -> Iterator[None]:
        """Run the block, skipping this machine where the stand-in cannot run the code (noted)."""
        try:
            yield
        except StandInCannot as why:
            notes = _NOTES.get()
            if notes is not None:
                notes.append(f"not tried on the stand-in GPU: {why}")


def _call_learner(function: Callable, args: tuple, kwargs: dict, consume: int | None, name: str) -> Any:
    result = function(*args, **kwargs)
    if consume is None:
        return result
    if isinstance(result, str | bytes | Mapping | torch.Tensor | np.ndarray | nn.Module):
        return result
    if not hasattr(result, "__iter__"):
        return result
    items = list(itertools.islice(iter(result), consume + 1))
    if len(items) > consume:
        fail(
            f"{name} gave more than {consume} items where far fewer were due",
            "stop at the end of one pass over the data",
        )
    return items


_CALL_LEARNER_CODE = _call_learner.__code__


def device_machines() -> list[Machine]:
    """The machines for a function given a device: the CPU, the stand-in GPU, and this machine's GPU."""
    machines = [Machine.cpu(), Machine.stand_in()]
    device = pick_device()
    if device.type != "cpu":
        machines.append(Machine.gpu(device))
    return machines


def real_gpu() -> torch.device | None:
    """This machine's accelerator, or ``None``."""
    device = pick_device()
    return device if device.type != "cpu" else None


@contextlib.contextmanager
def full_float32(device: torch.device) -> Iterator[None]:
    """On a CUDA GPU, TF32 off while the check trains, so that the weights compare with the CPU's."""
    saved = None
    if device.type == "cuda":
        with contextlib.suppress(Exception):  # a torch that refuses the legacy flags keeps its own
            saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        if saved is not None:
            with contextlib.suppress(Exception):
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
