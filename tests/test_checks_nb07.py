"""helpers.checks.nb07: right answers in other spellings pass (fragment None), typical mistakes are named."""

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases

from helpers.checks.nb07 import check_accumulated_step, check_largest_batch, check_state_bytes
from solutions import nb07 as solution

_bytes, _step = solution.state_bytes, solution.accumulated_step


def _states(
    optimizer, group
):  # parameter-sized tensors the optimizer keeps for a parameter of this group
    return 2 if "betas" in group else int(group.get("momentum", 0) != 0)


def _counted(size=None, *, grads=1, frozen=False, states=_states, unheld="", steps=0, result=int):
    """A state_bytes with one mistake: another size per number, frozen or unheld parameters, states."""

    def state_bytes(model, optimizer):
        group_of, total = {p: group for group in optimizer.param_groups for p in group["params"]}, 0
        for p in model.parameters():
            group, n = group_of.get(p), p.numel() * (size or p.element_size())
            if group is None and unheld == "skipped":
                continue
            trains = p.requires_grad or frozen
            total += n + n * grads * trains
            if trains and (group is not None or unheld == "state"):
                group = group or optimizer.param_groups[0]
                total += n * states(optimizer, group) + steps * ("betas" in group)
        return result(total)

    return state_bytes


def _nbytes(model, o):  # right: bytes from nbytes, state through the optimizer's groups
    state = [
        _states(o, g) * p.nbytes * p.requires_grad for g in o.param_groups for p in g["params"]
    ]
    return sum(state) + sum(p.nbytes * (1 + p.requires_grad) for p in model.parameters())


STATE = [
    ("nbytes, through the groups", _nbytes, None),
    ("a NumPy int", _counted(result=np.int64), None),
    ("elements", _counted(1), "counting numbers, not bytes"),
    ("4 bytes each", _counted(4), "a bfloat16 number takes 2 bytes"),
    ("no gradients", _counted(grads=0), "without the gradients"),
    ("frozen too", _counted(frozen=True), "gets no gradient and no state"),
    (
        "one Adam state",
        _counted(states=lambda o, g: 1 if "betas" in g else _states(o, g)),
        "Adam keeps two",
    ),
    ("the empty optimizer.state", _counted(states=lambda o, g: 0), "without the optimizer's state"),
    (
        "momentum always",
        _counted(states=lambda o, g: 2 if "betas" in g else 1),
        "SGD without momentum",
    ),
    (
        "defaults",
        _counted(states=lambda o, g: 2 if "betas" in g else o.defaults["momentum"] > 0),
        "own",
    ),
    ("state everywhere", _counted(unheld="state"), "state only for what the optimizer holds"),
    ("held only", _counted(unheld="skipped"), "state only for what the optimizer holds"),
    ("step counters", _counted(steps=4), "leave its step counters out"),
    ("right, as a float", _counted(result=float), "returned the float 3736.0"),
    ("a tensor", _counted(result=torch.tensor), "returned an int64 tensor"),
    ("one too many", lambda m, o: _bytes(m, o) + 1, "for a float32 model with SGD"),
    ("reads on the device", lambda m, o: _bytes(m, o) + 0 * m[0].bias.cpu().nbytes, "values on"),
    (
        "trains to see",
        lambda m, o: sum(p.sum() for p in m.parameters()).float().backward(),
        "trained the",
    ),
    ("memory_allocated", lambda model, optimizer: torch.cuda.memory_allocated(), "gave 0 bytes"),
    (
        "grads before any step",
        lambda m, o: sum(p.grad.nbytes for p in m.parameters()),
        "AttributeError",
    ),
    (
        "p in params",
        lambda m, o: sum(p in o.param_groups[0]["params"] for p in m.parameters()),
        "Error",
    ),
]


def _accumulate(
    weigh=lambda n, batch, k: n / batch, *, zero="before", steps=1, equal_shares=False, cut=None
):
    """An accumulated_step with one mistake: ``weigh(piece size, batch size, pieces)`` scales each loss."""

    def accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch):
        zero == "before" and optimizer.zero_grad()
        size = cut or micro_batch
        pieces, total = list(zip(inputs.split(size), targets.split(size), strict=True)), 0.0
        for x, y in pieces:
            zero == "inside" and optimizer.zero_grad()
            ((loss := loss_fn(model(x), y)) * weigh(len(y), len(inputs), len(pieces))).backward()
            total += loss.item() * (1 / len(pieces) if equal_shares else len(y) / len(inputs))
        [optimizer.step() for _ in range(steps)]
        return total

    return accumulated_step


