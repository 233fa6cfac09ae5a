"""Checks for the "Try it yourself" exercises of ``07_memory_and_errors``.

1. ``check_state_bytes``: the bytes that a model's parameters, their gradients and its optimizer's
   state take in training. The true figure is measured, not taken from a formula: the check builds
   each model and optimizer on the CPU, runs one real forward, backward and update, and adds up
   ``numel() * element_size()`` of the parameters, their ``.grad`` and the optimizer's state
   tensors of a parameter's shape (the ``step`` counters left out). The learner's function needs
   sizes only, so it runs on the CPU, on ``meta`` standing in for a GPU and on this machine's GPU
   when it has one; ``count_state_bytes`` (a formula with the typical mistakes as switches) names
   the mistake when the figure is wrong.
2. ``check_accumulated_step``: one update for a batch computed in pieces (gradient accumulation),
   compared with one ordinary update on the whole batch. The check leaves the gradients of an
   earlier batch in ``.grad``, records the pieces the model sees with a forward pre-hook and the
   calls of ``optimizer.step()`` with a step hook, and works out from the change of the weights
   which gradient the update used. On ``meta`` only the pieces, devices and the update count.
3. ``check_largest_batch``: the largest batch that fits, found by a binary search over ``fits``
   functions that raise a real ``torch.OutOfMemoryError`` above a hidden size, and two that
   raise another error, which must come through unchanged.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import LearnerError, Machine, describe, device_machines, exercise, short, where
from helpers.checks.harness import full_float32 as _full_float32

__all__ = ["check_accumulated_step", "check_largest_batch", "check_state_bytes", "count_state_bytes"]


# ---- exercise 1: state_bytes ----


def _mlp(dtype: torch.dtype) -> nn.Sequential:
    """Layers of different sizes, no buffers, no 0-d parameters: mistakes give figures of their own."""
    return nn.Sequential(
        nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 3)
    ).to(dtype)


def _sgd(momentum: float) -> Callable[[nn.Sequential], torch.optim.Optimizer]:
    return lambda model: torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)


def _trainable_sgd(model: nn.Sequential) -> torch.optim.Optimizer:
    return torch.optim.SGD((p for p in model.parameters() if p.requires_grad), lr=0.1, momentum=0.9)


def _two_groups(model: nn.Sequential) -> torch.optim.Optimizer:
    groups = [{"params": model[:3].parameters(), "momentum": 0.9}, {"params": model[3:].parameters()}]
    return torch.optim.SGD(groups, lr=0.1)


@dataclass(frozen=True)
class StateCase:
    """A model (``dtype``, its first layer ``frozen`` or not) and the optimizer ``make`` builds for it."""

    label: str
    dtype: torch.dtype
    frozen: bool
    make: Callable[[nn.Sequential], torch.optim.Optimizer]

    def build(self, device: torch.device) -> tuple[nn.Sequential, torch.optim.Optimizer]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = _mlp(self.dtype)
        if self.frozen:
            model[0].requires_grad_(False)
        model.to(device)
        return model, self.make(model)

    def measure(self) -> tuple[int, int, int]:
        """(parameters, gradients, optimizer state) in bytes after a real update on the CPU."""
        model, optimizer = self.build(torch.device("cpu"))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            x = torch.randn(4, 6, dtype=self.dtype)
        model(x).float().square().mean().backward()
        optimizer.step()
        parameters = sum(_nbytes(p) for p in model.parameters())
        gradients = sum(_nbytes(p.grad) for p in model.parameters() if p.grad is not None)
        state = sum(
            _nbytes(value)
            for p, values in optimizer.state.items()
            for key, value in values.items()
            if key != "step" and isinstance(value, torch.Tensor) and value.shape == p.shape
        )
        return parameters, gradients, state


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


STATE_CASES = (
    StateCase("a float32 model with SGD, momentum 0", torch.float32, False, _sgd(0.0)),
    StateCase("a float32 model with SGD, momentum 0.9", torch.float32, False, _sgd(0.9)),
    StateCase("a float32 model with Adam", torch.float32, False, lambda m: torch.optim.Adam(m.parameters())),
    StateCase(
        "a bfloat16 model with AdamW", torch.bfloat16, False, lambda m: torch.optim.AdamW(m.parameters())
    ),
    StateCase(
        "a model with a frozen first layer and Adam over all its parameters",
        torch.float32,
        True,
        lambda m: torch.optim.Adam(m.parameters()),
    ),
    StateCase(
        "a model with a frozen first layer and SGD (momentum 0.9) over the others",
        torch.float32,
        True,
        _trainable_sgd,
    ),
    StateCase(
        "a model whose optimizer (SGD, momentum 0.9) holds only its last layer",
        torch.float32,
        False,
        lambda m: torch.optim.SGD(m[-1].parameters(), lr=0.1, momentum=0.9),
    ),
    StateCase("a model with two SGD param groups, momentum 0.9 and 0", torch.float32, False, _two_groups),
)


def count_state_bytes(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    per_number: int | None = None,
    gradients: bool = True,
    frozen: str = "",
    adam_states: int = 2,
    momentum: str = "group",
    steps: bool = False,
    unheld: str = "",
) -> int:
    """The bytes of ``state_bytes`` by formula; the switches make the typical mistakes.

    ``per_number``: bytes per number instead of the dtype's (1: elements counted); ``gradients``:
    count them; ``frozen``: ``"grad"`` or ``"all"`` counts a gradient (and state) for frozen
    parameters; ``adam_states``: state tensors per parameter for Adam; ``momentum``: where SGD's
    momentum is read, ``"group"``, ``"defaults"``, ``"first"`` (group), ``"always"``, ``"never"``;
    ``steps``: Adam's 4-byte step counters counted; ``unheld``, for the parameters the optimizer
    does not hold: ``"state"`` (given state), ``"no grad"`` (given no gradient), ``"skipped"``
    (not counted at all).
    """
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    adam = isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)
    if not adam and not isinstance(optimizer, torch.optim.SGD):
        raise TypeError(f"no formula for {type(optimizer).__name__}")
    total = 0
    for p in model.parameters():
        group = group_of.get(id(p))
        if group is None and unheld == "skipped":
            continue
        size = p.numel() * (per_number or p.element_size())
        total += size
        if not p.requires_grad and not frozen:
            continue
        if gradients and not (group is None and unheld == "no grad"):
            total += size
        if (not p.requires_grad and frozen != "all") or (group is None and unheld != "state"):
            continue
        group = group or optimizer.param_groups[0]
        if adam:
            total += adam_states * size + (4 if steps else 0)
            continue
        source = {
            "group": group,
            "defaults": optimizer.defaults,
            "first": optimizer.param_groups[0],
            "always": {"momentum": 1},
            "never": {"momentum": 0},
        }[momentum]
        total += size if source.get("momentum", 0) else 0
    return total


@dataclass(frozen=True)
class _Mistake:
    switches: dict[str, Any]
    mistake: str
    fix: str


_STATE_MISTAKES = (
    _Mistake(
        {"per_number": 1},
        "state_bytes counted numbers (elements), not bytes",
        "multiply each tensor's numel() by its element_size(), the bytes per number",
    ),
    _Mistake(
        {"per_number": 4},
        "state_bytes took 4 bytes per number, but a {dtype} number takes {size}",
        "use p.element_size(), which follows the dtype",
    ),
    _Mistake(
        {"gradients": False},
        "state_bytes left out the gradients",
        "every parameter that requires grad gets a .grad as large as itself",
    ),
    _Mistake(
        {"frozen": "all"},
        "state_bytes counted a gradient and optimizer state for frozen parameters, which get neither",
        "count a parameter with requires_grad False once, as a parameter",
    ),
    _Mistake(
        {"frozen": "grad"},
        "state_bytes counted gradients for frozen parameters, which backward() leaves without one",
        "count a gradient only where p.requires_grad is True",
    ),
    _Mistake(
        {"adam_states": 0},
        "state_bytes left out Adam's state, which appears only at the first update",
        "count two tensors (exp_avg and exp_avg_sq) as large as each parameter it updates",
    ),
    _Mistake(
        {"adam_states": 1},
        "state_bytes counted one state tensor per parameter for Adam, which keeps two",
        "count exp_avg and exp_avg_sq, twice the parameter's bytes",
    ),
    _Mistake(
        {"steps": True},
        "state_bytes counted Adam's step counters, which the task leaves out",
        "count only the state tensors as large as a parameter",
    ),
    _Mistake(
        {"momentum": "never"},
        "state_bytes left out SGD's momentum buffers, which appear only at the first update",
        "with momentum other than 0, count one tensor as large as each parameter SGD updates",
    ),
    _Mistake(
        {"momentum": "always"},
        "state_bytes counted a momentum buffer for SGD with momentum 0, which keeps none",
        "count it only where the param group's momentum is not 0",
    ),
    _Mistake(
        {"momentum": "defaults"},
        "state_bytes read the momentum from optimizer.defaults, but each param group has its own",
        "read group['momentum'] for the parameters of each group",
    ),
    _Mistake(
        {"momentum": "first"},
        "state_bytes used the first param group's momentum for every group, but they differ",
        "read group['momentum'] for the parameters of each group",
    ),
    _Mistake(
        {"unheld": "state"},
        "state_bytes counted optimizer state for parameters that the optimizer does not hold",
        "count state only for the parameters in optimizer.param_groups",
    ),
    _Mistake(
        {"unheld": "no grad"},
        "state_bytes gave no gradient to the parameters the optimizer does not hold, but backward() does",
        "count a gradient for every parameter that requires grad",
    ),
    _Mistake(
        {"unheld": "skipped"},
        "state_bytes counted only the parameters the optimizer holds, but the model's others take memory too",
        "go through model.parameters(), and look each one up in the optimizer",
    ),
)


def _check_bytes_type(answer: Any, truth: int) -> None:
    if not isinstance(answer, bool) and isinstance(answer, numbers.Integral):
        return
    if isinstance(answer, float) and answer == truth:
        fail(
            f"state_bytes returned the float {answer!r}, which is the right figure",
            "return it as an int, since bytes are whole numbers",
        )
    if isinstance(answer, torch.Tensor):
        fail(
            f"state_bytes returned {describe(answer)}",
            "return a Python int (numel() and element_size() give Python ints already)",
        )
    fail(f"state_bytes returned {describe(answer)}", "return the number of bytes as an int")


def _state_bytes_on(m: Machine, state_bytes: Callable, case: StateCase, truth: int) -> int:
    model, optimizer = case.build(m.device)
    answer = m.run(state_bytes, model, optimizer)
    if m.reads:
        read = m.reads[0]
        at = f" at line {read.place.lineno}" if read.place else ""
        fail(
            f"state_bytes read values back from the device ({read.how}{at}), but the figure needs sizes only",
            "use numel() and element_size(), which work on any device",
        )
    if m.moves:
        move = m.moves[0]
        fail(
            f"state_bytes copied a tensor from {move.source} to {move.destination} (.{move.method}())",
            "use numel() and element_size(), which work on any device without a copy",
        )
    if optimizer.state or any(p.grad is not None for p in model.parameters()):
        fail(
            "state_bytes trained the model it was given (gradients or optimizer state appeared)",
            "work the figure out from the parameters' sizes, and leave the model and optimizer alone",
        )
    _check_bytes_type(answer, truth)
    return int(answer)


def _explain_bytes(answer: int, case: StateCase, earlier: list[tuple[StateCase, int]]) -> _Mistake | None:
    """The mistake that gives ``answer`` here while giving the right figure in every ``earlier`` case."""
    model, optimizer = case.build(torch.device("cpu"))
    for mistake in _STATE_MISTAKES:
        if count_state_bytes(model, optimizer, **mistake.switches) != answer:
            continue
        if all(
            count_state_bytes(*other.build(torch.device("cpu")), **mistake.switches) == truth
            for other, truth in earlier
        ):
            return mistake
    return None


@exercise(
    "write state_bytes(model, optimizer) so that it returns how many bytes the model's parameters, their "
    "gradients and the optimizer's state take during training, as an int"
)
def check_state_bytes(state_bytes: Callable[..., Any]) -> str:
    """Exercise 1: ``state_bytes(model, optimizer)``, the bytes of parameters, gradients and state."""
    earlier: list[tuple[StateCase, int]] = []
    for case in STATE_CASES:
        parts = case.measure()
        truth = sum(parts)
        answers: dict[str, int] = {}
        for m in device_machines():
            m.cuda_fix = "use the sizes of the tensors it is given, wherever they are"
            with m.tried():
                answers[m.label] = _state_bytes_on(m, state_bytes, case, truth)
        cpu = answers[Machine.cpu().label]
        for label, answer in answers.items():
            if answer != cpu:
                fail(
                    f"state_bytes gave {cpu:,} bytes on the CPU but {answer:,} on {label}",
                    "count from sizes and dtypes only, which are the same on every device",
                )
        if cpu != truth:
            details = [
                f"for {case.label}: your figure {cpu:,}, measured {truth:,} (parameters {parts[0]:,}, "
                f"gradients {parts[1]:,}, optimizer state {parts[2]:,})"
            ]
            mistake = _explain_bytes(cpu, case, earlier)
            if mistake is not None:
                size = torch.empty(0, dtype=case.dtype).element_size()
                dtype = str(case.dtype).removeprefix("torch.")
                fail(mistake.mistake.format(dtype=dtype, size=size), mistake.fix, details)
            fail(
                f"state_bytes gave {cpu:,} bytes, but a real update leaves {truth:,}",
                "count each parameter once, a gradient for each that requires grad, and the optimizer state",
                details,
            )
        earlier.append((case, truth))
    return (
        f"state_bytes agrees with what a real update leaves, in all {len(STATE_CASES)} cases: SGD with and "
        "without momentum, Adam, AdamW, bfloat16, frozen layers, parameters the optimizer does not hold"
    )


# ---- exercise 2: accumulated_step ----

_LR = 0.1
_BATCH = 10


@dataclass(frozen=True)
class _Accumulation:
    momentum: float
    micro_batch: int

    @property
    def sizes(self) -> list[int]:
        return [min(self.micro_batch, _BATCH - start) for start in range(0, _BATCH, self.micro_batch)]


_ACCUMULATIONS = (_Accumulation(0.0, 4), _Accumulation(0.9, 3))


def _accumulation_setup(case: _Accumulation, device: torch.device) -> tuple:
    """Model, loss, optimizer and batch on ``device``, after an update whose gradients stay in .grad."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
        g = torch.Generator().manual_seed(1)
        earlier = torch.randn(6, 5, generator=g), torch.randint(0, 3, (6,), generator=g)
        batch = torch.randn(_BATCH, 5, generator=g), torch.randint(0, 3, (_BATCH,), generator=g)
    model.to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR, momentum=case.momentum)
    x, y = (t.to(device) for t in earlier)
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()  # its gradients stay in .grad, as after any update
    inputs, targets = (t.to(device) for t in batch)
    return model, loss_fn, optimizer, inputs, targets


