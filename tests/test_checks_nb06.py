"""helpers.checks.nb06: right answers in other spellings pass, typical mistakes are refused by name."""

import time
import timeit
from time import perf_counter

import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks.nb06 import SimulatedDevice, check_device_batches, check_time_per_call, check_train_epoch
from solutions import nb06 as solution


def test_the_simulated_device_is_asynchronous():
    device = SimulatedDevice(work=0.05, first=0.05)
    start = device.clock()
    device.launch()
    device.launch()
    launched = device.clock() - start
    device.synchronize()
    finished = device.clock() - start
    assert launched < 0.001 and finished >= 0.1 and device.synchronized_after == [2]


def test_the_clocks_are_real_again_after_the_check():
    clocks = (time.perf_counter, time.time, time.monotonic, timeit.default_timer, perf_counter)
    check_time_per_call(solution.time_per_call)
    assert (time.perf_counter, time.time, time.monotonic, timeit.default_timer, perf_counter) == clocks
    assert abs(time.time() - timeit.default_timer()) > 0 and perf_counter is time.perf_counter


# ---- exercise 1: time_per_call ----


def _with(clock, scale=1.0):
    def time_per_call(fn, synchronize, *, warmup=2, repeats=10):
        for _ in range(warmup):
            fn()
        synchronize()
        start = clock()
        for _ in range(repeats):
            fn()
        synchronize()
        return (clock() - start) * scale / repeats

    return time_per_call


