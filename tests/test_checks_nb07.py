"""helpers.checks.nb07: right answers in other spellings pass, typical mistakes are refused by name.

``state_bytes`` and ``accumulated_step`` run on the CPU, on ``meta`` standing in for a GPU and, on
a machine with one, on the GPU; ``largest_batch`` runs against simulated ``fits`` functions that
raise a real ``torch.OutOfMemoryError``: these tests give the same verdicts on every machine.
"""

import bisect
import math

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases

from helpers.checks.nb07 import (
    SEARCHES,
    STATE_CASES,
    Search,
    check_accumulated_step,
    check_largest_batch,
    check_state_bytes,
    count_state_bytes,
    out_of_memory_error,
)
from solutions import nb07 as solution

# the name the notebook teaches; torch.cuda.OutOfMemoryError is the same class
OUT_OF_MEMORY = torch.OutOfMemoryError

# ---- exercise 1: state_bytes ----


def test_the_formula_agrees_with_a_real_update():
    for case in STATE_CASES:
        model, optimizer = case.build(torch.device("cpu"))
        assert count_state_bytes(model, optimizer) == sum(case.measure()), case.label


def test_every_mistake_gives_a_figure_of_its_own_somewhere():
    """Each switch of the formula changes the figure in at least one case, so each message can be reached."""
    from helpers.checks.nb07 import _STATE_MISTAKES

    for mistake in _STATE_MISTAKES:
        changed = [
            case.label
            for case in STATE_CASES
            if count_state_bytes(*case.build(torch.device("cpu")), **mistake.switches) != sum(case.measure())
        ]
        assert changed, mistake.mistake


def _is_adam(optimizer):
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)


def _states(optimizer, group, adam=2, momentum=None):
    """How many parameter-sized state tensors the optimizer keeps for a parameter of ``group``."""
    if _is_adam(optimizer):
        return adam
    value = group.get("momentum", 0) if momentum is None else momentum
    return 1 if value else 0


def _bytes_with(
    *,
    size=lambda p: p.element_size(),
    grads=True,
    frozen_too=False,
    adam=2,
    momentum=None,
    state_everywhere=False,
    held_only=False,
    unheld_grads=True,
    steps=0,
    result=int,
):
    """A state_bytes with one of the typical mistakes switched on."""

    def state_bytes(model, optimizer):
        group_of = {p: group for group in optimizer.param_groups for p in group["params"]}
        total = 0
        for p in model.parameters():
            group = group_of.get(p)
            if held_only and group is None:
                continue
            n = p.numel() * size(p)
            total += n
            if not (p.requires_grad or frozen_too):
                continue
            if grads and (unheld_grads or group is not None):
                total += n
            if group is None and not state_everywhere:
                continue
            m = momentum(optimizer) if callable(momentum) else momentum
            total += n * _states(optimizer, group or optimizer.param_groups[0], adam, m)
            total += steps if _is_adam(optimizer) else 0
        return result(total)

    return state_bytes


def _by_type_name(model, optimizer):
    held = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    per = {"SGD": lambda g: int(g["momentum"] != 0), "Adam": lambda g: 2, "AdamW": lambda g: 2}
    total = 0
    for p in model.parameters():
        total += p.nbytes
        if p.requires_grad:
            total += p.nbytes
            if id(p) in held:
                total += p.nbytes * per[type(optimizer).__name__](held[id(p)])
    return total


def _groups_first(model, optimizer):
    """Through the optimizer's groups for the state, and the model for the parameters and gradients."""
    total = sum(p.numel() * p.dtype.itemsize * (2 if p.requires_grad else 1) for p in model.parameters())
    for group in optimizer.param_groups:
        keeps = 2 if "betas" in group else (1 if group.get("momentum") else 0)
        total += sum(keeps * p.numel() * p.element_size() for p in group["params"] if p.requires_grad)
    return total


def _reads_on_the_device(model, optimizer):
    return solution.state_bytes(model, optimizer) + sum(int(p.cpu().numel()) * 0 for p in model.parameters())


def _trains_to_see(model, optimizer):
    sum(p.sum() for p in model.parameters() if p.requires_grad).float().backward()
    optimizer.step()
    return solution.state_bytes(model, optimizer)


