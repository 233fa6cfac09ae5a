"""helpers.checks.nb02: right answers in other spellings pass, typical mistakes are refused by name.

Every check runs the answer on the CPU, on ``meta`` standing in for a GPU and, on a machine with
one, on the GPU: these tests give the same verdicts on every machine.
"""

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases
from torch import nn

from helpers.checks.nb02 import check_accuracy, check_move_batch, check_weighted_loss
from helpers.data import CIFAR10_CLASSES
from helpers.devices import pick_device, to_device
from solutions import nb02 as solution

# ---- exercise 1: move_batch ----


def _unpacked(batch, device):
    inputs, targets = batch
    return inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)


def _pinned(batch, device):
    inputs, targets = batch
    return inputs.pin_memory().to(device, non_blocking=True), targets.pin_memory().to(
        device, non_blocking=True
    )


def _targets_stay(batch, device):
    inputs, targets = batch
    return inputs.to(device), targets


def _not_reassigned(batch, device):
    inputs, targets = batch
    inputs.to(device)
    return inputs, targets.to(device)


MOVE_BATCH_RIGHT = {
    "comprehension": lambda batch, device: [t.to(device) for t in batch],
    "tuple": lambda batch, device: tuple(t.to(device) for t in batch),
    "non_blocking": _unpacked,
    "helpers.to_device": lambda batch, device: to_device(batch, device),
    "indexing": lambda batch, device: (batch[0].to(device), batch[1].to(device)),
    "pinned": _pinned,
    "as_tensor": lambda batch, device: tuple(torch.as_tensor(t, device=device) for t in batch),
}

MOVE_BATCH_WRONG = [
    ("targets stay", _targets_stay, "the targets are on cpu, not on meta"),
    ("not reassigned", _not_reassigned, "returned a moved copy that was not kept"),
    ("a dict", lambda batch, device: {"x": batch[0]}, "returned a dict of 1 key"),
    (
        "made float",
        lambda batch, device: [t.to(device).float() for t in batch],
        "from int64 (4,) to float32 (4,)",
    ),
    (
        "hard-coded cuda",
        lambda batch, device: [t.to("cuda") for t in batch],
        "used the GPU itself, .to('cuda')",
    ),
    ("cuda()", lambda batch, device: [t.cuda() for t in batch], "used the GPU itself, .cuda()"),
    ("pick_device", lambda batch, device: [t.to(pick_device()) for t in batch], ".to('cuda:0')"),
    ("batch.to", lambda batch, device: batch.to(device), "called .to() on a list"),
    ("inputs alone", lambda batch, device: batch[0].to(device), "returned a float32 tensor"),
    (
        "swapped",
        lambda batch, device: (batch[1].to(device), batch[0].to(device)),
        "the inputs changed on the way",
    ),
    ("back to the CPU", lambda batch, device: [t.to(device).cpu() for t in batch], "on cpu, not on meta"),
]


@pytest.mark.parametrize("answer", right_cases(MOVE_BATCH_RIGHT))
def test_move_batch_right(answer, capsys):
    right(check_move_batch, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(MOVE_BATCH_WRONG))
def test_move_batch_wrong(answer, fragment):
    wrong(check_move_batch, answer, fragment)


# ---- exercise 2: accuracy ----


@torch.no_grad()
def _item_per_batch(model, loader):
    device = next(model.parameters()).device
    model.eval()
    right = seen = 0
    for inputs, targets in loader:
        right += (model(inputs.to(device)).argmax(1) == targets.to(device)).sum().item()
        seen += len(targets)
    return right / seen


@torch.no_grad()
def _predictions_to_the_cpu(model, loader):
    """Right on a GPU: the predictions come back to the CPU, where the targets are."""
    device = next(model.parameters()).device
    model.eval()
    right = seen = 0
    for inputs, targets in loader:
        predictions = model(inputs.to(device)).argmax(1).cpu()
        right += (predictions == targets).sum().item()
        seen += len(targets)
    return right / seen


