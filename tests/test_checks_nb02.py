"""helpers.checks.nb02: a table per exercise, of right answers (None) and mistakes (a part of the
message)."""

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases
from torch import nn

from helpers.checks.nb02 import check_accuracy_anywhere, check_move_batch, check_weighted_loss
from helpers.devices import pick_device, to_device
from solutions import nb02 as solution

# where pick_device() fails: on a machine with a GPU the CPU run, elsewhere the stand-in
WRITTEN_IN = "used the GPU itself" if torch.cuda.is_available() else "meta"

MOVE_BATCH = [
    ("non_blocking, a tuple", lambda b, d: tuple(t.to(d, non_blocking=True) for t in b), None),
    ("helpers.to_device", lambda b, d: to_device(b, d), None),
    ("targets stay", lambda b, d: (b[0].to(d), b[1]), "the targets are on cpu, not on meta"),
    (
        "not reassigned",
        lambda b, d: ([t.to(d) for t in b], b)[1],
        "on meta (the check's stand-in for a GPU), the",
    ),
    ("a dict", lambda b, d: {"x": b[0].to(d)}, "returned a dict of 1 item"),
    (
        "made float",
        lambda b, d: [t.to(d).float() for t in b],
        "targets changed on the way, to a float32",
    ),
    ("cuda written in", lambda b, d: [t.to("cuda") for t in b], "used the GPU itself ('cuda')"),
    ("cuda()", lambda b, d: [t.cuda() for t in b], "used the GPU itself (.cuda())"),
    ("pick_device", lambda b, d: [t.to(pick_device()) for t in b], WRITTEN_IN),
    ("batch.to", lambda b, d: b.to(d), "raised AttributeError"),
    ("inputs alone", lambda b, d: b[0].to(d), "returned a float32 tensor"),
    ("swapped", lambda b, d: (b[1].to(d), b[0].to(d)), "the inputs changed on the way"),
    ("back to the CPU", lambda b, d: [t.to(d).cpu() for t in b], "copies them off the device"),
    ("a generator", lambda b, d: (t.to(d) for t in b), "returned a generator"),
    ("with the device", lambda b, d: (b[0].to(d), b[1].to(d), d), "returned a tuple of 3 items"),
    ("the second GPU", lambda b, d: [t.to("cuda:1") for t in b], "used the GPU itself ('cuda:1')"),
    ("first batch kept", lambda b, d: [t.to(d)[:2] for t in b], "the inputs changed on the way"),
    ("scaled", lambda b, d: (b[0].to(d) / 255, b[1].to(d)), "the inputs changed on the way"),
]


def _accuracy(mistake="", change=None):
    """The reference accuracy with one ``mistake``, made by ``change``: "where" the batches go,
    how they "move", "train" mode, "grad" enabled, how the outputs are read ("predict"), or what
    is returned ("result")."""

    def accuracy(model, loader):
        device = change() if mistake == "where" else next(model.parameters()).device
        right = 0
        seen = 0
        model.train(mistake == "train")
        with torch.set_grad_enabled(mistake == "grad"):
            for x, t in loader:
                if mistake == "move":
                    x, t = change(x, t, device)
                else:
                    x, t = x.to(device), t.to(device)
                outputs = model(x)
                predicted = change(outputs) if mistake == "predict" else outputs.argmax(1)
                right = right + (predicted == t).sum()
                seen = seen + len(t)
        if mistake == "result":
            return change(right, seen, loader)
        return right.item() / seen

    return accuracy


@torch.no_grad()
def _predictions_to_the_cpu(model, loader):
    device = next(model.parameters()).device
    model.eval()
    right = 0
    for x, t in loader:
        right += (model(x.to(device)).argmax(1).cpu() == t).sum().item()
    return right / len(loader.dataset)


def _mean_of_batches(net, data):
    return float(np.mean([solution.accuracy_anywhere(net, [batch]) for batch in data]))