def _reads_the_empty_state(model, optimizer):
    total = sum(2 * p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    total += sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    for values in optimizer.state.values():  # empty until the first update
        total += sum(v.numel() * v.element_size() for v in values.values())
    return total


STATE_RIGHT = {
    "reference": solution.state_bytes,
    "type name, nbytes": _by_type_name,
    "groups first, itemsize": _groups_first,
    "a NumPy int": lambda model, optimizer: np.int64(solution.state_bytes(model, optimizer)),
}

STATE_WRONG = [
    ("elements", _bytes_with(size=lambda p: 1), "counted numbers (elements), not bytes"),
    ("4 bytes each", _bytes_with(size=lambda p: 4), "took 4 bytes per number, but a bfloat16 number takes 2"),
    ("no gradients", _bytes_with(grads=False), "left out the gradients"),
    ("frozen too", _bytes_with(frozen_too=True), "for frozen parameters, which get neither"),
    ("one Adam state", _bytes_with(adam=1), "one state tensor per parameter for Adam, which keeps two"),
    ("no momentum", _bytes_with(momentum=0), "left out SGD's momentum buffers"),
    ("the empty optimizer.state", _reads_the_empty_state, "left out SGD's momentum buffers"),
    ("momentum always", _bytes_with(momentum=1), "a momentum buffer for SGD with momentum 0"),
    (
        "defaults",
        _bytes_with(momentum=lambda o: o.defaults.get("momentum", 0)),
        "read the momentum from optimizer.defaults",
    ),
    (
        "first group",
        _bytes_with(momentum=lambda o: o.param_groups[0].get("momentum", 0)),
        "the first param group's momentum for every group",
    ),
    (
        "state everywhere",
        _bytes_with(state_everywhere=True),
        "state for parameters that the optimizer does not hold",
    ),
    ("held only", _bytes_with(held_only=True), "counted only the parameters the optimizer holds"),
    ("no gradient if not held", _bytes_with(unheld_grads=False), "gave no gradient to the parameters"),
    ("step counters", _bytes_with(steps=4), "counted Adam's step counters"),
    ("right, as a float", _bytes_with(result=float), "returned the float 3736.0, which is the right figure"),
    ("a tensor", _bytes_with(result=torch.tensor), "returned a int64 tensor"),
    (
        "one too many",
        lambda model, optimizer: solution.state_bytes(model, optimizer) + 1,
        "a real update leaves",
    ),
    ("reads on the device", _reads_on_the_device, "read values back from the device (.cpu() at line"),
    ("trains to see", _trains_to_see, "trained the model it was given"),
    ("memory_allocated", lambda model, optimizer: torch.cuda.memory_allocated(), "state_bytes gave 0 bytes"),
]


@pytest.mark.parametrize("answer", right_cases(STATE_RIGHT))
def test_state_bytes_right(answer, capsys):
    right(check_state_bytes, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(STATE_WRONG))
def test_state_bytes_wrong(answer, fragment):
    wrong(check_state_bytes, answer, fragment)


def test_state_bytes_shows_the_measured_figures():
    error = wrong(check_state_bytes, _bytes_with(adam=1), "keeps two")
    assert error.details == (
        "for a float32 model with Adam: your figure 5,604, measured 7,472 (parameters 1,868, "
        "gradients 1,868, optimizer state 3,736)",
    )


# ---- exercise 2: accumulated_step ----


def _pieces(inputs, targets, size):
    for start in range(0, len(inputs), size):
        yield inputs[start : start + size], targets[start : start + size]


def _item_per_piece(model, loss_fn, optimizer, inputs, targets, micro_batch):
    optimizer.zero_grad(set_to_none=False)
    total = 0.0
    for x, y in _pieces(inputs, targets, micro_batch):
        loss = loss_fn(model(x), y)
        (loss * len(y) / len(targets)).backward()
        total += loss.item() * len(y)  # a read per piece: allowed
    optimizer.step()
    return total / len(targets)


def _tensor_split(model, loss_fn, optimizer, inputs, targets, micro_batch):
    model.zero_grad()
    pieces = math.ceil(len(inputs) / micro_batch)
    total = torch.zeros((), device=inputs.device)
    for x, y in zip(inputs.tensor_split(pieces), targets.tensor_split(pieces), strict=True):
        loss = loss_fn(model(x), y) * x.shape[0] / inputs.shape[0]
        loss.backward()
        total += loss.detach()
    optimizer.step()
    return total.item()


def _accumulate(scale, *, zero="before", steps="once", result="mean", size=None, extra_forward=False):
    """An accumulated_step with one of the typical mistakes: ``scale(loss, piece, batch, pieces)``."""

    def accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch):
        if zero == "before":
            optimizer.zero_grad()
        pieces = list(_pieces(inputs, targets, size(micro_batch) if size else micro_batch))
        losses = []
        for x, y in pieces:
            if zero == "inside":
                optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            scale(loss, len(y), len(targets), len(pieces)).backward()
            losses.append((loss.item(), len(y)))
            if steps == "per piece":
                optimizer.step()
        if steps == "once":
            optimizer.step()
        if zero == "after":
            optimizer.zero_grad()
        if extra_forward:
            with torch.no_grad():
                return loss_fn(model(inputs), targets).item()
        if result == "last":
            return losses[-1][0]
        if result == "sum":
            return sum(value for value, _ in losses)
        if result == "mean of means":
            return sum(value for value, _ in losses) / len(losses)
        if result == "tensor":
            return torch.tensor(sum(value * n for value, n in losses) / len(targets))
        return sum(value * n for value, n in losses) / len(targets)

    return accumulated_step


