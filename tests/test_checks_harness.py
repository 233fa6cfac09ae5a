"""helpers.checks.harness and stubs: the machines a check runs the learner's code on, what they
report, and how a stub is told from an answer.

They give the same verdicts on every machine: a GPU is refused whether or not one is there, and the
stand-in is ``meta``.
"""

import linecache

import pytest
import torch
from torch import nn

from helpers.checks import CheckBug, CheckFailed
from helpers.checks.harness import (
    LearnerError,
    Machine,
    StandInError,
    Told,
    describe,
    exercise,
    retell,
)
from helpers.checks.stubs import is_stub
from helpers.devices import pick_device


def _doc(x):
    """What to do."""
    # your code here


def _raise(x):
    raise NotImplementedError("your code here")


def _raise_class(x):
    raise NotImplementedError


def _pass(x):
    pass


def _return(x):
    return


def _forgot_return(x):
    x + 1


def _generator(x):
    yield x


def _decorated(function):
    return function


@_decorated
def _decorated_stub(x): ...


STUBS = [
    pytest.param(_doc, True, id="docstring and comment"),
    pytest.param(_raise, True, id="raise NotImplementedError(...)"),
    pytest.param(_raise_class, True, id="raise NotImplementedError"),
    pytest.param(_pass, True, id="pass"),
    pytest.param(_return, True, id="return"),
    pytest.param(_decorated_stub, True, id="decorated ..."),
    pytest.param(lambda x: None, True, id="lambda: None"),
    pytest.param(lambda x: ..., True, id="lambda: ..."),
    pytest.param(_forgot_return, False, id="forgot return"),
    pytest.param(_generator, False, id="generator"),
    pytest.param(lambda x: x, False, id="lambda: x"),
    pytest.param(lambda x: 0, False, id="lambda: 0"),
    pytest.param(len, False, id="builtin"),
]


@pytest.mark.parametrize(("function", "stub"), STUBS)
def test_a_stub_is_a_function_that_does_nothing(function, stub):
    assert is_stub(function) is stub


def test_lambdas_on_one_line_are_told_apart():
    pair = (lambda x: None, lambda x: x)  # noqa: E731
    nested = lambda f: lambda x: None  # noqa: E731
    assert [is_stub(pair[0]), is_stub(pair[1])] == [True, False]
    assert [is_stub(nested), is_stub(nested(1))] == [False, True]


def _cell(source, name):
    """A function defined as IPython defines a cell's: compiled from a source kept in linecache."""
    filename = f"<ipython-input-{abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize(
    ("source", "stub"),
    [
        ('def f(x):\n    """Doc."""\n    # your code here\n', True),
        ("import torch\n\n\ndef f(x):\n    return torch.zeros(x)\n", False),
        ("def f(x):\n    ...\n\n\ndef g(x):\n    return x\n", True),
    ],
    ids=["stub", "answer", "stub beside another function"],
)
def test_a_function_from_a_notebook_cell_is_read_from_its_source(source, stub):
    assert is_stub(_cell(source, "f")) is stub


def test_without_its_source_a_function_counts_as_an_answer():
    namespace = {}
    exec("def f(x):\n    pass\n", namespace)  # no source kept: the check runs it
    assert is_stub(namespace["f"]) is False


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (None, "None"),
        ([1, 2], "a list of 2 items"),
        ((1,), "a tuple of 1 item"),
        (torch.zeros(2, 3), "a float32 tensor of shape (2, 3) on cpu"),
        (torch.zeros(2, dtype=torch.int64), "an int64 tensor"),
        (nn.Linear(1, 1), "a Linear module"),
        (torch.zeros(1).cpu, "the method cpu itself"),
        (2.5, "the float 2.5"),
        (object(), "an object"),
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
    assert check(_doc) is False
    assert capsys.readouterr().out == "not answered yet: write f(x)\n"
    with pytest.raises(CheckFailed, match=r"check_f\(f\)"):
        check(None)
    with pytest.raises(CheckBug, match="KeyError"):
        check(lambda x: x)


def _run(machine, function, *args, **kwargs):
    try:
        return machine.run(function, *args, **kwargs)
    except LearnerError as error:
        return error


def _caught(action):
    try:
        return action()
    except RuntimeError:
        return None


ON_CPU_AND_STAND_IN = [
    pytest.param(lambda d: torch.ones(2, device="cuda"), "used the GPU itself", id="'cuda'"),
    pytest.param(lambda d: torch.ones(2).cuda(), "used the GPU itself (.cuda())", id=".cuda()"),
    pytest.param(lambda d: torch.ones(2).to("cuda:0"), "used the GPU itself", id="'cuda:0'"),
    pytest.param(lambda d: torch.ones(2).to("mps"), "used the Mac's GPU itself", id="'mps'"),
    pytest.param(
        lambda d: _caught(lambda: torch.ones(2).cuda()), "it caught the error", id="caught"
    ),
]


@pytest.mark.parametrize(("function", "words"), ON_CPU_AND_STAND_IN)
@pytest.mark.parametrize("machine", [Machine.cpu(), Machine.stand_in()], ids=["cpu", "stand-in"])
def test_a_gpu_is_refused_with_the_fix_named(machine, function, words):
    error = _run(machine, function, machine.device)
    assert isinstance(error, LearnerError)
    assert words in str(error)
    assert "device it is given" in error.fix


def _index_on_the_stand_in(d):
    return torch.randperm(3, generator=torch.Generator(), device=d)


