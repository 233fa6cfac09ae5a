"""helpers.memory: byte counts of real tensors, the batch-size search, and the fresh-process runner."""

import gc
import math
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.memory import (
    MiB,
    StateBytes,
    largest_batch_that_fits,
    measure_state,
    run_script,
    saved_for_backward,
    tensor_bytes,
)


def _mlp(dtype=torch.float32):
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(dtype)


def _step(model, optimizer, dtype=torch.float32):
    x = torch.randn(5, 8, dtype=dtype)
    F.cross_entropy(model(x).float(), torch.tensor([0, 1, 2, 3, 0])).backward()
    optimizer.step()


# ---- tensor_bytes and measure_state ----


def test_tensor_bytes_counts_elements_times_their_size_on_any_device():
    assert tensor_bytes([torch.zeros(3, 4), torch.zeros(5, dtype=torch.int64)]) == 3 * 4 * 4 + 5 * 8
    assert tensor_bytes([torch.zeros(10, dtype=torch.bfloat16, device="meta")]) == 20
    assert tensor_bytes([]) == 0
    with pytest.raises(TypeError, match="counts tensors; got list"):
        tensor_bytes([[1.0, 2.0]])


@pytest.mark.parametrize(
    ("make_optimizer", "copies"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1), 0),
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 1),
        (lambda p: torch.optim.Adam(p), 2),
        (lambda p: torch.optim.AdamW(p), 2),
    ],
    ids=["sgd", "sgd-momentum", "adam", "adamw"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_state_bytes_before_and_after_a_step(make_optimizer, copies, dtype):
    model = _mlp(dtype)
    optimizer = make_optimizer(model.parameters())
    size = sum(p.numel() for p in model.parameters()) * torch.finfo(dtype).bits // 8
    assert measure_state(model, optimizer) == StateBytes(size, 0, 0)
    _step(model, optimizer, dtype)
    after = measure_state(model, optimizer)
    assert after == StateBytes(size, size, copies * size)
    assert after.total == (2 + copies) * size


def test_state_bytes_leaves_out_frozen_parameters_buffers_and_step_counters():
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))
    model[0].requires_grad_(False)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    _step(model, optimizer)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad) * 4
    everything = sum(p.numel() for p in model.parameters()) * 4
    assert any("step" in s for s in optimizer.state.values())  # there are step counters to leave out
    assert measure_state(model, optimizer) == StateBytes(everything, trainable, 2 * trainable)
    assert measure_state(model).optimizer == 0  # no optimizer given


def test_state_bytes_refuses_swapped_arguments():
    model = _mlp()
    with pytest.raises(TypeError, match="takes an nn.Module first; got Adam"):
        measure_state(torch.optim.Adam(model.parameters()), model)
    with pytest.raises(TypeError, match="must be a torch.optim optimizer; got dict"):
        measure_state(model, {})


def test_state_bytes_prints_a_table_in_mib():
    text = str(StateBytes(MiB, 2 * MiB, 0))
    assert "parameters:     1.00 MiB" in text and "total:     3.00 MiB" in text


# ---- saved_for_backward ----


def _kept(model, batch, exclude_inputs=True):
    x = torch.randn(batch, 8)
    y = torch.randint(0, 4, (batch,))
    exclude = [*model.parameters(), x, y] if exclude_inputs else list(model.parameters())
    with saved_for_backward(exclude=exclude) as saved:
        loss = F.cross_entropy(model(x), y)
    return saved, loss


def test_saved_for_backward_counts_what_autograd_keeps():
    model = _mlp()
    sizes = {b: _kept(model, b)[0].bytes for b in (10, 20, 40)}
    # per example: the ReLU's output (16 numbers, also the next Linear's input) and 4 log-probabilities
    assert sizes[40] - sizes[20] == 2 * (sizes[20] - sizes[10]) == 20 * (16 + 4) * 4
    with_inputs = _kept(model, 10, exclude_inputs=False)[0].bytes
    assert with_inputs - sizes[10] == 10 * 8 * 4 + 10 * 8  # the batch and its int64 labels, once each


def test_saved_for_backward_changes_no_gradient():
    model = _mlp()
    torch.manual_seed(0)
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    F.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with saved_for_backward() as saved:
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    assert saved.tensors > 0
    assert all(torch.equal(a, p.grad) for a, p in zip(plain, model.parameters(), strict=True))


def test_saved_for_backward_counts_nothing_outside_the_block():
    model = _mlp()
    with saved_for_backward() as saved:
        pass
    F.cross_entropy(model(torch.randn(3, 8)), torch.tensor([0, 1, 2])).backward()
    assert saved.bytes == 0 and saved.tensors == 0


