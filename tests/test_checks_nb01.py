"""helpers.checks.nb01: a table per exercise, of right answers (None) and mistakes (a part of the
message)."""

import pytest
import torch
from exercise_answers import judge, table_cases
from torch import nn
from torch.nn import functional

from helpers.checks.nb01 import check_cuda_batch, check_cuda_model_and_loss, check_tudui_with_relu
from helpers.devices import pick_device
from helpers.models import Tudui
from solutions import nb01 as solution

GUARD = "used the GPU itself (.cuda()): do that only when torch.cuda.is_available()"
MAC = "was moved to the Mac's GPU (mps)"
INPLACE = nn.ReLU(inplace=True)


def gpu():
    """What the machine that the check plays says."""
    return torch.cuda.is_available()


def _when_gpu(move):
    """An answer that applies ``move`` to the pair when a GPU is available."""
    return lambda a, b: move(a, b) if gpu() else (a, b)


def _device_idiom(imgs, targets):
    device = torch.device("cuda" if gpu() else "cpu")
    return [x.to(device) for x in (imgs, targets)]


def _asks_the_gpu(imgs, targets):
    if gpu():
        torch.cuda.get_device_name()
        return imgs.cuda(), targets.cuda()
    return imgs, targets


def _is_available_not_called(imgs, targets):
    if torch.cuda.is_available:  # the function itself, always true
        return imgs.cuda(), targets
    return imgs, targets


CUDA_BATCH = [
    ("non_blocking", _when_gpu(lambda i, t: (i.cuda(non_blocking=True), t.cuda(0))), None),
    ("the device idiom", _device_idiom, None),
    (
        "device_count",
        lambda i, t: (i.cuda(), t.cuda()) if torch.cuda.device_count() else (i, t),
        None,
    ),
    ("asks the GPU", _asks_the_gpu, None),
    ("pick_device, mps on a Mac", lambda i, t: (i.to(pick_device()), t.to(pick_device())), MAC),
    ("unguarded", lambda i, t: (i.cuda(), t.to("cuda")), GUARD),
    ("is_available not called", _is_available_not_called, GUARD),
    ("the other way round", lambda i, t: (i, t) if gpu() else (i.cuda(), t.cuda()), GUARD),
    ("not reassigned", _when_gpu(lambda i, t: ((i.cuda(), i)[1], t.cuda())), "imgs = imgs.cuda()"),
    ("images only", _when_gpu(lambda i, t: (i.cuda(), t)), "targets was not moved to the GPU"),
    ("images alone", lambda i, t: i.cuda() if gpu() else i, "cuda_batch returned a float32"),
    (
        "None without a GPU",
        lambda i, t: (i.cuda(), t.cuda()) if gpu() else None,
        "cuda_batch returned None",
    ),
    ("method not called", _when_gpu(lambda i, t: (i.cuda, t.cuda)), "the method cuda itself"),
    ("swapped", lambda i, t: solution.cuda_batch(i, t)[::-1], "from float32 to int64"),
    ("float64", lambda i, t: solution.cuda_batch(i.double(), t), "from float32 to float64"),
    ("scaled", lambda i, t: solution.cuda_batch(i / 255, t), "imgs changed on the way"),
    ("the second GPU", _when_gpu(lambda i, t: (i.cuda(1), t.cuda(1))), "used cuda:1, but the"),
    ("'cuda:1'", _when_gpu(lambda i, t: (i.to("cuda:1"), t.to("cuda:1"))), "1 GPU"),
]


def _parameters_moved_not_kept(model, loss_fn):
    if gpu():
        [p.cuda() for p in model.parameters()]
        return model, loss_fn.cuda()
    return model, loss_fn


def _weight_moved_not_kept(model, loss_fn):
    if gpu():
        loss_fn.weight.cuda()
        return model.cuda(), loss_fn
    return model, loss_fn


def _in_place(model, loss_fn):
    if gpu():
        model.cuda()
        loss_fn.cuda()
    return model, loss_fn


