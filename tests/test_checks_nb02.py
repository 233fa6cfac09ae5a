"""helpers.checks.nb02: wrong answers are refused with their messages."""

import re

import pytest
import torch
from torch import nn

from helpers.checks import CheckFailed
from helpers.checks.nb02 import check_accuracy, check_move_batch, check_weighted_loss
from solutions import nb02 as solution


def test_accuracy_may_read_numbers_per_batch():
    """Calling .item() per batch is slower on a GPU, not wrong: the check accepts it."""

    @torch.no_grad()
    def per_batch_items(model, loader):
        device = next(model.parameters()).device
        model.eval()
        right = seen = 0
        for inputs, targets in loader:
            right += (model(inputs.to(device)).argmax(1) == targets.to(device)).sum().item()
            seen += len(targets)
        return right / seen

    assert check_accuracy(per_batch_items) is True


# --- wrong answers ----------------------------------------------------------------------------


def _targets_stay(batch, device):
    inputs, targets = batch
    return inputs.to(device), targets


def _not_reassigned(batch, device):
    inputs, targets = batch
    inputs.to(device)
    return inputs, targets.to(device)


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
        }
        return answers[result]

    return accuracy


def _moves_the_model(model, loader):
    model.to("cpu")
    return solution.accuracy(model, loader)


def _weights(cat=2.0, other=1.0, index=3, move=True):
    def weighted_loss(device):
        weight = torch.full((10,), other)
        weight[index] = cat
        loss_fn = nn.CrossEntropyLoss(weight=weight)
        return loss_fn.to(device) if move else loss_fn

    return weighted_loss


WRONG = [
    (check_move_batch, _targets_stay, "the targets of this batch were not moved to"),
    (check_move_batch, _not_reassigned, "the inputs of this batch were not moved to"),
    (check_move_batch, _not_reassigned, "returns a moved copy and leaves the tensor where it was"),
    (check_move_batch, lambda batch, device: {"x": batch[0]}, "should return two tensors"),
    (check_move_batch, lambda batch, device: [t.to(device).float() for t in batch], "changed shape or dtype"),
    (check_accuracy, _evaluation(eval_mode=False), "the model was in training mode: call model.eval()"),
    (check_accuracy, _evaluation(no_grad=False), "gradients were being recorded"),
    (check_accuracy, _evaluation(result="tensor"), "accuracy returned a tensor"),
    (check_accuracy, _evaluation(result="percent"), "a percentage"),
    (check_accuracy, _evaluation(per_batch=True), "the mean of the batches' accuracies"),
    (
        check_accuracy,
        _evaluation(move=lambda x, device: x.to("cpu")),
        "the inputs of the batches were not moved",
    ),
    (
        check_accuracy,
        _evaluation(move=lambda x, device: x if x.dtype == torch.long else x.to(device)),
        "the targets",
    ),
    (check_accuracy, _moves_the_model, "accuracy moved the model to the CPU"),
    (check_accuracy, _evaluation(result="over batches"), "the accuracy is 1.66"),
    (check_accuracy, lambda model, loader: 0.5, "accuracy never ran the model"),
    (check_weighted_loss, lambda device: nn.CrossEntropyLoss(), "the loss has no class weights"),
    (check_weighted_loss, _weights(move=False), "the loss's class weights are still on cpu"),
    (check_weighted_loss, _weights(index=2), "the weight of 'cat' (class 3) is 1, expected 2.0"),
    (check_weighted_loss, _weights(other=0.5), "the weight of 'plane' (class 0) is 0.5, expected 1.0"),
    (check_weighted_loss, lambda device: nn.NLLLoss(), "returned a NLLLoss"),
]


@pytest.mark.parametrize(("check", "answer", "message"), WRONG, ids=[m for _, _, m in WRONG])
def test_a_wrong_answer_is_refused_with_its_message(check, answer, message):
    with pytest.raises(CheckFailed, match=re.escape(message)):
        check(answer)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine 'cuda' is the right device")
def test_a_hard_coded_cuda_is_refused_on_a_machine_without_one():
    with pytest.raises(CheckFailed, match="hard-coded 'cuda'"):
        check_move_batch(lambda batch, device: (batch[0].to("cuda"), batch[1].to("cuda")))
