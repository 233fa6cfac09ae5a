"""helpers.checks.nb01: a table per exercise, of right answers (None) and mistakes (a part of the message)."""

import pytest
import torch
import torch.nn.functional as F
from exercise_answers import judge, table_cases
from torch import nn

from helpers.checks.nb01 import check_cuda_batch, check_cuda_model_and_loss, check_tudui_with_relu
from helpers.devices import pick_device
from helpers.models import Tudui
from solutions import nb01 as solution

GUARD = "used the GPU itself (.cuda()): do that only when torch.cuda.is_available()"
INPLACE = nn.ReLU(inplace=True)
gpu = lambda: torch.cuda.is_available()  # noqa: E731 - what the machine that the check plays says

CUDA_BATCH = [
    ("non_blocking", lambda i, t: (i.cuda(non_blocking=True), t.cuda(0)) if gpu() else (i, t), None),
    ("the device idiom", lambda i, t: [x.to(torch.device("cuda" if gpu() else "cpu")) for x in (i, t)], None),
    ("device_count", lambda i, t: (i.cuda(), t.cuda()) if torch.cuda.device_count() else (i, t), None),
    ("pick_device", lambda i, t: (i.to(pick_device()), t.to(pick_device())), None),
    ("asks the GPU",
     lambda i, t: torch.cuda.get_device_name() and (i.cuda(), t.cuda()) if gpu() else (i, t), None),
    ("unguarded", lambda i, t: (i.cuda(), t.to("cuda")), GUARD),
    ("is_available not called", lambda i, t: (i.cuda(), t) if torch.cuda.is_available else (i, t), GUARD),
    ("the other way round", lambda i, t: (i, t) if gpu() else (i.cuda(), t.cuda()), GUARD),
    ("not reassigned", lambda i, t: ((i.cuda(), i)[1], t.cuda()) if gpu() else (i, t), "imgs = imgs.cuda()"),
    ("images only", lambda i, t: (i.cuda(), t) if gpu() else (i, t), "targets was not moved to the GPU"),
    ("images alone", lambda i, t: i.cuda() if gpu() else i, "cuda_batch returned a float32 tensor"),
    ("None without a GPU", lambda i, t: (i.cuda(), t.cuda()) if gpu() else None, "cuda_batch returned None"),
    ("method not called", lambda i, t: (i.cuda, t.cuda) if gpu() else (i, t), "the method cuda itself"),
    ("swapped", lambda i, t: solution.cuda_batch(i, t)[::-1], "imgs changed on the way, to an int64 tensor"),
    ("float64", lambda i, t: solution.cuda_batch(i.double(), t), "to a float64 tensor"),
    ("scaled", lambda i, t: solution.cuda_batch(i / 255, t), "imgs changed on the way"),
]  # fmt: skip

MODEL_AND_LOSS = [
    ("in place", lambda m, f: (m.cuda(), f.cuda()) and (m, f) if gpu() else (m, f), None),
    ("to('cuda')", lambda m, f: (m.to("cuda"), f.to("cuda:0")) if gpu() else (m, f), None),
    ("pick_device", lambda m, f: (m.to(pick_device()), f.to(pick_device())), None),
    ("a list comprehension", lambda m, f: [x.cuda() for x in (m, f)] if gpu() else (m, f), None),
    ("unguarded", lambda m, f: (m.cuda(), f.cuda()), GUARD),
    ("the other way round", lambda m, f: (m, f) if gpu() else (m.cuda(), f.cuda()), GUARD),
    ("model only", lambda m, f: (m.cuda() if gpu() else m, f), "loss_fn was not moved to the GPU"),
    ("loss only", lambda m, f: (m, f.cuda() if gpu() else f), "model was not moved to the GPU"),
    ("weight", lambda m, f: (m.cuda(), f, f.weight.cuda())[:2] if gpu() else (m, f), "loss_fn was not"),
    ("parameters moved, not kept",
     lambda m, f: (m, f.cuda(), [p.cuda() for p in m.parameters()])[:2] if gpu() else (m, f), "model was"),
    ("without ()", lambda m, f: (m.cuda, f) if gpu() else (m, f), "returned the method cuda itself"),
    ("a string", lambda m, f: (m, "loss"), "returned the string 'loss' as loss_fn"),
    ("model alone", lambda m, f: m, "returned a Tudui module"),
    ("a new model", lambda m, f: (Tudui(), f), "cuda_model_and_loss returned another model"),
    ("swapped", lambda m, f: (f, m), "returned another model"),
]  # fmt: skip


def _layers(after=(0, 1, 2, 3), act=nn.ReLU, end=False, anchors=(nn.Conv2d, nn.Linear)):
    """Tudui's layers, with the activation act after the anchors numbered in after."""
    layers = list(Tudui().model)
    for k in sorted(after, reverse=True):
        layers.insert([i for i, x in enumerate(layers) if isinstance(x, anchors)][k] + 1, act())
    return lambda: nn.Sequential(*layers, *[act()] * end)


class _Functional(nn.Sequential):  # Tudui's layers, with F.relu in forward
    def forward(self, x):
        for layer in self:
            x = F.relu(layer(x)) if isinstance(layer, nn.Conv2d) or layer is self[-2] else layer(x)
        return x


TUDUI = [
    ("ReLU after the pooling", _layers(anchors=(nn.MaxPool2d, nn.Linear)), None),
    ("inplace, one ReLU reused", _layers(act=lambda: INPLACE), None),
    ("functional, in a class", lambda: _Functional(*Tudui().model), None),
    ("Tudui as it is", Tudui, "there is no ReLU after the first convolution"),
    ("ReLU at the end", _layers(end=True), "a ReLU follows the last linear layer"),
    ("only at the end", lambda: nn.Sequential(Tudui(), nn.ReLU()), "a ReLU follows the last linear layer"),
    ("not after the first linear", _layers((0, 1, 2)), "no ReLU after the first linear layer"),
    ("not after the second conv", _layers((0, 2, 3)), "no ReLU after the second convolution"),
    ("two after the first conv", _layers((0, 0, 1, 2, 3)), "the network has 5 nn.ReLU layers"),
    ("before each conv", lambda: nn.Sequential(nn.ReLU(), *_layers((0, 1, 3))()), "third convolution"),
    ("sigmoids", _layers(act=nn.Sigmoid), "another function after the first convolution"),
    ("a LeakyReLU", lambda: nn.Sequential(*[*_layers((0, 1, 2))()][:-1], nn.LeakyReLU(), nn.Linear(64, 10)),
     "there is another function after the first linear layer"),
    ("wider", lambda: nn.Sequential(*list(_layers()())[:-1], nn.Linear(64, 20)), "has 146,228 parameters"),
    ("the class", lambda: Tudui, "returned the class Tudui, not a network"),
    ("a ReLU alone", lambda: nn.ReLU(), "the network has 0 parameters"),
    ("softmax", lambda: nn.Sequential(*_layers()(), nn.Softmax(dim=1)), "softmax follows"),
    ("on the GPU", lambda: solution.tudui_with_relu().cuda(), "used the GPU itself (.cuda())"),
    ("lazy", lambda: nn.Sequential(nn.LazyConv2d(32, 5, 1, 2), *list(_layers()())[1:]), "lazy layers"),
    ("no Flatten", lambda: nn.Sequential(*[x for x in _layers()() if not isinstance(x, nn.Flatten)]), "mat1"),
]  # fmt: skip

TABLES = {
    check_cuda_batch: CUDA_BATCH,
    check_cuda_model_and_loss: MODEL_AND_LOSS,
    check_tudui_with_relu: TUDUI,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