def _flat(tensors: Iterator[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).cpu() for t in tensors])


@dataclass
class _Reference:
    before: torch.Tensor  # the weights before the update, flattened
    after: torch.Tensor  # after one ordinary update on the whole batch
    stale: torch.Tensor  # the gradients left in .grad
    buffer: torch.Tensor  # SGD's momentum buffers before the update (zeros without momentum)
    pieces: list[torch.Tensor]  # each piece's mean-loss gradient
    losses: list[float]  # each piece's mean loss
    loss: float  # the whole batch's mean loss


def _reference(case: _Accumulation) -> _Reference:
    model, loss_fn, optimizer, inputs, targets = _accumulation_setup(case, torch.device("cpu"))
    parameters = list(model.parameters())
    before, stale = _flat(parameters), _flat(p.grad for p in parameters)
    buffers = [optimizer.state[p].get("momentum_buffer") for p in parameters]
    buffer = _flat(
        b if b is not None else torch.zeros_like(p) for b, p in zip(buffers, parameters, strict=True)
    )
    pieces, losses = [], []
    for x, y in zip(inputs.split(case.micro_batch), targets.split(case.micro_batch), strict=True):
        loss = loss_fn(model(x), y)
        pieces.append(_flat(torch.autograd.grad(loss, parameters)))
        losses.append(loss.item())
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return _Reference(before, _flat(parameters), stale, buffer, pieces, losses, loss.item())


