"""helpers.checks.nb00: a table per exercise, of right answers (None) and mistakes (a part of the
message)."""

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases

from helpers.checks.nb00 import check_as_floats, check_move_all, check_noise
from helpers.devices import pick_device, to_device, to_numpy

# pick_device() is the CPU here, so the stand-in finds it; on a machine with a GPU the CPU run does
WRITTEN_IN = "used the GPU itself" if torch.cuda.is_available() else "meta"

NOISE = [
    ("randn(shape)", lambda s, d: torch.randn(s, device=d), None),
    ("randn(*shape)", lambda s, d: torch.randn(*s, device=d), None),
    ("normal(0, 1, size)", lambda s, d: torch.normal(0.0, 1.0, size=s, device=d), None),
    ("empty().normal_()", lambda s, d: torch.empty(s, device=d).normal_(), None),
    ("device.type, float64", lambda s, d: torch.randn(s, device=d.type, dtype=torch.float64), None),
    ("left on the CPU", lambda s, d: torch.randn(s), "the tensor is on cpu, not on meta"),
    (
        "made, then copied",
        lambda s, d: torch.randn(s).to(d),
        "made on cpu and then copied with .to()",
    ),
    ("from NumPy data", lambda s, d: torch.tensor(np.random.randn(*s), device=d), "made from data"),
    ("uniform", lambda s, d: torch.rand(s, device=d), "uniform in [0, 1)"),
    (
        "shape ignored",
        lambda s, d: torch.randn(2, 3, device=d),
        "noise((5,), device) gave a tensor of shape (2, 3)",
    ),
    ("NumPy", lambda s, d: np.random.randn(*s), "a NumPy array (float64)"),
    ("the function", lambda s, d: torch.randn, "noise returned the function randn"),
    ("integers", lambda s, d: torch.randint(0, 9, s, device=d), "holds int64"),
    ("then .cuda()", lambda s, d: torch.randn(s).cuda(), "used the GPU itself (.cuda())"),
    ("pick_device", lambda s, d: torch.randn(s, device=pick_device()), WRITTEN_IN),
    ("scaled", lambda s, d: torch.randn(s, device=d) * 2, "standard deviation 2.00"),
    ("printed", lambda s, d: print(torch.randn(s, device=d)), "noise returned None"),
    ("back to the CPU", lambda s, d: torch.randn(s, device=d).cpu(), "copies them off the device"),
    ("device positional", lambda s, d: torch.randn(s, d), "noise raised TypeError"),
    (
        "CPU generator",
        lambda s, d: torch.randn(s, device=d, generator=torch.Generator()),
        "CPU generator",
    ),
    ("never drawn", lambda s, d: torch.zeros(s, device=d), "mean 0.00, standard deviation 0.00"),
]


def _loop_variable(tensors, device):
    for t in tensors:
        t = t.to(device)  # noqa: PLW2901 - the mistake: this rebinds t, the list keeps the old tensors
    return tensors


MOVE_ALL = [
    ("comprehension", lambda ts, d: [t.to(d) for t in ts], None),
    ("map, a tuple", lambda ts, d: tuple(map(lambda t: t.to(device=d), ts)), None),
    ("non_blocking", lambda ts, d: [t.to(d, non_blocking=True) for t in ts], None),
    ("helpers.to_device", lambda ts, d: to_device(ts, d), None),
    ("as_tensor", lambda ts, d: [torch.as_tensor(t, device=d) for t in ts], None),
    ("the copy not kept", _loop_variable, "the list holds the tensor given"),
    ("first only", lambda ts, d: [ts[0].to(d), *ts[1:]], "tensor 1 was not moved"),
    ("one dropped", lambda ts, d: [t.to(d) for t in ts[:2]], "a list of 2 items for 3 tensor(s)"),
    (
        "dtype",
        lambda ts, d: [t.to(d, torch.float64) for t in ts],
        "from float32 (3,) to float64 (3,)",
    ),
    (
        "stacked",
        lambda ts, d: torch.stack([t.float().sum() for t in ts]),
        "float32 tensor of shape (3,)",
    ),
    ("cuda()", lambda ts, d: [t.cuda() for t in ts], "used the GPU itself (.cuda())"),
    ("printed", lambda ts, d: print([t.to(d) for t in ts]), "move_all returned None"),
    ("list.to", lambda ts, d: ts.to(d), "called .to() on a list"),
    ("a set", lambda ts, d: {t.to(d) for t in ts}, "returned a set of 3 items"),
    ("method", lambda ts, d: [t.to for t in ts], "item 0 of the list is the method to itself"),
    ("zeros", lambda ts, d: [torch.zeros_like(t, device=d) for t in ts], "other numbers"),
    ("a generator", lambda ts, d: (t.to(d) for t in ts), "returned a generator"),
    ("back to the CPU", lambda ts, d: [t.to(d).cpu() for t in ts], "copies them off the device"),
    (
        "flattened",
        lambda ts, d: [t.to(d).view(-1) for t in ts],
        "from float32 (2, 2) to float32 (4,)",
    ),
]

AS_FLOATS = [
    ("tolist", lambda t: t.tolist(), None),
    ("via NumPy", lambda t: t.detach().cpu().numpy().tolist(), None),
    ("float() each", lambda t: [float(v) for v in t], None),
    ("to_numpy", lambda t: to_numpy(t).tolist(), None),
    ("item", lambda t: t.item(), "called .item() on a tensor of several numbers"),
    ("numpy with grad", lambda t: t.numpy().tolist(), ".numpy() on a tensor that requires grad"),
    (
        "numpy on the CPU only",
        lambda t: t.detach().numpy().tolist(),
        ".numpy() on a tensor not on the CPU",
    ),
    ("NumPy array", lambda t: t.detach().cpu().numpy(), "returned a NumPy array"),
    ("NumPy floats", lambda t: list(t.detach().numpy()), "holds float32, not only Python floats"),
    ("list(t)", lambda t: list(t), "one-element tensors"),
    ("a tensor", lambda t: t.detach().cpu(), "returned a float32 tensor"),
    (
        "bare number",
        lambda t: t.tolist() if t.numel() > 1 else t.item(),
        "returned the float 0.378",
    ),
    ("first only", lambda t: t.tolist()[0], "as_floats returned the float 1.027"),
    ("ints", lambda t: [round(v) for v in t.tolist()], "holds int"),
    ("a string", lambda t: str(t.tolist()), "returned the string"),
    (
        "requires_grad_(False)",
        lambda t: t.requires_grad_(False).tolist(),
        "switch off requires_grad",
    ),
    ("detach_()", lambda t: t.detach_().tolist(), "switched off requires_grad"),
    ("sorted", lambda t: sorted(t.tolist()), "not the tensor's"),
    ("cuda first", lambda t: t.cuda().tolist(), "used the GPU itself"),
    ("rounded", lambda t: [round(v, 2) for v in t.tolist()], "returned [1.03, -0.2, -1.45]"),
    ("a tuple", lambda t: tuple(t.tolist()), "returned a tuple of 3 items, not a list"),
]

TABLES = {check_noise: NOISE, check_move_all: MOVE_ALL, check_as_floats: AS_FLOATS}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)


def test_noise_leaves_the_random_numbers_alone():
    first = torch.manual_seed(3) and torch.rand(2)
    torch.manual_seed(3)
    check_noise(lambda shape, device: torch.randn(shape, device=device))
    assert torch.equal(torch.rand(2), first)
