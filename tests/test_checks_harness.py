"""helpers.checks.harness: the machines a check runs the learner's code on, and what they report.

They give the same verdicts on every machine: CUDA is refused whether or not a GPU is there, and
the stand-in is ``meta``.
"""

import pytest
import torch
from torch import nn

from helpers.checks import CheckBug, CheckFailed
from helpers.checks.harness import LearnerError, Machine, StandInCannot, describe, exercise, is_stub


def _doc(x):
    """What to do."""
    # your code here


def _raise(x):
    raise NotImplementedError("your code here")


def _forgot_return(x):
    x + 1


def _generator(x):
    yield x


@pytest.mark.parametrize(
    ("function", "stub"),
    [(_doc, True), (_raise, True), (lambda x: None, True), (lambda x: ..., True)]
    + [
        (_forgot_return, False),
        (_generator, False),
        (lambda x: x, False),
        (lambda x: 0, False),
        (len, False),
    ],
)
def test_a_stub_is_a_function_that_does_nothing(function, stub):
    assert is_stub(function) is stub


@pytest.mark.parametrize(
    ("value", "words"),
    [(None, "None"), ([1, 2], "a list of 2 items"), (torch.zeros(2, 3), "shape (2, 3) on cpu")]
    + [
        (nn.Linear(1, 1), "a Linear module"),
        (torch.zeros(1).cpu, "the method cpu itself"),
        (2.5, "float"),
    ],
)
def test_describe_names_a_value_in_a_few_words(value, words):
    assert words in describe(value)


def _check_that_crashes():
    @exercise("write f(x)")
    def check_f(f):
        return {}["missing"]

    return check_f


def test_the_decorator_answers_a_stub_a_non_function_and_its_own_crash(capsys):
    check = _check_that_crashes()
    assert check(_doc) is False and capsys.readouterr().out == "not answered yet: write f(x)\n"
    with pytest.raises(CheckFailed, match=r"check_f\(f\)"):
        check(None)
    with pytest.raises(CheckBug, match="KeyError"):
        check(lambda x: x)


def _run(machine, function, *args, **kwargs):
    try:
        return machine.run(function, *args, **kwargs)
    except LearnerError as error:
        return error


ON_CPU_AND_STAND_IN = [
    ("'cuda' written in", lambda d: torch.ones(2, device="cuda"), "used the GPU itself"),
    (".cuda()", lambda d: torch.ones(2).cuda(), "used the GPU itself (.cuda())"),
    (".to('cuda:0')", lambda d: torch.ones(2).to("cuda:0"), "used the GPU itself"),
    ("caught the refusal", lambda d: _caught(lambda: torch.ones(2).cuda()), "it caught the error"),
]
ON_THE_STAND_IN = [
    (
        "mixed devices",
        lambda d: torch.ones(2, device=d) + torch.ones(2),
        "mixed tensors on two devices",
    ),
    ("numpy on the device", lambda d: torch.ones(2, device=d).numpy(), "bring it to the CPU first"),
    (
        "CPU generator",
        lambda d: torch.randperm(3, generator=torch.Generator(), device=d),
        "CPU generator",
    ),
    ("other error", lambda d: [][1], "raised IndexError"),
]


def _caught(action):
    try:
        return action()
    except RuntimeError:
        return None


@pytest.mark.parametrize(
    ("function", "words"),
    [c[1:] for c in ON_CPU_AND_STAND_IN],
    ids=[c[0] for c in ON_CPU_AND_STAND_IN],
)
@pytest.mark.parametrize("machine", [Machine.cpu(), Machine.stand_in()], ids=["cpu", "stand-in"])
def test_cuda_is_refused_with_the_fix_named(machine, function, words):
    error = _run(machine, function, machine.device)
    assert (
        isinstance(error, LearnerError)
        and words in str(error)
        and "device it is given" in error.fix
    )


@pytest.mark.parametrize(
    ("function", "words"), [c[1:] for c in ON_THE_STAND_IN], ids=[c[0] for c in ON_THE_STAND_IN]
)
def test_the_stand_in_refuses_what_a_gpu_refuses(function, words):
    on_the_cpu = _run(Machine.cpu(), function, torch.device("cpu"))
    assert isinstance(on_the_cpu, LearnerError) == (words == "raised IndexError")
    error = _run(Machine.stand_in(), function, torch.device("meta"))
    assert isinstance(error, LearnerError) and words in str(error)


def test_a_read_on_the_stand_in_is_not_blamed_on_the_learner(capsys):
    with pytest.raises(StandInCannot):
        Machine.stand_in().run(lambda d: torch.ones(2, device=d).sum().item(), torch.device("meta"))

    @exercise("write f(d)")
    def check_f(f):
        m = Machine.stand_in()
        with m.tried():
            m.run(f, m.device)
        return "f is right"

    assert check_f(lambda d: torch.ones(1, device=d).tolist()) is True
    assert "on the stand-in, it ran up to reading a value" in capsys.readouterr().out


def test_a_copy_to_the_device_is_refused_where_the_task_wants_values_made_there():
    machine = Machine(torch.device("meta"), copies_refused=True)
    assert machine.run(lambda d: torch.zeros(2, device=d), machine.device).is_meta
    for made_then_copied in (
        lambda d: torch.zeros(2).to(d),
        lambda d: torch.tensor([1.0], device=d),
    ):
        assert "make them on the device directly" in str(
            _run(machine, made_then_copied, machine.device)
        )


ORIGINAL_IS_AVAILABLE = torch.cuda.is_available


def _cuda_batch(x):
    return x.cuda() if torch.cuda.is_available() else x


def test_the_cuda_machines_say_no_gpu_or_send_cuda_to_the_stand_in():
    assert Machine.without_gpu().run(_cuda_batch, torch.ones(2)).device.type == "cpu"
    assert Machine.with_stand_in_gpu().run(_cuda_batch, torch.ones(2)).is_meta
    assert Machine.with_stand_in_gpu().run(lambda m: m.cuda(), nn.Linear(2, 2)).weight.is_meta
    assert Machine.with_stand_in_gpu().run(lambda x: x.to("cuda"), torch.ones(2)).is_meta
    assert torch.cuda.is_available is ORIGINAL_IS_AVAILABLE  # the patch is undone


def test_an_error_names_the_learners_line_and_an_endless_generator_is_cut_short():
    def f(x):
        y = x + 1
        return y["key"]

    error = _run(Machine.cpu(), f, 1)
    assert "in f, line" in error.details[0] and 'y["key"]' in error.details[0]
    assert "TypeError" in error.details[1]
    with pytest.raises(CheckFailed, match="more than 5 items"):
        Machine.cpu().run(lambda: iter(int, 1), consume=5)
