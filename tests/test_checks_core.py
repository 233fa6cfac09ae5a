"""helpers.checks core: expect() and the CheckFailed contract."""

import pytest

from helpers.checks import CheckBug, CheckFailed, correct, expect, fail, not_answered


def test_expect_catches_the_error_and_prints_it_whole(capsys):
    """The first line alone is often not enough ("you have two options," and then the options)."""
    with expect(ValueError, "bad") as caught:
        raise ValueError("a bad value, you have two options:\n\n\x1b[1m(1) this\x1b[0m\n(2) that")
    assert isinstance(caught.error, ValueError)
    expected = "ValueError: a bad value, you have two options:\n    (1) this\n    (2) that\n"
    assert capsys.readouterr().out == expected


def test_expect_keeps_a_long_message_short_or_brief_on_request(capsys):
    with expect(ValueError):
        raise ValueError("\n".join(f"line {i}" for i in range(20)))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == expect.MAX_LINES + 1 and out[-1] == "    ... (12 more lines)"
    with expect(ValueError, brief=True):
        raise ValueError("first\nsecond")
    assert capsys.readouterr().out == "ValueError: first\n"


def test_expect_labels_the_error_it_prints(capsys):
    with expect(RuntimeError, "device", label="2. two tensors on two devices"):
        raise RuntimeError("Expected all tensors to be on the same device\nmore")
    assert capsys.readouterr().out == (
        "2. two tensors on two devices: RuntimeError: "
        "Expected all tensors to be on the same device\n"
        "    more\n"
    )


def test_expect_fails_when_nothing_is_raised():
    with pytest.raises(AssertionError, match="ran without an error"), expect(ValueError):
        pass


def test_expect_fails_on_another_error_type():
    with (
        pytest.raises(AssertionError, match="expected ValueError, got KeyError"),
        expect(ValueError),
    ):
        raise KeyError("x")


def test_expect_fails_when_the_message_lacks_every_fragment():
    with pytest.raises(AssertionError, match="none of"), expect(ValueError, "cuda", "device"):
        raise ValueError("something else")


def test_expect_refuses_a_non_exception():
    with pytest.raises(TypeError, match="exception class"):
        expect("ValueError")
    with pytest.raises(TypeError, match="'3'"):
        expect(ValueError, 3)


def test_fail_and_correct(capsys):
    with pytest.raises(CheckFailed, match="still on cpu: call model.to") as caught:
        fail(
            "the model's parameters are still on cpu",
            "call model.to(device)",
            ["in f, line 2: model"],
        )
    error = caught.value
    assert error.sentence == "the model's parameters are still on cpu: call model.to(device)."
    assert str(error) == error.sentence + "\nin f, line 2: model"
    assert (error.mistake, error.fix, error.details) == (
        "the model's parameters are still on cpu",
        "call model.to(device)",
        ("in f, line 2: model",),
    )
    assert issubclass(CheckFailed, AssertionError) and issubclass(CheckBug, CheckFailed)
    assert correct("the model is on the device") is True
    assert capsys.readouterr().out == "correct: the model is on the device\n"


def test_not_answered_prints_the_task_and_returns_false(capsys):
    assert not_answered("move the batch to the device") is False
    assert capsys.readouterr().out == "not answered yet: move the batch to the device\n"