def _gradient_mistakes(ref: _Reference, case: _Accumulation) -> list[tuple[torch.Tensor, str, str]]:
    """(gradient, mistake, fix) for the typical mistakes of gradient accumulation."""
    sizes = case.sizes
    k, last = len(sizes), sizes[-1]
    summed = sum(ref.pieces)
    right = sum(g * n / _BATCH for g, n in zip(ref.pieces, sizes, strict=True))
    scale = "multiply each piece's loss by its size / the batch size before backward()"
    by_pieces = summed / k
    stale = "the gradients left in .grad by the previous batch were added in"
    return [
        (
            summed,
            f"the update is about {k} times too large, as the {k} pieces' mean losses went into backward() "
            "unscaled and their gradients add up",
            scale,
        ),
        (
            by_pieces,
            f"each piece's loss was divided by the number of pieces, which weighs the last piece ({last} "
            "examples) like the full ones",
            scale + " instead",
        ),
        (
            sum(g * case.micro_batch / _BATCH for g in ref.pieces),
            "each piece's loss was weighed by micro_batch / the batch size, but the last piece has only "
            f"{last} examples",
            "weigh each piece by its own size, len(x) / the batch size",
        ),
        (
            sum(g * n for g, n in zip(ref.pieces, sizes, strict=True)),
            f"the update is {_BATCH} times too large, as each piece's loss was multiplied by its size but "
            "not divided by the batch size",
            "divide by the batch size too",
        ),
        *(
            (
                ref.pieces[-1] * weight,
                "only the last piece's gradient reached the update, as the gradients were zeroed in the loop",
                "call optimizer.zero_grad() once, before the first piece",
            )
            for weight in (1.0, last / _BATCH, 1 / k)
        ),
        *(
            (
                ref.stale + gradient,
                stale,
                "call optimizer.zero_grad() once, before the first piece",
            )
            for gradient in (right, summed, by_pieces)
        ),
    ]


