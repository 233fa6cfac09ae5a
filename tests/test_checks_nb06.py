"""helpers.checks.nb06: right answers in other spellings pass (fragment None), typical mistakes are
named."""

from time import perf_counter

import pytest
import torch
from exercise_answers import judge, table_cases
from torch.utils.data import DataLoader, TensorDataset

from helpers.checks.nb06 import check_device_batches, check_time_per_call, check_train_epoch
from solutions import nb06 as solution


def _timer(*, warm=True, before=True, after=True, scale=1, per=lambda warmup, repeats: repeats):
    """A time_per_call with one mistake: no warm-up, a wait left out, other units, another mean."""

    def time_per_call(fn, synchronize, clock, *, warmup=2, repeats=10):
        if warm:
            for _ in range(warmup):
                fn()
        if before:
            synchronize()
        start = clock()
        for _ in range(repeats):
            fn()
        if after:
            synchronize()
        return (clock() - start) * scale / per(warmup, repeats)

    return time_per_call


def _every_call(fn, synchronize, clock, *, warmup=2, repeats=10):
    for _ in range(warmup):
        fn()
        synchronize()
    total = 0.0
    for _ in range(repeats):
        start = clock()
        fn()
        synchronize()
        total += clock() - start
    return total / repeats


def _rounded(*args, **kwargs):
    return round(solution.time_per_call(*args, **kwargs), 2)


TIME = [
    ("synchronize every call", _every_call, None),
    ("no wait at the end", _timer(after=False), "the clock stopped with work queued"),
    ("no wait before starting", _timer(before=False), "the warm-up's work was counted"),
    ("no warm-up", _timer(warm=False), "fn ran 7 times, not warmup 3"),
    ("total", _timer(per=lambda w, r: 1), "the time of all 7 calls"),
    ("milliseconds", _timer(scale=1000), "milliseconds: return seconds"),
    ("divided by all calls", _timer(per=lambda w, r: w + r), "time the repeats alone"),
    (
        "perf_counter",
        lambda f, s, c, **kw: _timer()(f, s, perf_counter, **kw),
        "did not read the clock",
    ),
    ("called once", lambda fn, s, c, **kw: fn() or 0.02, "fn ran once"),
    (
        "cuda.synchronize",
        lambda fn, s, c, **kw: _timer()(fn, torch.cuda.synchronize, c, **kw),
        "CUDA",
    ),
    ("backwards", lambda *a, **kw: -solution.time_per_call(*a, **kw), "not a time span"),
    (
        "a tensor",
        lambda *a, **kw: torch.tensor(solution.time_per_call(*a, **kw)),
        "a float32 tensor",
    ),
    ("old signature, no clock", lambda fn, synchronize, **kw: 0.02, "keep the stub's first line"),
    ("its own warmup and repeats", lambda fn, s, c, **kw: _timer()(fn, s, c), "fn ran 12 times"),
    (
        "the end reading",
        lambda f, s, c, **kw: _timer(scale=0)(f, s, c, **kw) + c(),
        "not a time span",
    ),
    ("rounded to 10 ms", _rounded, "13.7 ms"),
]


def _batches(order=lambda n, g, d: torch.randperm(n, generator=g).to(d), image=None):
    """A device_batches: another order or other image indices make the mistakes."""

    def device_batches(images, labels, batch_size, generator):
        index = order(len(labels), generator, labels.device)
        for start in range(0, len(labels), batch_size):
            i = index[start : start + batch_size]
            if image:
                yield images[image(i, generator)], labels[i]
            else:
                yield images[i], labels[i]

    return device_batches


def _split(images, labels, batch_size, generator):
    order = torch.randperm(len(labels), generator=generator).to(labels.device)
    pieces = zip(
        images.index_select(0, order).split(batch_size),
        labels[order].split(batch_size),
        strict=True,
    )
    return list(pieces)


