"""What every exercise check runs on: ``@exercise``, and the machines that run the learner's code.

A check runs the learner's function as several machines would, so that code that works on one
kind of machine only is caught on any machine:

- ``Machine.cpu()`` gives it the CPU and refuses any use of a GPU;
- ``Machine.stand_in()`` gives it PyTorch's ``meta`` device, standing in for a GPU: mixing it with
  CPU tensors fails as on a GPU, and reading a value (``.item()``, ``print``) raises
  ``StandInError``;
- ``Machine.apple()`` gives it the CPU on a Mac whose GPU, ``mps``, the check stands in for with
  ``meta``: code that moves to ``mps`` by itself, away from the device it is given, is caught;
- ``Machine.no_gpu()``, ``Machine.stand_in_gpus(n)`` and ``Machine.apple_no_cuda()`` serve the
  exercises that ask ``torch.cuda`` themselves: it counts no GPU, or ``n`` of them, where
  ``"cuda"`` means ``meta`` and an index beyond ``n`` is refused, as CUDA refuses it;
- ``Machine.gpu(device)`` is this machine's own GPU, where there is one.

An exception from the learner's code is retold as one sentence, "mistake: fix", by ``retell``:
first by the rules (``Told``) a check passes to ``Machine.run``, then by the rules below.
"""

import contextlib
import contextvars
import functools
import itertools
import linecache
import re
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from helpers.checks import CheckBug, CheckFailed, correct, fail, not_answered, show_failures_briefly
from helpers.checks.stubs import is_stub

__all__ = [
    "LearnerError",
    "Machine",
    "StandInError",
    "Told",
    "cuda_machines",
    "describe",
    "device_machines",
    "exercise",
    "is_stub",
    "plural",
    "real_gpu",
    "retell",
    "short",
]


def short(text: object, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    return line[: limit - 3] + "..."


def plural(count: int, word: str) -> str:
    """``"1 item"``, ``"3 items"``."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}s"


def with_article(words: str) -> str:
    """``"an int64 tensor"``, ``"a Linear module"``."""
    if words[:1].lower() in "aeiou":
        return f"an {words}"
    return f"a {words}"


def describe(value: Any) -> str:
    """What ``value`` is, in a few words, for a message: "a list of 3 items", "the float 2.5"."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if inspect_method(value):
        return f"the method {value.__name__} itself (without the () that call it)"
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return with_article(f"{dtype} tensor of shape {tuple(value.shape)} on {value.device}")
    if isinstance(value, np.ndarray):
        return f"a NumPy array ({value.dtype}) of shape {value.shape}"
    if isinstance(value, nn.Module):
        return with_article(f"{type(value).__name__} module")
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if isinstance(value, str | int | float | np.number):
        kind = "string" if isinstance(value, str) else type(value).__name__
        return f"the {kind} {short(repr(value), 40)}"
    if isinstance(value, list | tuple | set | Mapping):
        return f"a {type(value).__name__} of {plural(len(value), 'item')}"
    if callable(value):
        return f"the function {getattr(value, '__name__', type(value).__name__)}"
    return with_article(type(value).__name__)


def inspect_method(value: Any) -> bool:
    """Whether ``value`` is a method of a tensor or a module, as ``t.cpu`` without ``()``."""
    owner = getattr(value, "__self__", None)
    return isinstance(value, types.MethodType) or isinstance(owner, torch.Tensor | nn.Module)


# ---- the exercise decorator -------------------------------------------------------------------

_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "check_notes", default=None
)


def note(text: str) -> None:
    """Add ``text`` to the success line of the check that runs now, in brackets."""
    notes = _NOTES.get()
    if notes is not None:
        notes.append(text)


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
            return correct(_judged(body, answer))

        check.task = task  # type: ignore[attr-defined]
        return check

    return decorate


def _judged(body: Callable[[Callable], str], answer: Callable) -> str:
    """``body(answer)`` with the notes the machines took; a crash of the check is a ``CheckBug``."""
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
    return text