ACCUMULATE = [
    ("a piece's share by shape", _accumulate(lambda n, batch, k: n / batch), None),
    ("uneven pieces, 4, 3, 3", _accumulate(cut=[4, 3, 3]), None),
    ("no scaling", _accumulate(lambda n, b, k: 1), "not weighed by their share"),
    ("micro_batch / batch", _accumulate(lambda n, b, k: 4 / b), "len(x) / len(inputs)"),
    ("zero_grad inside", _accumulate(zero="inside"), "only the last piece's gradient"),
    ("no zero_grad", _accumulate(zero="never"), "left in .grad by the previous batch were added"),
    ("step per piece", _accumulate(steps=3), "optimizer.step() ran 3 times"),
    ("no step", _accumulate(steps=0), "optimizer.step() ran 0 times"),
    (
        "the whole batch",
        lambda m, f, o, x, y, b: o.step(lambda: f(m(x), y).backward()),
        "pieces of [10]",
    ),
    (
        "whole-batch loss",
        lambda m, f, o, x, y, b: _step(m, f, o, x, y, b) and f(m(x), y).item(),
        "10]",
    ),
    ("pieces too large", _accumulate(cut=8), "pieces of [8, 2] examples"),
    ("pieces of one", _accumulate(cut=1), "pieces of [1, 1, 1"),
    ("mean of the means", _accumulate(equal_shares=True), "mean loss is"),
    ("a tensor", lambda *a: torch.tensor(_step(*a)), "returned a float32 tensor"),
    ("on the CPU", lambda model, *a: _step(model.cpu(), *a), "copied values off the device"),
    ("to cuda", lambda m, f, o, x, *a: _step(m, f, o, x.to("cuda"), *a), "the GPU itself"),
    ("drops the last piece", lambda m, f, o, x, y, b: _step(m, f, o, x[:8], y[:8], b), "[4, 4]"),
    (
        "repeats examples",
        lambda m, f, o, x, *a: _step(m, f, o, torch.cat([x[:8], x[:2]]), *a),
        "once",
    ),
]


def _search(*, low_fits=False, middle=lambda low, high: (low + high + 1) // 2, test=bool):
    """A largest_batch with one mistake: low taken to fit, another middle, fits misread."""

    def largest_batch(fits, low, high):
        if not low_fits and not test(fits(low)):
            return None
        while low < high:
            mid = middle(low, high)
            low, high = (mid, high) if test(fits(mid)) else (low, mid - 1)
        return low

    return largest_batch


def _first_failure(fits, low, high):  # the first size that does not fit, high + 1 if all do
    while low <= high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if fits(middle) else (low, middle - 1)
    return low


def _never_tries_high(fits, low, high):
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low if fits(low) else None


def _doubling(fits, low, high, past=False):
    n = low
    while (n * 2 <= high or past) and fits(n * 2):
        n *= 2
    return (
        (solution.largest_batch(fits, n, min(2 * n - 1, high)) if past else n)
        if fits(low)
        else None
    )


SEARCH = [
    ("first failure - 1", lambda f, lo, hi: _first_failure(f, lo, hi) - 1 if f(lo) else None, None),
    (
        "linear",
        lambda f, lo, hi: next((n for n in range(hi, lo - 1, -1) if f(n)), None),
        "654 times",
    ),
    ("the first failure", _first_failure, "returned the int 348"),
    ("never tries high", _never_tries_high, "returned the int 511"),
    ("low when nothing fits", _search(low_fits=True), "returned the int 32"),
    ("doubling", _doubling, "returned the int 256"),
    ("doubling past high", lambda *a: _doubling(*a, past=True), "not at most 12"),
    (
        "ignores high",
        lambda f, lo, hi: solution.largest_batch(f, lo, 4096),
        "fits(2049), not a whole size",
    ),
    ("a float middle", _search(middle=lambda low, high: (low + high + 1) / 2), "fits(501.0)"),
    ("never ends", _search(middle=lambda low, high: (low + high) // 2), "without end"),
    ("a string", lambda fits, low, high: "347", "returned the string '347'"),
    ("ignores what fits says", _search(test=lambda fits: True), "returned the int 1000"),
    ("the test inverted", _search(test=lambda fits: not fits), "returned None"),
]

TABLES = {check_state_bytes: STATE, check_accumulated_step: ACCUMULATE, check_largest_batch: SEARCH}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
