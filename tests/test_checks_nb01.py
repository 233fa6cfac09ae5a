"""helpers.checks.nb01: right answers in other spellings pass, typical mistakes are refused by name.

The checks run each answer as on a machine without a GPU and as on one with a GPU (played by
``meta``), and on the real GPU when there is one: these tests give the same verdicts everywhere.
"""

import copy
from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from exercise_answers import right, right_cases, wrong, wrong_cases
from torch import nn

from helpers.checks.nb01 import check_cuda_batch, check_cuda_model_and_loss, check_tudui_with_relu
from helpers.devices import pick_device
from helpers.models import Tudui
from solutions import nb01 as solution


def test_the_played_machine_is_undone_after_each_check():
    is_available, device_count = torch.cuda.is_available, torch.cuda.device_count
    synchronize, get_device_name = torch.cuda.synchronize, torch.cuda.get_device_name
    check_cuda_batch(solution.cuda_batch)
    wrong(check_cuda_batch, lambda imgs, targets: (imgs.cuda(), targets.cuda()), "without a GPU")
    assert torch.cuda.is_available is is_available and torch.cuda.device_count is device_count
    assert torch.cuda.synchronize is synchronize and torch.cuda.get_device_name is get_device_name


# ---- exercise 1: cuda_batch ----


def _early_return(imgs, targets):
    if torch.cuda.is_available():
        return imgs.cuda(), targets.cuda()
    return imgs, targets


def _device_idiom(imgs, targets):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return imgs.to(device), targets.to(device)


def _device_count(imgs, targets):
    if torch.cuda.device_count() > 0:
        imgs, targets = imgs.cuda(), targets.cuda()
    return imgs, targets


def _pick_device(imgs, targets):
    device = pick_device()
    return imgs.to(device), targets.to(device)


def _non_blocking(imgs, targets):
    if torch.cuda.is_available():
        imgs = imgs.cuda(non_blocking=True)
        targets = targets.cuda(non_blocking=True)
    return imgs, targets


def _asks_about_the_gpu(imgs, targets):
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        index = torch.cuda.current_device()
        memory = torch.cuda.get_device_properties(index).total_memory
        assert name and memory > 0 and torch.cuda.memory_allocated() >= 0
        imgs, targets = imgs.cuda(index), targets.cuda(index)
        torch.cuda.synchronize()
    return imgs, targets


def _no_reassignment(imgs, targets):
    if torch.cuda.is_available():
        imgs.cuda()
        targets = targets.cuda()
    return imgs, targets


def _images_only(imgs, targets):
    if torch.cuda.is_available():
        imgs = imgs.cuda()
    return imgs, targets


def _none_without_a_gpu(imgs, targets):
    if torch.cuda.is_available():
        return imgs.cuda(), targets.cuda()


def _method_not_called(imgs, targets):
    if torch.cuda.is_available():
        imgs, targets = imgs.cuda, targets.cuda
    return imgs, targets


def _is_available_not_called(imgs, targets):
    if torch.cuda.is_available:  # always true: a function is
        imgs, targets = imgs.cuda(), targets.cuda()
    return imgs, targets


def _swapped(imgs, targets):
    return solution.cuda_batch(imgs, targets)[::-1]


CUDA_BATCH_RIGHT = {
    "early return": _early_return,
    "the device idiom": _device_idiom,
    "device_count": _device_count,
    "pick_device": _pick_device,
    "non_blocking": _non_blocking,
    "asks about the GPU": _asks_about_the_gpu,
}

UNGUARDED = "on a machine without a GPU, where that fails: do that only when torch.cuda.is_available()"
CUDA_BATCH_WRONG = [
    ("unguarded", lambda imgs, targets: (imgs.cuda(), targets.cuda()), UNGUARDED),
    ("unguarded to('cuda')", lambda imgs, targets: (imgs.to("cuda"), targets.to("cuda")), UNGUARDED),
    ("not reassigned", _no_reassignment, "reassign it, imgs = imgs.cuda()"),
    ("images only", _images_only, "the targets were not moved to the GPU"),
    ("images returned alone", lambda imgs, targets: imgs, "returned a float32 tensor"),
    ("None without a GPU", _none_without_a_gpu, "cuda_batch returned None"),
    ("method not called", _method_not_called, "the method Tensor.cuda itself (without the () that call it)"),
    ("is_available not called", _is_available_not_called, UNGUARDED),
    ("swapped", _swapped, "the other way round"),
    ("float", lambda imgs, targets: (imgs.double(), targets), "changed shape or dtype"),
]


