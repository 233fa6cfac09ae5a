"""The exercise checks (``helpers.checks.nb00`` for notebook 00, ...), and ``expect``.

A check prints ``correct: ...`` for a right answer and ``not answered yet: <task>`` for a stub.
For a wrong one it raises ``CheckFailed``: one sentence naming the mistake and the fix, shown in
Jupyter without a traceback, then detail lines. The checks are built on ``harness``; the
reference solutions are in ``solutions/``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from types import TracebackType

__all__ = ["CheckBug", "CheckFailed", "correct", "expect", "fail", "not_answered"]


def _sentence(mistake: str, fix: str) -> str:
    text = mistake.strip()
    if fix.strip():
        text = f"{text}: {fix.strip()}"
    if text.endswith((".", "?", "!")):
        return text
    return text + "."


# The learner reads this name in the notebook, "CheckFailed: ...", so it keeps its plain form.
class CheckFailed(AssertionError):  # noqa: N818
    """An answer is wrong: the message is "mistake: fix." (``sentence``), then ``details`` lines."""

    def __init__(self, mistake: str, fix: str = "", details: Sequence[str] = ()) -> None:
        self.mistake = mistake
        self.fix = fix
        self.details = tuple(line for line in details if line)
        self.sentence = _sentence(mistake, fix)
        super().__init__("\n".join((self.sentence, *self.details)))


class CheckBug(CheckFailed):
    """The check itself failed: a bug in the course, told as a sentence; the tests fail on it."""


def fail(mistake: str, fix: str, details: Sequence[str] = ()) -> None:
    """Raise ``CheckFailed``: ``mistake`` (what is wrong) and ``fix`` (what to do), one sentence."""
    raise CheckFailed(mistake, fix, details)


def correct(what: str) -> bool:
    """Print the success line of a check and return ``True``."""
    print(f"correct: {what}")
    return True


def not_answered(what: str) -> bool:
    """Print what an unanswered exercise asks for and return ``False``."""
    print(f"not answered yet: {what}")
    return False


_RED = "\x1b[31m"
_BOLD = "\x1b[1m"
_DIM = "\x1b[2m"
_RESET = "\x1b[0m"


def _brief_traceback(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython's handler for ``CheckFailed``: the message, without a traceback through the check."""
    stb = [f"{_RED}{_BOLD}{etype.__name__}{_RESET}{_RED}: {value.sentence}{_RESET}"]
    stb += [f"{_DIM}    {line}{_RESET}" for line in value.details]
    shell._showtraceback(etype, value, stb)
    return stb


def show_failures_briefly() -> None:
    """In IPython, show every ``CheckFailed`` as its message alone; leave another handler alone."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    if not getattr(shell, "custom_exceptions", ()):
        shell.set_custom_exc((CheckFailed,), _brief_traceback)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _shown(message: str, max_lines: int) -> str:
    """A message as ``expect`` prints it: no colours or blank lines, ``max_lines`` at most."""
    lines = [line.rstrip() for line in _ANSI.sub("", message).splitlines() if line.strip()]
    if len(lines) > max_lines:
        more = len(lines) - max_lines
        said = f"... ({more} more line)" if more == 1 else f"... ({more} more lines)"
        lines = lines[:max_lines]
        if max_lines > 1:
            lines.append(said)
    return "\n    ".join(line.strip() if index else line for index, line in enumerate(lines))


# Lower case: it reads like a keyword in a lesson, `with expect(TypeError, "cpu"):`.
class expect:  # noqa: N801
    """Check that the ``with`` block raises ``error_type`` with one of ``fragments`` in its message.

    The error is caught, printed (after ``label``, when given) up to ``MAX_LINES`` lines, or its
    first line with ``brief=True``, and kept as ``.error``; the notebook goes on. If the block
    raises nothing, another error, or a message without any fragment, ``AssertionError``: a lesson
    that shows an error also proves that it happens::

        with expect(TypeError, "Use Tensor.cpu()"):
            gpu_tensor.numpy()
    """

    MAX_LINES = 8

    def __init__(
        self,
        error_type: type[BaseException],
        *fragments: str,
        label: str | None = None,
        brief: bool = False,
    ) -> None:
        if not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
            raise TypeError(f"expect() takes an exception class first, got {error_type!r}")
        not_text = [fragment for fragment in fragments if not isinstance(fragment, str)]
        if not_text:
            raise TypeError(
                f"expect() takes fragments of the message as strings, got {not_text[0]!r}: "
                f"write it in quotes, {str(not_text[0])!r}."
            )
        self.error_type = error_type
        self.fragments = fragments
        self.label = label
        self.brief = brief
        self.error: BaseException | None = None

    def __enter__(self) -> expect:
        return self

    def __exit__(
        self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        name = self.error_type.__name__
        if exc is None:
            raise AssertionError(f"expected {name}, but the block ran without an error")
        if not isinstance(exc, self.error_type):
            raise AssertionError(f"expected {name}, got {type(exc).__name__}: {exc}") from exc
        message = str(exc)
        if self.fragments and not any(fragment in message for fragment in self.fragments):
            raise AssertionError(
                f"{name} raised, but its message has none of {self.fragments}: {message}"
            )
        self.error = exc
        text = _shown(message, 1 if self.brief else self.MAX_LINES)
        if self.label:
            print(f"{self.label}: {name}: {text}")
        else:
            print(f"{name}: {text}")
        return True  # swallow the expected error