ACCURACY = [
    ("one .item(), at the end", _accuracy(), None),
    ("predictions to the CPU", _predictions_to_the_cpu, None),
    ("NumPy float", lambda net, data: np.float64(solution.accuracy_anywhere(net, data)), None),
    ("argmax(-1)", _accuracy("predict", lambda out: out.argmax(-1)), None),
    ("training mode", _accuracy("train"), "the model was in training mode: call model.eval()"),
    ("gradients", _accuracy("grad"), "gradients were being recorded"),
    (
        "a tensor",
        _accuracy("result", lambda r, n, d: r / n),
        "not a Python float: call .item() once",
    ),
    (
        "a percentage",
        _accuracy("result", lambda r, n, d: 100 * r.item() / n),
        "63.636, a percentage",
    ),
    ("per batch", _mean_of_batches, "the mean of the batches' accuracies"),
    (
        "inputs not moved",
        _accuracy("move", lambda x, t, d: (x, t.to(d))),
        "the inputs of the batches",
    ),
    (
        "targets not moved",
        _accuracy("move", lambda x, t, d: (x.to(d), t)),
        "the targets of the batches",
    ),
    (
        "model.to('cpu')",
        lambda net, data: solution.accuracy_anywhere(net.to("cpu"), data),
        "moved the model",
    ),
    (
        "model.cpu()",
        lambda net, data: solution.accuracy_anywhere(net.cpu(), data),
        "moved the model from",
    ),
    (
        "over batches",
        _accuracy("result", lambda r, n, d: r.item() / len(d)),
        "the accuracy is 2.333, but 7 of the 11 are right",
    ),
    ("floor division", _accuracy("result", lambda r, n, d: r.item() // n), "the accuracy is 0.000"),
    ("never runs the model", lambda net, data: 0.625, "accuracy_anywhere never ran the model"),
    ("picks a device", _accuracy("where", pick_device), "take the device from the model"),
    (
        "model to cuda",
        lambda net, data: solution.accuracy_anywhere(net.to("cuda"), data),
        "GPU itself ('cuda')",
    ),
    (
        "a string",
        lambda net, data: f"{solution.accuracy_anywhere(net, data):.1%}",
        "returned the string",
    ),
    (
        "argmax over the batch",
        _accuracy("predict", lambda out: out.argmax(0)),
        "accuracy raised RuntimeError",
    ),
    ("argmax without dim", _accuracy("predict", lambda out: out.argmax()), "but 7 of the 11 are"),
    ("the last batch's", _accuracy("result", lambda r, n, d: 0.5), "the accuracy is 0.500"),
]


def _weights(cat=2.0, other=1.0, index=3, move=True, dtype=torch.float32, **options):
    weight = torch.full((10,), other, dtype=dtype).index_fill(0, torch.tensor([index]), cat)

    def weighted_loss(device):
        loss_fn = nn.CrossEntropyLoss(weight=weight, **options)
        if move:
            return loss_fn.to(device)
        return loss_fn

    return weighted_loss


def _set_after(device):
    loss_fn = nn.CrossEntropyLoss()
    loss_fn.weight = _weights()(device).weight
    return loss_fn


def _listed_weights(device):
    return nn.CrossEntropyLoss(weight=[1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])


def _from_numpy(device):
    return nn.CrossEntropyLoss(weight=torch.from_numpy(np.ones(10)))


def _with_its_weights(device):
    loss_fn = _weights()(device)
    return loss_fn, loss_fn.weight


WEIGHTED_LOSS = [
    ("made on the device", lambda d: nn.CrossEntropyLoss(weight=_weights()(d).weight), None),
    ("set after", _set_after, None),
    ("no weights", lambda d: nn.CrossEntropyLoss(), "the class weights are None"),
    ("not moved", _weights(move=False), "the class weights are on cpu, not on meta"),
    ("cat at 2", _weights(index=2), "the weight of 'cat' (class 3) is 1"),
    ("others 0.5", _weights(other=0.5), "the weight of 'plane' (class 0) is 0.5"),
    ("NLLLoss", lambda d: nn.NLLLoss(), "returned a NLLLoss module"),
    ("integer weights", _weights(dtype=torch.long), "the class weights are an int64 tensor"),
    ("float64 from NumPy", _from_numpy, "float64"),
    ("a list", _listed_weights, "raised TypeError"),
    ("reduction sum", _weights(reduction="sum"), "the loss is"),
    ("label smoothing", _weights(label_smoothing=0.1), "change only the weights"),
    ("cuda written in", lambda d: _weights()("cuda"), "used the GPU itself"),
    ("the class", lambda d: nn.CrossEntropyLoss, "returned the class CrossEntropyLoss"),
    ("nine weights", lambda d: nn.CrossEntropyLoss(weight=torch.ones(9)).to(d), "shape (9,)"),
    ("no reduction", _weights(reduction="none"), "the loss gives a float32 tensor of shape (6,)"),
    (
        "normalised",
        lambda d: nn.CrossEntropyLoss(weight=_weights()(d).weight / 11),
        "(class 3) is 0.18",
    ),
    ("with its weights", _with_its_weights, "returned a tuple of 2 items"),
    ("pick_device", lambda d: _weights()(pick_device()), "not on meta"),
]

TABLES = {
    check_move_batch: MOVE_BATCH,
    check_accuracy_anywhere: ACCURACY,
    check_weighted_loss: WEIGHTED_LOSS,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