def _weighted(loss, n, batch, pieces):
    return loss * n / batch


def _whole_batch(model, loss_fn, optimizer, inputs, targets, micro_batch):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def _on_the_cpu(model, loss_fn, optimizer, inputs, targets, micro_batch):
    model.cpu()
    return solution.accumulated_step(model, loss_fn, optimizer, inputs.cpu(), targets.cpu(), micro_batch)


def _pieces_to_cuda(model, loss_fn, optimizer, inputs, targets, micro_batch):
    return solution.accumulated_step(model, loss_fn, optimizer, inputs.to("cuda"), targets, micro_batch)


def _updates_by_hand(model, loss_fn, optimizer, inputs, targets, micro_batch):
    model.zero_grad()
    total = 0.0
    for x, y in _pieces(inputs, targets, micro_batch):
        loss = loss_fn(model(x), y) * len(y) / len(targets)
        loss.backward()
        total += loss.item()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    return total


ACCUMULATE_RIGHT = {
    "reference": solution.accumulated_step,
    ".item() per piece": _item_per_piece,
    "tensor_split, model.zero_grad": _tensor_split,
    "weighted": _accumulate(_weighted),
}

ACCUMULATE_WRONG = [
    ("no scaling", _accumulate(lambda loss, n, batch, k: loss), "the update is about 3 times too large"),
    (
        "by the number of pieces",
        _accumulate(lambda loss, n, batch, k: loss / k),
        "divided by the number of pieces",
    ),
    (
        "micro_batch / batch",
        _accumulate(lambda loss, n, batch, k: loss * 4 / batch),
        "weighed by micro_batch / the batch size",
    ),
    ("times the size only", _accumulate(lambda loss, n, batch, k: loss * n), "10 times too large"),
    ("zero_grad inside", _accumulate(_weighted, zero="inside"), "only the last piece's gradient"),
    (
        "zero_grad inside, unscaled",
        _accumulate(lambda loss, n, b, k: loss, zero="inside"),
        "only the last piece's",
    ),
    (
        "no zero_grad",
        _accumulate(_weighted, zero="never"),
        "left in .grad by the previous batch were added in",
    ),
    ("zero_grad at the end", _accumulate(_weighted, zero="after"), "left in .grad by the previous batch"),
    (
        "step per piece",
        _accumulate(_weighted, steps="per piece"),
        "called optimizer.step() 3 times, once per piece",
    ),
    ("no step", _accumulate(_weighted, steps="never"), "never called optimizer.step()"),
    ("updates by hand", _updates_by_hand, "never called optimizer.step()"),
    ("the whole batch", _whole_batch, "ran the whole batch of 10 through the model at once"),
    ("loss of the whole batch", _accumulate(_weighted, extra_forward=True), "ran the whole batch of 10"),
    ("pieces too large", _accumulate(_weighted, size=lambda m: 2 * m), "ran a piece of 8 examples"),
    ("pieces of one", _accumulate(_weighted, size=lambda m: 1), "into 10 pieces where 3"),
    ("the last piece's loss", _accumulate(_weighted, result="last"), "returned the last piece's loss"),
    ("sum of the means", _accumulate(_weighted, result="sum"), "the sum of the 3 pieces' mean losses"),
    ("mean of the means", _accumulate(_weighted, result="mean of means"), "the mean of the pieces' losses"),
    ("a tensor", _accumulate(_weighted, result="tensor"), "returned a float32 tensor"),
    ("on the CPU", _on_the_cpu, "ran the model on cpu"),
    ("to cuda", _pieces_to_cuda, "used the GPU itself"),
]


def _drops_the_last_piece(model, loss_fn, optimizer, inputs, targets, micro_batch):
    optimizer.zero_grad()
    full = len(inputs) // micro_batch * micro_batch
    total = 0.0
    for x, y in _pieces(inputs[:full], targets[:full], micro_batch):
        loss = loss_fn(model(x), y) * len(y) / full
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