def _pieces_seen(sizes: list[int], case: _Accumulation) -> None:
    if not sizes:
        fail(
            "accumulated_step never ran the model on the batch",
            "run it on each piece of at most micro_batch examples, model(inputs[start:start + micro_batch])",
        )
    if max(sizes) > case.micro_batch:
        if max(sizes) == _BATCH:
            fail(
                f"accumulated_step ran the whole batch of {_BATCH} through the model at once, which is what "
                "does not fit in memory",
                "run only pieces of at most micro_batch examples, also to compute the loss",
            )
        fail(
            f"accumulated_step ran a piece of {max(sizes)} examples, "
            f"more than micro_batch ({case.micro_batch})",
            "cut the batch into pieces of at most micro_batch examples, inputs[start:start + micro_batch]",
        )
    if sum(sizes) < _BATCH:
        fail(
            f"the pieces held {sum(sizes)} of the batch's {_BATCH} examples (sizes {short(sizes, 30)})",
            "run every example once, the last piece may be smaller",
        )
    if sum(sizes) > _BATCH:
        fail(
            f"accumulated_step ran {sum(sizes)} examples through the model for a batch of {_BATCH}",
            "run each piece once, and keep its loss for the mean",
        )
    if len(sizes) > len(case.sizes):
        fail(
            f"accumulated_step cut the batch of {_BATCH} into {len(sizes)} pieces where "
            f"{len(case.sizes)} of at most {case.micro_batch} do",
            "make each piece as large as micro_batch allows",
        )


