"""What every exercise check runs on: ``@exercise``, and the machines that run the learner's function.

A check runs the learner's function as a laptop without a GPU would and with a stand-in for one, so
a hard-coded ``"cuda"`` or a forgotten ``.cpu()`` is caught on any machine. ``Machine.cpu()`` gives it
the CPU and refuses any use of CUDA. ``Machine.stand_in()`` gives it PyTorch's ``meta`` device: mixing
it with CPU tensors fails as on a GPU, and reading a value (``.item()``, ``print``) raises
``StandInCannot``. ``Machine.without_gpu()`` and ``Machine.with_stand_in_gpu()`` serve the ``.cuda()``
exercises: ``torch.cuda.is_available()`` says no, or says yes and ``"cuda"`` means ``meta``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dis
import functools
import inspect
import itertools
import linecache
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from helpers.checks import CheckBug, CheckFailed, correct, fail, not_answered, show_failures_briefly


def short(text: object, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe(value: Any) -> str:
    """What ``value`` is, in a few words, for a message: "a list of 3 items", "the float 2.5"."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if inspect.ismethod(value) or isinstance(
        getattr(value, "__self__", None), torch.Tensor | nn.Module
    ):
        return f"the method {value.__name__} itself (without the () that call it)"
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"a{'n' * (dtype[0] in 'iu')} {dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array ({value.dtype}) of shape {value.shape}"
    if isinstance(value, nn.Module):
        return f"a {type(value).__name__} module"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if isinstance(value, str | int | float | np.number):
        kind = "string" if isinstance(value, str) else type(value).__name__
        return f"the {kind} {short(repr(value), 40)}"
    if isinstance(value, list | tuple | set | Mapping):
        return f"a {type(value).__name__} of {len(value)} item{'s' * (len(value) != 1)}"
    if callable(value):
        return f"the function {getattr(value, '__name__', type(value).__name__)}"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def where(device: torch.device) -> str:
    """How a message names ``device``: ``meta`` is said to stand in for a GPU."""
    return "meta (the check's stand-in for a GPU)" if device.type == "meta" else str(device)


# ---- stubs and the exercise decorator ---------------------------------------------------------

_QUIET = {
    "RESUME",
    "NOP",
    "CACHE",
    "EXTENDED_ARG",
    "RETURN_VALUE",
    "POP_TOP",
    "NOT_TAKEN",
    "RETURN_CONST",
}
_RAISE = {"LOAD_GLOBAL", "LOAD_NAME", "PUSH_NULL", "PRECALL", "CALL", "RAISE_VARARGS", "LOAD_CONST"}


def is_stub(function: Any) -> bool:
    """Whether ``function`` does nothing: ``...``, ``pass``, a docstring, ``raise NotImplementedError``."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType) or code.co_flags & (
        inspect.CO_GENERATOR | inspect.CO_COROUTINE
    ):
        return False
    allowed = (
        _QUIET | _RAISE if code.co_names == ("NotImplementedError",) else _QUIET | {"LOAD_CONST"}
    )
    for op in dis.get_instructions(code):
        if op.opname not in allowed:
            return False
        constant = op.opname in {"LOAD_CONST", "RETURN_CONST"} and code.co_names != (
            "NotImplementedError",
        )
        if constant and op.argval is not None and op.argval is not Ellipsis:
            return False
    return True


_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "check_notes", default=None
)


def exercise(task: str) -> Callable[[Callable[[Callable], str]], Callable[[Callable], bool]]:
    """Make ``body(answer) -> success text`` an exercise check; ``task`` restates the exercise.

    The check prints ``not answered yet: <task>`` and returns ``False`` for a stub, prints
    ``correct: <text>`` and returns ``True`` when the body returns, and lets the body's
    ``CheckFailed`` through. Any other exception from the body is a bug of the check: ``CheckBug``.
    """

    def decorate(body: Callable[[Callable], str]) -> Callable[[Callable], bool]:
        name = body.__name__.removeprefix("check_")

        @functools.wraps(body)
        def check(answer: Any = None, /) -> bool:
            show_failures_briefly()
            if not callable(answer):
                fail(
                    f"check_{name} was given {describe(answer)}, not your function",
                    f"pass the function itself, without calling it: check_{name}({name})",
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
                last = traceback.extract_tb(error.__traceback__)[-1]
                here = f"{Path(last.filename).name}, line {last.lineno}"
                raise CheckBug(
                    "The check itself failed, which is a bug in the course and not in your answer",
                    "please report it, with the line below",
                    (f"in {here}: {type(error).__name__}: {short(error, 160)}",),
                ) from error
            finally:
                _NOTES.reset(token)
            if notes:
                text += " (" + "; ".join(dict.fromkeys(notes)) + ")"
            return correct(text)

        check.task = task  # type: ignore[attr-defined]
        return check

    return decorate


# ---- errors from the learner's code -----------------------------------------------------------


class StandInCannot(Exception):
    """The stand-in cannot go on: the code read a value from ``meta``, which has none."""


class LearnerError(CheckFailed):
    """An exception from the learner's code, told as a sentence; ``error`` is the exception itself."""

    def __init__(
        self, mistake: str, fix: str, details: tuple[str, ...], error: BaseException
    ) -> None:
        super().__init__(mistake, fix, details)
        self.error = error

    def instead(self, mistake: str, fix: str) -> CheckFailed:
        """The same failure told in the check's own words (the detail lines are kept)."""
        return CheckFailed(mistake, fix, self.details)


