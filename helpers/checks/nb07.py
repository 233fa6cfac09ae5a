"""Checks for ``07_memory_and_errors``.

``state_bytes`` and ``accumulated_step`` run on the CPU, on ``meta`` standing in for a GPU, on a
Mac whose GPU the check stands in for, and on this machine's GPU if any. ``accumulated_step`` is
watched: what autograd keeps for backward (the pieces' activations) must be freed piece by piece.
``fit_batch`` is given a ``train`` of the check's own, which runs out of memory above a known size.
"""

import math
import numbers
import sys
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from helpers.checks import CheckFailed, fail
from helpers.checks.harness import (
    LearnerError,
    Machine,
    StandInError,
    describe,
    device_machines,
    exercise,
    short,
)

__all__ = ["check_accumulated_step", "check_fit_batch", "check_state_bytes"]


# ---- exercise 1: state_bytes ------------------------------------------------------------------

_CASES = {  # the cases of state_bytes, and the fix each asks for
    "a float32 model with SGD": (
        "count each parameter and its gradient; SGD without momentum keeps no state"
    ),
    "SGD with momentum 0.9": (
        "SGD with momentum keeps a buffer as large as each parameter it updates"
    ),
    "Adam": (
        "Adam keeps two tensors as large as each parameter it updates; leave its step counters out"
    ),
    "a bfloat16 model with AdamW": "a bfloat16 number takes 2 bytes: use p.element_size()",
    "a frozen first layer and Adam": (
        "a frozen parameter (requires_grad False) gets no gradient and no state"
    ),
    "SGD holding the last layer alone": (
        "state only for what the optimizer holds, a gradient for all"
    ),
    "SGD groups, momentum 0.9 and 0": "read the momentum of each parameter's own param group",
}


