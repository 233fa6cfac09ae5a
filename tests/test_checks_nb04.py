"""helpers.checks.nb04: right answers in other spellings pass, typical mistakes are refused by name."""

import copy
import os
from collections import OrderedDict

import numpy as np
import pytest
import torch
from exercise_answers import judge, table_cases
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present as consume_prefix

from helpers.checks.nb04 import (
    check_numpy_batch_to_device,
    check_plain_state_dict,
    check_visible_gpus_env,
)
from helpers.models import Tudui

T = torch.from_numpy


def L(y):  # noqa: N802 - a short name keeps the rows on one line
    return torch.from_numpy(y).long()


BATCH = [  # (name, answer, a fragment of the message; None for a right answer)
    ("torch.tensor", lambda x, y, d: (torch.tensor(x, device=d).float(), L(y).to(d)), None),
    (
        "as_tensor",
        lambda x, y, d: (torch.as_tensor(x, dtype=torch.float32, device=d), L(y).to(d)),
        None,
    ),
    (
        "to(device, dtype)",
        lambda x, y, d: (T(x).to(d, torch.float32), T(y).to(d, torch.int64)),
        None,
    ),
    ("torch.Tensor", lambda x, y, d: (torch.Tensor(x).to(d), T(y.astype(np.int64)).to(d)), None),
    ("NumPy as it is", lambda x, y, d: (x, y), "the inputs are still a NumPy array"),
    ("not moved", lambda x, y, d: (T(x).float(), L(y)), "the inputs are on cpu, not on meta"),
    (
        "targets not moved",
        lambda x, y, d: (T(x).float().to(d), L(y)),
        "the targets are on cpu, not on meta",
    ),
    (
        "float64",
        lambda x, y, d: (T(x).to(d), L(y).to(d)),
        "the inputs are float64, but a model wants",
    ),
    (
        "int32",
        lambda x, y, d: (T(x).float().to(d), T(y).int().to(d)),
        "the targets are int32, but a loss",
    ),
    (
        "float labels",
        lambda x, y, d: (T(x).float().to(d), T(y).float().to(d)),
        "the targets are float32",
    ),
    ("swapped", lambda x, y, d: (L(y).to(d), T(x).float().to(d)), "the inputs are int64"),
    (
        "transposed",
        lambda x, y, d: (T(x).T.float().to(d), L(y).to(d)),
        "have shape (6, 5), not (5, 6)",
    ),
    ("inputs alone", lambda x, y, d: T(x).float().to(d), "returned a float32 tensor"),
    (
        "a dict",
        lambda x, y, d: {"inputs": T(x).float().to(d), "targets": L(y).to(d)},
        "a dict of 2",
    ),
    (
        "hard-coded cuda",
        lambda x, y, d: (T(x).float().cuda(), L(y).cuda()),
        "used the GPU itself (.cuda())",
    ),
    (
        "rounded",
        lambda x, y, d: (T(x.round()).float().to(d), L(y).to(d)),
        "the inputs hold other values",
    ),
    ("ndarray.to", lambda x, y, d: (x.to(d), y.to(d)), "called a tensor's method on a NumPy array"),
]


def _each(change):
    return lambda w: {k: change(v) for k, v in w.module.state_dict().items()}


STATE = [
    (
        "removeprefix",
        lambda w: {k.removeprefix("module."): v for k, v in w.state_dict().items()},
        None,
    ),
    (
        "slice, OrderedDict",
        lambda w: OrderedDict((k[7:], v) for k, v in w.state_dict().items()),
        None,
    ),
    (
        "replace once",
        lambda w: {k.replace("module.", "", 1): v for k, v in w.state_dict().items()},
        None,
    ),
    ("consume_prefix", lambda w: (consume_prefix(s := w.state_dict(), "module."), s)[1], None),
    ("a copy on the CPU", lambda w: copy.deepcopy(w.module).cpu().state_dict(), None),
    ("named_parameters", lambda w: dict(w.module.named_parameters()), None),
    ("the wrapper's", lambda w: w.state_dict(), "the keys start with 'module.'"),
    ("the model", lambda w: w.module, "returned a model, not its weights"),
    ("new weights", lambda w: Tudui().state_dict(), "the keys are right, but not the tensors"),
    ("other keys", lambda w: {"weight": torch.zeros(1)}, "not the model's, such as 'model.0.bias'"),
    (
        "lstrip",
        lambda w: {k.lstrip("module."): v for k, v in w.state_dict().items()},
        "lstrip('module.')",
    ),
    ("the method", lambda w: w.module.state_dict, "the method state_dict itself"),
    ("keys()", lambda w: w.module.state_dict().keys(), "returned an odict_keys"),
    ("parameters()", lambda w: w.module.parameters(), "returned a generator"),
    ("NumPy values", _each(lambda v: v.numpy()), "is a NumPy array"),
    ("half", _each(lambda v: v.half()), "the keys are right, but not the tensors"),
]


def _env(value, **more):
    return lambda ids: {"CUDA_VISIBLE_DEVICES": value(ids), **more}


def J(ids):  # noqa: N802
    return ",".join(map(str, ids))


ENV = [
    ("f-strings", _env(lambda ids: ",".join(f"{i}" for i in ids)), None),
    ("with CUDA_DEVICE_ORDER", _env(J, CUDA_DEVICE_ORDER="PCI_BUS_ID"), None),
    ("from str(list)", _env(lambda ids: str(ids)[1:-1].replace(" ", "")), None),
    ("typo", lambda ids: {"CUDA_VISIBLE_DEVICE": J(ids)}, "CUDA_VISIBLE_DEVICE is read by nothing"),
    (
        "lower case",
        lambda ids: {"cuda_visible_devices": J(ids)},
        "cuda_visible_devices is read by nothing",
    ),
    ("a list", _env(lambda ids: ids), "CUDA_VISIBLE_DEVICES is a list of 2 items, not a string"),
    ("an int", _env(lambda ids: int("".join(map(str, ids)))), "is the int 12, not a string"),
    ("str(list)", _env(str), "the value is '[1, 2]'"),
    ("spaces", _env(lambda ids: ", ".join(map(str, ids))), "'1, 2' has spaces"),
    (
        "device names",
        _env(lambda ids: ",".join(f"cuda:{i}" for i in ids)),
        "the value is 'cuda:1,cuda:2'",
    ),
    ("renumbered", _env(lambda ids: J(range(len(ids)))), "build it from gpu_ids, '1,2'"),
    ("hard-coded", _env(lambda ids: "1,2"), "build it from gpu_ids, '0'"),
    ("sorted", _env(lambda ids: J(sorted(ids))), "'0,1,3' lists the ids in another order"),
    ("another variable", _env(J, OTHER="x"), "visible_gpus_env also sets OTHER"),
    ("a string", lambda ids: f"CUDA_VISIBLE_DEVICES={J(ids)}", "returned the string"),
    ("the whole environment", _env(J, **os.environ), "variables: return only the ones to set"),
    ("bad order", _env(J, CUDA_DEVICE_ORDER="pci"), "CUDA_DEVICE_ORDER is 'pci'"),
    ("printed, not returned", lambda ids: print(f"CUDA_VISIBLE_DEVICES={J(ids)}"), "returned None"),
    (
        "no CUDA_VISIBLE_DEVICES",
        lambda ids: {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        "no CUDA_VISIBLE_DEVICES",
    ),
]

TABLES = {
    check_numpy_batch_to_device: BATCH,
    check_plain_state_dict: STATE,
    check_visible_gpus_env: ENV,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