class Forbidden(RuntimeError):
    """Raised inside the learner's code when it calls what the task forbids (``Machine.forbidden``)."""


class CudaRefused(RuntimeError):
    """Raised inside the learner's code when it uses CUDA on a machine that refuses it."""


def _learner_line(tb: types.TracebackType | None, filename: str) -> str:
    """The innermost line of the learner's file (``filename``) in a traceback, for a message."""
    found = ""
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            function = "a lambda" if frame.f_code.co_name == "<lambda>" else frame.f_code.co_name
            text = linecache.getline(filename, lineno).strip()
            found = f"in {function}, line {lineno}: {short(text, 100)}"
    return found


# (words in the error, what it means, what to do): the first that matches explains the error.
_EXPLAINED = (
    (
        ("same device", "expected device", "is on cpu"),
        "mixed tensors on two devices",
        "move all to one device",
    ),
    (
        ("device type for generator",),
        "drew on the device with a CPU generator",
        "use a generator there",
    ),
    (
        ("to numpy", "Use Tensor.cpu()"),
        "called .numpy() on a tensor not on the CPU",
        "call .cpu() first",
    ),
    (("requires grad",), "called .numpy() on a tensor that requires grad", "call .detach() first"),
    (
        ("flags of leaf",),
        "switched off requires_grad of a computed tensor",
        "use .detach(), a copy",
    ),
    (
        ("CUDA", "cuda", "NVIDIA"),
        "used CUDA where there is no GPU",
        "use what the function is given instead",
    ),
)


def _explain(error: BaseException, name: str, filename: str = "") -> tuple[str, str]:
    message = str(error)
    if isinstance(error, Forbidden):
        return error.args
    if isinstance(error, CudaRefused):
        return (
            f"{name} used the GPU itself ({message})",
            "keep to the device it is given or its arguments' device, never 'cuda' written in",
        )
    for words, meaning, fix in _EXPLAINED:
        if any(word in message for word in words):
            return f"{name} {meaning}", fix
    at_the_call = not _learner_line(
        error.__traceback__, filename
    )  # raised before its first line ran
    if isinstance(error, TypeError) and "argument" in message and at_the_call:
        return (
            f"{name} does not take the arguments the check gives it",
            "keep the stub's first line as it is",
        )
    return f"{name} raised {type(error).__name__}", "read the error below and fix the function"


# ---- the machines -----------------------------------------------------------------------------


def _is_cuda(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith("cuda")) or getattr(
        value, "type", None
    ) == "cuda"


def _cuda_in(values: Any, depth: int = 0) -> str | None:
    """How ``values`` (arguments of a torch call) name CUDA, or ``None``."""
    for value in values:
        if isinstance(value, str | torch.device) and _is_cuda(value):
            return repr(str(value))
        if isinstance(value, torch.Tensor) and value.is_cuda:
            return "a tensor on the GPU"
        if isinstance(value, list | tuple) and depth < 2 and (found := _cuda_in(value, depth + 1)):
            return found
    return None


def _to_meta(value: Any) -> Any:
    if isinstance(value, str | torch.device) and _is_cuda(value):
        return "meta" if isinstance(value, str) else torch.device("meta")
    return value


_PRINTS = (
    torch.Tensor.__repr__,
    torch.Tensor.__format__,
    torch.Tensor.__str__,
)  # each reads the values


class _Guard(TorchFunctionMode):
    """Refuses CUDA (or sends it to ``meta``), and makes ``meta`` refuse what a GPU refuses."""

    def __init__(self, machine: Machine) -> None:
        super().__init__()
        self.machine = machine

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        m = self.machine
        if m.cuda == "meta":
            if func is torch.Tensor.cuda:
                return args[0].to("meta")
            args, kwargs = (
                tuple(_to_meta(a) for a in args),
                {k: _to_meta(v) for k, v in kwargs.items()},
            )
        elif m.cuda != "real":
            how = ".cuda()" if func is torch.Tensor.cuda else _cuda_in((*args, *kwargs.values()))
            if how:
                m.refused = m.refused or CudaRefused(how)
                raise CudaRefused(how)
        if m.device.type == "meta" and func in _PRINTS:
            raise NotImplementedError("printing a tensor reads its value")
        if func in m.forbidden:
            raise Forbidden(*m.forbidden[func])
        if m.copies_refused and m.device.type != "cpu":
            _refuse_copy(func, args, kwargs)
        generator, device = kwargs.get("generator"), kwargs.get("device")
        on_meta = (
            m.device.type == "meta"
            and isinstance(generator, torch.Generator)
            and device is not None
        )
        if on_meta and torch.device(device).type != generator.device.type:
            raise RuntimeError("Expected a 'cuda' device type for generator but found 'cpu'")
        return func(*args, **kwargs)