# ---- errors from the learner's code, and how they are retold ----------------------------------


class StandInError(Exception):
    """The stand-in cannot go on: the code read a value from ``meta``, which has none."""


class LearnerError(CheckFailed):
    """An exception from the learner's code, told as a sentence; ``error`` is the exception."""

    def __init__(
        self, mistake: str, fix: str, details: tuple[str, ...], error: BaseException
    ) -> None:
        super().__init__(mistake, fix, details)
        self.error = error


class ForbiddenCallError(RuntimeError):
    """Raised in the learner's code at a call the task forbids; its args are (mistake, fix)."""


class GpuRefusedError(RuntimeError):
    """Raised in the learner's code when it uses a GPU that the machine does not have."""


class NoSuchGpuError(RuntimeError):
    """Raised in the learner's code when it names a GPU index the machine does not have."""


@dataclass(frozen=True)
class Told:
    """How to retell an exception whose ``"Type: message"`` matches ``pattern``, a regex.

    ``mistake`` follows the function's name; it may use the pattern's groups (``\\1``), or be a
    function that gives the words once the error has happened. ``fix`` says what to do.
    """

    pattern: str
    mistake: str | Callable[[], str]
    fix: str


_TOLD = (
    Told(
        r"same device|expected device|is on cpu",
        "mixed tensors on two devices",
        "move all to one device",
    ),
    Told(
        r"device type for generator",
        "drew on the device with a CPU generator",
        "use a generator there",
    ),
    Told(
        r"to numpy|Use Tensor\.cpu\(\)",
        "called .numpy() on a tensor not on the CPU",
        "call .cpu() first",
    ),
    Told(
        r"requires grad", "called .numpy() on a tensor that requires grad", "call .detach() first"
    ),
    Told(
        r"flags of leaf", "switched off requires_grad of a computed tensor", "use .detach(), a copy"
    ),
    Told(r"CUDA|cuda|NVIDIA", "used CUDA where there is no GPU", "use what the function is given"),
)


def learner_line(tb: types.TracebackType | None, filename: str) -> str:
    """The innermost line of the learner's file (``filename``) in a traceback, for a message."""
    found = ""
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            function = frame.f_code.co_name.replace("<lambda>", "a lambda")
            text = linecache.getline(filename, lineno).strip()
            found = f"in {function}, line {lineno}: {short(text, 100)}"
    return found


def retell(error: BaseException, name: str, machine: "Machine", told=()) -> tuple[str, str]:
    """``(mistake, fix)`` for an exception from the learner's function ``name`` on ``machine``."""
    said = f"{type(error).__name__}: {error}"
    for rule in told:
        found = re.search(rule.pattern, said)
        if found:
            return _told(rule, found, name)
    if isinstance(error, ForbiddenCallError):
        return error.args
    if isinstance(error, GpuRefusedError):
        return _refused(error, name, machine)
    if isinstance(error, NoSuchGpuError):
        gpus = plural(machine.gpus or 0, "GPU")
        return f"{name} used {error}, but the machine has {gpus}", "use 'cuda', the first GPU"
    if machine.gpus == 0 and re.search(r"CUDA|cuda|NVIDIA", said):
        return f"{name} used CUDA where there is no GPU", _ONLY_WHEN_AVAILABLE
    for rule in _TOLD:
        found = re.search(rule.pattern, said)
        if found:
            return _told(rule, found, name)
    at_the_call = len(traceback.extract_tb(error.__traceback__)) <= 1
    if isinstance(error, TypeError) and "argument" in said and at_the_call:
        return (
            f"{name} does not take the arguments the check gives it",
            "keep the stub's first line",
        )
    return f"{name} raised {type(error).__name__}", "read the error below and fix the function"


def _told(rule: Told, found: re.Match, name: str) -> tuple[str, str]:
    if callable(rule.mistake):
        return f"{name} {rule.mistake()}", rule.fix
    return f"{name} {found.expand(rule.mistake)}", rule.fix


