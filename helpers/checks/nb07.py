"""Checks for ``07_memory_and_errors``: two run on the CPU, on ``meta`` standing in for a GPU and on this
machine's GPU if any; ``largest_batch`` is given ``fits`` with a known threshold, and its calls counted."""

import math
import numbers
from collections.abc import Callable, Iterable

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, StandInCannot, describe, device_machines, exercise

__all__ = ["check_accumulated_step", "check_largest_batch", "check_state_bytes"]


_CASES = {  # the cases of state_bytes, and the fix each asks for
    "a float32 model with SGD": "count each parameter and its gradient; SGD without momentum keeps no state",
    "SGD with momentum 0.9": "SGD with momentum keeps a buffer as large as each parameter it updates",
    "Adam": "Adam keeps two tensors as large as each parameter it updates; leave its step counters out",
    "a bfloat16 model with AdamW": "a bfloat16 number takes 2 bytes: use p.element_size()",
    "a frozen first layer and Adam": "a frozen parameter (requires_grad False) gets no gradient and no state",
    "SGD holding the last layer alone": "state only for what the optimizer holds, a gradient for all",
    "SGD groups, momentum 0.9 and 0": "read the momentum of each parameter's own param group",
}


def _nbytes(tensors: Iterable[torch.Tensor | None]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def _build(case: int, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    with torch.device("meta"):  # sizes matter, not values: no random numbers drawn
        model = nn.Sequential(
            nn.Linear(6, 16), nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 3)
        )
    model = model.to(torch.bfloat16 if case == 3 else torch.float32).to_empty(device=device)
    model[0].requires_grad_(case != 4)
    p, sgd, adam = list(model.parameters()), torch.optim.SGD, torch.optim.Adam
    made = [
        sgd(p, 0.1),
        sgd(p, 0.1, 0.9),
        adam(p),
        torch.optim.AdamW(p),
        adam(p),
        sgd(p[-2:], 0.1, 0.9),
    ]
    return model, [*made, sgd([{"params": p[:4], "momentum": 0.9}, {"params": p[4:]}], 0.1)][case]


@exercise(
    "write state_bytes(model, optimizer) returning the bytes of parameters, gradients, optimizer state"
)
def check_state_bytes(state_bytes: Callable) -> str:
    for case, (label, fix) in enumerate(_CASES.items()):
        model, optimizer = _build(case, torch.device("cpu"))  # measured after a real update
        model(torch.zeros(2, 6, dtype=model[0].weight.dtype)).float().sum().backward()
        optimizer.step()
        params, grads = _nbytes(model.parameters()), _nbytes(p.grad for p in model.parameters())
        state = _nbytes(v for s in optimizer.state.values() for k, v in s.items() if k != "step")
        for m in device_machines():
            model, optimizer = _build(case, m.device)
            try:
                a = m.run(state_bytes, model, optimizer)
            except StandInCannot:
                fail(
                    "state_bytes read values on the device",
                    "use numel() and element_size(), sizes only",
                )
            if optimizer.state or _nbytes(p.grad for p in model.parameters()):
                fail(
                    "state_bytes trained the model it was given",
                    "work from the sizes, and change nothing",
                )
            if not isinstance(a, numbers.Integral) or isinstance(a, bool):
                fail(f"state_bytes returned {describe(a)}", "return the number of bytes as an int")
            if a != params + grads + state:
                if a * (2 if case == 3 else 4) == params + grads + state:
                    label, fix = (
                        f"{label}, counting numbers, not bytes",
                        "multiply numel() by element_size()",
                    )
                elif a in (params + grads, params + state):
                    label += ", without the " + (
                        "optimizer's state" if a == params + grads else "gradients"
                    )
                details = [
                    f"measured: parameters {params:,}, gradients {grads:,}, optimizer state {state:,}"
                ]
                fail(f"state_bytes gave {int(a):,} bytes for {label}", fix, details)
    return "state_bytes agrees with what a real update leaves: SGD, momentum, Adam, bfloat16, frozen, groups"


def _accumulation(device: torch.device) -> tuple:
    """A setup on ``device`` (.grad holds an older batch's), the model's inputs, the steps' gradients."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
        x, y, seen, used = torch.randn(16, 5).to(device), torch.randint(3, (16,)).to(device), [], []
    loss_fn, optimizer = nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn(model(x[10:]), y[10:]).backward()
    model.register_forward_pre_hook(lambda _, args: seen.extend(args[:1]))
    grads = lambda: device.type == "meta" or _flat(p.grad for p in model.parameters())  # noqa: E731
    optimizer.register_step_pre_hook(lambda *_: used.append(grads()))
    return (model, loss_fn, optimizer, x[:10], y[:10]), seen, used


def _flat(tensors: Iterable[torch.Tensor | None]) -> torch.Tensor:
    return torch.cat(
        [torch.zeros(1) if t is None else t.detach().cpu().flatten() for t in tensors]
    ).double()


@exercise(
    "write accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch) in pieces"
)
def check_accumulated_step(accumulated_step: Callable) -> str:
    for m in device_machines():
        setup, seen, used = _accumulation(m.device)
        try:
            a = m.run(accumulated_step, *setup, 4)
        except StandInCannot:  # a read of the loss is fine, but not before the model ran
            if not seen:
                fail(
                    "accumulated_step copied values off the device",
                    "keep the model and batch there",
                )
            continue  # the stand-in stops there: the CPU checks the rest
        sizes = [len(x) if x.dim() else 0 for x in seen]
        if max(sizes, default=5) > 4 or sum(sizes) != 10 or len(sizes) != 3:
            fail(
                f"the model ran on pieces of {sizes} examples", "cut 3 pieces of at most 4 examples"
            )
        if len(used) != 1:
            fail(
                f"optimizer.step() ran {len(used)} times",
                "call it once, after the last piece's backward()",
            )
        if m.device.type == "meta":
            continue
        if not torch.cat(seen)[:, 0].sort().values.equal(setup[3][:, 0].sort().values):
            fail(
                "the pieces did not hold each example once",
                "cut inputs and targets alike, in order",
            )
        (model, loss_fn, _, x, y), _, _ = _accumulation(torch.device("cpu"))  # the right update:
        params, stale = list(model.parameters()), _flat(p.grad for p in model.parameters())
        whole, last = (loss_fn(model(x[n:]), y[n:]) for n in (0, 8))
        right, alone = (_flat(torch.autograd.grad(loss, params)) for loss in (whole, last))
        if torch.allclose(used[0], right + stale, 1e-4, 1e-7):
            fail(
                "the gradients left in .grad by the previous batch were added in",
                "zero_grad() once, first",
            )
        if torch.allclose(used[0], alone * (used[0] @ alone) / (alone @ alone), 1e-4, 1e-7):
            fail(
                "only the last piece's gradient counted",
                "zero the gradients once, before the first piece",
            )
        if not torch.allclose(used[0], right, 1e-4, 1e-7):
            fail(
                "the pieces' gradients were not weighed by their share",
                "scale by len(x) / len(inputs)",
            )
        if not isinstance(a, float) or not math.isclose(a, whole.item(), rel_tol=1e-4):
            mean = f"accumulated_step returned {describe(a)}; the batch's mean loss is {whole.item():.5f}"
            fail(mean, "return that, a float: the sum of each piece's loss times its share")
    return "pieces of at most micro_batch examples, weighed by their size, make the whole batch's update"


def _search(largest_batch: Callable, low: int, high: int, threshold: int) -> tuple[object, list]:
    calls: list = []

    def fits(n: int) -> bool:
        calls.append(n)
        if len(calls) > 2 * (high - low) + 50:
            fail(
                f"largest_batch called fits {len(calls)} times, without end",
                "narrow the range every call",
            )
        return n <= threshold

    return Machine.cpu().run(largest_batch, fits, low, high), calls


@exercise("write largest_batch(fits, low, high) returning the largest n from low to high that fits")
def check_largest_batch(largest_batch: Callable) -> str:
    searches = [
        (1, 1000, 347),
        (8, 512, 512),
        (8, 512, 10**9),
        (16, 256, 16),
        (32, 64, 20),
        (64, 64, 100),
    ]
    searches += [
        (64, 64, 63),
        *((1, 64, t) for t in range(66)),
        *((10, 42, t) for t in range(8, 44)),
    ]
    for low, high, threshold in searches:
        a, calls = _search(largest_batch, low, high, threshold)
        expected, most = (
            None if threshold < low else min(threshold, high),
            (high - low).bit_length() + 2,
        )
        if bad := [n for n in calls if not isinstance(n, numbers.Integral) or not low <= n <= high]:
            said = f"largest_batch called fits({bad[0]!r}), not a whole size from {low} to {high}"
            fail(said, "search from low to high, taking the middle with //")
        if not isinstance(a, numbers.Integral | None) or a != expected:
            where = f"for low {low}, high {high}, sizes up to {threshold} fitting, largest_batch returned"
            fail(
                f"{where} {describe(a)}",
                "return the last size that fits, an int, or None if none does",
            )
        if len(calls) > most:
            fail(
                f"largest_batch called fits {len(calls)} times, not at most {most}",
                "halve the range",
            )
    return "the largest size that fits, in about log2(high - low + 1) calls"