@pytest.mark.parametrize("answer", right_cases(CUDA_BATCH_RIGHT))
def test_cuda_batch_right(answer, capsys):
    right(check_cuda_batch, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(CUDA_BATCH_WRONG))
def test_cuda_batch_wrong(answer, fragment):
    wrong(check_cuda_batch, answer, fragment)


# ---- exercise 2: cuda_model_and_loss ----


def _in_place(model, loss_fn):
    if torch.cuda.is_available():
        model.cuda()
        loss_fn.cuda()
    return model, loss_fn


def _to_cuda(model, loss_fn):
    if torch.cuda.is_available():
        model, loss_fn = model.to("cuda"), loss_fn.to("cuda")
    return model, loss_fn


def _model_idiom(model, loss_fn):
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    return model.to(device), loss_fn.to(device)


def _loop(model, loss_fn):
    if torch.cuda.is_available():
        for module in (model, loss_fn):
            module.cuda()
    return model, loss_fn


def _model_only(model, loss_fn):
    if torch.cuda.is_available():
        model.cuda()
    return model, loss_fn


def _loss_only(model, loss_fn):
    if torch.cuda.is_available():
        loss_fn = loss_fn.cuda()
    return model, loss_fn


def _model_method(model, loss_fn):
    if torch.cuda.is_available():
        model = model.cuda
        loss_fn = loss_fn.cuda()
    return model, loss_fn


def _weight_not_kept(model, loss_fn):
    if torch.cuda.is_available():
        model.cuda()
        loss_fn.weight.cuda()
    return model, loss_fn


def _new_model(model, loss_fn):
    if torch.cuda.is_available():
        return Tudui().cuda(), loss_fn.cuda()
    return model, loss_fn


def _a_copy(model, loss_fn):
    model = copy.deepcopy(model)
    if torch.cuda.is_available():
        model, loss_fn = model.cuda(), loss_fn.cuda()
    return model, loss_fn


MODEL_AND_LOSS_RIGHT = {
    "in place": _in_place,
    "to('cuda')": _to_cuda,
    "the device idiom": _model_idiom,
    "a loop": _loop,
    "pick_device": lambda model, loss_fn: (model.to(pick_device()), loss_fn.to(pick_device())),
}

MODEL_AND_LOSS_WRONG = [
    ("unguarded", lambda model, loss_fn: (model.cuda(), loss_fn.cuda()), UNGUARDED),
    ("model only", _model_only, "the loss function's class weights are still on cpu"),
    ("loss only", _loss_only, "the model's parameters are not on the GPU"),
    ("model.cuda without ()", _model_method, "the model returned is the method Tudui.cuda itself"),
    ("a string", lambda model, loss_fn: (model, "loss"), "the loss_fn returned is the string 'loss'"),
    ("model alone", lambda model, loss_fn: model, "returned a Tudui module"),
    ("weight not kept", _weight_not_kept, "the loss function's class weights are still on cpu"),
    ("a new model", _new_model, "returned another model than the one it was given"),
    ("a copy", _a_copy, "returned another model"),
]


@pytest.mark.parametrize("answer", right_cases(MODEL_AND_LOSS_RIGHT))
def test_cuda_model_and_loss_right(answer, capsys):
    right(check_cuda_model_and_loss, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(MODEL_AND_LOSS_WRONG))
def test_cuda_model_and_loss_wrong(answer, fragment):
    wrong(check_cuda_model_and_loss, answer, fragment)


# ---- exercise 3: tudui_with_relu ----

CONV = [(3, 32), (32, 32), (32, 64)]


def _relu_after_pool():
    layers = []
    for c_in, c_out in CONV:
        layers += [nn.Conv2d(c_in, c_out, 5, 1, 2), nn.MaxPool2d(2), nn.ReLU()]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(1024, 64), nn.ReLU(), nn.Linear(64, 10))