def _refused(error: GpuRefusedError, name: str, machine: "Machine") -> tuple[str, str]:
    if "mps" in str(error):
        mistake = f"{name} used the Mac's GPU itself ({error})"
    else:
        mistake = f"{name} used the GPU itself ({error})"
    if machine.gpus == 0:
        return mistake, _ONLY_WHEN_AVAILABLE
    return (
        mistake,
        "keep to the device it is given or its arguments' device, never a GPU written in",
    )


_ONLY_WHEN_AVAILABLE = "do that only when torch.cuda.is_available()"


# ---- the machines -----------------------------------------------------------------------------

_GPU_KINDS = ("cuda", "mps")
_PRINTS = (torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.__str__)  # read values
_MOVES = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_)
_FROM_DATA = (torch.tensor, torch.as_tensor, torch.from_numpy)
_INDEXING = (torch.Tensor.__getitem__, torch.Tensor.index_select, torch.index_select)


def _named_gpus(func: Callable, args: tuple, kwargs: dict) -> list[tuple[str, int | None, str]]:
    """The GPUs a torch call names, as (kind, index, the words): ``"cuda:1"``, ``.cuda()``..."""
    named = []
    if func is torch.Tensor.cuda:
        index = args[1] if len(args) > 1 else kwargs.get("device")
        shown = ".cuda()" if index is None else f".cuda({index!r})"
        named.append(("cuda", _cuda_index(index), shown))
    for value in _flattened((*args, *kwargs.values())):
        if isinstance(value, str | torch.device) and str(value).split(":")[0] in _GPU_KINDS:
            device = torch.device(value)
            named.append((device.type, device.index, repr(str(value))))
        if isinstance(value, torch.Tensor) and value.device.type in _GPU_KINDS:
            named.append((value.device.type, value.device.index, "a tensor on the GPU"))
    return named


