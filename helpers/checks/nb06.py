"""Checks for the "Try it yourself" exercises of ``06_performance``.

1. ``check_time_per_call``: a timing function that waits for the device (the tutorial's
   ``time.time()`` clock, with the waits it needs). It is run against a simulated asynchronous
   device on a simulated clock: each call queues work and returns at once, as a CUDA kernel launch
   does, and ``synchronize()`` waits until the queue is empty. While the learner's function runs,
   ``time.perf_counter``, ``time.time``, ``time.monotonic`` (and their ``_ns`` forms) and
   ``timeit.default_timer`` read the simulated clock, so the check knows exactly what was measured,
   on any machine and however busy it is; ``time.process_time`` reads the simulated time this
   process computed, which does not grow while it waits. Then it times a real computation on this
   machine's device.
2. ``check_device_batches``: a batch iterator over tensors that stay on the device, run on CPU
   tensors (content), on ``meta`` tensors standing in for a GPU (nothing may be read back, a CPU
   generator cannot draw there) and on this machine's GPU when it has one.
3. ``check_train_epoch``: a training epoch without a host sync per step, run on the CPU against a
   reference run, on ``meta`` (where every read of a value, ``.item()``, ``float()``, ``print``,
   ``.cpu()``, an ``if`` on a tensor, is recorded) and on this machine's GPU when it has one.
"""

from __future__ import annotations

import contextlib
import math
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import (
    LearnerError,
    Machine,
    a_gpu,
    describe,
    device_machines,
    exercise,
    short,
    where,
)
from helpers.checks.harness import full_float32 as _full_float32

__all__ = ["SimulatedDevice", "check_device_batches", "check_time_per_call", "check_train_epoch"]


class SimulatedDevice:
    """An asynchronous device on a simulated clock: ``launch()`` queues work, ``synchronize()`` waits for it.

    ``launch()`` costs the host ``launch_cost`` seconds and queues ``work`` seconds of device work
    (``first`` for the very first call, which pays one-off costs, like a GPU's first kernel);
    ``synchronize()`` advances the clock to when the queue is empty. ``clock()`` reads the time
    (as ``time.perf_counter`` does), ``cpu_clock()`` the host's compute time (as
    ``time.process_time`` does). ``events`` lists what happened, in order:
    ``("launch", calls)``, ``("sync", calls)``, ``("clock", calls)``, ``("cpu_clock", calls)``.
    """

    def __init__(self, work: float = 0.02, first: float = 0.3, launch_cost: float = 1e-5) -> None:
        self.work, self.first, self.launch_cost = work, first, launch_cost
        self.calls = 0
        self.now = 1000.0
        self.cpu = 1.0
        self.busy_until = self.now
        self.events: list[tuple[str, int]] = []
        self.synchronized_after: list[int] = []  # the number of calls made before each synchronize()

    def launch(self) -> None:
        self.now += self.launch_cost
        self.cpu += self.launch_cost
        cost = self.first if self.calls == 0 else self.work
        self.busy_until = max(self.busy_until, self.now) + cost
        self.calls += 1
        self.events.append(("launch", self.calls))

    def synchronize(self) -> None:
        self.now = max(self.now, self.busy_until) + 1e-6
        self.synchronized_after.append(self.calls)
        self.events.append(("sync", self.calls))

    def clock(self) -> float:
        self.now += 1e-7
        self.events.append(("clock", self.calls))
        return self.now

    def cpu_clock(self) -> float:
        self.cpu += 1e-7
        self.events.append(("cpu_clock", self.calls))
        return self.cpu


_CLOCKS = ("perf_counter", "time", "monotonic")
_CPU_CLOCKS = ("process_time", "thread_time")