def _check_steps(steps: int) -> None:
    if steps == 0:
        fail(
            "accumulated_step never called optimizer.step()",
            "call it once, after the last piece's backward()",
        )
    if steps > 1:
        fail(
            f"accumulated_step called optimizer.step() {steps} times, once per piece, "
            f"which makes {steps} updates",
            "call it once, after the last piece's backward()",
        )


def _check_weights(model: nn.Module, case: _Accumulation, ref: _Reference, tolerance: float) -> None:
    after = _flat(model.parameters())
    if torch.allclose(after, ref.after, rtol=tolerance, atol=tolerance / 10):
        return
    used = (ref.before - after) / _LR - case.momentum * ref.buffer  # the gradient the update used
    for gradient, mistake, fix in _gradient_mistakes(ref, case):
        if torch.allclose(used, gradient, rtol=1e-3, atol=1e-5):
            fail(mistake, fix)
    fail(
        "after accumulated_step the weights differ from those after one ordinary update on the whole batch",
        "zero the gradients once, backward() each piece's loss times its size / the batch size, update once",
    )


def _check_loss(answer: Any, case: _Accumulation, ref: _Reference, tolerance: float) -> None:
    if answer is None:
        fail("accumulated_step returned None", "return the whole batch's mean loss as a Python float")
    if isinstance(answer, torch.Tensor):
        fail(f"accumulated_step returned {describe(answer)}", "return a Python float, read once with .item()")
    if not isinstance(answer, float):
        fail(
            f"accumulated_step returned {describe(answer)}",
            "return the whole batch's mean loss as a Python float",
        )
    if math.isclose(answer, ref.loss, rel_tol=tolerance, abs_tol=tolerance):
        return
    k = len(ref.losses)
    for value, mistake, fix in (
        (
            ref.losses[-1],
            "accumulated_step returned the last piece's loss",
            "return the whole batch's mean loss",
        ),
        (
            sum(ref.losses),
            f"accumulated_step returned the sum of the {k} pieces' mean losses",
            "weigh each by its size / the batch size, and add those up",
        ),
        (
            sum(ref.losses) / k,
            "accumulated_step returned the mean of the pieces' losses, which weighs the smaller last "
            "piece like the full ones",
            "weigh each by its size / the batch size",
        ),
        (
            ref.loss * _BATCH,
            "accumulated_step returned the sum of the per-example losses",
            "divide it by the batch size",
        ),
    ):
        if math.isclose(answer, value, rel_tol=1e-4):
            fail(mistake, fix)
    fail(
        f"accumulated_step returned {short(answer, 12)}, but the batch's mean loss before the update is "
        f"{ref.loss:.5f}",
        "return the mean of the per-example losses over the whole batch",
    )


