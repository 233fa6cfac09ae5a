"""What the tests of the exercise checks share: run an answer, and judge the message of a refusal.

``right(check, answer)`` asserts that the check accepts the answer. ``wrong(check, answer,
fragment)`` asserts that it refuses it with a ``CheckFailed`` (never ``CheckBug``, never another
exception) whose message contains ``fragment`` and is a good message: one sentence, under 200
characters, that names the mistake and the fix. ``table_cases`` and ``judge`` run one table of
``(name, answer, fragment or None)`` rows per exercise.
"""

from __future__ import annotations

import pytest

from helpers.checks import CheckBug, CheckFailed

MAX_SENTENCE = 200


def assert_good_message(error: CheckFailed) -> None:
    """One sentence "mistake: fix." under 200 characters, and short detail lines."""
    assert not isinstance(error, CheckBug), f"the check crashed: {error}"
    sentence = error.sentence
    assert error.mistake.strip(), f"no mistake named: {sentence!r}"
    assert error.fix.strip(), f"no fix named: {sentence!r}"
    assert "\n" not in sentence, f"more than one line: {sentence!r}"
    assert len(sentence) <= MAX_SENTENCE, f"{len(sentence)} characters: {sentence!r}"
    assert sentence.endswith((".", "?", "!")), f"not a sentence: {sentence!r}"
    assert "Traceback" not in str(error)
    for line in error.details:
        assert len(line) <= 220, f"a detail line of {len(line)} characters: {line!r}"


def right(check, answer, capsys=None) -> None:
    try:
        verdict = check(answer)
    except CheckFailed as error:
        pytest.fail(f"a right answer was refused: {error}")
    assert verdict is True
    if capsys is not None:
        assert capsys.readouterr().out.startswith("correct: ")


def wrong(check, answer, fragment: str) -> CheckFailed:
    with pytest.raises(CheckFailed) as caught:
        check(answer)
    error = caught.value
    assert_good_message(error)
    assert fragment in str(error), f"{fragment!r} is not in: {error}"
    return error


def table_cases(tables: dict) -> list:
    """``{check: [(name, answer, fragment or None), ...]}`` as pytest parameters (check, answer,
    fragment)."""
    return [
        pytest.param(check, answer, fragment, id=f"{check.__name__.removeprefix('check_')}: {name}")
        for check, rows in tables.items()
        for name, answer, fragment in rows
    ]


def judge(check, answer, fragment, capsys) -> None:
    """A right answer (``fragment`` None) must pass; a wrong one must be named with ``fragment``."""
    if fragment is None:
        right(check, answer, capsys)
    else:
        wrong(check, answer, fragment)