MODEL_AND_LOSS = [
    ("in place", _in_place, None),
    ("to('cuda')", _when_gpu(lambda m, f: (m.to("cuda"), f.to("cuda:0"))), None),
    ("a list comprehension", lambda m, f: [x.cuda() for x in (m, f)] if gpu() else (m, f), None),
    ("pick_device, mps on a Mac", lambda m, f: (m.to(pick_device()), f.to(pick_device())), MAC),
    ("unguarded", lambda m, f: (m.cuda(), f.cuda()), GUARD),
    ("the other way round", lambda m, f: (m, f) if gpu() else (m.cuda(), f.cuda()), GUARD),
    ("model only", _when_gpu(lambda m, f: (m.cuda(), f)), "loss_fn was not moved to the GPU"),
    ("loss only", _when_gpu(lambda m, f: (m, f.cuda())), "model was not moved to the GPU"),
    ("weight", _weight_moved_not_kept, "loss_fn was not moved"),
    ("parameters moved, not kept", _parameters_moved_not_kept, "model was not moved"),
    ("without ()", _when_gpu(lambda m, f: (m.cuda, f)), "returned the method cuda itself"),
    ("a string", lambda m, f: (m, "loss"), "returned the string 'loss' as loss_fn"),
    ("model alone", lambda m, f: m, "returned a Tudui module"),
    ("a new model", lambda m, f: (Tudui(), f), "cuda_model_and_loss returned another model"),
    ("swapped", lambda m, f: (f, m), "returned another model"),
    ("half precision", _when_gpu(lambda m, f: (m.cuda().half(), f.cuda())), "to float16"),
    ("half everywhere", lambda m, f: (m.half(), f), "from float32 to float16"),
    ("the second GPU", _when_gpu(lambda m, f: (m.cuda(1), f.cuda(1))), "used cuda:1"),
    ("reset weights", lambda m, f: (m, nn.CrossEntropyLoss(weight=f.weight * 0 + 1)), "another"),
]


def _layers(after=(0, 1, 2, 3), act=nn.ReLU, end=False, anchors=(nn.Conv2d, nn.Linear)):
    """Tudui's layers, with the activation act after the anchors numbered in after."""
    layers = list(Tudui().model)
    for k in sorted(after, reverse=True):
        positions = [i for i, x in enumerate(layers) if isinstance(x, anchors)]
        layers.insert(positions[k] + 1, act())
    if end:
        layers.append(act())
    return lambda: nn.Sequential(*layers)


class _Functional(nn.Sequential):  # Tudui's layers, with functional.relu in forward
    def forward(self, x):
        for layer in self:
            x = layer(x)
            if isinstance(layer, nn.Conv2d) or layer is self[-2]:
                x = functional.relu(x)
        return x


def _leaky_at_the_end():
    layers = list(_layers((0, 1, 2))())
    return nn.Sequential(*layers[:-1], nn.LeakyReLU(), nn.Linear(64, 10))


def _without(kind):
    return lambda: nn.Sequential(*[x for x in _layers()() if not isinstance(x, kind)])


TUDUI = [
    ("ReLU after the pooling", _layers(anchors=(nn.MaxPool2d, nn.Linear)), None),
    ("inplace, one ReLU reused", _layers(act=lambda: INPLACE), None),
    ("functional, in a class", lambda: _Functional(*Tudui().model), None),
    ("Tudui as it is", Tudui, "there is no ReLU after the first convolution"),
    ("ReLU at the end", _layers(end=True), "a ReLU follows the last linear layer"),
    (
        "only at the end",
        lambda: nn.Sequential(Tudui(), nn.ReLU()),
        "a ReLU follows the last linear layer",
    ),
    ("not after the first linear", _layers((0, 1, 2)), "no ReLU after the first linear layer"),
    ("not after the second conv", _layers((0, 2, 3)), "no ReLU after the second convolution"),
    ("two after the first conv", _layers((0, 0, 1, 2, 3)), "the network has 5 nn.ReLU layers"),
    (
        "before each conv",
        lambda: nn.Sequential(nn.ReLU(), *_layers((0, 1, 3))()),
        "third convolution",
    ),
    ("sigmoids", _layers(act=nn.Sigmoid), "another function after the first convolution"),
    ("a LeakyReLU", _leaky_at_the_end, "there is another function after the first linear layer"),
    (
        "wider",
        lambda: nn.Sequential(*list(_layers()())[:-1], nn.Linear(64, 20)),
        "has 146,228 parameters",
    ),
    ("the class", lambda: Tudui, "returned the class Tudui, not a network"),
    ("a ReLU alone", lambda: nn.ReLU(), "the network has 0 parameters"),
    ("softmax", lambda: nn.Sequential(*_layers()(), nn.Softmax(dim=1)), "softmax follows"),
    ("on the GPU", lambda: solution.tudui_with_relu().cuda(), "used the GPU itself (.cuda())"),
    (
        "lazy",
        lambda: nn.Sequential(nn.LazyConv2d(32, 5, 1, 2), *list(_layers()())[1:]),
        "lazy layers",
    ),
    ("no Flatten", _without(nn.Flatten), "mat1"),
    ("float64", lambda: solution.tudui_with_relu().double(), "raised RuntimeError"),
]

TABLES = {
    check_cuda_batch: CUDA_BATCH,
    check_cuda_model_and_loss: MODEL_AND_LOSS,
    check_tudui_with_relu: TUDUI,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