def _accumulate_on(m: Machine, accumulated_step: Callable, case: _Accumulation, ref: _Reference) -> None:
    model, loss_fn, optimizer, inputs, targets = _accumulation_setup(case, m.device)
    seen: list[torch.Tensor] = []
    steps = [0]

    def record(module: nn.Module, args: tuple) -> None:
        first = args[0] if args else None
        seen.append(first.detach() if isinstance(first, torch.Tensor) else torch.empty(0))

    hooks = [
        model.register_forward_pre_hook(record),
        optimizer.register_step_post_hook(lambda *args: steps.__setitem__(0, steps[0] + 1)),
    ]
    try:
        answer = m.run(accumulated_step, model, loss_fn, optimizer, inputs, targets, case.micro_batch)
    finally:
        for hook in hooks:
            hook.remove()
    sizes = [len(x) if x.dim() else 0 for x in seen]
    _pieces_seen(sizes, case)
    elsewhere = sorted({str(x.device) for x in seen if x.device.type != m.device.type})
    if elsewhere or any(p.device.type != m.device.type for p in model.parameters()):
        fail(
            f"the batch and model were on {where(m.device)}, but accumulated_step ran the model on "
            f"{', '.join(elsewhere) or 'another device'}",
            "keep the model and the pieces where they are",
        )
    rows = [x for x in seen if x.dim() == 2]
    if (
        m.device.type == "cpu"
        and len(rows) == len(seen)
        and not torch.equal(torch.cat(seen)[:, 0].sort().values, inputs[:, 0].sort().values)
    ):
        fail(
            "the pieces did not hold each example of the batch once",
            "cut inputs and targets alike, in order, inputs[start:start + micro_batch]",
        )
    _check_steps(steps[0])
    if m.device.type == "meta":
        return  # no values to compare
    tolerance = 1e-5 if m.device.type == "cpu" else 1e-3
    _check_weights(model, case, ref, tolerance)
    _check_loss(answer, case, ref, tolerance)


@exercise(
    "write accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch) so that it makes one "
    "update for the whole batch from pieces of at most micro_batch examples and returns its mean loss"
)
def check_accumulated_step(accumulated_step: Callable[..., Any]) -> str:
    """Exercise 2: one update for the whole batch, its gradient accumulated over pieces of ``micro_batch``."""
    for case in _ACCUMULATIONS:
        ref = _reference(case)
        for m in device_machines():
            m.cuda_fix = "stay on the device of the model and the batch"
            with m.tried(), _full_float32(m.device):
                _accumulate_on(m, accumulated_step, case, ref)
    return (
        "pieces of at most micro_batch examples, each weighed by its size, give the update and the mean "
        "loss of the whole batch at once"
    )


# ---- exercise 3: largest_batch ----


class _EndlessSearch(BaseException):
    """Raised by ``fits`` once it has been called far more often than any search needs."""


