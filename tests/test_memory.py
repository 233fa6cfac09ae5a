"""helpers.memory: byte counts of real tensors, and the batch-size search."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.memory import (
    MiB,
    StateBytes,
    largest_batch_that_fits,
    measure_state,
    saved_for_backward,
    tensor_bytes,
)


@pytest.mark.parametrize(
    ("make_optimizer", "copies"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1), 0),  # a momentum_buffer of None
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 1),
        (lambda p: torch.optim.Adam(p), 2),  # and a step counter, left out
    ],
)
def test_state_bytes_before_and_after_a_step(make_optimizer, copies):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = make_optimizer(model.parameters())
    size = sum(p.numel() for p in model.parameters()) * 4
    assert measure_state(model, optimizer) == StateBytes(size, 0, 0) == measure_state(model)
    F.cross_entropy(model(torch.randn(5, 8)), torch.tensor([0, 1, 2, 3, 0])).backward()
    optimizer.step()
    after = measure_state(model, optimizer)
    assert after == StateBytes(size, size, copies * size) and after.total == (2 + copies) * size
    assert str(StateBytes(MiB, 2 * MiB, 0)).splitlines()[-1].split() == ["total:", "3.00", "MiB"]
    assert tensor_bytes(t for t in [torch.zeros(10, dtype=torch.bfloat16, device="meta")]) == 20


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda m, o: measure_state(o, m), TypeError, "model is an nn.Module"),
        (lambda m, o: measure_state(m, "adam"), TypeError, "'adam'"),
        (
            lambda m, o: measure_state(m, torch.optim.Adam(nn.Linear(2, 2).parameters())),
            ValueError,
            "other",
        ),
        (lambda m, o: tensor_bytes([[1.0, 2.0]]), TypeError, "counts tensors"),
        (lambda m, o: tensor_bytes(m), TypeError, r"model\.parameters\(\)"),
        (lambda m, o: tensor_bytes(np.zeros(3)), TypeError, "torch.from_numpy"),
        (lambda m, o: tensor_bytes(m.state_dict()), TypeError, r"\.values\(\)"),
        (lambda m, o: tensor_bytes(m.weight), TypeError, r"\[tensor\]"),
        (lambda m, o: tensor_bytes([m.weight, None]), TypeError, "NoneType"),
        (lambda m, o: measure_state(type(m)), TypeError, "model is an nn.Module"),
        (lambda m, o: saved_for_backward(exclude=m).__enter__(), TypeError, "list of tensors"),
        (lambda m, o: saved_for_backward([m.weight.to("meta")]).__enter__(), ValueError, "meta"),
        (lambda m, o: largest_batch_that_fits(64, 1, 8), TypeError, "step is 64"),
        (lambda m, o: largest_batch_that_fits(print, "1", 8), ValueError, "whole numbers"),
    ],
)
def test_bad_arguments_are_named(call, error, words):
    model = nn.Linear(2, 2)
    with pytest.raises(error, match=words):
        call(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_saved_for_backward_counts_what_autograd_keeps_each_storage_once():
    a = torch.randn(100, requires_grad=True)
    with saved_for_backward(exclude=[a]) as saved:
        b = a.exp()  # saves its result: 400 bytes
        c = (b * b).sum() + (a * a).sum() + (b[:10] * 2).sum()  # b again, a (excluded), no save
    after = saved.bytes
    c.backward()
    (a * a.exp()).sum().backward()  # outside the block: not counted
    assert after == saved.bytes == 400


def _oom_above(limit, calls):
    def step(batch_size):
        calls.append(batch_size)
        if limit is None or batch_size > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch_size} MiB.")

    return step


@pytest.mark.parametrize(
    ("low", "high", "limit", "expected", "tries"),
    [
        (
            1,
            131_072,
            5_000,
            5_000,
            [1, 65537, 32769, 16385, 8193, 4097, 6145, 5121, 4609, 4865, 4993],
        ),
        (1, 100, 100, 100, None),
        (1, 100, None, None, [1]),
        (7, 7, 7, 7, [7]),
    ],
)
def test_largest_batch_that_fits_finds_the_limit_by_bisection(low, high, limit, expected, tries):
    calls = []
    assert largest_batch_that_fits(_oom_above(limit, calls), low, high) == expected
    assert len(calls) <= 18 and (tries is None or calls[: len(tries)] == tries)


def test_largest_batch_that_fits_lets_other_errors_through_and_refuses_a_bad_range():
    def buggy(batch_size):
        raise ValueError("a bug in the step, not a lack of memory")

    with pytest.raises(ValueError, match="a bug in the step"):
        largest_batch_that_fits(buggy, 1, 8)
    for low, high in ((0, 8), (9, 8), (1.5, 8)):
        with pytest.raises(ValueError, match="1 <= low <= high"):
            largest_batch_that_fits(buggy, low, high)