def _cuda_index(device: Any) -> int | None:
    """The index of ``device`` as ``.cuda(device)`` reads it: 1, "cuda:1", torch.device(...)."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    return torch.device(device).index


def _flattened(values: tuple, depth: int = 0) -> Iterator[Any]:
    for value in values:
        if isinstance(value, list | tuple) and depth < 2:
            yield from _flattened(value, depth + 1)
        else:
            yield value


class _Guard(TorchFunctionMode):
    """Sends the machine's stand-in GPUs to ``meta``, refuses the others, and polices the rest."""

    def __init__(self, machine: "Machine") -> None:
        super().__init__()
        self.machine = machine

    def __torch_function__(self, func, classes, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device:  # naming a device uses no device
            return func(*args, **kwargs)
        named = _named_gpus(func, args, kwargs)
        for kind, index, shown in named:
            self.machine.allow(kind, index, shown)
        if named and func is torch.Tensor.cuda and self.machine.cuda == "stand-in":
            return args[0].to("meta")
        if named:
            args = tuple(self.machine.stand_in_for(a) for a in args)
            kwargs = {k: self.machine.stand_in_for(v) for k, v in kwargs.items()}
        self.machine.police(func, args, kwargs)
        return func(*args, **kwargs)


class Machine:
    """Where a check runs the learner's function: ``device`` to give it, and the GPUs it has.

    ``cuda`` is ``"refused"`` (any use of CUDA fails), ``"stand-in"`` (``meta`` stands in for
    ``gpus`` CUDA GPUs) or ``"real"``. ``gpus`` is what ``torch.cuda`` counts, or None to leave
    ``torch.cuda`` as it is. ``apple`` stands in for a Mac's GPU, ``mps``, with ``meta``.
    ``copies_refused``: values must be made on the device, not copied there.
    ``cpu_indices_refused``: a tensor off the CPU must not be indexed with a CPU tensor (each use
    waits for a copy).
    ``forbidden``: torch functions the task forbids, each with the (mistake, fix) it gets.
    """

    def __init__(
        self,
        device: torch.device,
        *,
        cuda: str = "refused",
        gpus: int | None = None,
        apple: bool = False,
    ) -> None:
        self.device = device
        self.cuda = cuda
        self.gpus = gpus
        self.apple = apple
        self.copies_refused = False
        self.cpu_indices_refused = False
        self.forbidden: dict[Callable, tuple[str, str]] = {}
        self.gpu_indices: set[int] = set()  # the CUDA indices the learner's code named
        self.refused: BaseException | None = None  # a refusal the learner's code caught counts

    def __repr__(self) -> str:
        return f"Machine({self.device}, cuda={self.cuda}, gpus={self.gpus}, apple={self.apple})"

    @classmethod
    def cpu(cls) -> "Machine":
        return cls(torch.device("cpu"))

    @classmethod
    def stand_in(cls) -> "Machine":
        return cls(torch.device("meta"))

    @classmethod
    def apple_stand_in(cls) -> "Machine":
        return cls(torch.device("cpu"), gpus=0, apple=True)

    @classmethod
    def gpu(cls, device: torch.device) -> "Machine":
        return cls(device, cuda="real")

    @classmethod
    def no_gpu(cls) -> "Machine":
        return cls(torch.device("cpu"), gpus=0)

    @classmethod
    def stand_in_gpus(cls, count: int = 1) -> "Machine":
        return cls(torch.device("meta"), cuda="stand-in", gpus=count)

    def where(self, device: torch.device) -> str:
        """How a message names ``device``: ``meta`` is said to stand in for a GPU."""
        if device.type != "meta":
            return str(device)
        if self.apple:
            return "mps (meta, the check's stand-in for the Mac's GPU)"
        return "meta (the check's stand-in for a GPU)"

    # -- what the guard asks --

    def allow(self, kind: str, index: int | None, shown: str) -> None:
        """Refuse a GPU this machine does not have: ``kind`` "cuda" or "mps", named as ``shown``."""
        if kind == "mps" and not self.apple:
            self._refuse(GpuRefusedError(shown))
        if kind == "cuda" and self.cuda == "refused":
            self._refuse(GpuRefusedError(shown))
        if kind == "cuda" and self.cuda == "stand-in":
            self.gpu_indices.add(index or 0)
            if index is not None and index >= self.gpus:
                self._refuse(NoSuchGpuError(f"cuda:{index}"))

    def _refuse(self, error: BaseException) -> None:
        if self.refused is None:
            self.refused = error
        raise error

    def stand_in_for(self, value: Any) -> Any:
        """``value``, with the name of a GPU this machine stands in for replaced by ``meta``."""
        if not isinstance(value, str | torch.device):
            return value
        kind = str(value).split(":")[0]
        stood_in = (kind == "cuda" and self.cuda == "stand-in") or (kind == "mps" and self.apple)
        if not stood_in:
            return value
        if isinstance(value, str):
            return "meta"
        return torch.device("meta")

    def police(self, func: Callable, args: tuple, kwargs: dict) -> None:
        """Refuse what the task forbids, and what the stand-in cannot do."""
        first = args[0] if args else None
        if func in _PRINTS and isinstance(first, torch.Tensor) and first.is_meta:
            raise NotImplementedError("printing a tensor reads its value")
        if func in self.forbidden:
            raise ForbiddenCallError(*self.forbidden[func])
        if self.copies_refused and self.device.type != "cpu":
            _refuse_copy(func, args, kwargs)
        if self.cpu_indices_refused and func in _INDEXING:
            _refuse_cpu_indices(func, args, kwargs)
        _refuse_cpu_generator(self.device, kwargs)

    # -- running the learner's function --

    def run(
        self,
        function: Callable,
        *args: Any,
        consume: int | None = None,
        reads: bool = True,
        told: tuple[Told, ...] = (),
        **kwargs: Any,
    ) -> Any:
        """Call ``function(*args, **kwargs)`` here; its errors become ``LearnerError``.

        With ``consume=n`` an iterable result (a generator) is read into a list here, at most
        ``n`` items: more is an error, since the data has fewer batches. With ``reads=False`` the
        task reads no values, so reading one on the stand-in is a mistake, not ``StandInError``.
        ``told`` retells the function's exceptions before the general rules.
        """
        name = getattr(function, "__name__", "your function").replace("<lambda>", "your function")
        if self.device.type == "meta" and real_gpu() is None:
            note("no GPU here: meta stood in for one; the numbers were checked on the CPU")
        self.refused = None
        self.gpu_indices = set()
        try:
            with self.patched(), _Guard(self), warnings.catch_warnings():
                # the stand-in's own warning: loading values into meta tensors keeps none of them
                warnings.filterwarnings("ignore", ".*copying from a non-meta parameter")
                result = function(*args, **kwargs)
                result = _consumed(result, consume, name)
        except (CheckFailed, KeyboardInterrupt):
            raise
        except BaseException as error:  # SystemExit too: a learner's exit() must not end the kernel
            raise self._retold(error, function, name, reads, told) from None
        if self.refused is not None:
            mistake, fix = retell(self.refused, name, self, told)
            details = ("(it caught the error and went on)",)
            raise LearnerError(mistake, fix, details, self.refused)
        return result

    def _retold(self, error, function, name, reads, told) -> BaseException:
        """What to raise for ``error`` from the learner's ``function``."""
        message = str(error)
        said = f"{type(error).__name__}: {message}"
        ours = isinstance(error, ForbiddenCallError | GpuRefusedError | NoSuchGpuError)
        ours = ours or any(re.search(rule.pattern, said) for rule in told)  # the check knows it
        no_values = isinstance(error, NotImplementedError) or "cannot be called on meta" in message
        stood_in = self.device.type == "meta" or self.apple  # a Mac's mps is meta too
        if no_values and stood_in and not ours:
            if not reads:
                mistake = f"{name} reads values back, or copies them off the device"
                return CheckFailed(mistake, "keep them there")
            return StandInError("it ran up to reading a value back, which meta cannot give")
        if self.cuda == "stand-in" and not ours and re.search(r"CUDA|cuda|NVIDIA", message):
            return StandInError(f"it asked the GPU itself ({short(message, 80)})")
        code = getattr(getattr(function, "forward", function), "__code__", None)
        filename = code.co_filename if code else ""
        mistake, fix = retell(error, name, self, told)
        line = learner_line(error.__traceback__, filename)
        if isinstance(error, ForbiddenCallError):
            return LearnerError(mistake, fix, (line,), error)
        said = f"{type(error).__name__}: {short(message, 150)}"
        return LearnerError(mistake, fix, (line, said), error)

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        """``torch.cuda``, ``torch.accelerator`` and ``torch.backends.mps``, as on this machine."""
        with contextlib.ExitStack() as stack:
            for owner, attribute, value in self._answers():
                stack.enter_context(mock.patch.object(owner, attribute, value))
            yield

    def _answers(self) -> list[tuple[Any, str, Callable]]:
        if self.gpus is None:
            return []
        accelerator = self._accelerator()
        return [
            (torch.cuda, "is_available", lambda: self.gpus > 0),
            (torch.cuda, "device_count", lambda: self.gpus),
            (torch.cuda, "current_device", self._current_gpu),
            (torch.cuda, "get_device_name", lambda device=None: "the check's stand-in GPU"),
            (torch.cuda, "get_device_properties", self._properties),
            (torch.backends.mps, "is_available", lambda: self.apple),
            (torch.accelerator, "is_available", lambda: accelerator is not None),
            (torch.accelerator, "device_count", lambda: self.gpus or int(self.apple)),
            (torch.accelerator, "current_accelerator", lambda *a: _device_or_none(accelerator)),
        ]

    def _accelerator(self) -> str | None:
        """What ``torch.accelerator`` says this machine has: CUDA first, then Apple's GPU."""
        if self.gpus:
            return "cuda"
        if self.apple:
            return "mps"
        return None

    def _current_gpu(self) -> int:
        if not self.gpus:
            self._refuse(GpuRefusedError("torch.cuda.current_device()"))
        return 0

    def _properties(self, device: Any = None) -> types.SimpleNamespace:
        if isinstance(device, int):
            index = device
        elif isinstance(device, str | torch.device):
            index = torch.device(device).index or 0
        else:
            index = 0
        if index >= self.gpus:  # asking about a GPU moves nothing there
            self._refuse(NoSuchGpuError(f"cuda:{index}"))
        return types.SimpleNamespace(
            name="the check's stand-in GPU", total_memory=80 * 2**30, multi_processor_count=132
        )

    @contextlib.contextmanager
    def tried(self) -> Iterator[None]:
        """Run the block; where the stand-in cannot go on, skip this machine and say so."""
        try:
            yield
        except StandInError as why:
            note(f"on the stand-in, {why}")


def _device_or_none(kind: str | None) -> torch.device | None:
    if kind is None:
        return None
    return torch.device(kind)


def _consumed(result: Any, consume: int | None, name: str) -> Any:
    """``result``, read into a list of at most ``consume`` items if it is lazy (a generator)."""
    lazy = not isinstance(result, torch.Tensor | str | Mapping | nn.Module)
    if consume is None or not lazy or not hasattr(result, "__iter__"):
        return result
    items = list(itertools.islice(iter(result), consume + 1))
    if len(items) > consume:
        fail(f"{name} gave more than {consume} items", "stop after one pass over the data")
    return items


def _refuse_copy(func: Callable, args: tuple, kwargs: dict) -> None:
    """For checks that want values made on the device: refuse a copy from the CPU, or from data."""
    fix = "make them on the device directly, with device=device"
    if func in _FROM_DATA and kwargs.get("device") is not None:
        mistake = f"the values were made from data with torch.{func.__name__}, then copied"
        raise ForbiddenCallError(mistake, fix)
    first = args[0] if args else None
    if func in _MOVES and isinstance(first, torch.Tensor) and first.device.type == "cpu":
        mistake = f"the values were made on cpu and then copied with .{func.__name__}()"
        raise ForbiddenCallError(mistake, fix)


def _refuse_cpu_indices(func: Callable, args: tuple, kwargs: dict) -> None:
    """Refuse ``x[index]`` or ``index_select`` of an ``x`` off the CPU with CPU indices."""
    tensor = args[0] if args else None
    if not isinstance(tensor, torch.Tensor) or tensor.device.type == "cpu":
        return
    index = args[-1] if func is not torch.Tensor.__getitem__ else args[1]
    index = kwargs.get("index", index)
    if isinstance(index, torch.Tensor) and index.device.type == "cpu":
        raise ForbiddenCallError(
            "a tensor on the device was indexed with CPU indices, which wait for a copy every time",
            "move the indices to the device once, before the loop",
        )


def _refuse_cpu_generator(device: torch.device, kwargs: dict) -> None:
    """On the stand-in, a CPU generator drawing on the device fails, as it does on a GPU."""
    generator = kwargs.get("generator")
    target = kwargs.get("device")
    if device.type != "meta" or not isinstance(generator, torch.Generator) or target is None:
        return
    if torch.device(target).type != generator.device.type:
        raise RuntimeError("Expected a 'cuda' device type for generator but found 'cpu'")


def real_gpu() -> torch.device | None:
    """This machine's CUDA GPU, or ``None``."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    return None


def device_machines() -> list[Machine]:
    """The machines for a function given a device: the CPU, the stand-in, a Mac, this GPU if any."""
    machines = [Machine.cpu(), Machine.stand_in(), Machine.apple_stand_in()]
    gpu = real_gpu()
    if gpu is not None:
        machines.append(Machine.gpu(gpu))
    return machines


def cuda_machines() -> list[Machine]:
    """The machines for a function that asks ``torch.cuda``: none, a stand-in GPU, a Mac, a GPU."""
    machines = [Machine.no_gpu(), Machine.stand_in_gpus(1), Machine.apple_stand_in()]
    gpu = real_gpu()
    if gpu is not None:
        machines.append(Machine.gpu(gpu))
    return machines
