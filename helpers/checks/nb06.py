"""Checks for ``06_performance``: ``time_per_call`` is given a device whose calls return at once and finish
later, as a GPU's do; the others run on the CPU, on ``meta`` standing in for a GPU and on any real GPU."""

import math
from collections.abc import Callable

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, StandInCannot, describe, device_machines, exercise

__all__ = ["check_device_batches", "check_time_per_call", "check_train_epoch"]


def _first(*rules: tuple[bool, str, str]) -> None:
    """Fail with the first ``(wrong, mistake, fix)`` whose ``wrong`` holds."""
    for wrong, mistake, fix in rules:
        if wrong:
            fail(mistake, fix)


class _Device:
    """``fn()`` queues 20 ms of work (the first call 300 ms) and returns at once; ``synchronize()`` waits."""

    def __init__(self) -> None:
        self.now = self.busy = 5000.0
        self.calls = self.syncs = self.reads = 0

    def fn(self) -> None:
        self.now, self.calls = self.now + 1e-5, self.calls + 1
        self.busy = max(self.busy, self.now) + (0.3 if self.calls == 1 else 0.02)

    def synchronize(self) -> None:
        self.now, self.syncs = max(self.now, self.busy), self.syncs + 1

    def clock(self) -> float:
        self.reads += 1
        return self.now


@exercise(
    "write time_per_call(fn, synchronize, clock, warmup, repeats) returning the seconds per call of fn"
)
def check_time_per_call(time_per_call: Callable) -> str:
    d = _Device()
    a = Machine.cpu().run(time_per_call, d.fn, d.synchronize, d.clock, warmup=3, repeats=7)
    if isinstance(a, bool) or not isinstance(a, int | float) or not math.isfinite(a):
        fail(f"time_per_call returned {describe(a)}", "return the seconds per call, a float")
    times, close = (
        "once" if d.calls == 1 else f"{d.calls} times",
        lambda x: math.isclose(a, x, rel_tol=0.05),
    )
    ms = f"{a * 1000:.4g} ms per call, for calls that keep the device busy 20 ms"
    _first(
        (
            d.calls != 10,
            f"fn ran {times}, not warmup 3 + repeats 7",
            "run it warmup, then repeats times",
        ),
        (
            d.syncs == 0,
            "time_per_call never called synchronize",
            "call the synchronize it is given",
        ),
        (d.reads < 2, "it did not read the clock it is given", "call clock() at the start and end"),
        (
            close(20) or close(140),
            "it returned milliseconds",
            "return seconds, as the clock gives them",
        ),
        (close(0.14), "it returned the time of all 7 calls together", "divide by repeats"),
        (
            a < 0 or a > 100,
            f"it returned {a:.4g}, not a time span",
            "subtract the start from the end",
        ),
        (
            a < 0.01,
            f"{ms}: the clock stopped with work queued",
            "synchronize() before reading the end",
        ),
        (a > 0.03, f"{ms}: the warm-up's work was counted", "synchronize() after the warm-up"),
        (not close(0.02), ms, "time the repeats alone, between two synchronize() calls"),
    )
    return ms


_PER_SAMPLE = (
    "device_batches makes the indices Python numbers",
    "index with a slice of the permutation",
)


def _epoch(m: Machine, device_batches: Callable, seed: int) -> torch.Tensor:
    """One epoch of 50 samples in batches of 8 on ``m``, checked: the labels in their order."""
    labels, g = torch.arange(50), torch.Generator().manual_seed(seed)
    images = labels.float().view(50, 1, 1, 1).expand(50, 3, 4, 4).contiguous().to(m.device)
    m.forbidden = dict.fromkeys((torch.Tensor.tolist, torch.Tensor.item), _PER_SAMPLE)
    batches = m.run(device_batches, images, labels.to(m.device), 8, g, consume=50, reads=False)
    pairs = isinstance(batches, list) and all(
        isinstance(b, tuple | list) and len(b) == 2 for b in batches
    )
    if not pairs or not all(isinstance(t, torch.Tensor) for b in batches for t in b):
        fail(f"device_batches gave {describe(batches)}", "yield pairs of tensors, (images, labels)")
    if any(x.shape[1:] != (3, 4, 4) or y.shape != x.shape[:1] for x, y in batches):
        fail("the batches do not have the tensors' shapes", "index the tensors, nothing more")
    if (sizes := [len(y) for _, y in batches]) != [8] * 6 + [2]:
        fail(
            f"for 50 samples in batches of 8 the sizes are {sizes}", "only the last batch is short"
        )
    if m.device.type == "meta":
        return labels.flip(0)
    order = torch.cat([y.cpu() for _, y in batches])
    separated = any(not x.cpu()[:, 0, 0, 0].long().equal(y.cpu()) for x, y in batches)
    _first(
        (
            sorted(order.tolist()) != labels.tolist(),
            "some samples come twice, others never",
            "permute once",
        ),
        (separated, "images and labels got separated", "index both with the same indices"),
        (
            order.equal(labels),
            "the batches come in the stored order",
            "shuffle, with torch.randperm",
        ),
    )
    return order


@exercise(
    "write device_batches(images, labels, batch_size, generator) yielding an epoch of shuffled batches"
)
def check_device_batches(device_batches: Callable) -> str:
    for m in device_machines():
        order, again, other = (_epoch(m, device_batches, seed) for seed in (0, 0, 1))
        if m.device.type != "meta" and (not order.equal(again) or order.equal(other)):
            fail(
                "the order does not follow the generator",
                "draw it with torch.randperm(..., generator=)",
            )
    return "shuffled batches, every sample once, on the tensors' device"


def _setup(device: torch.device) -> tuple:
    """A model, 3 batches (16, 16 and 5 samples), a loss and an optimizer, on ``device``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10)).to(device)
        data = [
            (torch.randn(n, 12).to(device), torch.randint(10, (n,)).to(device)) for n in (16, 16, 5)
        ]
    return model, data, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


@exercise(
    "write train_epoch(model, batches, loss_fn, optimizer) returning the mean loss, reading nothing"
)
def check_train_epoch(train_epoch: Callable) -> str:
    reference, batches, loss_fn, optimizer = _setup(torch.device("cpu"))
    expected = 0.0
    for x, y in batches:
        optimizer.zero_grad()
        (loss := loss_fn(reference(x), y)).backward()
        expected += optimizer.step() or loss.item() * len(y) / 37
    reads = "keep the running sum on the device and return it as a tensor"
    for m in device_machines():
        model, batches, loss_fn, optimizer = setup = _setup(m.device)
        steps: list[int] = []
        optimizer.register_step_post_hook(lambda *_, steps=steps: steps.append(1))
        try:
            answer = m.run(train_epoch, *setup)
        except StandInCannot:
            when = "at the end" if len(steps) == 3 else "every step"
            fail(
                f"train_epoch reads a value back {when}, and on a GPU each read waits for it", reads
            )
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
    return "the epoch trains as a reference run does, and reads nothing back from the device"
