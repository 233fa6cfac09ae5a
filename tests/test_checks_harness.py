"""helpers.checks.harness: the machines a check runs the learner's code on, and what they report.

These run on every machine: the played machines patch ``torch.cuda`` the same way whether or not a
GPU is there, and the stand-in is ``meta``.
"""

import numpy as np
import pytest
import torch
from torch import nn

from helpers.checks import CheckBug, CheckFailed
from helpers.checks.harness import (
    LearnerError,
    Machine,
    StandInCannot,
    describe,
    device_machines,
    exercise,
    is_stub,
    short,
)
from helpers.devices import pick_device


def _meta(*shape, **kwargs):
    return torch.zeros(*shape, device="meta", **kwargs)


# ---- stubs, descriptions -----------------------------------------------------------------------


def _stub_with_docstring(x):
    """What to do."""
    # your code here


def _stub_pass(x):
    pass


def _answer(x):
    return x


def _forgot_return(x):
    x + 1


def _generator(x):
    yield x


def _not_implemented(x):
    """What to do."""
    raise NotImplementedError


def _not_implemented_with_a_message(x):
    raise NotImplementedError("your code here")


def _not_implemented_after_work(x):
    y = x + 1
    raise NotImplementedError(y)


@pytest.mark.parametrize(
    "function",
    [
        _stub_with_docstring,
        _stub_pass,
        lambda *a: None,
        lambda: ...,
        _not_implemented,
        _not_implemented_with_a_message,
    ],
)
def test_a_stub_is_a_function_that_does_nothing(function):
    assert is_stub(function)


@pytest.mark.parametrize(
    "function",
    [_answer, _forgot_return, _generator, _not_implemented_after_work, lambda x: x, print, nn.Linear, len],
)
def test_an_answer_is_not_a_stub(function):
    assert not is_stub(function)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "None"),
        (torch.zeros(2).cuda, "the method Tensor.cuda itself (without the () that call it)"),
        (nn.Linear(1, 1).cuda, "the method Linear.cuda itself"),
        (torch.zeros(2, 3, dtype=torch.long), "a int64 tensor of shape (2, 3) on cpu"),
        (np.zeros(2), "a NumPy array (float64) of shape (2,)"),
        (nn.Linear, "the class Linear"),
        (torch.randn, "the function randn"),
        (nn.Linear(1, 1), "a Linear module"),
        ("x" * 100, "the string 'xxxxxxxx"),
        ([1, 2], "a list of 2 items"),
        ({"a": 1}, "a dict of 1 key"),
        ({}.values(), "a dict_values"),
        (object(), "an object"),
        (True, "the bool True"),
    ],
)
def test_describe_names_a_value_in_a_few_words(value, text):
    assert describe(value).startswith(text)
    assert len(describe(value)) <= 80


def test_short_cuts_long_text_on_one_line():
    assert short("a\nb") == "a b"
    assert short("x" * 100, 10) == "xxxxxxx..."


# ---- the exercise decorator ------------------------------------------------------------------


def test_a_crash_in_the_check_itself_is_a_check_bug():
    @exercise("write f(x)")
    def check_f(f):
        return {}["missing"]

    with pytest.raises(CheckBug, match="a bug in the course") as caught:
        check_f(_answer)
    assert isinstance(caught.value.__cause__, KeyError)
    assert "test_checks_harness.py" not in str(caught.value)  # it names the check's file, under helpers/


def test_the_success_line_says_what_the_stand_in_could_not_try(capsys):
    @exercise("write f(t)")
    def check_f(f):
        m = Machine.stand_in()
        with m.tried():
            m.run(f, _meta(3))
        return "f works"

    assert check_f(lambda t: t[t > 0]) is True
    out = capsys.readouterr().out
    assert out.startswith("correct: f works (")
    assert "not tried on the stand-in GPU: meta cannot run it" in out


# ---- the machines --------------------------------------------------------------------------------


def test_the_machines_leave_torch_cuda_as_it_was():
    before = {name: getattr(torch.cuda, name) for name in dir(torch.cuda) if not name.startswith("_")}
    accelerator = {name: getattr(torch.accelerator, name) for name in dir(torch.accelerator)}
    for m in (Machine.cpu(), Machine.stand_in(), Machine.without_gpu(), Machine.with_stand_in_gpu()):
        with pytest.raises(CheckFailed):
            m.run(lambda: torch.zeros(1).cuda() + torch.cuda.synchronize() + 1)
    assert {name: getattr(torch.cuda, name) for name in before} == before
    assert {name: getattr(torch.accelerator, name) for name in accelerator} == accelerator


def test_the_cpu_machine_says_a_gpu_exists_and_refuses_its_use():
    m = Machine.cpu()
    answers = m.run(
        lambda: (
            torch.cuda.is_available(),
            torch.cuda.device_count(),
            pick_device(),
            torch.cuda.get_device_name(0),
        )
    )
    assert answers == (True, 1, torch.device("cuda", 0), "Stand-in GPU (the check's meta device)")
    for code, how in (
        (lambda: torch.ones(2, device="cuda"), "ones(..., device='cuda')"),
        (lambda: torch.ones(2).to(0), ".to(0)"),
        (lambda: torch.ones(2).cuda(), ".cuda()"),
        (lambda: nn.Linear(2, 2).to(pick_device()), ".to('cuda:0')"),
        (lambda: torch.cuda.synchronize(), "torch.cuda.synchronize()"),
        (lambda: torch.cuda.Event(enable_timing=True), "torch.cuda.Event()"),
    ):
        with pytest.raises(LearnerError, match="used the GPU itself") as caught:
            Machine.cpu().run(code)
        assert caught.value.kind == "cuda" and how in caught.value.sentence