def _refuse_copy(func: Callable, args: tuple, kwargs: dict) -> None:
    """For checks that want values made on the device: refuse a copy from the CPU, or from data."""
    fix = "make them on the device directly, with device=device"
    if (
        func in (torch.tensor, torch.as_tensor, torch.from_numpy)
        and kwargs.get("device") is not None
    ):
        raise Forbidden(
            f"the values were made from data with torch.{func.__name__}, then copied", fix
        )
    moves = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_)
    if func in moves and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu":
        raise Forbidden(f"the values were made on cpu and then copied with .{func.__name__}()", fix)


class Machine:
    """Where a check runs the learner's function: ``device`` to give it, and how CUDA behaves (``cuda``)."""

    def __init__(
        self,
        device: torch.device,
        cuda: str = "refused",
        available: bool | None = None,
        copies_refused=False,
    ) -> None:
        self.device, self.cuda, self.available, self.copies_refused = (
            device,
            cuda,
            available,
            copies_refused,
        )
        self.refused: CudaRefused | None = (
            None  # kept: a refusal the learner's code caught still counts
        )
        self.forbidden: dict[
            Callable, tuple[str, str]
        ] = {}  # torch function: (mistake, fix) if called

    @classmethod
    def cpu(cls) -> Machine:
        return cls(torch.device("cpu"))

    @classmethod
    def stand_in(cls) -> Machine:
        return cls(torch.device("meta"))

    @classmethod
    def gpu(cls, device: torch.device) -> Machine:
        return cls(device, cuda="real")

    @classmethod
    def without_gpu(cls) -> Machine:
        return cls(torch.device("cpu"), available=False)

    @classmethod
    def with_stand_in_gpu(cls) -> Machine:
        return cls(torch.device("meta"), cuda="meta", available=True)

    def run(
        self, function: Callable, *args: Any, consume: int | None = None, reads=True, **kwargs: Any
    ) -> Any:
        """Call ``function(*args, **kwargs)`` here; its errors become ``LearnerError`` (or ``StandInCannot``).

        With ``consume=n`` an iterable result (a generator) is read into a list here, at most ``n``
        items: more is an error, since the data has fewer batches. With ``reads=False`` the task
        reads no values, so reading one on the stand-in is a mistake, not ``StandInCannot``.
        """
        name = getattr(function, "__name__", "your function").replace("<lambda>", "your function")
        if self.device.type == "meta" and _NOTES.get() is not None and real_gpu() is None:
            _NOTES.get().append(
                "no GPU here: meta stood in for one; the numbers were checked on the CPU"
            )
        answer = torch.cuda.is_available if self.available is None else lambda: self.available
        self.refused = None
        try:
            with mock.patch.object(torch.cuda, "is_available", answer), _Guard(self):
                result = function(*args, **kwargs)
                lazy = not isinstance(result, torch.Tensor | str | Mapping | nn.Module)
                if consume is not None and lazy and hasattr(result, "__iter__"):
                    result = list(itertools.islice(iter(result), consume + 1))
                    if len(result) > consume:
                        fail(
                            f"{name} gave more than {consume} items",
                            "stop after one pass over the data",
                        )
        except (CheckFailed, KeyboardInterrupt):
            raise
        except BaseException as error:  # SystemExit too: a learner's exit() must not end the kernel
            message = str(error)
            no_values = (
                isinstance(error, NotImplementedError) or "cannot be called on meta" in message
            )
            if self.device.type == "meta" and no_values and not isinstance(error, Forbidden):
                if not reads:
                    fail(
                        f"{name} reads values back, or copies them off the device",
                        "keep them there",
                    )
                raise StandInCannot(
                    "it ran up to reading a value back, which meta cannot give"
                ) from None
            code = getattr(
                getattr(function, "forward", function), "__code__", None
            )  # a module: its forward
            filename = code.co_filename if code else ""
            mistake, fix = _explain(error, name, filename)
            line, said = (
                _learner_line(error.__traceback__, filename),
                f"{type(error).__name__}: {short(message, 150)}",
            )
            details = (line,) if isinstance(error, Forbidden) else (line, said)
            raise LearnerError(mistake, fix, details, error) from None
        if self.refused:
            mistake, fix = _explain(self.refused, name)
            raise LearnerError(mistake, fix, ("(it caught the error and went on)",), self.refused)
        return result

    @contextlib.contextmanager
    def tried(self) -> Iterator[None]:
        """Run the block; where the stand-in cannot go on, skip this machine and say so when correct."""
        try:
            yield
        except StandInCannot as why:
            if (notes := _NOTES.get()) is not None:
                notes.append(f"on the stand-in, {why}")


def real_gpu() -> torch.device | None:
    """This machine's CUDA GPU, or ``None``."""
    return torch.device("cuda") if torch.cuda.is_available() else None


def device_machines() -> list[Machine]:
    """The machines for a function given a device: the CPU, the stand-in, and this machine's GPU if any."""
    gpu = real_gpu()
    return [Machine.cpu(), Machine.stand_in(), *([Machine.gpu(gpu)] if gpu else [])]