def _in_place_relus():
    return nn.Sequential(
        *[nn.ReLU(inplace=True) if isinstance(m, nn.ReLU) else m for m in solution.tudui_with_relu()]
    )


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(c_in, c_out, 5, 1, 2) for c_in, c_out in CONV)
        self.fc1, self.fc2 = nn.Linear(1024, 64), nn.Linear(64, 10)

    def forward(self, x):
        for conv in self.convs:
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def _from_tudui():
    layers = []
    for layer in Tudui().model:
        layers.append(layer)
        if isinstance(layer, nn.Conv2d) or (isinstance(layer, nn.Linear) and layer.out_features == 64):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _tudui_changed_in_place():
    model = Tudui()
    model.model = _from_tudui()
    return model


def _ordered_dict():
    names = ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "conv3", "relu3", "pool3"]
    names += ["flatten", "fc1", "relu4", "fc2"]
    return nn.Sequential(OrderedDict(zip(names, solution.tudui_with_relu(), strict=True)))


def _layers(relus_after, extra_end=False, activation=nn.ReLU):
    """Tudui's layers, with an activation after the layers numbered in relus_after (0-4)."""
    layers, index = [], 0
    for layer in Tudui().model:
        layers.append(layer)
        if isinstance(layer, nn.Conv2d | nn.Linear):
            layers += [activation() for _ in range(relus_after.count(index))]
            index += 1
    if extra_end:
        layers.append(activation())
    return lambda: nn.Sequential(*layers)


def _wider():
    layers = list(solution.tudui_with_relu())
    layers[10], layers[12] = nn.Linear(1024, 128), nn.Linear(128, 10)
    return nn.Sequential(*layers)


def _relus_before_each_conv():
    layers = []
    for layer in Tudui().model:
        if isinstance(layer, nn.Conv2d):
            layers.append(nn.ReLU())
        layers.append(layer)
    return nn.Sequential(*layers[:-1], nn.ReLU(), layers[-1])


def _moved_to_the_gpu():
    return solution.tudui_with_relu().cuda()


TUDUI_RIGHT = {
    "ReLU after the pooling": _relu_after_pool,
    "inplace=True": _in_place_relus,
    "functional, in a class": _Functional,
    "built from Tudui's layers": _from_tudui,
    "Tudui with a new .model": _tudui_changed_in_place,
    "OrderedDict": _ordered_dict,
}

TUDUI_WRONG = [
    ("Tudui as it is", Tudui, "the network has no ReLU"),
    ("ReLU at the end", _layers([0, 1, 2, 3], extra_end=True), "a ReLU follows the last linear layer"),
    ("only at the end", lambda: nn.Sequential(Tudui(), nn.ReLU()), "a ReLU follows the last linear layer"),
    ("not after the first linear", _layers([0, 1, 2]), "no ReLU after the first linear layer"),
    ("not after the second conv", _layers([0, 2, 3]), "no ReLU after the second convolution"),
    ("two after the first conv", _layers([0, 0, 1, 2, 3]), "there are 2 ReLUs after the first convolution"),
    ("before each conv", _relus_before_each_conv, "no ReLU after the third convolution"),
    ("sigmoids", _layers([0, 1, 2, 3], activation=nn.Sigmoid), "the network has no ReLU"),
    ("wider", _wider, "the network has 211,818 parameters, Tudui has 145,578"),
    ("the class", lambda: Tudui, "returned the class Tudui, not a network"),
    ("a ReLU alone", lambda: nn.ReLU(), "the network has 0 parameters"),
    (
        "a softmax at the end",
        lambda: nn.Sequential(solution.tudui_with_relu(), nn.Softmax(dim=1)),
        "applies softmax",
    ),
    ("on the GPU", _moved_to_the_gpu, "used the GPU itself, .cuda()"),
]


@pytest.mark.parametrize("answer", right_cases(TUDUI_RIGHT))
def test_tudui_with_relu_right(answer, capsys):
    right(check_tudui_with_relu, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(TUDUI_WRONG))
def test_tudui_with_relu_wrong(answer, fragment):
    wrong(check_tudui_with_relu, answer, fragment)