def test_a_refused_use_of_cuda_fails_even_if_the_code_catches_it():
    def falls_back(t):
        try:
            return t.cuda()
        except RuntimeError:
            return t

    with pytest.raises(LearnerError, match=r"used the GPU itself, \.cuda\(\)"):
        Machine.cpu().run(falls_back, torch.ones(2))


def test_the_machine_without_a_gpu_fails_as_without_a_driver():
    m = Machine.without_gpu()
    assert m.run(lambda: (torch.cuda.is_available(), torch.cuda.device_count(), pick_device())) == (
        False,
        0,
        torch.device("cpu"),
    )
    with pytest.raises(LearnerError, match=r"used CUDA \(\.cuda\(\)\) on a machine without a GPU") as caught:
        m.run(lambda: torch.ones(2).cuda())
    assert "NVIDIA driver" in caught.value.details[-1] or caught.value.kind == "cuda"


def test_the_stand_in_gpu_plays_torch_cuda():
    m = Machine.with_stand_in_gpu()

    def uses_the_gpu():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(2, 2).cuda()
        x = torch.randn(4, 2, device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y = model(x.to(device, non_blocking=True))
        end.record()
        torch.cuda.synchronize()
        name = torch.cuda.get_device_properties(0).name
        return y, start.elapsed_time(end), name, torch.cuda.memory_allocated(), torch.cuda.get_rng_state()

    y, elapsed, name, memory, _ = m.run(uses_the_gpu)
    assert y.device.type == "meta" and elapsed == 0.0 and "Stand-in" in name and memory == 0


def test_the_stand_in_reads_back_placeholders_and_records_them():
    m = Machine.stand_in()

    def reads(t):
        total = t.sum()
        return (
            total.item(),
            float(total),
            t.tolist(),
            t.cpu(),
            f"{total:.2f}",
            bool(total > 0),
            t.numpy(force=True),
        )

    item, number, values, copy, text, flag, array = m.run(reads, _meta(3))
    assert (item, number, values, text, flag) == (1.0, 1.0, [1.0, 1.0, 1.0], "1.00", False)
    assert copy.device.type == "cpu" and array.shape == (3,)
    assert [read.how for read in m.reads] == [
        ".item()",
        "float()",
        ".tolist()",
        ".cpu()",
        "a format string",
        "an if or bool() on a tensor",
        ".numpy(force=True)",
    ]
    assert all(read.place.function == "reads" for read in m.reads)


def test_the_stand_in_refuses_what_cuda_refuses():
    m = Machine.stand_in()
    for code, kind in (
        (lambda: _meta(3) + torch.ones(3), "devices"),  # meta alone says it another way
        (lambda: nn.Linear(2, 2).to("meta")(torch.ones(1, 2)), "devices"),  # meta alone lets it through
        (lambda: torch.zeros(()).add_(_meta(())), "devices"),  # in place on the CPU, from the GPU
        (lambda: torch.ones(3)[_meta(2, dtype=torch.long)], "devices"),  # a GPU index into a CPU tensor
        (lambda: torch.randperm(5, generator=torch.Generator(), device="meta"), "generator"),
        (lambda: _meta(3).numpy(), "numpy-device"),
        (lambda: _meta(3, requires_grad=True).numpy(), "numpy-device"),
    ):
        with pytest.raises(LearnerError) as caught:
            m.run(code)
        assert caught.value.kind == kind, caught.value


def test_the_stand_in_allows_what_cuda_allows():
    m = Machine.stand_in()
    x = _meta(4, 3)
    assert m.run(lambda: x * torch.tensor(2.0)).device.type == "meta"  # a CPU scalar
    assert m.run(lambda: x[torch.tensor([0, 2])]).shape == (2, 3)  # a CPU index
    assert m.run(lambda: x.pin_memory()) is x


def test_what_meta_cannot_run_is_not_blamed_on_the_learner():
    m = Machine.stand_in()
    with pytest.raises(StandInCannot, match="meta cannot run it"):
        m.run(lambda t: t[t > 0], _meta(3))
    with pytest.raises(StandInCannot, match="values read back"):
        m.run(lambda t: [0, 1][int(t.sum()) + 5], _meta(3))


def test_an_error_names_the_learners_line_and_the_exception():
    def move(batch, device):
        inputs, targets = batch
        return batch.to(device)

    with pytest.raises(LearnerError) as caught:
        Machine.cpu().run(move, [torch.ones(1), torch.ones(1)], torch.device("cpu"))
    error = caught.value
    assert error.kind == "container" and error.sentence.startswith("move called .to() on a list")
    assert error.details[0].startswith("in move, line ") and error.details[0].endswith(
        "return batch.to(device)"
    )
    assert error.details[1] == "AttributeError: 'list' object has no attribute 'to'"


def test_a_function_with_other_arguments_is_told_to_keep_the_stubs_first_line():
    def noise(shape):
        return shape

    with pytest.raises(LearnerError) as caught:
        Machine.cpu().run(noise, (2, 3), torch.device("cpu"))
    assert caught.value.kind == "signature"
    assert caught.value.sentence.startswith("noise does not take the arguments the check gives it")
    assert caught.value.fix == "keep the first line of the stub, its def and arguments, as it is"


def test_an_endless_generator_is_cut_short():
    def endless():
        while True:
            yield 1

    with pytest.raises(CheckFailed, match="more than 5 items"):
        Machine.cpu().run(endless, consume=5)


def test_the_device_machines_are_the_cpu_the_stand_in_and_the_gpu_if_any():
    kinds = [m.kind for m in device_machines()]
    assert kinds[:2] == ["cpu", "stand-in"]
    assert kinds[2:] == ([] if pick_device().type == "cpu" else ["gpu"])
