"""helpers.checks.nb02: a table per exercise, of right answers (None) and mistakes (a part of the message)."""

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases
from torch import nn

from helpers.checks.nb02 import check_accuracy, check_move_batch, check_weighted_loss
from helpers.devices import pick_device, to_device
from solutions import nb02 as solution

WRITTEN_IN = (
    "used the GPU itself" if torch.cuda.is_available() else "meta"
)  # where pick_device() fails

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
    ("scaled", lambda b, d: (b[0].to(d) / 255, b[1].to(d)), "the inputs changed on the way"),
]


def _accuracy(
    where=None, move=None, train=False, grad=False, predict=lambda out: out.argmax(1), result=None
):
    def accuracy(model, loader):
        device, right, seen = where or next(model.parameters()).device, 0, 0
        model.train(train)
        with torch.set_grad_enabled(grad):
            for x, t in loader:
                x, t = move(x, t, device) if move else (x.to(device), t.to(device))
                right, seen = right + (predict(model(x)) == t).sum(), seen + len(t)
        return result(right, seen) if result else right.item() / seen

    return accuracy  # with the mistakes switched on, and otherwise as the reference solution


ACCURACY = [
    ("one .item(), at the end", _accuracy(), None),
    ("predictions to the CPU",
     _accuracy(move=lambda x, t, d: (x.to(d), t), predict=lambda out: out.argmax(1).cpu()), None),
    ("NumPy float", lambda net, data: np.float64(solution.accuracy(net, data)), None),
    ("training mode", _accuracy(train=True), "the model was in training mode: call model.eval()"),
    ("gradients", _accuracy(grad=True), "gradients were being recorded"),
    ("a tensor", _accuracy(result=lambda r, n: r / n), "not a Python float: call .item() once"),
    ("a percentage", _accuracy(result=lambda r, n: 100 * r.item() / n), "62.500, a percentage"),
    ("per batch", lambda net, data: float(np.mean([solution.accuracy(net, [b]) for b in data])), "the mean"),
    ("inputs not moved", _accuracy(move=lambda x, t, d: (x, t.to(d))), "the inputs of the batches"),
    ("targets not moved", _accuracy(move=lambda x, t, d: (x.to(d), t)), "the targets of the batches"),
    ("model.to('cpu')", lambda net, data: solution.accuracy(net.to("cpu"), data), "moved the model"),
    ("model.cpu()", lambda net, data: solution.accuracy(net.cpu(), data), "moved the model from meta"),
    ("over batches", _accuracy(result=lambda r, n: r.item() / 3), "the accuracy is 1.667"),
    ("floor division", _accuracy(result=lambda r, n: r.item() // n), "the accuracy is 0.000"),
    ("never runs the model", lambda net, data: 0.625, "accuracy never ran the model"),
    ("picks a device", _accuracy(where=pick_device()), "take the device from the model"),
    ("model to cuda", lambda net, data: solution.accuracy(net.to("cuda"), data), "GPU itself ('cuda')"),
    ("a string", lambda net, data: f"{solution.accuracy(net, data):.1%}", "returned the string"),
    ("argmax over the batch", _accuracy(predict=lambda out: out.argmax(0)), "accuracy raised RuntimeError"),
]  # fmt: skip


def _weights(cat=2.0, other=1.0, index=3, move=True, dtype=torch.float32, **options):
    weight = torch.full((10,), other, dtype=dtype).index_fill(0, torch.tensor([index]), cat)
    return lambda d: nn.CrossEntropyLoss(weight=weight, **options).to(d if move else "cpu")


WEIGHTED_LOSS = [
    ("made on the device", lambda d: nn.CrossEntropyLoss(weight=_weights()(d).weight), None),
    ("set after", lambda d: setattr(f := nn.CrossEntropyLoss(), "weight", _weights(2)(d).weight) or f, None),
    ("no weights", lambda d: nn.CrossEntropyLoss(), "the class weights are None"),
    ("not moved", _weights(move=False), "the class weights are on cpu, not on meta"),
    ("cat at 2", _weights(index=2), "the weight of 'cat' (class 3) is 1"),
    ("others 0.5", _weights(other=0.5), "the weight of 'plane' (class 0) is 0.5"),
    ("NLLLoss", lambda d: nn.NLLLoss(), "returned a NLLLoss module"),
    ("integer weights", _weights(dtype=torch.long), "the class weights are an int64 tensor"),
    ("float64 from NumPy", lambda d: nn.CrossEntropyLoss(weight=torch.from_numpy(np.ones(10))), "float64"),
    ("a list", lambda d: nn.CrossEntropyLoss(weight=[1.0] * 3 + [2.0] + [1.0] * 6), "raised TypeError"),
    ("reduction sum", _weights(reduction="sum"), "the loss is"),
    ("label smoothing", _weights(label_smoothing=0.1), "change only the weights"),
    ("cuda written in", lambda d: _weights()("cuda"), "used the GPU itself"),
    ("the class", lambda d: nn.CrossEntropyLoss, "returned the class CrossEntropyLoss"),
    ("nine weights", lambda d: nn.CrossEntropyLoss(weight=torch.ones(9)).to(d), "shape (9,)"),
    ("no reduction", _weights(reduction="none"), "the loss gives a float32 tensor of shape (4,)"),
    ("normalised", lambda d: nn.CrossEntropyLoss(weight=_weights()(d).weight / 11), "(class 3) is 0.18"),
    ("with its weights", lambda d: (f := _weights()(d), f.weight), "returned a tuple of 2 items"),
]  # fmt: skip

TABLES = {
    check_move_batch: MOVE_BATCH,
    check_accuracy: ACCURACY,
    check_weighted_loss: WEIGHTED_LOSS,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