def _tolist(model, loader):
    device = next(model.parameters()).device
    model.eval()
    right = seen = 0
    with torch.no_grad():
        for inputs, targets in loader:
            predictions = model(inputs.to(device)).argmax(1).tolist()
            right += sum(p == t for p, t in zip(predictions, targets.tolist(), strict=True))
            seen += len(predictions)
    return right / seen


def _inference_mode(model, loader):
    device = next(model.parameters()).device
    model.eval()
    right = torch.zeros((), device=device)
    with torch.inference_mode():
        for inputs, targets in loader:
            inputs, targets = to_device((inputs, targets), device)
            _, predicted = torch.max(model(inputs), 1)
            right += (predicted == targets).float().sum()
    return (right / len(loader.dataset)).item()


def _restores_the_mode(model, loader):
    was_training = model.training
    model.eval()
    try:
        return solution.accuracy(model, loader)
    finally:
        model.train(was_training)


def _numpy_float(model, loader):
    return np.float64(solution.accuracy(model, loader))


def _evaluation(
    *, eval_mode=True, no_grad=True, move=lambda x, device: x.to(device), result="item", per_batch=False
):
    """An accuracy function with one mistake switched on, the rest as in the reference solution."""

    def accuracy(model, loader):
        device = next(model.parameters()).device
        if eval_mode:
            model.eval()
        scores, right, seen = [], torch.zeros((), dtype=torch.long, device=device), 0
        with torch.set_grad_enabled(not no_grad):
            for inputs, targets in loader:
                outputs = model(move(inputs, device))
                hits = (outputs.argmax(1) == move(targets, device)).sum()
                right, seen = right + hits, seen + len(targets)
                scores.append(hits.item() / len(targets))
        if per_batch:
            return sum(scores) / len(scores)
        answers = {
            "item": right.item() / seen,
            "tensor": right / seen,
            "percent": 100 * right.item() / seen,
            "over batches": right.item() / len(loader),
            "floor": right.item() // seen,
        }
        return answers[result]

    return accuracy


def _moves_the_model(model, loader):
    model.to("cpu")
    return solution.accuracy(model, loader)


@torch.no_grad()
def _picks_a_device(model, loader):
    device = pick_device()
    model.eval()
    right = seen = 0
    for inputs, targets in loader:
        right += (model(inputs.to(device)).argmax(1) == targets.to(device)).sum().item()
        seen += len(targets)
    return right / seen


def _model_to_cuda(model, loader):
    model.to("cuda")
    return solution.accuracy(model, loader)


ACCURACY_RIGHT = {
    ".item() per batch": _item_per_batch,
    "predictions to the CPU": _predictions_to_the_cpu,
    ".tolist()": _tolist,
    "inference_mode, len(dataset)": _inference_mode,
    "restores the mode": _restores_the_mode,
    "NumPy float": _numpy_float,
}

ACCURACY_WRONG = [
    ("training mode", _evaluation(eval_mode=False), "the model was in training mode: call model.eval()"),
    ("gradients", _evaluation(no_grad=False), "gradients were being recorded"),
    ("a tensor", _evaluation(result="tensor"), "not a Python float: call .item() once"),
    ("a percentage", _evaluation(result="percent"), "a percentage"),
    ("mean of batches", _evaluation(per_batch=True), "the mean of the batches' accuracies"),
    (
        "inputs to the CPU",
        _evaluation(move=lambda x, device: x.to("cpu")),
        "the inputs of the batches are not on",
    ),
    (
        "inputs not moved",
        _evaluation(move=lambda x, device: x if x.is_floating_point() else x.to(device)),
        "inputs",
    ),
    (
        "targets not moved",
        _evaluation(move=lambda x, device: x if x.dtype == torch.long else x.to(device)),
        "targets",
    ),
    ("moves the model", _moves_the_model, "accuracy moved the model from meta"),
    ("over batches", _evaluation(result="over batches"), "the accuracy is 1.666"),
    ("floor division", _evaluation(result="floor"), "the accuracy is 0"),
    ("never runs the model", lambda model, loader: 0.5, "accuracy never ran the model"),
    ("picks a device", _picks_a_device, "take the device from the model"),
    ("model to cuda", _model_to_cuda, "used the GPU itself, .to('cuda')"),
    ("a string", lambda model, loader: f"{solution.accuracy(model, loader):.1%}", "returned the string"),
]