ON_THE_STAND_IN = [
    pytest.param(
        lambda d: torch.ones(2, device=d) + torch.ones(2),
        "mixed tensors on two devices",
        id="mixed devices",
    ),
    pytest.param(
        lambda d: torch.ones(2, device=d).numpy(),
        "called .numpy() on a tensor not on the CPU",
        id="numpy on the device",
    ),
    pytest.param(_index_on_the_stand_in, "CPU generator", id="CPU generator"),
    pytest.param(lambda d: [][1], "raised IndexError", id="other error"),
]


@pytest.mark.parametrize(("function", "words"), ON_THE_STAND_IN)
def test_the_stand_in_refuses_what_a_gpu_refuses(function, words):
    on_the_cpu = _run(Machine.cpu(), function, torch.device("cpu"))
    assert isinstance(on_the_cpu, LearnerError) == (words == "raised IndexError")
    error = _run(Machine.stand_in(), function, torch.device("meta"))
    assert isinstance(error, LearnerError)
    assert words in str(error)


def test_a_read_on_the_stand_in_is_not_blamed_on_the_learner(capsys):
    with pytest.raises(StandInError):
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
    machine = Machine.stand_in()
    machine.copies_refused = True
    assert machine.run(lambda d: torch.zeros(2, device=d), machine.device).is_meta
    for made_then_copied in (
        lambda d: torch.zeros(2).to(d),
        lambda d: torch.tensor([1.0], device=d),
    ):
        error = _run(machine, made_then_copied, machine.device)
        assert "make them on the device directly" in str(error)


def test_cpu_indices_into_a_device_tensor_are_refused_where_the_task_says_so():
    machine = Machine.stand_in()
    machine.cpu_indices_refused = True
    values = torch.zeros(5, device="meta")
    assert machine.run(lambda i: values[i], torch.tensor([0, 2], device="meta")).shape == (2,)
    error = _run(machine, lambda i: values[i], torch.tensor([0, 2]))
    assert "move the indices to the device" in error.fix


ORIGINAL_IS_AVAILABLE = torch.cuda.is_available


def _cuda_batch(x):
    if torch.cuda.is_available():
        return x.cuda()
    return x


def test_the_gpu_machines_say_how_many_gpus_and_send_cuda_to_the_stand_in():
    assert Machine.no_gpu().run(_cuda_batch, torch.ones(2)).device.type == "cpu"
    assert Machine.stand_in_gpus(1).run(_cuda_batch, torch.ones(2)).is_meta
    assert Machine.stand_in_gpus(1).run(lambda m: m.cuda(), nn.Linear(2, 2)).weight.is_meta
    assert Machine.stand_in_gpus(1).run(lambda x: x.to("cuda"), torch.ones(2)).is_meta
    assert Machine.stand_in_gpus(3).run(lambda: torch.cuda.device_count()) == 3
    assert torch.cuda.is_available is ORIGINAL_IS_AVAILABLE  # the patch is undone


@pytest.mark.parametrize(
    "function",
    [
        lambda x: x.cuda(1),
        lambda x: x.to("cuda:1"),
        lambda x: x.to(torch.device("cuda", 2)),
        lambda x: torch.cuda.get_device_properties(1),
    ],
    ids=[".cuda(1)", "'cuda:1'", "device('cuda', 2)", "properties of 1"],
)
def test_a_gpu_index_beyond_the_stand_ins_count_is_refused(function):
    error = _run(Machine.stand_in_gpus(1), function, torch.ones(2))
    assert isinstance(error, LearnerError)
    assert "but the machine has 1 GPU" in error.mistake


def test_the_stand_in_mac_has_an_mps_that_means_meta_and_no_cuda():
    mac = Machine.apple_stand_in()
    assert mac.run(pick_device).type == "mps"
    assert mac.run(lambda x: x.to(pick_device()), torch.ones(2)).is_meta
    assert mac.run(lambda: torch.cuda.is_available()) is False
    error = _run(mac, lambda x: x.cuda(), torch.ones(2))
    assert "torch.cuda.is_available()" in error.fix
    assert "Mac's GPU" in mac.where(torch.device("meta"))


def test_a_checks_own_rules_come_first_and_may_name_what_happened_after():
    happened = []
    told = (Told(r"IndexError", lambda: f"read item {happened[-1]}", "read fewer items"),)

    def reads_too_far(items):
        happened.append(len(items))
        return items[len(items)]

    error = _run(Machine.cpu(), reads_too_far, [1, 2], told=told)
    assert error.sentence == "reads_too_far read item 2: read fewer items."
    groups = (Told(r"GpuRefusedError: (.*)", r"went to \1", "stay"),)
    error = _run(Machine.cpu(), lambda x: x.cuda(), torch.ones(1), told=groups)
    assert error.mistake == "your function went to .cuda()"


def test_retell_says_when_the_arguments_do_not_fit_the_stub():
    error = _run(Machine.cpu(), lambda a, b: a, 1)
    assert "does not take the arguments the check gives it" in error.mistake
    mistake, fix = retell(ValueError("bad"), "f", Machine.cpu())
    assert (mistake, fix) == ("f raised ValueError", "read the error below and fix the function")


def test_an_error_names_the_learners_line_and_an_endless_generator_is_cut_short():
    def f(x):
        y = x + 1
        return y["key"]

    error = _run(Machine.cpu(), f, 1)
    assert "in f, line" in error.details[0]
    assert 'y["key"]' in error.details[0]
    assert "TypeError" in error.details[1]
    with pytest.raises(CheckFailed, match="more than 5 items"):
        Machine.cpu().run(lambda: iter(int, 1), consume=5)
