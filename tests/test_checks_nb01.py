"""helpers.checks.nb01: wrong answers are refused with their messages.

The checks run each answer as on a machine without a GPU and as on one with a GPU; the machine
the tests run on plays itself, and the other one is played (see the module's docstring).
"""

import re

import pytest
import torch
from torch import nn

from helpers.checks import CheckFailed
from helpers.checks.nb01 import check_cuda_batch, check_cuda_model_and_loss, check_tudui_with_relu
from helpers.models import Tudui
from solutions import nb01 as solution


def test_the_played_machine_is_undone_after_each_check():
    is_available, device_count = torch.cuda.is_available, torch.cuda.device_count
    check_cuda_batch(solution.cuda_batch)
    with pytest.raises(CheckFailed):
        check_cuda_batch(lambda imgs, targets: (imgs.cuda(), targets.cuda()))
    assert torch.cuda.is_available is is_available and torch.cuda.device_count is device_count


def _no_reassignment(imgs, targets):
    if torch.cuda.is_available():
        imgs.cuda()
        targets = targets.cuda()
    return imgs, targets


def _images_only(imgs, targets):
    if torch.cuda.is_available():
        imgs = imgs.cuda()
    return imgs, targets


def _model_only(model, loss_fn):
    if torch.cuda.is_available():
        model.cuda()
    return model, loss_fn


def _loss_only(model, loss_fn):
    if torch.cuda.is_available():
        loss_fn = loss_fn.cuda()
    return model, loss_fn


def _relu_at_the_end():
    return nn.Sequential(*solution.tudui_with_relu(), nn.ReLU())


def _three_relus():
    layers = list(solution.tudui_with_relu())
    return nn.Sequential(*layers[:11], *layers[12:])  # no ReLU after the first linear layer


def _wider():
    layers = list(solution.tudui_with_relu())
    layers[10], layers[12] = nn.Linear(1024, 128), nn.Linear(128, 10)
    return nn.Sequential(*layers)


UNGUARDED = ".cuda() ran on a machine without a GPU, and failed: put the moves behind"
WRONG = [
    (check_cuda_batch, lambda imgs, targets: (imgs.cuda(), targets.cuda()), UNGUARDED),
    (check_cuda_batch, _no_reassignment, "the images of this batch were not moved to"),
    (check_cuda_batch, _no_reassignment, "reassign it, imgs = imgs.cuda()"),
    (check_cuda_batch, _images_only, "the targets of this batch were not moved to"),
    (check_cuda_batch, lambda imgs, targets: imgs, "cuda_batch should return two things"),
    (check_cuda_model_and_loss, lambda model, loss_fn: (model.cuda(), loss_fn.cuda()), UNGUARDED),
    (check_cuda_model_and_loss, _model_only, "the loss function's class weights are still on cpu"),
    (check_cuda_model_and_loss, _loss_only, "the model's parameters are still on cpu"),
    (check_cuda_model_and_loss, lambda model, loss_fn: (model, "loss"), "should return (model, loss_fn)"),
    (check_tudui_with_relu, Tudui, "the network has no nn.ReLU module"),
    (check_tudui_with_relu, _relu_at_the_end, "the network's outputs are never negative"),
    (check_tudui_with_relu, _three_relus, "the network has 3 ReLUs; the exercise asks for 4"),
    (check_tudui_with_relu, _wider, "the network has 211,818 parameters, Tudui has 145,578"),
    (check_tudui_with_relu, lambda: Tudui, "returned a type, not a network"),
]


@pytest.mark.parametrize(("check", "answer", "message"), WRONG, ids=[m for _, _, m in WRONG])
def test_a_wrong_answer_is_refused_with_its_message(check, answer, message):
    with pytest.raises(CheckFailed, match=re.escape(message)):
        check(answer)