@pytest.mark.parametrize("answer", right_cases(ACCURACY_RIGHT))
def test_accuracy_right(answer, capsys):
    right(check_accuracy, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(ACCURACY_WRONG))
def test_accuracy_wrong(answer, fragment):
    wrong(check_accuracy, answer, fragment)


# ---- exercise 3: weighted_loss ----


def _weights(cat=2.0, other=1.0, index=3, move=True, dtype=torch.float32, **options):
    def weighted_loss(device):
        weight = torch.full((10,), other, dtype=dtype)
        weight[index] = cat
        loss_fn = nn.CrossEntropyLoss(weight=weight, **options)
        return loss_fn.to(device) if move else loss_fn

    return weighted_loss


def _made_on_the_device(device):
    weight = torch.ones(10, device=device)
    weight[3] = 2.0
    return nn.CrossEntropyLoss(weight=weight)


WEIGHTED_RIGHT = {
    "made on the device": _made_on_the_device,
    "a literal": lambda device: nn.CrossEntropyLoss(
        weight=torch.tensor([1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], device=device)
    ),
    "from the class names": lambda device: nn.CrossEntropyLoss(
        weight=torch.tensor([2.0 if name == "cat" else 1.0 for name in CIFAR10_CLASSES]).to(device)
    ),
    "index_fill_": lambda device: nn.CrossEntropyLoss(
        weight=torch.ones(10).index_fill_(0, torch.tensor([3]), 2.0)
    ).to(device),
    "full, integer 2": _weights(cat=2),
}

WEIGHTED_WRONG = [
    ("no weights", lambda device: nn.CrossEntropyLoss(), "the loss has no class weights"),
    ("not moved", _weights(move=False), "the class weights are on cpu, not on meta"),
    ("cat at 2", _weights(index=2), "the weight of 'cat' (class 3) is 1"),
    ("others 0.5", _weights(other=0.5), "the weight of 'plane' (class 0) is 0.5"),
    ("NLLLoss", lambda device: nn.NLLLoss(), "returned a NLLLoss module"),
    ("integer weights", _weights(dtype=torch.long), "the class weights are int64"),
    (
        "float64 from NumPy",
        lambda device: nn.CrossEntropyLoss(weight=torch.from_numpy(np.ones(10))),
        "float64",
    ),
    ("a list", lambda device: nn.CrossEntropyLoss(weight=[1.0] * 3 + [2.0] + [1.0] * 6), "make it a tensor"),
    ("reduction sum", _weights(reduction="sum"), "but weighted cross-entropy gives"),
    ("label smoothing", _weights(label_smoothing=0.1), "change only the weights"),
    ("hard-coded cuda", lambda device: _weights()("cuda"), "used the GPU itself"),
    ("the class", lambda device: nn.CrossEntropyLoss, "returned the class CrossEntropyLoss"),
    ("nine weights", lambda device: nn.CrossEntropyLoss(weight=torch.ones(9)).to(device), "have shape (9,)"),
]


@pytest.mark.parametrize("answer", right_cases(WEIGHTED_RIGHT))
def test_weighted_loss_right(answer, capsys):
    right(check_weighted_loss, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(WEIGHTED_WRONG))
def test_weighted_loss_wrong(answer, fragment):
    wrong(check_weighted_loss, answer, fragment)