def _synchronize_every_call(fn, synchronize, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
        synchronize()
    total = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize()
        total += time.perf_counter() - start
    return total / repeats


def _list_of_times(fn, synchronize, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
    synchronize()
    times = [time.perf_counter()]
    for _ in range(repeats):
        fn()
    synchronize()
    times.append(time.perf_counter())
    return (times[-1] - times[0]) / repeats


def _seed_000(fn, synchronize, *, warmup=2, repeats=10):
    """The seed's timing: no wait for the device at the end."""
    for _ in range(warmup):
        fn()
    synchronize()
    start = time.time()
    for _ in range(repeats):
        fn()
    return (time.time() - start) / repeats


def _no_sync_before_starting(fn, synchronize, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeats


def _clock_around_the_warmup(fn, synchronize, *, warmup=2, repeats=10):
    start = time.perf_counter()
    for _ in range(warmup + repeats):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeats


def _no_warmup(fn, synchronize, *, warmup=2, repeats=10):
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeats


def _divides_by_all_calls(fn, synchronize, *, warmup=2, repeats=10):
    return (
        solution.time_per_call(fn, synchronize, warmup=warmup, repeats=repeats) * repeats / (warmup + repeats)
    )


def _torch_cuda_synchronize(fn, synchronize, *, warmup=2, repeats=10):
    return solution.time_per_call(fn, torch.cuda.synchronize, warmup=warmup, repeats=repeats)


def _no_clock(fn, synchronize, *, warmup=2, repeats=10):
    for _ in range(warmup + repeats):
        fn()
    synchronize()
    return 0.02


def _backwards(fn, synchronize, *, warmup=2, repeats=10):
    return -solution.time_per_call(fn, synchronize, warmup=warmup, repeats=repeats)


TIME_RIGHT = {
    "time.time": _with(time.time),
    "from time import perf_counter": _with(perf_counter),
    "time.monotonic": _with(time.monotonic),
    "timeit.default_timer": _with(timeit.default_timer),
    "perf_counter_ns": _with(time.perf_counter_ns, scale=1e-9),
    "synchronize every call": _synchronize_every_call,
    "a list of times": _list_of_times,
}

TIME_WRONG = [
    ("seed 000", _seed_000, "call synchronize() before reading the clock at the end"),
    ("no sync before starting", _no_sync_before_starting, "the warm-up's work, still queued, was counted"),
    ("clock around the warm-up", _clock_around_the_warmup, "the warm-up's work, still queued"),
    ("no warm-up", _no_warmup, "with no warm-up"),
    (
        "total",
        lambda fn, s, **kw: solution.time_per_call(fn, s, **kw) * kw["repeats"],
        "for all 10 calls together",
    ),
    ("milliseconds", _with(time.perf_counter, scale=1000), "in milliseconds: return seconds"),
    (
        "ms in total",
        lambda fn, s, **kw: solution.time_per_call(fn, s, **kw) * 10_000,
        "in milliseconds for all",
    ),
    ("process_time", _with(time.process_time), "time.process_time counts the time this process computes"),
    ("a string", lambda fn, synchronize, **kw: "10 ms", "returned the string '10 ms'"),
    ("called once", lambda fn, synchronize, **kw: fn() or 0.02, "fn was called once"),
    ("divided by all calls", _divides_by_all_calls, "time the repeats alone"),
    (
        "torch.cuda.synchronize",
        _torch_cuda_synchronize,
        "torch.cuda.synchronize(): call the synchronize it is given",
    ),
    ("no clock", _no_clock, "did not read the clock"),
    ("backwards", _backwards, "a negative time"),
    (
        "a tensor",
        lambda fn, s, **kw: torch.tensor(solution.time_per_call(fn, s, **kw)),
        "returned a float32 tensor",
    ),
]


@pytest.mark.parametrize("answer", right_cases(TIME_RIGHT))
def test_time_per_call_right(answer, capsys):
    right(check_time_per_call, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(TIME_WRONG))
def test_time_per_call_wrong(answer, fragment):
    wrong(check_time_per_call, answer, fragment)


# ---- exercise 2: device_batches ----


def _randperm_on_the_cpu_then_moved(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).to(labels.device)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        yield images[index], labels[index]


def _cpu_index(images, labels, batch_size, generator):
    """A CPU index into tensors on a GPU works: PyTorch copies the index over."""
    order = torch.randperm(len(labels), generator=generator)
    for start in range(0, len(order), batch_size):
        yield images[order[start : start + batch_size]], labels[order[start : start + batch_size]]


def _split(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator, device=generator.device).to(labels.device)
    yield from zip(images[order].split(batch_size), labels[order].split(batch_size), strict=True)


def _index_select(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator, device=generator.device).to(labels.device)
    return [(images.index_select(0, i), labels.index_select(0, i)) for i in order.split(batch_size)]


def _in_stored_order(images, labels, batch_size, generator):
    for start in range(0, len(labels), batch_size):
        yield images[start : start + batch_size], labels[start : start + batch_size]


def _drops_the_last_batch(images, labels, batch_size, generator):
    batches = list(solution.device_batches(images, labels, batch_size, generator))
    return batches[:-1] if len(labels) % batch_size else batches


def _two_permutations(images, labels, batch_size, generator):
    a = torch.randperm(len(labels), generator=generator).to(labels.device)
    b = torch.randperm(len(labels), generator=generator).to(labels.device)
    for start in range(0, len(labels), batch_size):
        yield images[a[start : start + batch_size]], labels[b[start : start + batch_size]]


def _ignores_the_generator(images, labels, batch_size, generator):
    return solution.device_batches(images, labels, batch_size, torch.Generator().manual_seed(7))


def _with_replacement(images, labels, batch_size, generator):
    index = torch.randint(0, len(labels), (len(labels),), generator=generator).to(labels.device)
    for start in range(0, len(labels), batch_size):
        yield images[index[start : start + batch_size]], labels[index[start : start + batch_size]]


def _per_sample_python(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).tolist()
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        yield torch.stack([images[i] for i in chosen]), torch.stack([labels[i] for i in chosen])


def _a_list_of_indices(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).tolist()
    for start in range(0, len(order), batch_size):
        yield images[order[start : start + batch_size]], labels[order[start : start + batch_size]]


def _data_loader(images, labels, batch_size, generator):
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True, generator=generator)


def _drawn_on_the_tensors_device(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator, device=labels.device)  # fails on a GPU
    for start in range(0, len(labels), batch_size):
        yield images[order[start : start + batch_size]], labels[order[start : start + batch_size]]


def _through_the_cpu(images, labels, batch_size, generator):
    yield from solution.device_batches(images.cpu(), labels.cpu(), batch_size, generator)


def _reads_the_permutation(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).to(labels.device)
    for start in range(0, len(labels), batch_size):
        index = order[start : start + batch_size].tolist()
        yield (
            images[torch.tensor(index, device=labels.device)],
            labels[torch.tensor(index, device=labels.device)],
        )


def _endless(images, labels, batch_size, generator):
    while True:
        yield from solution.device_batches(images, labels, batch_size, generator)


BATCHES_RIGHT = {
    "randperm on the CPU, moved": _randperm_on_the_cpu_then_moved,
    "a CPU index": _cpu_index,
    "split": _split,
    "index_select, a list": _index_select,
}

BATCHES_WRONG = [
    ("stored order", _in_stored_order, "the batches come in the stored order"),
    ("drops the last batch", _drops_the_last_batch, "the batch sizes are [8, 8, 8, 8, 8, 8]"),
    ("two permutations", _two_permutations, "images and labels got separated"),
    ("ignores the generator", _ignores_the_generator, "the order does not follow the generator"),
    ("with replacement", _with_replacement, "some samples appear twice"),
    ("per-sample Python", _per_sample_python, "100 times for 50 samples, once per sample"),
    ("a list of indices", _a_list_of_indices, "with a Python list of indices"),
    ("DataLoader", _data_loader, "once per sample"),
    (
        "drawn on the tensors' device",
        _drawn_on_the_tensors_device,
        "a CPU generator cannot draw the permutation on a GPU",
    ),
    ("through the CPU", _through_the_cpu, "reads values back from the device (.cpu()"),
    ("reads the permutation", _reads_the_permutation, "(.tolist() at line"),
    ("not pairs", lambda images, labels, batch_size, generator: [images, labels], "yield pairs of tensors"),
    ("endless", _endless, "gave more than 500 items"),
]


@pytest.mark.parametrize("answer", right_cases(BATCHES_RIGHT))
def test_device_batches_right(answer, capsys):
    right(check_device_batches, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(BATCHES_WRONG))
def test_device_batches_wrong(answer, fragment):
    randperm = torch.randperm
    wrong(check_device_batches, answer, fragment)
    assert torch.randperm is randperm


# ---- exercise 3: train_epoch ----


def _step(model, x, y, loss_fn, optimizer):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def _zeros_on_the_device(model, batches, loss_fn, optimizer):
    device = next(model.parameters()).device
    total, seen = torch.zeros((), device=device), 0
    model.train()
    for x, y in batches:
        total += _step(model, x, y, loss_fn, optimizer).detach() * len(y)
        seen += len(y)
    return total / seen


def _python_zero(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        total = total + _step(model, x, y, loss_fn, optimizer).detach() * y.shape[0]
        seen += y.shape[0]
    return total / seen


def _stacked(model, batches, loss_fn, optimizer):
    losses = [_step(model, x, y, loss_fn, optimizer).detach() * len(y) for x, y in batches]
    return torch.stack(losses).sum() / sum(len(y) for _, y in batches)


def _under_no_grad(model, batches, loss_fn, optimizer):
    total, seen = 0.0, 0
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total = total + loss * len(y)
        seen += len(y)
    return total / seen


def _item_per_step(model, batches, loss_fn, optimizer):
    total, seen = 0.0, 0
    for x, y in batches:
        total += _step(model, x, y, loss_fn, optimizer).item() * len(y)
        seen += len(y)
    return torch.tensor(total / seen)


def _returns_a_float(model, batches, loss_fn, optimizer):
    return solution.train_epoch(model, batches, loss_fn, optimizer).item()


def _keeps_the_graph(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        total = total + _step(model, x, y, loss_fn, optimizer) * len(y)
        seen += len(y)
    return total / seen


def _mean_of_batch_means(model, batches, loss_fn, optimizer):
    losses = [_step(model, x, y, loss_fn, optimizer).detach() for x, y in batches]
    return torch.stack(losses).mean()


def _no_zero_grad(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total = total + loss.detach() * len(y)
        seen += len(y)
    return total / seen


def _prints_every_step(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for step, (x, y) in enumerate(batches):
        loss = _step(model, x, y, loss_fn, optimizer)
        print(f"step {step}: loss {loss:.3f}")
        total, seen = total + loss.detach() * len(y), seen + len(y)
    return total / seen


def _prints_the_tensor(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        loss = _step(model, x, y, loss_fn, optimizer)
        print(loss)
        total, seen = total + loss.detach() * len(y), seen + len(y)
    return total / seen


def _stops_on_nan(model, batches, loss_fn, optimizer):
    total, seen = 0, 0
    for x, y in batches:
        loss = _step(model, x, y, loss_fn, optimizer)
        if torch.isnan(loss):
            break
        total, seen = total + loss.detach() * len(y), seen + len(y)
    return total / seen


def _sum_on_the_cpu(model, batches, loss_fn, optimizer):
    total, seen = torch.zeros(()), 0
    for x, y in batches:
        total += _step(model, x, y, loss_fn, optimizer).detach() * len(y)
        seen += len(y)
    return total / seen


def _back_on_the_cpu(model, batches, loss_fn, optimizer):
    return solution.train_epoch(model, batches, loss_fn, optimizer).cpu()


def _per_batch_mean(model, batches, loss_fn, optimizer):
    total = 0
    for x, y in batches:
        total = total + _step(model, x, y, loss_fn, optimizer).detach()
    return total / len(batches)


EPOCH_RIGHT = {
    "zeros on the device": _zeros_on_the_device,
    "a Python 0 to start": _python_zero,
    "stacked": _stacked,
    "under no_grad": _under_no_grad,
}

EPOCH_WRONG = [
    ("item per step", _item_per_step, "reads a value back from the device (.item() at line"),
    ("returns a float", _returns_a_float, "train_epoch returned the float"),
    ("keeps the graph", _keeps_the_graph, "still requires grad"),
    ("mean of batch means", _mean_of_batch_means, "the mean loss per sample is"),
    ("per-batch mean", _per_batch_mean, "add each batch's loss times its size"),
    ("no zero_grad", _no_zero_grad, "differs from a reference run"),
    ("prints every step", _prints_every_step, "(a format string at line"),
    ("prints the tensor", _prints_the_tensor, "(print or repr at line"),
    ("stops on NaN", _stops_on_nan, "(an if or bool() on a tensor at line"),
    ("all under no_grad", lambda *a: torch.no_grad()(solution.train_epoch)(*a), "computed without gradients"),
    ("sum on the CPU", _sum_on_the_cpu, "combined tensors on two devices, meta and cpu"),
    ("back on the CPU", _back_on_the_cpu, "(.cpu() at line"),
]


@pytest.mark.parametrize("answer", right_cases(EPOCH_RIGHT))
def test_train_epoch_right(answer, capsys):
    right(check_train_epoch, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(EPOCH_WRONG))
def test_train_epoch_wrong(answer, fragment):
    wrong(check_train_epoch, answer, fragment)
