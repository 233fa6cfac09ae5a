"""helpers.checks.nb00: right answers in other spellings pass, typical mistakes are refused by name.

Every check runs the answer on the CPU, on ``meta`` standing in for a GPU and, on a machine with
one, on the GPU: these tests give the same verdicts on every machine.
"""

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases

from helpers.checks.nb00 import check_as_floats, check_move_all, check_noise
from helpers.devices import pick_device, to_device, to_numpy

# ---- exercise 1: noise ----


def _noise_in_device_context(shape, device):
    with torch.device(device):
        return torch.randn(shape)


def _noise_forgot_return(shape, device):
    torch.randn(shape, device=device)


NOISE_RIGHT = {
    "randn(shape)": lambda shape, device: torch.randn(shape, device=device),
    "randn(*shape)": lambda shape, device: torch.randn(*shape, device=device),
    "normal(0, 1, size)": lambda shape, device: torch.normal(0.0, 1.0, size=shape, device=device),
    "empty().normal_()": lambda shape, device: torch.empty(shape, device=device).normal_(),
    "zeros().normal_(0, 1)": lambda shape, device: torch.zeros(shape, device=device).normal_(0, 1),
    "float64": lambda shape, device: torch.randn(shape, device=device, dtype=torch.float64),
    "size=": lambda shape, device: torch.randn(size=shape, device=device),
    "randn_like": lambda shape, device: torch.randn_like(torch.empty(shape, device=device)),
    "torch.device(device)": lambda shape, device: torch.randn(shape, device=torch.device(device)),
    "with torch.device": _noise_in_device_context,
}

NOISE_WRONG = [
    ("left on the CPU", lambda shape, device: torch.randn(shape), "the tensor is on cpu, not on meta"),
    ("made, then copied", lambda shape, device: torch.randn(shape).to(device), "made on cpu and then copied"),
    ("uniform", lambda shape, device: torch.rand(shape, device=device), "uniform in [0, 1)"),
    ("shape ignored", lambda shape, device: torch.randn(3, 2, device=device), "shape (3, 2)"),
    ("2x3 always", lambda shape, device: torch.randn(2, 3, device=device), "noise((20000,), device)"),
    ("NumPy", lambda shape, device: np.random.randn(*shape), "a NumPy array (float64)"),
    ("integers", lambda shape, device: torch.ones(shape, dtype=torch.long, device=device), "holds int64"),
    ("randint", lambda shape, device: torch.randint(0, 9, shape, device=device), "holds int64"),
    ("hard-coded cuda", lambda shape, device: torch.randn(shape, device="cuda"), "used the GPU itself"),
    ("pick_device", lambda shape, device: torch.randn(shape, device=pick_device()), "device='cuda:0'"),
    ("then .cuda()", lambda shape, device: torch.randn(shape).cuda(), "used the GPU itself, .cuda()"),
    (
        "from NumPy data",
        lambda shape, device: torch.tensor(np.random.randn(*shape), device=device),
        "made outside PyTorch's factories",
    ),
    ("scaled", lambda shape, device: torch.randn(shape, device=device) * 2, "standard deviation 2.00"),
    ("shifted", lambda shape, device: torch.randn(shape, device=device) + 1, "mean 0.99"),
    ("forgot return", _noise_forgot_return, "noise returned None"),
    ("a list", lambda shape, device: torch.randn(shape, device=device).tolist(), "a list of 2 items"),
    ("back to the CPU", lambda shape, device: torch.randn(shape, device=device).cpu(), "on cpu, not on meta"),
    ("the function", lambda shape, device: torch.randn, "the function randn"),
    ("device positional", lambda shape, device: torch.randn(shape, device), "noise raised TypeError"),
]


@pytest.mark.parametrize("answer", right_cases(NOISE_RIGHT))
def test_noise_right(answer, capsys):
    right(check_noise, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(NOISE_WRONG))
def test_noise_wrong(answer, fragment):
    wrong(check_noise, answer, fragment)


def test_noise_leaves_the_random_numbers_alone():
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    check_noise(NOISE_RIGHT["randn(shape)"])
    assert torch.equal(torch.rand(2), expected)


# ---- exercise 2: move_all ----


def _append_loop(tensors, device):
    moved = []
    for t in tensors:
        moved.append(t.to(device))
    return moved


def _in_place_in_the_list(tensors, device):
    for i, t in enumerate(tensors):
        tensors[i] = t.to(device)
    return tensors


def _forgot_to_reassign(tensors, device):
    for t in tensors:
        t.to(device)
    return tensors


def _reassigned_the_loop_variable(tensors, device):
    for t in tensors:
        t = t.to(device)  # noqa: PLW2901 - the mistake: this rebinds t, the list keeps the old tensors
    return tensors


def _forgot_return(tensors, device):
    _ = [t.to(device) for t in tensors]


MOVE_ALL_RIGHT = {
    "comprehension": lambda ts, device: [t.to(device) for t in ts],
    "map": lambda ts, device: list(map(lambda t: t.to(device), ts)),
    "append loop": _append_loop,
    "in place in the list": _in_place_in_the_list,
    "device=": lambda ts, device: [t.to(device=device) for t in ts],
    "non_blocking": lambda ts, device: [t.to(device, non_blocking=True) for t in ts],
    "tuple": lambda ts, device: tuple(t.to(device) for t in ts),
    "helpers.to_device": lambda ts, device: to_device(ts, device),
    "as_tensor": lambda ts, device: [torch.as_tensor(t, device=device) for t in ts],
    "clone first": lambda ts, device: [t.clone().to(device) for t in ts],
}

