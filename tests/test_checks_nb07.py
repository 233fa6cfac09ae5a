"""helpers.checks.nb07: right answers in other spellings pass (fragment None), typical mistakes are
named."""

import gc

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases

from helpers.checks.nb07 import check_accumulated_step, check_fit_batch, check_state_bytes
from solutions import nb07 as solution

_bytes = solution.state_bytes
_step = solution.accumulated_step


def _states(optimizer, group):
    """How many parameter-sized tensors the optimizer keeps for a parameter of this group."""
    if "betas" in group:
        return 2
    return int(group.get("momentum", 0) != 0)


def _counted(**mistake):
    """A state_bytes with one mistake: another ``size`` per number, no ``grads``, ``frozen``
    parameters counted, other ``states``, parameters the optimizer does not hold (``unheld``),
    Adam's ``steps`` counted, or another ``result`` type."""
    size = mistake.get("size")
    grads = mistake.get("grads", 1)
    frozen = mistake.get("frozen", False)
    states = mistake.get("states", _states)
    unheld = mistake.get("unheld", "")
    steps = mistake.get("steps", 0)
    result = mistake.get("result", int)

    def state_bytes(model, optimizer):
        group_of = {p: group for group in optimizer.param_groups for p in group["params"]}
        total = 0
        for p in model.parameters():
            group = group_of.get(p)
            n = p.numel() * (size or p.element_size())
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
    ("elements", _counted(size=1), "counting numbers, not bytes"),
    ("4 bytes each", _counted(size=4), "a bfloat16 number takes 2 bytes"),
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


