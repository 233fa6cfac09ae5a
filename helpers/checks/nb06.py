"""Checks for the exercises of ``06_performance``.

``time_per_call`` is given a device whose calls return at once and finish later, as a GPU's do,
and a clock of the check's own. The others run on the CPU, on ``meta`` standing in for a GPU, on a
Mac whose GPU the check stands in for, and on any real GPU.
"""

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import (
    Machine,
    StandInError,
    describe,
    device_machines,
    exercise,
    short,
)

__all__ = ["check_device_batches", "check_time_per_call", "check_train_epoch"]


def _first(*rules: tuple[bool, str, str]) -> None:
    """Fail with the first ``(wrong, mistake, fix)`` whose ``wrong`` holds."""
    for wrong, mistake, fix in rules:
        if wrong:
            fail(mistake, fix)


# ---- exercise 1: time_per_call ----------------------------------------------------------------


class _Device:
    """``fn()`` queues ``work`` seconds of work (the first call ``first``) and returns at once;
    ``synchronize()`` waits until the queue is empty; ``clock()`` tells the time."""

    def __init__(self, work: float, first: float) -> None:
        self.work = work
        self.first = first
        self.now = 5000.0
        self.busy = 5000.0
        self.calls = 0
        self.syncs = 0
        self.reads = 0

    def fn(self) -> None:
        self.now += 1e-5
        self.calls += 1
        duration = self.first if self.calls == 1 else self.work
        self.busy = max(self.busy, self.now) + duration

    def synchronize(self) -> None:
        self.now = max(self.now, self.busy)
        self.syncs += 1

    def clock(self) -> float:
        self.reads += 1
        return self.now


def _timed(time_per_call: Callable, work: float, warmup: int, repeats: int) -> None:
    """Time calls of ``work`` seconds each (the first ten times longer) and judge the answer."""
    d = _Device(work, first=10 * work)
    a = Machine.cpu().run(
        time_per_call, d.fn, d.synchronize, d.clock, warmup=warmup, repeats=repeats
    )
    if isinstance(a, bool) or not isinstance(a, int | float) or not math.isfinite(a):
        fail(f"time_per_call returned {describe(a)}", "return the seconds per call, a float")
    times = "once" if d.calls == 1 else f"{d.calls} times"
    ms = f"{a * 1000:.4g} ms per call, for calls that keep the device busy {work * 1000:g} ms"

    def close(x: float) -> bool:
        return math.isclose(a, x, rel_tol=0.01)

    _first(
        (
            d.calls != warmup + repeats,
            f"fn ran {times}, not warmup {warmup} + repeats {repeats}",
            "run it warmup, then repeats times",
        ),
        (
            d.syncs == 0,
            "time_per_call never called synchronize",
            "call the synchronize it is given",
        ),
        (d.reads < 2, "it did not read the clock it is given", "call clock() at the start and end"),
        (
            close(work * 1000) or close(work * repeats * 1000),
            "it returned milliseconds",
            "return seconds, as the clock gives them",
        ),
        (
            close(work * repeats),
            f"it returned the time of all {repeats} calls",
            "divide by repeats",
        ),
        (
            a < 0 or a > 100,
            f"it returned {a:.4g}, not a time span",
            "subtract the start from the end",
        ),
        (
            a < 0.5 * work,
            f"{ms}: the clock stopped with work queued",
            "synchronize() before the end",
        ),
        (
            a > 1.5 * work,
            f"{ms}: the warm-up's work was counted",
            "synchronize() after the warm-up",
        ),
        (not close(work), ms, "time the repeats alone, between two synchronize() calls"),
    )


@exercise(
    "write time_per_call(fn, synchronize, clock, warmup, repeats) returning the seconds per call "
    "of fn"
)
def check_time_per_call(time_per_call: Callable) -> str:
    _timed(time_per_call, work=0.02, warmup=3, repeats=7)
    _timed(time_per_call, work=0.0137, warmup=2, repeats=5)
    return "the seconds per call, measured between two waits for the device, after a warm-up"


# ---- exercise 2: device_batches ---------------------------------------------------------------

_PER_SAMPLE = (
    "device_batches makes the indices Python numbers",
    "index with a slice of the permutation",
)