_OUT_OF_MEMORY = (
    "CUDA out of memory. Tried to allocate {mib:.2f} MiB. GPU 0 has a total capacity of 15.70 GiB of "
    "which {free:.2f} MiB is free. Including non-PyTorch memory, this process has 15.48 GiB memory in "
    "use. Of the allocated memory 14.91 GiB is allocated by PyTorch, and 301.52 MiB is reserved by "
    "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
    "Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html"
    "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)


def out_of_memory_error(n: int) -> torch.OutOfMemoryError:
    """A real ``torch.OutOfMemoryError``, worded as CUDA words it, for a batch of ``n``."""
    return torch.OutOfMemoryError(_OUT_OF_MEMORY.format(mib=2.0 * n, free=n % 97 + 0.5))


@dataclass(frozen=True)
class Search:
    """``fits(n)`` runs out of memory for ``n > threshold``; ``other`` is raised for ``n >= other_from``."""

    low: int
    high: int
    threshold: int
    other: BaseException | None = None
    other_from: int = 0

    @property
    def answer(self) -> int | None:
        return None if self.threshold < self.low else min(self.threshold, self.high)

    @property
    def most_calls(self) -> int:
        """What the check allows: a binary search needs at most ceil(log2(sizes)) + 1 calls."""
        return math.ceil(math.log2(self.high - self.low + 1)) + 2

    def fits(self, calls: list[Any]) -> Callable[[int], None]:
        limit = 2 * (self.high - self.low + 1) + 50

        def fits(n: int) -> None:
            calls.append(n)
            if len(calls) > limit:
                raise _EndlessSearch(f"fits was called {len(calls)} times")
            if isinstance(n, bool) or not isinstance(n, numbers.Integral):
                raise TypeError(f"fits takes a whole number of examples, not {describe(n)}")
            if self.other is not None and n >= self.other_from:
                raise self.other
            if n > self.threshold:
                raise out_of_memory_error(int(n))

        return fits


_SHAPES = RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)")
_TARGETS = ValueError("Expected input batch_size (64) to match target batch_size (32).")

SEARCHES = (
    Search(1, 1000, 347),
    Search(8, 512, 512),  # everything from low to high fits
    Search(8, 512, 10**9),  # and larger sizes too
    Search(16, 256, 16),  # only low fits
    Search(32, 64, 20),  # not even low fits
    Search(64, 64, 100),
    Search(64, 64, 63),
    Search(1, 4096, 3000, _TARGETS, 600),
    Search(1, 4096, 3000, _SHAPES, 600),
    *(Search(1, 64, threshold) for threshold in range(66)),
    *(Search(10, 42, threshold) for threshold in range(8, 44)),
)


def _played_gpu() -> Machine:
    """The CPU, on a machine that says it has a GPU: torch.cuda.empty_cache() and the like do nothing."""
    return Machine("played-gpu", torch.device("cpu"), None, "meta", "a machine with a GPU")


def _search(largest_batch: Callable, search: Search) -> tuple[Any, list[Any]]:
    calls: list[Any] = []
    m = _played_gpu()
    m.cuda_fix = "leave the GPU to fits, which runs the training step"
    given = f"(low {search.low}, high {search.high}, sizes up to {search.threshold} fit)"
    try:
        answer = m.run(largest_batch, search.fits(calls), search.low, search.high)
    except LearnerError as error:
        _calls_made(calls, search)
        if search.other is not None and error.error is search.other:
            return error, calls
        if isinstance(error.error, _EndlessSearch):
            fail(
                f"largest_batch called fits over {len(calls) - 1} times and did not stop {given}",
                "narrow the range at every call, so that the search ends",
            )
        if isinstance(error.error, torch.OutOfMemoryError):
            if search.answer is None:
                fail(
                    "largest_batch let the out-of-memory error through when not even low "
                    f"({search.low}) fits",
                    "catch it and return None",
                )
            fail(
                "largest_batch let the out-of-memory error of fits through",
                "catch torch.OutOfMemoryError, and take it to mean that the size does not fit",
            )
        if search.other is not None and isinstance(error.error, type(search.other)):
            fail(
                f"largest_batch raised a new {type(search.other).__name__} in place of the one fits raised",
                "let the error of fits through unchanged, with a bare raise",
            )
        raise
    _calls_made(calls, search)
    return answer, calls