@contextlib.contextmanager
def _simulated_clocks(device: SimulatedDevice, function: Callable) -> Iterator[None]:
    """The clocks of ``time`` and ``timeit`` read ``device``, also as ``function`` names them."""
    replacements: list[tuple[Any, Callable[[], Any]]] = []
    for name in _CLOCKS:
        replacements.append((getattr(time, name), device.clock))
        replacements.append((getattr(time, f"{name}_ns"), lambda: int(device.clock() * 1e9)))
    for name in _CPU_CLOCKS:
        replacements.append((getattr(time, name), device.cpu_clock))
        replacements.append((getattr(time, f"{name}_ns"), lambda: int(device.cpu_clock() * 1e9)))

    def replacement(value: Any) -> Callable[[], Any] | None:
        return next((new for old, new in replacements if value is old), None)

    saved: list[tuple[Any, str, Any]] = []
    namespaces: list[Any] = [time, timeit]
    module_globals = getattr(function, "__globals__", None)
    try:
        for namespace in namespaces:
            for attribute, value in list(vars(namespace).items()):
                if replacement(value) is not None:
                    saved.append((namespace, attribute, value))
                    setattr(namespace, attribute, replacement(value))
        for cell in getattr(function, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                if replacement(cell.cell_contents) is not None:
                    saved.append((cell, "cell_contents", cell.cell_contents))
                    cell.cell_contents = replacement(cell.cell_contents)
        if isinstance(module_globals, dict):
            for name, value in list(module_globals.items()):
                if replacement(value) is not None:
                    saved.append((module_globals, name, value))
                    module_globals[name] = replacement(value)
        yield
    finally:
        for namespace, attribute, value in reversed(saved):
            if isinstance(namespace, dict):
                namespace[attribute] = value
            else:
                setattr(namespace, attribute, value)


@exercise(
    "write time_per_call(fn, synchronize, warmup, repeats) so that it returns the seconds per call of fn, "
    "measured correctly on a device that runs asynchronously"
)
def check_time_per_call(time_per_call: Callable[..., Any]) -> str:
    """Exercise 1: ``time_per_call(fn, synchronize, warmup=2, repeats=10)`` returns seconds per call."""
    device = SimulatedDevice()
    warmup, repeats = 2, 10
    m = Machine.cpu()
    m.cuda_fix = "call the synchronize it is given, which waits for the device being timed"
    with _simulated_clocks(device, time_per_call):
        answer = m.run(time_per_call, device.launch, device.synchronize, warmup=warmup, repeats=repeats)
    _check_answer(answer, "time_per_call")
    if device.calls != warmup + repeats:
        if device.calls == repeats:
            fail(
                f"fn was called {repeats} times, with no warm-up",
                f"call it warmup={warmup} times before starting the clock, so that one-off costs stay out",
            )
        times = "once" if device.calls == 1 else f"{device.calls} times"
        fail(f"fn was called {times}", f"call it warmup + repeats = {warmup + repeats} times")
    clocks = [calls for kind, calls in device.events if kind == "clock"]
    if [kind for kind, _ in device.events if kind == "cpu_clock"] and not clocks:
        fail(
            "time.process_time counts the time this process computes, not the time it waits for the device",
            "read time.perf_counter() instead",
        )
    if len(clocks) < 2:
        fail(
            "time_per_call did not read the clock before and after the calls (the check knows "
            "time.perf_counter, time.time and time.monotonic)",
            "read time.perf_counter() before and after",
        )
    expected = device.work
    if answer < 0:
        fail(
            f"time_per_call returned {answer:.3g} seconds, a negative time", "subtract the start from the end"
        )
    for factor, mistake, fix in (
        (1000, "in milliseconds", "return seconds, as time.perf_counter gives them"),
        (repeats, f"for all {repeats} calls together", "divide by repeats for the time per call"),
        (1000 * repeats, f"in milliseconds for all {repeats} calls", "return seconds per call"),
    ):
        if math.isclose(answer, factor * expected, rel_tol=0.05):
            fail(f"time_per_call returned {short(answer, 12)}, the time {mistake}", fix)
    if answer < 0.5 * expected:
        fail(
            f"you measured {answer * 1000:.2f} ms per call for calls that keep the device busy "
            f"{expected * 1000:.0f} ms, so the clock stopped while work was still queued",
            "call synchronize() before reading the clock at the end",
        )
    if answer > 1.5 * expected:
        fail(
            f"you measured {answer * 1000:.0f} ms per call for calls of {expected * 1000:.0f} ms, so the "
            "warm-up's work, still queued, was counted",
            "call synchronize() after the warm-up, before starting the clock",
        )
    if not math.isclose(answer, expected, rel_tol=0.05):
        fail(
            f"you measured {answer * 1000:.1f} ms per call for calls of {expected * 1000:.0f} ms",
            "time the repeats alone, between two synchronize() calls",
        )
    _time_for_real(time_per_call)
    return f"{answer * 1000:.1f} ms per call, for calls that keep the device busy {expected * 1000:.0f} ms"


def _check_answer(answer: Any, name: str) -> None:
    if answer is None:
        fail(f"{name} returned None", "return the seconds per call, a float")
    if isinstance(answer, bool) or not isinstance(answer, int | float) or not math.isfinite(answer):
        fail(f"{name} returned {describe(answer)}", "return the seconds per call, a float")


def _time_for_real(time_per_call: Callable[..., Any]) -> None:
    """Time a small matrix product on this machine's device, with the device's own synchronize."""
    m = Machine.as_is()
    with torch.random.fork_rng(devices=[]):
        x = torch.randn(128, 128, device=m.device)
    if m.device.type == "cuda":
        synchronize: Callable[[], None] = torch.cuda.synchronize
    elif m.device.type == "mps":
        synchronize = torch.mps.synchronize
    else:

        def synchronize() -> None:
            return None

    answer = m.run(time_per_call, lambda: x @ x, synchronize, warmup=2, repeats=5)
    _check_answer(answer, "time_per_call")
    if not 0 < answer < 10:
        fail(
            f"on {m.device} time_per_call returned {short(answer, 12)} s for a small matrix product",
            "return the seconds per call, measured with a real clock",
        )


# ---- exercise 2: device_batches ----

_N, _BATCH = 50, 8


def _data(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.arange(_N)
    images = labels.float().view(_N, 1, 1, 1).expand(_N, 3, 4, 4).contiguous()
    return images.to(device), labels.to(device)


def _epoch(m: Machine, device_batches: Callable, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    images, labels = _data(m.device)
    generator = torch.Generator().manual_seed(seed)
    before = len(m.names)
    m.list_indexes = 0
    try:
        batches = m.run(device_batches, images, labels, _BATCH, generator, consume=10 * _N)
    except LearnerError as error:
        if error.kind == "generator":
            raise error.instead(
                f"a CPU generator cannot draw the permutation on {a_gpu(m.device)}",
                "draw it where the generator is, device=generator.device, then move it to labels.device",
            ) from None
        raise
    if batches is None:
        fail("device_batches returned None", "yield the batches, or return them as a list")
    if not isinstance(batches, list):
        fail(f"device_batches returned {describe(batches)}", "yield the batches (or return a list of them)")
    for batch in batches:
        if not (isinstance(batch, tuple | list) and len(batch) == 2):
            fail(f"a batch is {describe(batch)}", "yield pairs of tensors, (images, labels)")
        if not all(isinstance(t, torch.Tensor) for t in batch):
            fail(f"a batch holds {describe(batch[0])} and {describe(batch[1])}", "yield pairs of tensors")
    if m.list_indexes:
        fail(
            "device_batches indexes the tensors with a Python list of indices, made one sample at a time",
            "keep the permutation a tensor and index with slices of it",
        )
    indexing = sum(1 for name in m.names[before:] if name in {"__getitem__", "select", "index_select"})
    if indexing > 4 * len(batches) + 6:
        fail(
            f"device_batches indexes the tensors {indexing} times for {_N} samples, once per sample",
            "index each batch at once, images[index] with a tensor of indices",
        )
    return [(batch[0], batch[1]) for batch in batches]


def _order(m: Machine, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    sizes = [len(labels) if labels.dim() else 0 for _, labels in batches]
    expected = [_BATCH] * (_N // _BATCH) + ([_N % _BATCH] if _N % _BATCH else [])
    if sizes != expected:
        fail(
            f"for {_N} samples in batches of {_BATCH} the batch sizes are {short(sizes, 40)}",
            "fill every batch but the last, which keeps the remaining samples",
        )
    for images, labels in batches:
        if images.shape[1:] != (3, 4, 4) or labels.dtype != torch.int64 or images.shape[0] != len(labels):
            fail(
                "the batches changed the images' or labels' shape or dtype", "index the tensors, nothing more"
            )
    elsewhere = sorted({str(t.device) for batch in batches for t in batch if t.device.type != m.device.type})
    if elsewhere:
        fail(
            f"the tensors were on {where(m.device)}, but batches came back on {', '.join(elsewhere)}",
            "keep the batches on the tensors' device",
        )
    if m.device.type == "meta":
        return torch.empty(0)
    order = torch.cat([labels.cpu() for _, labels in batches])
    if sorted(order.tolist()) != list(range(_N)):
        fail("some samples appear twice and others never", "take each index of one permutation exactly once")
    if not all(torch.equal(images[:, 0, 0, 0].cpu().long(), labels.cpu()) for images, labels in batches):
        fail("images and labels got separated", "index both with the same indices")
    if torch.equal(order, torch.arange(_N)):
        fail("the batches come in the stored order", "shuffle, with torch.randperm")
    return order


@exercise(
    "write device_batches(images, labels, batch_size, generator) so that it yields one epoch of shuffled "
    "(images, labels) batches that stay on the tensors' device"
)
def check_device_batches(device_batches: Callable[..., Any]) -> str:
    """Exercise 2: ``device_batches(images, labels, batch_size, generator)`` yields one shuffled epoch."""
    for m in device_machines():
        m.cuda_fix = "stay on the tensors' device, labels.device"
        with m.tried():
            reads = len(m.reads)
            batches = _epoch(m, device_batches, seed=0)
            if len(m.reads) > reads:
                read = m.reads[reads]
                at = f" at line {read.place.lineno}" if read.place else ""
                fail(
                    f"device_batches reads values back from the device ({read.how}{at})",
                    "keep everything on the tensors' device and index with the permutation tensor itself",
                )
            order = _order(m, batches)
            if m.device.type == "meta":
                continue
            again = _order(m, _epoch(m, device_batches, seed=0))
            other = _order(m, _epoch(m, device_batches, seed=1))
            if not torch.equal(order, again) or torch.equal(order, other):
                fail(
                    "the order does not follow the generator passed in",
                    "draw the permutation with torch.randperm(..., generator=generator)",
                )
    return "shuffled batches, every sample once, on the tensors' device, with no per-sample Python"


# ---- exercise 3: train_epoch ----


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def _setup(device: torch.device):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = _Tiny()
        g = torch.Generator().manual_seed(1)
        batches = [
            (torch.randn(size, 3, 4, 4, generator=g), torch.randint(0, 10, (size,), generator=g))
            for size in (16, 16, 5)
        ]
    model, batches = model.to(device), [(x.to(device), y.to(device)) for x, y in batches]
    return model, batches, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


def _reference_epoch() -> tuple[nn.Module, torch.Tensor]:
    model, batches, loss_fn, optimizer = _setup(torch.device("cpu"))
    total, seen = 0.0, 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        seen += len(y)
    return model, torch.tensor(total / seen)


@exercise(
    "write train_epoch(model, batches, loss_fn, optimizer) so that it trains one epoch and returns the mean "
    "loss per sample as a tensor on the device, reading nothing back during the epoch"
)
def check_train_epoch(train_epoch: Callable[..., Any]) -> str:
    """Exercise 3: ``train_epoch(model, batches, loss_fn, optimizer)``: the mean loss, on the device."""
    reference_model, expected = _reference_epoch()
    for m in device_machines():
        m.cuda_fix = "stay on the device of the model and the batches"
        with m.tried(), _full_float32(m.device):
            model, batches, loss_fn, optimizer = _setup(m.device)
            answer = m.run(train_epoch, model, batches, loss_fn, optimizer)
            if m.reads:
                read = m.reads[0]
                at = f" at line {read.place.lineno}" if read.place else ""
                fail(
                    f"train_epoch reads a value back from the device ({read.how}{at}), and on a GPU each "
                    "read waits for it",
                    "keep the running sum on the device and return it as a tensor",
                )
            _check_epoch(answer, m, model, reference_model, expected)
    return "the epoch trains as a reference run does, and reads nothing back from the device"


def _check_epoch(
    answer: Any, m: Machine, model: nn.Module, reference: nn.Module, expected: torch.Tensor
) -> None:
    if answer is None:
        fail("train_epoch returned None", "return the mean loss, a tensor on the device")
    if not isinstance(answer, torch.Tensor):
        fail(
            f"train_epoch returned {describe(answer)}, not a tensor on the device",
            "return the mean loss as a tensor (the caller reads it once per epoch)",
        )
    if answer.requires_grad:
        fail(
            "the returned loss still requires grad, so every step's graph stays alive",
            "add loss.detach() to the sum",
        )
    if answer.device.type != m.device.type:
        fail(
            f"the model and batches were on {where(m.device)}, but the loss came back on {answer.device}",
            "keep it on the device",
        )
    tolerance = 1e-5 if m.device.type == "cpu" else 1e-3
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        if not p.is_meta and not torch.allclose(p.detach().cpu(), q.detach(), atol=tolerance, rtol=tolerance):
            fail(
                f"after your epoch the model's {name} differs from a reference run",
                "per batch, call optimizer.zero_grad(), loss.backward() and optimizer.step() once each",
            )
    if answer.dim() != 0:
        fail(
            f"train_epoch returned {describe(answer)}",
            "return one number, the mean loss per sample, as a 0-d tensor",
        )
    if not answer.is_meta:
        value = answer.detach().cpu().double().item()
        if not math.isclose(value, expected.item(), rel_tol=10 * tolerance):
            fail(
                f"the mean loss returned is {value:.5f}, but the mean loss per sample is "
                f"{expected.item():.5f}",
                "add each batch's loss times its size, then divide by the number of samples",
            )