# ---- largest_batch_that_fits ----


def _oom_above(limit, calls):
    def step(batch_size):
        calls.append(batch_size)
        if limit is None or batch_size > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch_size} MiB.")

    return step


@pytest.mark.parametrize(
    ("low", "high", "limit", "expected"),
    [
        (1, 131_072, 40_190, 40_190),
        (1, 1000, 1, 1),
        (1, 1000, 1000, 1000),
        (1, 1000, 5000, 1000),
        (16, 16, 16, 16),
        (8, 100, 7, None),
        (8, 100, None, None),
        (3, 17, 11, 11),
    ],
)
def test_largest_batch_that_fits_finds_the_limit_by_bisection(low, high, limit, expected):
    calls = []
    assert largest_batch_that_fits(_oom_above(limit, calls), low, high) == expected
    assert all(low <= b <= high for b in calls)
    assert len(calls) <= math.ceil(math.log2(high - low + 1)) + 1


def test_largest_batch_that_fits_catches_the_error_under_its_older_name():
    def step(batch_size):
        if batch_size > 100:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")  # the same class, older name

    assert largest_batch_that_fits(step, 1, 1000) == 100


def test_largest_batch_that_fits_lets_other_errors_through():
    def step(batch_size):
        if batch_size > 100:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        largest_batch_that_fits(step, 1, 1000)


def test_largest_batch_that_fits_drops_the_failed_steps_tensors():
    alive = []

    def step(batch_size):
        batch = torch.zeros(batch_size)  # held by this frame when the error leaves it
        alive.append(weakref.ref(batch))
        if batch_size > 10:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")

    largest_batch_that_fits(step, 1, 64)
    gc.collect()
    assert alive and all(ref() is None for ref in alive)


@pytest.mark.parametrize(
    ("low", "high", "error", "words"),
    [
        (0, 10, ValueError, "need 1 <= low <= high"),
        (20, 10, ValueError, "low=20, high=10"),
        (1.0, 10, TypeError, "whole numbers"),
    ],
)
def test_largest_batch_that_fits_refuses_a_bad_range(low, high, error, words):
    with pytest.raises(error, match=words):
        largest_batch_that_fits(lambda b: None, low, high)
    with pytest.raises(TypeError, match="step must be a function"):
        largest_batch_that_fits(32, 1, 10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: a real out-of-memory error")
def test_largest_batch_that_fits_a_real_gpu_under_a_cap():
    device = torch.device("cuda:0")
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(
        (torch.cuda.memory_reserved(device) + 256 * MiB) / total, device
    )
    try:
        largest = largest_batch_that_fits(
            lambda n: torch.empty(n * MiB, dtype=torch.uint8, device=device), 1, 4096
        )
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        torch.cuda.empty_cache()
    assert largest is not None and 64 <= largest <= 256


# ---- run_script ----


def test_run_script_reports_the_error_and_its_line():
    run = run_script(
        """
        import torch
        import torch.nn.functional as F

        logits = torch.randn(4, 10)
        print("before", flush=True)
        loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 10]))
        print("after")
        """
    )
    assert run.returncode == 1
    assert run.error == "IndexError: Target 10 is out of bounds."
    assert run.error_line == run.line_of("F.cross_entropy") == 6
    assert run.line(run.error_line) == "loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 10]))"
    assert run.stdout == "before\n"


def test_run_script_passes_the_environment_and_reports_success():
    run = run_script(
        "import os\nprint(os.environ['COURSE_TEST_VARIABLE'])", env={"COURSE_TEST_VARIABLE": "42"}
    )
    assert (run.returncode, run.stdout, run.error, run.error_line) == (0, "42\n", None, None)
    assert run.line(None) == ""


def test_run_script_finds_the_last_line_of_the_script_in_a_deeper_traceback():
    run = run_script("def inner():\n    raise KeyError('x')\n\n\ndef outer():\n    inner()\n\n\nouter()\n")
    assert run.error == "KeyError: 'x'" and run.error_line == 2


def test_run_script_refuses_bad_input_and_stops_a_script_that_hangs():
    with pytest.raises(ValueError, match="non-empty string"):
        run_script("  ")
    with pytest.raises(ValueError, match="name/value strings"):
        run_script("print(1)", env={"A": 1})
    with pytest.raises(RuntimeError, match="did not finish within 1 s"):
        run_script("import time\ntime.sleep(30)", timeout=1)
    run = run_script("x = 1\nx = 2\n")
    with pytest.raises(ValueError, match="on 2 lines"):
        run.line_of("x =")
