"""The checks of 06_performance accept the reference solutions and reject wrong answers."""

import time

import pytest
import torch

from helpers.checks import CheckFailed, nb06
from solutions import nb06 as solution


def test_the_simulated_device_is_asynchronous():
    device = nb06.SimulatedDevice(work=0.05, first=0.05)
    start = time.perf_counter()
    device.launch()
    device.launch()
    launched = time.perf_counter() - start
    device.synchronize()
    finished = time.perf_counter() - start
    assert launched < 0.01 and finished >= 0.1 and device.synchronized_after == [2]


# ---- exercise 1: time_per_call ----


def seed_000_style(fn, synchronize, *, warmup=2, repeats=10):
    """The seed's timing: no wait for the device at the end."""
    for _ in range(warmup):
        fn()
    synchronize()
    start = time.time()
    for _ in range(repeats):
        fn()
    return (time.time() - start) / repeats


def no_sync_before_starting(fn, synchronize, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeats


def no_warmup(fn, synchronize, *, warmup=2, repeats=10):
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeats


def total_not_per_call(fn, synchronize, *, warmup=2, repeats=10):
    return solution.time_per_call(fn, synchronize, warmup=warmup, repeats=repeats) * repeats


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (seed_000_style, "Call synchronize\\(\\) before reading the clock at the end"),
        (no_sync_before_starting, "warm-up's work, still queued"),
        (no_warmup, "with no warm-up"),
        (total_not_per_call, "divide by repeats"),
        (lambda fn, synchronize, **kw: "10 ms", "return a float"),
        (lambda fn, synchronize, **kw: fn() or 0.02, "called 1 times"),
    ],
)
def test_wrong_timing_functions_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb06.check_time_per_call(answer)


# ---- exercise 2: device_batches ----


def in_stored_order(images, labels, batch_size, generator):
    for start in range(0, len(labels), batch_size):
        yield images[start : start + batch_size], labels[start : start + batch_size]


def drops_the_last_batch(images, labels, batch_size, generator):
    batches = list(solution.device_batches(images, labels, batch_size, generator))
    return batches[:-1] if len(labels) % batch_size else batches


def two_permutations(images, labels, batch_size, generator):
    a = torch.randperm(len(labels), generator=generator, device=labels.device)
    b = torch.randperm(len(labels), generator=generator, device=labels.device)
    for start in range(0, len(labels), batch_size):
        yield images[a[start : start + batch_size]], labels[b[start : start + batch_size]]


def ignores_the_generator(images, labels, batch_size, generator):
    return solution.device_batches(images, labels, batch_size, torch.Generator().manual_seed(7))


def with_replacement(images, labels, batch_size, generator):
    index = torch.randint(0, len(labels), (len(labels),), generator=generator, device=labels.device)
    for start in range(0, len(labels), batch_size):
        yield images[index[start : start + batch_size]], labels[index[start : start + batch_size]]


def per_sample_python(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).tolist()
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        yield torch.stack([images[i] for i in chosen]), torch.tensor([labels[i].item() for i in chosen])


def permutation_drawn_on_the_tensors_device(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator, device=labels.device)  # fails on a GPU
    for start in range(0, len(labels), batch_size):
        yield images[order[start : start + batch_size]], labels[order[start : start + batch_size]]


def through_the_cpu(images, labels, batch_size, generator):
    yield from solution.device_batches(images.cpu(), labels.cpu(), batch_size, generator)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (in_stored_order, "stored order"),
        (drops_the_last_batch, "expected batch sizes"),
        (two_permutations, "separated"),
        (ignores_the_generator, "follow the generator"),
        (with_replacement, "appear twice"),
        (per_sample_python, "'meta' device"),
        (through_the_cpu, "'meta' device"),
        (permutation_drawn_on_the_tensors_device, "a CPU generator cannot draw a permutation on the GPU"),
        (lambda images, labels, batch_size, generator: [images, labels], "pair of tensors"),
    ],
)
def test_wrong_batch_iterators_are_rejected(answer, message):
    randperm = torch.randperm
    with pytest.raises(CheckFailed, match=message):
        nb06.check_device_batches(answer)
    assert torch.randperm is randperm  # the check's GPU-like randperm is gone again


# ---- exercise 3: train_epoch ----


def _step(model, x, y, loss_fn, optimizer):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def item_per_step(model, batches, loss_fn, optimizer):
    total, seen = 0.0, 0
    for x, y in batches:
        total += _step(model, x, y, loss_fn, optimizer).item() * len(y)
        seen += len(y)
    return torch.tensor(total / seen)


def returns_a_float(model, batches, loss_fn, optimizer):
    return item_per_step(model, batches, loss_fn, optimizer).item()


def keeps_the_graph(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        total = total + _step(model, x, y, loss_fn, optimizer) * len(y)
        seen += len(y)
    return total / seen


def mean_of_batch_means(model, batches, loss_fn, optimizer):
    losses = [_step(model, x, y, loss_fn, optimizer).detach() for x, y in batches]
    return torch.stack(losses).mean()


def no_zero_grad(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total = total + loss.detach() * len(y)
        seen += len(y)
    return total / seen


def back_on_the_cpu(model, batches, loss_fn, optimizer):
    return solution.train_epoch(model, batches, loss_fn, optimizer).cpu()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (item_per_step, "reads a value back from the device"),
        (returns_a_float, "returned a float"),
        (keeps_the_graph, "still requires grad"),
        (mean_of_batch_means, "mean loss per sample"),
        (no_zero_grad, "differs from a reference run"),
        (back_on_the_cpu, "'meta' device"),
    ],
)
def test_wrong_training_loops_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb06.check_train_epoch(answer)
