"""helpers.checks core: expect() and the CheckFailed contract."""

import pytest

from helpers.checks import CheckBug, CheckFailed, correct, expect, fail, not_answered


def test_expect_catches_the_error_and_prints_its_first_line(capsys):
    with expect(ValueError, "bad") as caught:
        raise ValueError("a bad value\nsecond line")
    assert isinstance(caught.error, ValueError)
    assert capsys.readouterr().out == "ValueError: a bad value\n"


def test_expect_labels_the_error_it_prints(capsys):
    with expect(RuntimeError, "device", label="2. two tensors on two devices"):
        raise RuntimeError("Expected all tensors to be on the same device\nmore")
    assert capsys.readouterr().out == (
        "2. two tensors on two devices: RuntimeError: Expected all tensors to be on the same device\n"
    )


def test_expect_fails_when_nothing_is_raised():
    with pytest.raises(AssertionError, match="ran without an error"), expect(ValueError):
        pass


def test_expect_fails_on_another_error_type():
    with pytest.raises(AssertionError, match="expected ValueError, got KeyError"), expect(ValueError):
        raise KeyError("x")


def test_expect_fails_when_the_message_lacks_every_fragment():
    with pytest.raises(AssertionError, match="none of"), expect(ValueError, "cuda", "device"):
        raise ValueError("something else")


def test_expect_refuses_a_non_exception():
    with pytest.raises(TypeError, match="exception class"):
        expect("ValueError")


def test_fail_and_correct(capsys):
    with pytest.raises(CheckFailed, match="still on cpu: call model.to") as caught:
        fail("the model's parameters are still on cpu", "call model.to(device)", ["in f, line 2: model"])
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