ACCUMULATE_WRONG.append(
    ("drops the last piece", _drops_the_last_piece, "the pieces held 8 of the batch's 10")
)


def _the_first_examples_again(model, loss_fn, optimizer, inputs, targets, micro_batch):
    """The last, smaller piece is cut from the start of the batch."""
    optimizer.zero_grad()
    n, total = len(inputs), 0.0
    for start in range(0, n, micro_batch):
        size = min(micro_batch, n - start)
        first = start if size == micro_batch else 0
        x, y = inputs[first : first + size], targets[first : first + size]
        loss = loss_fn(model(x), y) * size / n
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


ACCUMULATE_WRONG.append(
    ("the first examples again", _the_first_examples_again, "did not hold each example of the batch once")
)


@pytest.mark.parametrize("answer", right_cases(ACCUMULATE_RIGHT))
def test_accumulated_step_right(answer, capsys):
    right(check_accumulated_step, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(ACCUMULATE_WRONG))
def test_accumulated_step_wrong(answer, fragment):
    wrong(check_accumulated_step, answer, fragment)


def test_accumulated_step_leaves_the_random_numbers_alone():
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    check_accumulated_step(solution.accumulated_step)
    assert torch.equal(torch.rand(2), expected)


# ---- exercise 3: largest_batch ----


def test_the_out_of_memory_error_is_the_real_one():
    error = out_of_memory_error(512)
    assert type(error) is torch.OutOfMemoryError and isinstance(error, RuntimeError)
    assert torch.OutOfMemoryError is torch.cuda.OutOfMemoryError  # one class, two names
    assert str(error).startswith(
        "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity"
    )


