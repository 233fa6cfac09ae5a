"""Checks for the "Try it yourself" exercises of ``06_performance``.

1. ``check_time_per_call``: a timing function that waits for the device (seed 000's ``time.time()``
   loop, fixed). It is run against a simulated asynchronous device: each call queues work and
   returns at once, as a CUDA kernel launch does, and ``synchronize()`` waits until the queue is
   empty, so a missing ``synchronize`` shows on any machine.
2. ``check_device_batches``: a batch iterator over tensors that stay on the device, run on CPU
   tensors (content) and on ``meta`` tensors (standing in for a GPU: nothing may leave it).
3. ``check_train_epoch``: a training epoch without a host sync per step, run on ``meta`` tensors,
   where any read of a value (``.item()``, ``float()``, ``.tolist()``, ``.cpu()``) fails, and on
   the CPU against a reference run.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers.checks import correct, fail, not_answered

__all__ = ["SimulatedDevice", "check_device_batches", "check_time_per_call", "check_train_epoch"]


class SimulatedDevice:
    """An asynchronous device in plain Python: ``launch()`` queues work, ``synchronize()`` waits for it.

    The device works through its queue in the background (by the clock): ``launch()`` returns at
    once and the work finishes ``work`` seconds after the previous work (``first`` seconds for the
    very first call, which pays one-off costs, like a GPU's first kernel).
    """

    def __init__(self, work: float = 0.02, first: float = 0.3) -> None:
        self.work, self.first = work, first
        self.calls = 0
        self.synchronized_after: list[int] = []  # the number of calls made before each synchronize()
        self._busy_until = time.perf_counter()

    def launch(self) -> None:
        cost = self.first if self.calls == 0 else self.work
        self._busy_until = max(self._busy_until, time.perf_counter()) + cost
        self.calls += 1

    def synchronize(self) -> None:
        self.synchronized_after.append(self.calls)
        delay = self._busy_until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def check_time_per_call(time_per_call: Callable[..., Any]) -> bool:
    """Exercise 1: ``time_per_call(fn, synchronize, warmup=2, repeats=10)`` returns seconds per call."""
    device = SimulatedDevice()
    warmup, repeats = 2, 10
    answer = time_per_call(device.launch, device.synchronize, warmup=warmup, repeats=repeats)
    if answer is None:
        return not_answered(
            "write time_per_call(fn, synchronize, warmup, repeats): call fn warmup times, synchronize(), "
            "start the clock, call fn repeats times, synchronize(), stop the clock, return seconds per call"
        )
    if isinstance(answer, torch.Tensor) or not isinstance(answer, int | float) or isinstance(answer, bool):
        fail(f"time_per_call returned {answer!r} ({type(answer).__name__}); return a float: seconds per call")
    if device.calls != warmup + repeats:
        if device.calls == repeats:
            fail(
                f"fn was called {repeats} times, with no warm-up: call it warmup={warmup} times before "
                "starting the clock, so that one-off costs of the first call stay out of the figure"
            )
        fail(f"fn was called {device.calls} times; expected warmup + repeats = {warmup + repeats}")
    ms, work_ms = answer * 1000, device.work * 1000
    if answer < 0.5 * device.work:
        fail(
            f"you measured {ms:.2f} ms per call, but each call keeps the device busy for {work_ms:.0f} ms: "
            "the clock was stopped while the work was still queued. Call synchronize() before reading "
            "the clock at the end."
        )
    if 0.7 * repeats * device.work <= answer <= 1.5 * repeats * device.work:
        fail(
            f"you returned {ms:.0f} ms, the time of all {repeats} calls: divide by repeats for the time "
            "per call"
        )
    if answer > 1.6 * device.work:
        fail(
            f"you measured {ms:.0f} ms per call, but each call takes {work_ms:.0f} ms: the warm-up's work, "
            "still queued when the clock started, was counted. Call synchronize() after the warm-up, before "
            "starting the clock."
        )
    return correct(f"{ms:.1f} ms per call, for calls that take {work_ms:.0f} ms on the device")


@contextlib.contextmanager
def _randperm_as_on_a_gpu():
    """``torch.randperm`` refusing a generator of another device type, as CUDA does (``meta`` does not)."""
    original = torch.randperm

    def strict(*args, generator=None, device=None, **kwargs):
        wanted = torch.device(device if device is not None else "cpu").type
        if generator is not None and generator.device.type != wanted:
            raise RuntimeError(
                f"Expected a '{wanted}' device type for generator but found '{generator.device.type}'"
            )
        return original(*args, generator=generator, device=device, **kwargs)

    torch.randperm = strict
    try:
        yield
    finally:
        torch.randperm = original


def _epoch(device_batches: Callable[..., Any], images, labels, batch_size, seed) -> list | None:
    generator = torch.Generator().manual_seed(seed)
    batches = device_batches(images, labels, batch_size, generator)
    return None if batches is None else [tuple(batch) for batch in batches]


def check_device_batches(device_batches: Callable[..., Any]) -> bool:
    """Exercise 2: ``device_batches(images, labels, batch_size, generator)`` yields one shuffled epoch."""
    n, batch_size = 50, 8
    labels = torch.arange(n)
    images = labels.float().view(n, 1, 1, 1).expand(n, 3, 4, 4).contiguous()
    try:
        batches = _epoch(device_batches, images, labels, batch_size, seed=0)
    except (RuntimeError, TypeError, IndexError) as error:
        fail(
            f"device_batches failed on CPU tensors with {type(error).__name__}: {str(error).splitlines()[0]}"
        )
    if batches is None:
        return not_answered(
            "write device_batches(images, labels, batch_size, generator): draw an order with "
            "torch.randperm(len(labels), generator=generator, device=generator.device), move it to "
            "labels.device, then yield "
            "images[index], labels[index] for each slice index of batch_size positions"
        )
    if not all(len(b) == 2 and all(isinstance(t, torch.Tensor) for t in b) for b in batches):
        fail("each batch should be a pair of tensors (images, labels)")
    sizes = [len(y) for _, y in batches]
    expected = [batch_size] * (n // batch_size) + [n % batch_size]
    if sizes != expected:
        fail(
            f"for {n} samples in batches of {batch_size}, expected batch sizes {expected}, got {sizes}: "
            "every batch full except the last, which keeps the remaining samples"
        )
    order = torch.cat([y for _, y in batches])
    if sorted(order.tolist()) != list(range(n)):
        fail("some samples appear twice and others never: take each index of the permutation exactly once")
    if not all(torch.equal(x[:, 0, 0, 0].long(), y) for x, y in batches):
        fail("images and labels got separated: index both with the same indices")
    if torch.equal(order, labels):
        fail("the batches come in the stored order: shuffle with torch.randperm")
    again = torch.cat([y for _, y in _epoch(device_batches, images, labels, batch_size, seed=0)])
    other = torch.cat([y for _, y in _epoch(device_batches, images, labels, batch_size, seed=1)])
    if not torch.equal(order, again) or torch.equal(order, other):
        fail("the order should follow the generator passed in: torch.randperm(n, generator=generator, ...)")

    meta = torch.device("meta")  # stands in for a GPU: the batches must stay there
    try:
        with _randperm_as_on_a_gpu():
            on_meta = _epoch(device_batches, images.to(meta), labels.to(meta), batch_size, seed=0)
    except (RuntimeError, NotImplementedError, IndexError) as error:
        if "device type for generator" in str(error):
            fail(
                "on a GPU this fails: a CPU generator cannot draw a permutation on the GPU. Draw it where "
                "the generator lives and move it: torch.randperm(n, generator=generator, "
                "device=generator.device).to(labels.device)"
            )
        fail(
            "with the tensors on the 'meta' device (standing in for a GPU) your code failed: "
            f"{str(error).splitlines()[0]}. Keep the work on the tensors' device: no .tolist(), .item() "
            "or Python loop over samples, and make the permutation with device=labels.device."
        )
    moved = {str(t.device) for batch in on_meta for t in batch} - {"meta"}
    if moved:
        fail(f"the tensors were on meta (a stand-in for a GPU), but batches came back on {sorted(moved)}")
    return correct(f"{len(batches)} shuffled batches, every sample once, on the tensors' device")


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def _setup(device: torch.device):
    torch.manual_seed(0)
    model = _Tiny()
    g = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(size, 3, 4, 4, generator=g), torch.randint(0, 10, (size,), generator=g))
        for size in (16, 16, 5)
    ]
    model, batches = model.to(device), [(x.to(device), y.to(device)) for x, y in batches]
    return model, batches, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


def _reference_epoch(model, batches, loss_fn, optimizer) -> torch.Tensor:
    total, seen = 0.0, 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        seen += len(y)
    return torch.tensor(total / seen)


def check_train_epoch(train_epoch: Callable[..., Any]) -> bool:
    """Exercise 3: ``train_epoch(model, batches, loss_fn, optimizer)``: the mean loss, on the device."""
    model, batches, loss_fn, optimizer = _setup(torch.device("cpu"))
    answer = train_epoch(model, batches, loss_fn, optimizer)
    if answer is None:
        return not_answered(
            "write train_epoch(model, batches, loss_fn, optimizer): train on each batch, add "
            "loss.detach() * len(y) to a running sum kept on the device, and return sum / number of samples"
        )
    if not isinstance(answer, torch.Tensor):
        fail(
            f"train_epoch returned a {type(answer).__name__}; return the mean loss as a tensor on the "
            "device: turning it into a number is the caller's one wait for the device, once per epoch"
        )
    if answer.requires_grad:
        fail(
            "the returned loss still requires grad: add loss.detach() to the sum, or every step's graph "
            "stays alive"
        )
    reference_model, reference_batches, reference_loss, reference_optimizer = _setup(torch.device("cpu"))
    expected = _reference_epoch(reference_model, reference_batches, reference_loss, reference_optimizer)
    for (name, p), q in zip(model.named_parameters(), reference_model.parameters(), strict=True):
        if not torch.allclose(p, q, atol=1e-6):
            fail(
                f"after your epoch the model's {name} differs from a reference run: per batch, call "
                "optimizer.zero_grad(), loss.backward() and optimizer.step() once each"
            )
    if answer.dim() != 0 or not math.isclose(answer.item(), expected.item(), rel_tol=1e-4):
        fail(
            f"returned {answer.detach().cpu().tolist()}, but the mean loss per sample is "
            f"{expected.item():.5f}: add each batch's loss times its size, then divide by the number of "
            "samples"
        )

    meta = torch.device("meta")  # stands in for a GPU: reading any value back fails here
    model, batches, loss_fn, optimizer = _setup(meta)
    try:
        answer = train_epoch(model, batches, loss_fn, optimizer)
    except (RuntimeError, NotImplementedError) as error:
        fail(
            f"on the 'meta' device (standing in for a GPU) your loop failed: {str(error).splitlines()[0]}. "
            "It reads a value back from the device during the epoch (.item(), float(), .tolist(), .cpu() "
            "or an if on a tensor); on a GPU every such read waits for the GPU. Keep the sum on the device."
        )
    if answer.device != meta:
        fail(
            f"the model and batches were on meta, but the loss came back on {answer.device}: keep it on "
            "the device"
        )
    return correct("the epoch trains as a reference run does, and reads nothing back from the device")