def _data(size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Images whose pixels hold their label, and the labels 0, 1, ..., on ``device``."""
    labels = torch.arange(size)
    images = labels.float().view(size, 1, 1, 1).expand(size, 3, 4, 4).contiguous()
    return images.to(device), labels.to(device)


def _epoch(m: Machine, device_batches: Callable, size: int, batch: int, seed: int) -> torch.Tensor:
    """One epoch of ``size`` samples in batches of ``batch``, checked: the labels in their order."""
    images, labels = _data(size, m.device)
    generator = torch.Generator().manual_seed(seed)
    m.forbidden = dict.fromkeys((torch.Tensor.tolist, torch.Tensor.item), _PER_SAMPLE)
    m.cpu_indices_refused = True
    batches = m.run(device_batches, images, labels, batch, generator, consume=size, reads=False)
    _check_batches(batches, size, batch)
    if m.device.type == "meta":
        return torch.arange(size).flip(0)
    order = torch.cat([y.cpu() for _, y in batches])
    separated = any(not x.cpu()[:, 0, 0, 0].long().equal(y.cpu()) for x, y in batches)
    _first(
        (
            sorted(order.tolist()) != list(range(size)),
            "some samples come twice, others never",
            "permute once",
        ),
        (separated, "images and labels got separated", "index both with the same indices"),
        (
            order.equal(torch.arange(size)),
            "the batches come in the stored order",
            "shuffle, with torch.randperm",
        ),
    )
    return order


def _check_batches(batches: Any, size: int, batch: int) -> None:
    pairs = isinstance(batches, list) and all(
        isinstance(b, tuple | list) and len(b) == 2 for b in batches
    )
    if not pairs or not all(isinstance(t, torch.Tensor) for b in batches for t in b):
        fail(f"device_batches gave {describe(batches)}", "yield pairs of tensors, (images, labels)")
    if any(x.shape[1:] != (3, 4, 4) or y.shape != x.shape[:1] for x, y in batches):
        fail("the batches do not have the tensors' shapes", "index the tensors, nothing more")
    sizes = [len(y) for _, y in batches]
    expected = [min(batch, size - start) for start in range(0, size, batch)]
    if sizes != expected:
        fail(
            f"for {size} samples in batches of {batch} the sizes are {short(sizes, 40)}",
            "only the last batch is short, when the size does not divide evenly",
        )


@exercise(
    "write device_batches(images, labels, batch_size, generator) yielding an epoch of shuffled "
    "batches"
)
def check_device_batches(device_batches: Callable) -> str:
    for m in device_machines():
        for size, batch in ((50, 8), (48, 6)):
            order = _epoch(m, device_batches, size, batch, seed=0)
            again = _epoch(m, device_batches, size, batch, seed=0)
            other = _epoch(m, device_batches, size, batch, seed=1)
            follows = order.equal(again) and not order.equal(other)
            if m.device.type != "meta" and not follows:
                fail(
                    "the order does not follow the generator",
                    "draw it with torch.randperm(..., generator=)",
                )
    return "shuffled batches, every sample once, indexed on the tensors' device"


# ---- exercise 3: train_epoch ------------------------------------------------------------------


def _setup(device: torch.device, sizes: tuple[int, ...]) -> tuple:
    """A model, batches of ``sizes`` samples, a loss and an optimizer, on ``device``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10)).to(device)
        data = [(torch.randn(n, 12).to(device), torch.randint(10, (n,)).to(device)) for n in sizes]
    return model, data, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


def _reference(sizes: tuple[int, ...]) -> tuple[nn.Module, float]:
    """The model after a plain epoch on the CPU, and the mean loss per sample."""
    model, batches, loss_fn, optimizer = _setup(torch.device("cpu"), sizes)
    total = 0.0
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
    return model, total / sum(sizes)


def _epoch_on(m: Machine, train_epoch: Callable, sizes: tuple[int, ...]) -> tuple:
    setup = _setup(m.device, sizes)
    steps: list[int] = []
    setup[3].register_step_post_hook(lambda *_: steps.append(1))
    try:
        answer = m.run(train_epoch, *setup)
    except StandInError:
        when = "at the end" if len(steps) == len(sizes) else "every step"
        fail(
            f"train_epoch reads a value back {when}, and on a GPU each read waits for it",
            "keep the running sum on the device and return it as a tensor",
        )
    if len(steps) != len(sizes):
        fail(
            f"optimizer.step() ran {len(steps)} times for {len(sizes)} batches",
            "step once per batch",
        )
    return answer, setup[0]


def _check_epoch(answer: Any, model: nn.Module, reference: nn.Module, expected: float) -> None:
    if not isinstance(answer, torch.Tensor) or answer.dim():
        fail(f"train_epoch returned {describe(answer)}", "return the mean loss, a 0-d tensor")
    pairs = zip(model.parameters(), reference.parameters(), strict=True)
    differs = any(not p.is_meta and not p.cpu().allclose(q, 1e-4, 1e-5) for p, q in pairs)
    mean = answer.is_meta or math.isclose(answer.detach().cpu().item(), expected, rel_tol=1e-4)
    _first(
        (
            answer.requires_grad,
            "the loss returned still requires grad",
            "add up loss.detach(), not loss",
        ),
        (
            answer.device != model[0].weight.device,
            "the loss left the model's device",
            "keep it there",
        ),
        (
            differs,
            "the model differs from a reference run",
            "per batch: zero_grad(), backward(), step()",
        ),
        (
            not mean,
            "the loss returned is not the mean per sample",
            "weigh each batch's loss by its size",
        ),
    )


@exercise(
    "write train_epoch(model, batches, loss_fn, optimizer) returning the mean loss, reading nothing"
)
def check_train_epoch(train_epoch: Callable) -> str:
    for sizes in ((16, 16, 5), (8, 3)):
        reference, expected = _reference(sizes)
        for m in device_machines():
            answer, model = _epoch_on(m, train_epoch, sizes)
            _check_epoch(answer, model, reference, expected)
    return "the epoch trains as a reference run does, and reads nothing back from the device"