def test_the_reference_stays_within_the_bound_for_many_ranges():
    for low in (1, 2, 7, 32):
        for width in (*range(1, 70), 127, 128, 129, 1000, 4096):
            high = low + width - 1
            for threshold in {low - 1, low, low + width // 3, high - 1, high, high + 5}:
                calls = []
                search = Search(low, high, threshold)
                assert solution.largest_batch(search.fits(calls), low, high) == search.answer
                assert len(calls) <= math.ceil(math.log2(width)) + 1 <= search.most_calls


def _fits_in_memory(fits, n):
    try:
        fits(n)
    except OUT_OF_MEMORY:
        return False
    return True


def _by_message(fits, low, high):
    """The older spelling: catch RuntimeError, and look at the message."""

    def ok(n):
        try:
            fits(n)
        except RuntimeError as error:
            if "out of memory" not in str(error):
                raise
            torch.cuda.empty_cache()
            return False
        return True

    if not ok(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low


def _bisect(fits, low, high):
    index = bisect.bisect_left(range(low, high + 1), True, key=lambda n: not _fits_in_memory(fits, n))
    return low + index - 1 if index else None


def _first_failure_search(fits, low, high):
    lo, hi = low, high + 1  # the first size that does not fit, high + 1 if all do
    while lo < hi:
        middle = (lo + hi) // 2
        if _fits_in_memory(fits, middle):
            lo = middle + 1
        else:
            hi = middle
    return lo - 1 if lo > low else None


def _search_with(*, check_low=True, catch=torch.OutOfMemoryError, result=lambda low: low, middle=None):
    """The reference with one mistake: no check of low, another except, another result."""

    def largest_batch(fits, low, high):
        def ok(n):
            try:
                fits(n)
            except catch:
                return False
            return True

        if check_low and not ok(low):
            return None
        while low < high:
            mid = middle(low, high) if middle else (low + high + 1) // 2
            if ok(mid):
                low = mid
            else:
                high = mid - 1
        return result(low)

    return largest_batch


def _linear_up(fits, low, high):
    for n in range(low, high + 1):
        if not _fits_in_memory(fits, n):
            return n - 1 if n > low else None
    return high


def _linear_down(fits, low, high):
    for n in range(high, low - 1, -1):
        if _fits_in_memory(fits, n):
            return n
    return None


def _returns_the_first_failure(fits, low, high):
    lo, hi = low, high + 1
    while lo < hi:
        middle = (lo + hi) // 2
        if _fits_in_memory(fits, middle):
            lo = middle + 1
        else:
            hi = middle
    return lo


def _never_tries_high(fits, low, high):
    if not _fits_in_memory(fits, low):
        return None
    lo, hi = low, high
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if _fits_in_memory(fits, middle):
            lo = middle
        else:
            hi = middle
    return lo


def _raises_when_nothing_fits(fits, low, high):
    fits(low)  # let it fail: nothing fits
    return solution.largest_batch(fits, low, high)


def _never_catches(fits, low, high):
    while low < high:
        middle = (low + high + 1) // 2
        fits(middle)
        low = middle
    return low


def _doubling(fits, low, high):
    n = low
    if not _fits_in_memory(fits, n):
        return None
    while n * 2 <= high and _fits_in_memory(fits, n * 2):
        n *= 2
    return n


def _doubling_past_high(fits, low, high):
    n = low
    while _fits_in_memory(fits, n):
        n *= 2
    return solution.largest_batch(fits, n // 2, min(n - 1, high)) if n > low else None


def _renames_the_error(fits, low, high):
    try:
        return solution.largest_batch(fits, low, high)
    except RuntimeError as error:
        raise RuntimeError(f"training failed: {error}") from error


def _two_calls_per_round(fits, low, high):
    if not _fits_in_memory(fits, low):
        return None
    while low < high:
        middle = (low + high) // 2
        if _fits_in_memory(fits, middle) and not _fits_in_memory(fits, middle + 1):
            return middle
        if _fits_in_memory(fits, middle):
            low = middle + 1
        else:
            high = middle - 1
    return low


def _bare_except(fits, low, high):
    def ok(n):
        try:
            fits(n)
        except:  # noqa: E722 - the mistake: it catches every error
            return False
        return True

    if not ok(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low


SEARCH_RIGHT = {
    "reference": solution.largest_batch,
    "torch.cuda.OutOfMemoryError": _search_with(catch=torch.cuda.OutOfMemoryError),
    "by the message, empty_cache": _by_message,
    "bisect": _bisect,
    "the first failure, minus one": _first_failure_search,
}

SEARCH_WRONG = [
    (
        "linear, upwards",
        _linear_up,
        "called fits 348 times for the 1000 sizes from 1 to 1000, one size after",
    ),
    ("linear, downwards", _linear_down, "called fits 654 times"),
    ("the first failure", _returns_the_first_failure, "returned 348, the first size that did not fit"),
    ("never tries high", _never_tries_high, "returned 511, one less than the largest size that fits (512)"),
    ("low when nothing fits", _search_with(check_low=False), "returned 32 though not even low (32) fits"),
    (
        "raises when nothing fits",
        _raises_when_nothing_fits,
        "let the out-of-memory error through when not even low",
    ),
    ("never catches", _never_catches, "let the out-of-memory error of fits through"),
    ("except Exception", _search_with(catch=Exception), "took the ValueError that fits raised"),
    ("bare except", _bare_except, "not Exception, and let other errors through"),
    (
        "except RuntimeError",
        _search_with(catch=RuntimeError),
        "not RuntimeError, and let other errors through",
    ),
    ("renames the error", _renames_the_error, "raised a new RuntimeError in place of the one fits raised"),
    ("doubling", _doubling, "returned 256, the last size that fitted before the first failure (512)"),
    ("doubling past high", _doubling_past_high, "more than the 12 a binary search needs"),
    (
        "ignores high",
        lambda fits, low, high: solution.largest_batch(fits, low, 4096),
        "called fits(2049), above high (1000)",
    ),
    (
        "a float middle",
        _search_with(middle=lambda low, high: (low + high + 1) / 2),
        "called fits with the float",
    ),
    ("never ends", _search_with(middle=lambda low, high: (low + high) // 2), "did not stop"),
    ("two calls per round", _two_calls_per_round, "more than the 12 a binary search needs"),
    ("one less", _search_with(result=lambda low: low - 1), "one less than the largest size that fits (347)"),
    ("always None", lambda fits, low, high: fits(low) and None, "returned None, though low (1) fits"),
    ("a string", lambda fits, low, high: "347", "returned the string '347'"),
]


@pytest.mark.parametrize("answer", right_cases(SEARCH_RIGHT))
def test_largest_batch_right(answer, capsys):
    right(check_largest_batch, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(SEARCH_WRONG))
def test_largest_batch_wrong(answer, fragment):
    wrong(check_largest_batch, answer, fragment)


def test_the_searches_cover_the_edges():
    answers = [search.answer for search in SEARCHES]
    assert None in answers  # not even low fits
    assert any(s.answer == s.low < s.high for s in SEARCHES)  # only low fits
    assert any(s.answer == s.high and s.threshold == s.high for s in SEARCHES)  # exactly high fits
    assert any(s.threshold > s.high for s in SEARCHES)  # more than high would fit
    assert {type(s.other) for s in SEARCHES if s.other} == {RuntimeError, ValueError}
