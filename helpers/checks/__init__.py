"""Self-checks for the "Try it yourself" exercises, and ``expect`` for the errors a lesson shows.

Introduced in ``00_devices_and_tensors``. Each notebook's exercise checks live in their own module
(``helpers.checks.nb00`` for notebook 00, and so on), built on one harness,
``helpers.checks.harness``; the reference solutions are in ``solutions/`` at the repository root,
away from the notebooks. ``tests/test_checks_every_notebook.py`` runs every check against its
reference solution, a stub and answers that no check may crash on, and checks that the notebook
calls it; ``tests/test_checks_nbNN.py`` runs it against other right answers and typical mistakes.

A check prints ``correct: ...`` and returns ``True`` when the answer is right. When it is wrong,
the check raises ``CheckFailed``, whose message is one sentence that names the mistake and the
fix, followed, where it helps, by detail lines (the line of the learner's code that failed, the
error it raised). An exercise left as its stub (a function whose body does nothing) is not an
error: the check prints ``not answered yet: ...`` with the task and returns ``False``, so a
notebook runs top to bottom before the learner has tried anything.

In IPython and Jupyter a ``CheckFailed`` is shown as its message alone, without a traceback
(which would run through the check's own code): the first check that runs registers a handler
with IPython's ``set_custom_exc``. The cell still ends in an error, so ``pytest --nbval-lax``
(``make test``) reports a wrong answer as a failed cell, as it reports any exception.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import TracebackType

__all__ = ["CheckBug", "CheckFailed", "correct", "expect", "fail", "not_answered"]


def _sentence(mistake: str, fix: str) -> str:
    text = f"{mistake.strip()}: {fix.strip()}" if fix.strip() else mistake.strip()
    return text if text.endswith((".", "?", "!")) else text + "."


class CheckFailed(AssertionError):
    """An exercise answer is wrong: ``mistake`` says what is wrong, ``fix`` what to do.

    The message is the sentence "Mistake: fix." followed by the ``details`` lines (where the
    learner's code failed, the error it raised); ``sentence`` is the first line alone.
    """

    def __init__(self, mistake: str, fix: str = "", details: Sequence[str] = ()) -> None:
        self.mistake, self.fix = mistake, fix
        self.details = tuple(line for line in details if line)
        self.sentence = _sentence(mistake, fix)
        super().__init__("\n".join((self.sentence, *self.details)))


class CheckBug(CheckFailed):
    """The check itself failed: a bug in the course, not in the learner's answer.

    The exercise decorator of ``helpers.checks.harness`` turns any exception raised by a
    check's own code into this, so a learner sees a sentence, not a traceback; the tests fail on
    it, since every answer must get a verdict.
    """


def fail(mistake: str, fix: str, details: Sequence[str] = ()) -> None:
    """Raise ``CheckFailed``: ``mistake`` (what is wrong) and ``fix`` (what to do) make one sentence."""
    raise CheckFailed(mistake, fix, details)


def correct(what: str) -> bool:
    """Print the success line of a check and return ``True``."""
    print(f"correct: {what}")
    return True


def not_answered(what: str) -> bool:
    """Print what an unanswered exercise asks for and return ``False``."""
    print(f"not answered yet: {what}")
    return False


_RED, _BOLD, _DIM, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[2m", "\x1b[0m"


def _brief_traceback(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython's handler for ``CheckFailed``: the message, without the traceback through the check."""
    sentence = getattr(value, "sentence", str(value))
    details = getattr(value, "details", ())
    stb = [f"{_RED}{_BOLD}{etype.__name__}{_RESET}{_RED}: {sentence}{_RESET}"]
    stb += [f"{_DIM}    {line}{_RESET}" for line in details]
    shell._showtraceback(etype, value, stb)
    return stb


def show_failures_briefly() -> None:
    """In IPython or Jupyter, show every ``CheckFailed`` as its message alone (idempotent).

    Does nothing outside IPython, or when the notebook has its own handler for custom
    exceptions (then the usual traceback is shown, with the message at its end).
    """
    import sys

    if "IPython" not in sys.modules:
        return
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except Exception:  # an IPython too old or half-imported: keep the usual traceback
        return
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    current = tuple(getattr(shell, "custom_exceptions", ()) or ())
    if current == (CheckFailed,):
        return
    if current:  # someone else's handler: leave it alone
        return
    shell.set_custom_exc((CheckFailed,), _brief_traceback)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _shown(message: str, max_lines: int) -> str:
    """An error message as ``expect`` prints it: no colours, no blank lines, at most ``max_lines``."""
    lines = [line.rstrip() for line in _ANSI.sub("", message).splitlines() if line.strip()]
    if len(lines) > max_lines:
        more = len(lines) - max_lines
        lines = (
            lines[:max_lines] + [f"... ({more} more line{'s' if more != 1 else ''})"]
            if max_lines > 1
            else lines[:1]
        )
    return "\n    ".join(line.strip() if index else line for index, line in enumerate(lines))


class expect:  # lower case: it reads like a keyword, `with expect(TypeError, "cpu"):`
    """Check that the ``with`` block raises ``error_type`` whose message contains one of ``fragments``.

    The error is caught, printed (after ``label``, when given: which mistake it is), and kept as
    ``.error``; the notebook goes on. The message is printed whole, up to ``MAX_LINES`` lines
    without terminal colours (its first line alone is often not enough: "you have two options,"),
    or only its first line with ``brief=True``. If
    the block raises nothing, or another type of error, or a message without any fragment, the
    ``with`` statement fails with an ``AssertionError`` (the other error is chained), so a lesson
    that shows an error also proves that it happens::

        with expect(TypeError, "Use Tensor.cpu()"):
            gpu_tensor.numpy()
    """

    MAX_LINES = 8

    def __init__(
        self, error_type: type[BaseException], *fragments: str, label: str | None = None, brief: bool = False
    ) -> None:
        if not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
            raise TypeError(f"expect() takes an exception class first, got {error_type!r}")
        self.error_type = error_type
        self.fragments = fragments
        self.label = label
        self.brief = brief
        self.error: BaseException | None = None

    def __enter__(self) -> expect:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        name = self.error_type.__name__
        if exc is None:
            raise AssertionError(f"expected {name}, but the block ran without an error")
        if not isinstance(exc, self.error_type):
            raise AssertionError(f"expected {name}, got {type(exc).__name__}: {exc}") from exc
        message = str(exc)
        if self.fragments and not any(fragment in message for fragment in self.fragments):
            raise AssertionError(f"{name} raised, but its message has none of {self.fragments}: {message}")
        self.error = exc
        text = _shown(message, 1 if self.brief else self.MAX_LINES)
        print(f"{self.label}: {name}: {text}" if self.label else f"{name}: {text}")
        return True  # swallow the expected error