def _floor_batches(images, labels, batch_size, generator):
    """Counts the batches with //, which drops the rest when the size does not divide evenly."""
    order = torch.randperm(len(labels), generator=generator).to(labels.device)
    for k in range(len(labels) // batch_size):
        index = order[k * batch_size : (k + 1) * batch_size]
        yield images[index], labels[index]


def _one_too_many(images, labels, batch_size, generator):
    """Adds a batch, empty when the size divides evenly."""
    order = torch.randperm(len(labels), generator=generator).to(labels.device)
    for k in range(len(labels) // batch_size + 1):
        index = order[k * batch_size : (k + 1) * batch_size]
        yield images[index], labels[index]


def _first_batch(*args):
    return next(solution.device_batches(*args))


def _endless(*args):
    return iter(lambda: _first_batch(*args), None)


BATCHES = [
    ("split", _split, None),
    (
        "drawn where the generator is",
        _batches(lambda n, g, d: torch.randperm(n, generator=g, device=g.device).to(d)),
        None,
    ),
    (
        "a CPU index into device tensors",
        _batches(order=lambda n, g, d: torch.randperm(n, generator=g)),
        "indexed with CPU indices",
    ),
    (
        "stored order",
        _batches(order=lambda n, g, d: torch.arange(n, device=d)),
        "come in the stored order",
    ),
    ("drops the last batch", _floor_batches, "are [8, 8, 8, 8, 8, 8]"),
    ("an empty batch at the end", _one_too_many, "are [6, 6, 6, 6, 6, 6, 6, 6, 0]"),
    (
        "two permutations",
        _batches(image=lambda i, g: torch.randperm(50, generator=g)[: len(i)].to(i.device)),
        "separated",
    ),
    (
        "ignores the generator",
        lambda *a: solution.device_batches(*a[:3], torch.Generator()),
        "follow",
    ),
    (
        "with replacement",
        _batches(order=lambda n, g, d: torch.randint(n, (n,), generator=g).to(d)),
        "twice",
    ),
    (
        "drawn on the device",
        _batches(order=lambda n, g, d: torch.randperm(n, generator=g, device=d)),
        "CPU",
    ),
    (
        "through the CPU",
        lambda i, lab, *a: solution.device_batches(i.cpu(), lab.cpu(), *a),
        "values back",
    ),
    (
        "not pairs",
        lambda images, labels, batch_size, generator: [images, labels],
        "yield pairs of tensors",
    ),
    ("endless", _endless, "more than 50 items"),
    ("returns inside the loop", _first_batch, "yield pairs of tensors"),
    (
        "indices as a list",
        _batches(order=lambda n, g, d: torch.randperm(n, generator=g).tolist()),
        "Python numbers",
    ),
    (
        "a DataLoader",
        lambda i, lab, b, g: DataLoader(TensorDataset(i, lab), b, True, generator=g),
        "Python numbers",
    ),
]


def _epoch(*, step=True, zero=True, read=None, weigh=True, result=None):
    """A train_epoch with one mistake: a step or zero_grad left out, a read per step, another
    mean, or another result."""

    def train_epoch(model, batches, loss_fn, optimizer):
        batches = list(batches)
        samples = sum(len(y) for _, y in batches)
        total = torch.zeros((), device=next(model.parameters()).device)
        for x, y in batches:
            if zero:
                optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            if step:
                optimizer.step()
            if read:
                read(loss)
            share = len(y) / samples if weigh else 1 / len(batches)
            total += loss.detach() * share
        if result:
            return result(total)
        return total

    return train_epoch


def _stacked(model, batches, loss_fn, optimizer):
    losses = []
    sizes = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        sizes.append(len(y))
    weights = torch.tensor(sizes, dtype=torch.float32, device=losses[0].device)
    return torch.stack(losses) @ weights / sum(sizes)


def _two_steps(model, batches, loss_fn, optimizer):
    answer = solution.train_epoch(model, batches, loss_fn, optimizer)
    optimizer.step()
    return answer


EPOCH = [
    ("a sum on the device", _epoch(), None),
    ("stacked", _stacked, None),
    ("item per step", _epoch(read=lambda loss: loss.item()), "reads a value back every step"),
    ("returns a float", _epoch(result=float), "returned the float"),
    (
        "keeps the graph",
        lambda *a: solution.train_epoch(*a).requires_grad_(),
        "still requires grad",
    ),
    ("mean of batch means", _epoch(weigh=False), "not the mean per sample"),
    ("no zero_grad", _epoch(zero=False), "differs from a reference run"),
    ("no step", _epoch(step=False), "optimizer.step() ran 0 times for 3 batches"),
    ("one step too many", _two_steps, "optimizer.step() ran 4 times for 3 batches"),
    ("prints every step", _epoch(read=print), "reads a value back every step"),
    ("stops on NaN", _epoch(read=lambda loss: bool(torch.isnan(loss))), "every step"),
    (
        "all under no_grad",
        lambda *a: torch.no_grad()(solution.train_epoch)(*a),
        "does not require grad",
    ),
    (
        "sum on the CPU",
        _epoch(result=lambda total: torch.zeros(()).add_(total)),
        "left the model's",
    ),
    ("back on the CPU", _epoch(result=lambda total: total.cpu()), "reads a value back at the end"),
]


TABLES = {check_time_per_call: TIME, check_device_batches: BATCHES, check_train_epoch: EPOCH}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
