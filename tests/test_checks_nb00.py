"""helpers.checks.nb00: wrong answers are refused with their messages."""

import re

import numpy as np
import pytest
import torch

from helpers.checks import CheckFailed
from helpers.checks.nb00 import TorchCalls, check_as_floats, check_move_all, check_noise, stand_in_device


def _forgot_to_reassign(tensors, device):
    for t in tensors:
        t.to(device)
    return tensors


def _reassigned_the_loop_variable(tensors, device):
    for t in tensors:
        t = t.to(device)  # the mistake: this rebinds t, the list keeps the old tensors
    return tensors


WRONG = [
    (check_noise, lambda shape, device: torch.randn(shape), "the tensor is on cpu, not on"),
    (check_noise, lambda shape, device: torch.randn(shape).to(device), "made on cpu and then copied"),
    (check_noise, lambda shape, device: torch.rand(shape, device=device), "torch.rand draws uniformly"),
    (check_noise, lambda shape, device: torch.randn(3, 2, device=device), "shape (3, 2)"),
    (check_noise, lambda shape, device: np.random.randn(*shape), "returned a ndarray, not a tensor"),
    (check_noise, lambda shape, device: torch.ones(shape, dtype=torch.long, device=device), "torch.int64"),
    (check_move_all, _forgot_to_reassign, "tensor 0 is the very tensor you were given, still on cpu"),
    (check_move_all, _reassigned_the_loop_variable, "reassigning the loop variable does not change the list"),
    (check_move_all, lambda ts, device: [ts[0].to(device), *ts[1:]], "tensor 1 is the very tensor"),
    (check_move_all, lambda ts, device: [t.to(device) for t in ts[:2]], "returned 2 items for 3 tensors"),
    (
        check_move_all,
        lambda ts, device: [t.to(device, torch.float64) for t in ts],
        "changed its shape or dtype",
    ),
    (check_move_all, lambda ts, device: torch.stack([t.float().sum() for t in ts]), "returned a Tensor"),
    (check_as_floats, lambda t: t.item(), ".item() gives one number and works only for a tensor with one"),
    (check_as_floats, lambda t: t.numpy().tolist(), "this tensor requires grad: call .detach() first"),
    (check_as_floats, lambda t: t.detach().numpy(), "returned a NumPy array"),
    (check_as_floats, lambda t: list(t), "the list holds tensors"),
    (check_as_floats, lambda t: t * 1, "returned a tensor, not Python floats"),
    (check_as_floats, lambda t: list(t.detach().numpy()), "the list holds float32, not Python floats"),
    (check_as_floats, lambda t: t.tolist() if t.numel() > 1 else t.item(), "returned a bare number"),
    (check_as_floats, lambda t: [round(v) for v in t.tolist()], "the list holds int"),
]


@pytest.mark.parametrize(("check", "answer", "message"), WRONG, ids=[m for _, _, m in WRONG])
def test_a_wrong_answer_is_refused_with_its_message(check, answer, message):
    with pytest.raises(CheckFailed, match=re.escape(message)):
        check(answer)


def test_the_stand_in_device_is_the_accelerator_or_meta():
    device = stand_in_device()
    assert device.type != "cpu"
    if not torch.cuda.is_available() and device.type not in {"mps", "xpu"}:
        assert device == torch.device("meta")


def test_torch_calls_records_calls_and_moves_without_changing_them():
    with TorchCalls() as calls:
        made = torch.zeros(2, device="meta")
        moved = torch.ones(2).to("meta")
        kept = moved.to("meta")
    assert calls.names == ["zeros", "ones", "to", "to"]
    assert calls.moves == [("to", torch.device("cpu"), torch.device("meta"))]
    assert len(calls.moved) == 1 and calls.moved[0].device.type == "cpu"
    assert made.device.type == moved.device.type == "meta" and kept is moved