def _calls_made(calls: list[Any], search: Search) -> None:
    odd = next((n for n in calls if isinstance(n, bool) or not isinstance(n, numbers.Integral)), None)
    if calls and odd is not None:
        fail(
            f"largest_batch called fits with {describe(odd)}, not a whole number of examples",
            "find the middle with //, which keeps sizes whole",
        )
    above = next((n for n in calls if n > search.high), None)
    if above is not None:
        fail(
            f"largest_batch called fits({above}), above high ({search.high})",
            "search only the sizes from low to high",
        )
    below = next((n for n in calls if n < search.low), None)
    if below is not None:
        fail(
            f"largest_batch called fits({below}), below low ({search.low})",
            "search only the sizes from low to high",
        )


def _check_answer(answer: Any, calls: list[Any], search: Search) -> None:
    expected = search.answer
    detail = [
        f"for low {search.low} and high {search.high}, with sizes up to {search.threshold} fitting, "
        f"it returned {short(repr(answer), 30)}"
    ]
    if search.other is not None and any(n >= search.other_from for n in calls):
        name = type(search.other).__name__
        caught = "RuntimeError" if name == "RuntimeError" else "Exception"
        fail(
            f"largest_batch took the {name} that fits raised for running out of memory",
            f"catch only torch.OutOfMemoryError, not {caught}, and let other errors through",
            [f"fits raised {name}: {short(search.other, 100)}", *detail],
        )
    if answer is None:
        if expected is None:
            return
        fail(
            f"largest_batch returned None, though low ({search.low}) fits",
            "return None only when low does not fit",
            detail,
        )
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        fail(
            f"largest_batch returned {describe(answer)}",
            "return the largest size that fits, an int, or None",
            detail,
        )
    if answer == expected:
        return
    if expected is None:
        fail(
            f"largest_batch returned {answer} though not even low ({search.low}) fits",
            "return None when fits(low) runs out of memory",
            detail,
        )
    if answer > search.high:
        fail(
            f"largest_batch returned {answer}, above high ({search.high})",
            "return a size from low to high",
            detail,
        )
    if answer == expected + 1:
        fail(
            f"largest_batch returned {answer}, the first size that did not fit",
            f"return the largest size that fits, {expected}",
            detail,
        )
    if answer == expected - 1:
        fail(
            f"largest_batch returned {answer}, one less than the largest size that fits ({expected})",
            "return the last size that fitted, not the one before it",
            detail,
        )
    failed = min((n for n in calls if n > search.threshold), default=None)
    if (
        answer < expected
        and answer in calls
        and failed is not None
        and answer < failed
        and not any(answer < n < failed for n in calls)
    ):
        fail(
            f"largest_batch returned {answer}, the last size that fitted before the first failure "
            f"({failed}), but never tried the sizes between",
            "keep searching between the last size that fitted and the first that did not",
            detail,
        )
    if answer > expected:
        fail(
            f"largest_batch returned {answer}, but fits({answer}) runs out of memory",
            f"return {expected}",
            detail,
        )
    fail(
        f"largest_batch returned {answer}, but sizes up to {expected} fit",
        "return the largest size that fits",
        detail,
    )


def _check_calls(calls: list[Any], search: Search) -> None:
    sizes = search.high - search.low + 1
    if len(calls) <= search.most_calls:
        return
    steps = {b - a for a, b in zip(calls, calls[1:], strict=False)}
    span = f"the {sizes} sizes from {search.low} to {search.high}"
    if steps <= {1} or steps <= {-1}:
        fail(
            f"largest_batch called fits {len(calls)} times for {span}, one size after another",
            f"halve the range with each call (a binary search), at most {search.most_calls} calls",
        )
    fail(
        f"largest_batch called fits {len(calls)} times for {span}, more than the {search.most_calls} "
        "a binary search needs",
        "halve the range with each call, and try each size once at most",
    )


@exercise(
    "write largest_batch(fits, low, high) so that it returns the largest n from low to high for which "
    "fits(n) does not run out of memory, or None, calling fits about log2(high - low + 1) times"
)
def check_largest_batch(largest_batch: Callable[..., Any]) -> str:
    """Exercise 3: ``largest_batch(fits, low, high)``, a binary search that catches out-of-memory alone."""
    for search in SEARCHES:
        answer, calls = _search(largest_batch, search)
        if isinstance(answer, LearnerError):
            continue  # the other error came through unchanged
        _check_answer(answer, calls, search)
        _check_calls(calls, search)
    return (
        f"the largest batch that fits, in at most log2(sizes) + 2 calls, over {len(SEARCHES)} searches; "
        "other errors come through"
    )