MOVE_ALL_WRONG = [
    ("not reassigned", _forgot_to_reassign, "t.to(device) made a moved copy that was not kept"),
    ("loop variable", _reassigned_the_loop_variable, "reassigning a loop variable does not change the list"),
    ("nothing moved", lambda ts, device: ts, "tensor 0 was not moved"),
    ("first only", lambda ts, device: [ts[0].to(device), *ts[1:]], "tensor 1 was not moved"),
    ("one dropped", lambda ts, device: [t.to(device) for t in ts[:2]], "returned 2 items for the 3 tensors"),
    (
        "dtype changed",
        lambda ts, device: [t.to(device, torch.float64) for t in ts],
        "from float32 (3,) to float64 (3,)",
    ),
    ("made float", lambda ts, device: [t.float().to(device) for t in ts], "tensor 2 changed on the way"),
    (
        "stacked",
        lambda ts, device: torch.stack([t.float().sum() for t in ts]),
        "float32 tensor of shape (3,)",
    ),
    ("cuda()", lambda ts, device: [t.cuda() for t in ts], "used the GPU itself, .cuda()"),
    ("to('cuda')", lambda ts, device: [t.to("cuda") for t in ts], "used the GPU itself, .to('cuda')"),
    ("forgot return", _forgot_return, "move_all returned None"),
    ("list.to", lambda ts, device: ts.to(device), "called .to() on a list"),
    ("a set", lambda ts, device: {t.to(device) for t in ts}, "returned a set of 3 items"),
    ("method", lambda ts, device: [t.to for t in ts], "the method Tensor.to itself"),
    ("zeros", lambda ts, device: [torch.zeros_like(t, device=device) for t in ts], "other numbers"),
]


@pytest.mark.parametrize("answer", right_cases(MOVE_ALL_RIGHT))
def test_move_all_right(answer, capsys):
    right(check_move_all, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(MOVE_ALL_WRONG))
def test_move_all_wrong(answer, fragment):
    wrong(check_move_all, answer, fragment)


# ---- exercise 3: as_floats ----


AS_FLOATS_RIGHT = {
    "tolist": lambda t: t.tolist(),
    "detach.cpu.tolist": lambda t: t.detach().cpu().tolist(),
    "via NumPy": lambda t: t.detach().cpu().numpy().tolist(),
    "float() each": lambda t: [float(v) for v in t],
    "item() each": lambda t: [v.item() for v in t],
    "map(float)": lambda t: list(map(float, t.detach())),
    "detach.tolist": lambda t: t.detach().tolist(),
    "float() of NumPy": lambda t: [float(v) for v in t.detach().cpu().numpy()],
    "cpu.tolist": lambda t: t.cpu().tolist(),
    "to_numpy": lambda t: to_numpy(t).tolist(),
    "flatten": lambda t: t.flatten().tolist(),
}


def _switches_off_grad(t):
    t.requires_grad_(False)
    return t.tolist()


AS_FLOATS_WRONG = [
    ("item", lambda t: t.item(), ".item() (or float()) on a tensor of several numbers"),
    ("numpy with grad", lambda t: t.numpy().tolist(), ".numpy() on a tensor that requires grad"),
    ("NumPy array", lambda t: t.detach().numpy(), "returned a NumPy array, not a list"),
    (
        "numpy on the CPU only",
        lambda t: t.detach().numpy().tolist(),
        ".numpy() on a tensor that is not on the CPU",
    ),
    ("data.numpy", lambda t: t.data.numpy().tolist(), "not on the CPU"),
    ("list(t)", lambda t: list(t), "one-element tensors"),
    ("a tensor", lambda t: t * 1, "returned a tensor, not Python floats"),
    ("NumPy floats", lambda t: list(t.detach().numpy()), "holds float32, not only Python floats"),
    ("bare number", lambda t: t.tolist() if t.numel() > 1 else t.item(), "returned the bare number 2.5"),
    ("ints", lambda t: [round(v) for v in t.tolist()], "holds int"),
    ("first only", lambda t: t.tolist()[0], "returned the float"),
    ("a string", lambda t: str(t.tolist()), "returned the string"),
    ("requires_grad_(False)", _switches_off_grad, "switch off requires_grad"),
    ("tensor on the CPU", lambda t: t.detach().cpu(), "returned a tensor"),
    ("two of three", lambda t: t.tolist()[:2], "returned 2 numbers for a tensor of 3"),
    ("sorted", lambda t: sorted(t.tolist()), "not the tensor's"),
    ("cuda first", lambda t: t.cuda().tolist(), "used the GPU itself"),
]


@pytest.mark.parametrize("answer", right_cases(AS_FLOATS_RIGHT))
def test_as_floats_right(answer, capsys):
    right(check_as_floats, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(AS_FLOATS_WRONG))
def test_as_floats_wrong(answer, fragment):
    wrong(check_as_floats, answer, fragment)


def test_the_learners_line_is_shown():
    def as_floats(t):
        values = t.item()
        return values

    error = wrong(check_as_floats, as_floats, "several numbers")
    assert error.details[0].startswith("in as_floats, line ") and error.details[0].endswith(
        ": values = t.item()"
    )
    assert "RuntimeError" in error.details[1]