def _nbytes(tensors: Iterable[torch.Tensor | None]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def _optimizer(case: int, p: list[nn.Parameter]) -> torch.optim.Optimizer:
    sgd = torch.optim.SGD
    adam = torch.optim.Adam
    made = [
        lambda: sgd(p, 0.1),
        lambda: sgd(p, 0.1, 0.9),
        lambda: adam(p),
        lambda: torch.optim.AdamW(p),
        lambda: adam(p),
        lambda: sgd(p[-2:], 0.1, 0.9),
        lambda: sgd([{"params": p[:4], "momentum": 0.9}, {"params": p[4:]}], 0.1),
    ]
    return made[case]()


def _build(case: int, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    with torch.device("meta"):  # sizes matter, not values: no random numbers drawn
        model = nn.Sequential(
            nn.Linear(6, 16), nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 3)
        )
    dtype = torch.bfloat16 if case == 3 else torch.float32
    model = model.to(dtype).to_empty(device=device)
    model[0].requires_grad_(case != 4)
    return model, _optimizer(case, list(model.parameters()))


def _measured(case: int) -> tuple[int, int, int]:
    """The bytes of parameters, gradients and optimizer state after a real update on the CPU."""
    model, optimizer = _build(case, torch.device("cpu"))
    model(torch.zeros(2, 6, dtype=model[0].weight.dtype)).float().sum().backward()
    optimizer.step()
    params = _nbytes(model.parameters())
    grads = _nbytes(p.grad for p in model.parameters())
    state = _nbytes(v for s in optimizer.state.values() for k, v in s.items() if k != "step")
    return params, grads, state


def _judge_bytes(answer: Any, case: int, measured: tuple[int, int, int]) -> None:
    label, fix = list(_CASES.items())[case]
    params, grads, state = measured
    total = params + grads + state
    if not isinstance(answer, numbers.Integral) or isinstance(answer, bool):
        fail(f"state_bytes returned {describe(answer)}", "return the number of bytes as an int")
    if answer == total:
        return
    if answer * (2 if case == 3 else 4) == total:
        label = f"{label}, counting numbers, not bytes"
        fix = "multiply numel() by element_size()"
    elif answer == params + grads:
        label = f"{label}, without the optimizer's state"
    elif answer == params + state:
        label = f"{label}, without the gradients"
    details = [f"measured: parameters {params:,}, gradients {grads:,}, optimizer state {state:,}"]
    fail(f"state_bytes gave {int(answer):,} bytes for {label}", fix, details)


@exercise(
    "write state_bytes(model, optimizer) returning the bytes of parameters, gradients, optimizer "
    "state"
)
def check_state_bytes(state_bytes: Callable) -> str:
    for case in range(len(_CASES)):
        measured = _measured(case)
        for m in device_machines():
            model, optimizer = _build(case, m.device)
            try:
                answer = m.run(state_bytes, model, optimizer)
            except StandInError:
                fail(
                    "state_bytes read values on the device",
                    "use numel() and element_size(), sizes only",
                )
            if optimizer.state or _nbytes(p.grad for p in model.parameters()):
                fail(
                    "state_bytes trained the model it was given",
                    "work from the sizes, and change nothing",
                )
            _judge_bytes(answer, case, measured)
    return "state_bytes agrees with a real update: SGD, momentum, Adam, bfloat16, frozen, groups"


# ---- exercise 2: accumulated_step -------------------------------------------------------------


class _Kept:
    """Counts what autograd keeps for backward, by ``saved_tensors_hooks``: a box per tensor."""

    def __init__(self) -> None:
        self.alive: set[int] = set()
        self.held_at_a_forward = 0  # the most boxes alive when a piece's forward pass began

    def pack(self, tensor: torch.Tensor) -> Any:
        box = _Box(tensor)
        self.alive.add(id(box))
        weakref.finalize(box, self.alive.discard, id(box))
        return box

    def unpack(self, box: Any) -> torch.Tensor:
        return box.tensor

    def forward_begins(self, *_: Any) -> None:
        self.held_at_a_forward = max(self.held_at_a_forward, len(self.alive))


class _Box:
    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _accumulation(device: torch.device) -> tuple:
    """A setup on ``device`` (``.grad`` holds an older batch's), and what the check watches."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
        x = torch.randn(16, 5).to(device)
        y = torch.randint(3, (16,)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn(model(x[10:]), y[10:]).backward()
    watched = {"seen": [], "used": [], "backward": 0, "kept": _Kept()}
    model.register_forward_pre_hook(lambda _, args: watched["seen"].extend(args[:1]))
    model.register_forward_pre_hook(watched["kept"].forward_begins)
    model[0].weight.register_hook(lambda grad: _count_backward(watched))

    def grads() -> Any:
        if device.type == "meta":
            return None
        return _flat(p.grad for p in model.parameters())

    optimizer.register_step_pre_hook(lambda *_: watched["used"].append(grads()))
    return (model, loss_fn, optimizer, x[:10], y[:10]), watched


def _count_backward(watched: dict) -> None:
    watched["backward"] += 1


def _flat(tensors: Iterable[torch.Tensor | None]) -> torch.Tensor:
    flat = [torch.zeros(1) if t is None else t.detach().cpu().flatten() for t in tensors]
    return torch.cat(flat).double()


def _check_pieces(watched: dict) -> None:
    sizes = [len(x) if x.dim() else 0 for x in watched["seen"]]
    if max(sizes, default=5) > 4 or sum(sizes) != 10 or len(sizes) != 3:
        fail(f"the model ran on pieces of {sizes} examples", "cut 3 pieces of at most 4 examples")
    if watched["kept"].held_at_a_forward and watched["backward"] == len(sizes):
        fail(
            "backward(retain_graph=True) kept each piece's activations while the next piece ran",
            "call backward() without retain_graph",
        )
    if watched["kept"].held_at_a_forward:
        fail(
            "the activations of one piece were still kept when the next piece ran",
            "call backward() on each piece's loss before the next piece, and add up loss.detach()",
        )
    if watched["backward"] != len(sizes):
        fail(
            f"backward() ran {watched['backward']} times for {len(sizes)} pieces",
            "call it once per piece",
        )
    if len(watched["used"]) != 1:
        fail(
            f"optimizer.step() ran {len(watched['used'])} times",
            "call it once, after the last piece's backward()",
        )


def _check_update(answer: Any, setup: tuple, watched: dict) -> None:
    if not torch.cat(watched["seen"])[:, 0].sort().values.equal(setup[3][:, 0].sort().values):
        fail(
            "the pieces did not hold each example once",
            "cut inputs and targets alike, in order",
        )
    (model, loss_fn, _, x, y), _ = _accumulation(torch.device("cpu"))  # the right update:
    params = list(model.parameters())
    stale = _flat(p.grad for p in params)
    whole = loss_fn(model(x), y)
    right = _flat(torch.autograd.grad(whole, params))
    alone = _flat(torch.autograd.grad(loss_fn(model(x[8:]), y[8:]), params))
    used = watched["used"][0]
    if torch.allclose(used, right + stale, 1e-4, 1e-7):
        fail(
            "the gradients left in .grad by the previous batch were added in",
            "zero_grad() once, first",
        )
    if torch.allclose(used, alone * (used @ alone) / (alone @ alone), 1e-4, 1e-7):
        fail(
            "only the last piece's gradient counted",
            "zero the gradients once, before the first piece",
        )
    if not torch.allclose(used, right, 1e-4, 1e-7):
        fail(
            "the pieces' gradients were not weighed by their share",
            "scale by len(x) / len(inputs)",
        )
    if not isinstance(answer, float) or not math.isclose(answer, whole.item(), rel_tol=1e-4):
        mean = whole.item()
        fail(
            f"accumulated_step returned {describe(answer)}; the batch's mean loss is {mean:.5f}",
            "return that, a float: the sum of each piece's loss times its share",
        )


@exercise(
    "write accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch) in pieces"
)
def check_accumulated_step(accumulated_step: Callable) -> str:
    for m in device_machines():
        setup, watched = _accumulation(m.device)
        kept = watched["kept"]
        try:
            with torch.autograd.graph.saved_tensors_hooks(kept.pack, kept.unpack):
                answer = m.run(accumulated_step, *setup, 4)
        except StandInError:  # a read of the loss is fine, but not before the model ran
            if not watched["seen"]:
                fail(
                    "accumulated_step copied values off the device",
                    "keep the model and batch there",
                )
            continue  # the stand-in stops there: the CPU checks the rest
        _check_pieces(watched)
        if m.device.type != "meta":
            _check_update(answer, setup, watched)
    return "pieces of at most micro_batch examples, weighed by their size, make one update"


# ---- exercise 3: fit_batch --------------------------------------------------------------------

_HALVE = "halve it with n // 2 after each out-of-memory error"


class _Stopped(BaseException):
    """Raised in ``train`` to stop the learner's loop; a ``BaseException``, so that the learner's
    ``except Exception`` lets it through. ``args[0]`` is the ``CheckFailed`` to show."""


class _Training:
    """``train(n)``: makes a batch of ``n`` and runs out of memory when ``n`` exceeds ``fits``.

    It raises another error (a shape mismatch) at size ``broken``. It records each size asked
    for, and whether the tensors of a failed call were still alive at the next one.
    """

    def __init__(self, fits: int, broken: int | None = None) -> None:
        self.fits = fits
        self.broken = broken
        self.sizes: list[Any] = []
        self.failed: list[weakref.ref] = []
        self.kept = ""  # how the learner kept a failed call's tensors, if it did

    def __call__(self, n: Any) -> None:
        self._note_kept()
        self.sizes.append(n)
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise _Stopped(CheckFailed(f"fit_batch called train({n!r})", f"{_HALVE}, stop at 1"))
        if len(self.sizes) > 40:
            raise _Stopped(None)  # judged by the sizes it tried
        batch = torch.empty(int(n), 64)  # the memory this call holds, until its frame is freed
        self.failed.append(weakref.ref(batch))
        if n == self.broken:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x3 and 5x2)")
        if n > self.fits:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory (the check's stand-in: {n} does not fit, {self.fits} would)"
            )
        self.failed.pop()

    def _note_kept(self) -> None:
        if self.kept or not any(ref() is not None for ref in self.failed):
            return
        if isinstance(sys.exc_info()[1], torch.OutOfMemoryError):
            self.kept = "inside"
        else:
            self.kept = "after"


def _sizes_from(batch_size: int, fits: int) -> list[int]:
    """The sizes a right answer tries: batch_size, halved until one fits or 1 fails."""
    sizes = [batch_size]
    while sizes[-1] > fits and sizes[-1] > 1:
        sizes.append(sizes[-1] // 2)
    return sizes


def _judge_kept(training: _Training) -> None:
    if training.kept == "inside":
        fail(
            "fit_batch retried inside the except block, where the error still holds the failed "
            "call's tensors",
            "leave the except block first, then retry",
        )
    if training.kept == "after":
        fail(
            "the error was kept after the except block, and with it the failed call's tensors",
            "keep its message, str(error), not the error",
        )


def _judge_sizes(training: _Training, batch_size: int, until: int) -> None:
    expected = _sizes_from(batch_size, until)
    tried = training.sizes
    if tried == expected:
        return
    if tried[:1] != [batch_size]:
        fail(f"fit_batch first tried {short(tried[:1])}, not {batch_size}", "start at batch_size")
    for before, after in zip(tried, tried[1:], strict=False):
        if after != before // 2:
            fail(f"after {before} ran out of memory, fit_batch tried {after!r}", _HALVE)
    fail(f"fit_batch tried {short(tried, 40)}, not {short(expected, 40)}", _HALVE)


def _run(fit_batch: Callable, training: _Training, batch_size: int) -> Any:
    """``fit_batch(training, batch_size)``; where ``training`` stopped it, its reason."""
    try:
        return Machine.cpu().run(fit_batch, training, batch_size)
    except LearnerError as error:
        if not isinstance(error.error, _Stopped):
            raise
        reason = error.error.args[0]
    if reason is None:
        _judge_sizes(training, batch_size, training.fits)
        reason = CheckFailed(f"fit_batch called train {len(training.sizes)} times", _HALVE)
    raise reason


def _fits(fit_batch: Callable, batch_size: int, fits: int) -> None:
    """A search that ends on a size that fits."""
    training = _Training(fits)
    answer = _run(fit_batch, training, batch_size)
    _judge_kept(training)
    _judge_sizes(training, batch_size, fits)
    ran = training.sizes[-1]
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral) or answer != ran:
        fail(f"fit_batch returned {describe(answer)}, but {ran} ran", "return the size that ran")


_BY_NAME = "catch torch.OutOfMemoryError by name, and let every other error through"


def _none_fits(fit_batch: Callable) -> None:
    """Nothing fits, not even 1: the last out-of-memory error must come through."""
    training = _Training(fits=0)
    try:
        answer = _run(fit_batch, training, 5)
    except LearnerError as error:
        if isinstance(error.error, torch.OutOfMemoryError):
            _judge_sizes(training, 5, 0)
            return
        fail(
            f"when not even 1 fits, fit_batch raised {type(error.error).__name__}",
            "let the out-of-memory error through: raise it again",
            error.details,
        )
    _judge_kept(training)
    fail(
        f"when not even 1 fits, fit_batch returned {describe(answer)}",
        "let the out-of-memory error through: raise it",
    )


def _other_error(fit_batch: Callable) -> None:
    """An error that is no out-of-memory error must come through at once, not be retried."""
    training = _Training(fits=20, broken=32)
    try:
        _run(fit_batch, training, 64)
    except LearnerError as error:
        if "mat1 and mat2" in str(error.error) and training.sizes == [64, 32]:
            return
    fail(
        f"after a shape error at 32, fit_batch tried {short(training.sizes, 40)}",
        _BY_NAME,
    )


@exercise(
    "write fit_batch(train, batch_size) to call train(n) from n at batch_size, halving n after "
    "each out-of-memory error, and return the n that ran"
)
def check_fit_batch(fit_batch: Callable) -> str:
    for batch_size, fits in ((64, 20), (100, 100), (100, 7), (1, 1), (37, 9)):
        _fits(fit_batch, batch_size, fits)
    _none_fits(fit_batch)
    _other_error(fit_batch)
    return "out-of-memory errors are caught by name, and each retry starts with the memory freed"
