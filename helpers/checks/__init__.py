"""Self-checks for the "Try it yourself" exercises, and ``expect`` for the errors a lesson shows.

Introduced in ``00_devices_and_tensors``. Each notebook's exercise checks live in their own module
(``helpers.checks.nb00`` for notebook 00, and so on); the reference solutions are in
``solutions/`` at the repository root, away from the notebooks. ``tests/test_checks_every_notebook.py``
runs every check against its reference solution and a stub, and checks that the notebook calls
it; ``tests/test_checks_nbNN.py`` runs it against wrong answers.

A check prints ``correct: ...`` and returns ``True`` when the answer is right, and raises
``CheckFailed`` with a message that says exactly what is wrong and what to do when it is not. An
exercise left as its stub (the learner's function returns ``None``) is not an error: the check
prints ``not answered yet: ...`` and returns ``False``, so a notebook runs top to bottom before the
learner has tried anything.
"""

from __future__ import annotations

from types import TracebackType

__all__ = ["CheckFailed", "correct", "expect", "fail", "not_answered"]


class CheckFailed(AssertionError):
    """An exercise answer is wrong; the message says what is wrong and what to do."""


def fail(message: str) -> None:
    """Raise ``CheckFailed`` with the learner-facing ``message``."""
    raise CheckFailed(message)


def correct(what: str) -> bool:
    """Print the success line of a check and return ``True``."""
    print(f"correct: {what}")
    return True


def not_answered(what: str) -> bool:
    """Print what an unanswered exercise asks for and return ``False``."""
    print(f"not answered yet: {what}")
    return False


class expect:  # lower case: it reads like a keyword, `with expect(TypeError, "cpu"):`
    """Check that the ``with`` block raises ``error_type`` whose message contains one of ``fragments``.

    The error is caught, its first line printed (after ``label``, when given: which mistake it
    is), and kept as ``.error``; the notebook goes on. If
    the block raises nothing, or another type of error, or a message without any fragment, the
    ``with`` statement fails with an ``AssertionError`` (the other error is chained), so a lesson
    that shows an error also proves that it happens::

        with expect(TypeError, "Use Tensor.cpu()"):
            gpu_tensor.numpy()
    """

    def __init__(self, error_type: type[BaseException], *fragments: str, label: str | None = None) -> None:
        if not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
            raise TypeError(f"expect() takes an exception class first, got {error_type!r}")
        self.error_type = error_type
        self.fragments = fragments
        self.label = label
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
        first_line = message.splitlines()[0] if message else ""
        print(f"{self.label}: {name}: {first_line}" if self.label else f"{name}: {first_line}")
        return True  # swallow the expected error