def _accumulate(weigh=lambda n, batch, k: n / batch, **mistake):
    """An accumulated_step with one mistake: ``weigh(piece size, batch size, pieces)`` scales each
    loss; ``zero`` says where zero_grad() goes, ``steps`` how many steps, ``equal_shares`` how the
    returned loss is averaged, ``cut`` the pieces' size."""
    zero = mistake.get("zero", "before")
    steps = mistake.get("steps", 1)
    equal_shares = mistake.get("equal_shares", False)
    cut = mistake.get("cut")

    # The exercise gives the six things a training step uses, as the notebook names them.
    def accumulated_step(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
        if zero == "before":
            optimizer.zero_grad()
        size = cut or micro_batch
        pieces = list(zip(inputs.split(size), targets.split(size), strict=True))
        total = 0.0
        for x, y in pieces:
            if zero == "inside":
                optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            (loss * weigh(len(y), len(inputs), len(pieces))).backward()
            share = 1 / len(pieces) if equal_shares else len(y) / len(inputs)
            total += loss.item() * share
        for _ in range(steps):
            optimizer.step()
        return total

    return accumulated_step


def _whole_batch(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    optimizer.zero_grad()
    loss_fn(model(inputs), targets).backward()
    optimizer.step()


def _whole_batch_loss(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    _step(model, loss_fn, optimizer, inputs, targets, micro_batch)
    return loss_fn(model(inputs), targets).item()


def _one_backward(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    """Adds up the pieces' losses, graphs and all, and calls backward() once at the end."""
    optimizer.zero_grad()
    total = 0
    for x, y in zip(inputs.split(micro_batch), targets.split(micro_batch), strict=True):
        total = total + loss_fn(model(x), y) * (len(x) / len(inputs))
    total.backward()
    optimizer.step()
    return total.item()


def _retained(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    optimizer.zero_grad()
    total = 0.0
    for x, y in zip(inputs.split(micro_batch), targets.split(micro_batch), strict=True):
        loss = loss_fn(model(x), y) * (len(x) / len(inputs))
        loss.backward(retain_graph=True)
        total += loss.item()
    optimizer.step()
    return total


def _graph_kept_after_backward(model, loss_fn, optimizer, inputs, targets, micro_batch):  # noqa: PLR0913
    """Adds up the losses with their graphs, each after its backward(): activations are freed."""
    optimizer.zero_grad()
    total = 0
    for x, y in zip(inputs.split(micro_batch), targets.split(micro_batch), strict=True):
        loss = loss_fn(model(x), y) * (len(x) / len(inputs))
        loss.backward()
        total = total + loss
    optimizer.step()
    return total.item()


ACCUMULATE = [
    ("a piece's share by shape", _accumulate(lambda n, batch, k: n / batch), None),
    ("uneven pieces, 4, 3, 3", _accumulate(cut=[4, 3, 3]), None),
    ("the sum keeps graphs, freed", _graph_kept_after_backward, None),
    ("no scaling", _accumulate(lambda n, b, k: 1), "not weighed by their share"),
    ("micro_batch / batch", _accumulate(lambda n, b, k: 4 / b), "len(x) / len(inputs)"),
    ("zero_grad inside", _accumulate(zero="inside"), "only the last piece's gradient"),
    ("no zero_grad", _accumulate(zero="never"), "left in .grad by the previous batch were added"),
    ("step per piece", _accumulate(steps=3), "optimizer.step() ran 3 times"),
    ("no step", _accumulate(steps=0), "optimizer.step() ran 0 times"),
    ("the whole batch", _whole_batch, "pieces of [10]"),
    ("whole-batch loss", _whole_batch_loss, "10]"),
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
    ("one backward() at the end", _one_backward, "still kept when the next piece ran"),
    ("retain_graph=True", _retained, "backward(retain_graph=True) kept each piece's"),
]


def _fit(*, catches=torch.OutOfMemoryError, inside=False, keep=False, halve=None, end=None):
    """A fit_batch with one mistake: what it ``catches``, a retry ``inside`` the except block,
    errors it ``keep``s, how it ``halve``s, what it does at the ``end`` when 1 does not fit."""
    errors = []

    def fit_batch(train, batch_size):
        n = batch_size
        while True:
            try:
                train(n)
                return n
            except catches as error:
                if keep:
                    errors.append(error)
                if n == 1:
                    return end(error) if end else _raise(error)
                if inside:
                    return fit_batch(train, n // 2)
            n = halve(n) if halve else n // 2

    return fit_batch


def _raise(error):
    raise error


def _message_kept(train, batch_size):
    """Keeps the message, not the error, and raises a new error with it."""
    n = batch_size
    message = ""
    while n >= 1:
        try:
            train(n)
            return n
        except torch.OutOfMemoryError as error:
            message = str(error)
        gc.collect()
        n //= 2
    raise torch.OutOfMemoryError(message)


def _by_message(train, batch_size):
    """The idiom before torch.OutOfMemoryError: a RuntimeError whose message says out of memory."""
    n = batch_size
    while True:
        try:
            train(n)
            return n
        except RuntimeError as error:
            if "out of memory" not in str(error) or n == 1:
                raise
        n //= 2


def _from_half(train, batch_size):
    return _fit()(train, max(batch_size // 2, 1))


def _returns_the_next(train, batch_size):
    n = _fit()(train, batch_size)
    return n // 2


FIT = [
    ("the message kept, then raised", _message_kept, None),
    ("by message, the old idiom", _by_message, None),
    ("torch.cuda.OutOfMemoryError", _fit(catches=torch.cuda.OutOfMemoryError), None),
    ("retried inside except", _fit(inside=True), "retried inside the except block"),
    ("errors kept", _fit(keep=True), "keep its message, str(error), not the error"),
    ("catches RuntimeError", _fit(catches=RuntimeError), "catch torch.OutOfMemoryError by name"),
    ("catches Exception", _fit(catches=Exception), "catch torch.OutOfMemoryError by name"),
    ("None when nothing fits", _fit(end=lambda error: None), "returned None: let the out-of"),
    ("0 when nothing fits", _fit(end=lambda error: 0), "returned the int 0"),
    (
        "another error when nothing fits",
        _fit(end=lambda error: _raise(ValueError("nothing fits"))),
        "fit_batch raised ValueError: let the out-of-memory error through",
    ),
    ("one less each time", _fit(halve=lambda n: n - 1), "after 64 ran out of memory"),
    ("halved with /", _fit(halve=lambda n: n / 2), "fit_batch called train(32.0)"),
    ("quartered", _fit(halve=lambda n: n // 4), "fit_batch tried 16"),
    ("starts at half", _from_half, "first tried [32], not 64"),
    ("returns the next size", _returns_the_next, "but 16 ran"),
    ("a string", lambda train, batch_size: str(_fit()(train, batch_size)), "the string '16'"),
]

TABLES = {check_state_bytes: STATE, check_accumulated_step: ACCUMULATE, check_fit_batch: FIT}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
