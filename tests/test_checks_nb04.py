"""helpers.checks.nb04: right answers in other spellings pass, typical mistakes are refused by
name."""

import copy
import os
from collections import OrderedDict

import pytest
import torch
from exercise_answers import judge, table_cases
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present as consume_prefix

from helpers.checks.nb04 import check_plain_state_dict, check_use_all_gpus, check_visible_gpus_env
from helpers.devices import pick_device
from helpers.models import Tudui
from solutions import nb04 as solution


def _tutorial(model):
    """PyTorch's tutorial: wrap with several GPUs, then move to cuda:0 where there is a GPU."""
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model.to(device)
    return model


def _wrapped_then_moved(model):
    if torch.cuda.device_count() > 1:
        return nn.DataParallel(model).cuda()
    if torch.cuda.is_available():
        return model.cuda()
    return model


def _answer(*, wrap_when=lambda n: n > 1, move=lambda m: m.to("cuda"), ids=None):
    """A use_all_gpus with one change: when it wraps, how it moves, the device_ids it names."""

    def use_all_gpus(model):
        count = torch.cuda.device_count()
        if wrap_when(count):
            model = nn.DataParallel(model, device_ids=ids)
        if count:
            model = move(model)
        return model

    return use_all_gpus


def _not_kept(model):
    if torch.cuda.device_count() > 1:
        nn.DataParallel(model)  # the wrapper is thrown away
    return solution.use_all_gpus(model) if torch.cuda.device_count() < 2 else model.cuda()


def _moved_to_the_second(model):
    if torch.cuda.device_count() > 1:
        return nn.DataParallel(model.to("cuda:1"))
    return solution.use_all_gpus(model)


def _picks_a_device(model):
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    return model.to(pick_device())


USE_ALL = [
    ("the tutorial's", _tutorial, None),
    ("wrapped, then .cuda()", _wrapped_then_moved, None),
    ("pick_device: mps on a Mac", _picks_a_device, None),
    ("all ids named", _answer(ids=None, move=lambda m: m.cuda(0)), None),
    ("always wrapped", _answer(wrap_when=lambda n: True), "without a CUDA GPU: wrap it only"),
    ("wrapped with one GPU", _answer(wrap_when=lambda n: n > 0), "in DataParallel with one GPU"),
    ("never wrapped", _answer(wrap_when=lambda n: False), "with 2 GPUs use_all_gpus returned"),
    ("not moved", _answer(move=lambda m: m), "with one GPU the model stayed on the CPU"),
    ("ids [0, 1]", _answer(ids=[0, 1]), "with 3 GPUs DataParallel uses [0, 1]"),
    ("the wrapper thrown away", _not_kept, "not a DataParallel"),
    ("model on cuda:1", _moved_to_the_second, "moved the model to cuda:1"),
    ("half precision", _answer(move=lambda m: m.half().cuda()), "changed from torch.float32"),
    ("a new model", lambda model: solution.use_all_gpus(Tudui()), "not the model"),
    ("unguarded .cuda()", lambda model: model.cuda(), "used the GPU itself (.cuda())"),
    ("every GPU by hand", _answer(move=lambda m: m.to("cuda:2")), "used cuda:2, but the machine"),
]


def _consumed(wrapped):
    state = wrapped.state_dict()
    consume_prefix(state, "module.")
    return state


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
    ("consume_prefix", _consumed, None),
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


def _joined(ids):
    return ",".join(map(str, ids))


ENV = [
    ("f-strings", _env(lambda ids: ",".join(f"{i}" for i in ids)), None),
    ("with CUDA_DEVICE_ORDER", _env(_joined, CUDA_DEVICE_ORDER="PCI_BUS_ID"), None),
    ("from str(list)", _env(lambda ids: str(ids)[1:-1].replace(" ", "")), None),
    (
        "typo",
        lambda ids: {"CUDA_VISIBLE_DEVICE": _joined(ids)},
        "CUDA_VISIBLE_DEVICE is read by nothing",
    ),
    (
        "lower case",
        lambda ids: {"cuda_visible_devices": _joined(ids)},
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
    ("renumbered", _env(lambda ids: _joined(range(len(ids)))), "build it from gpu_ids, '1,2'"),
    ("hard-coded", _env(lambda ids: "1,2"), "build it from gpu_ids, '0'"),
    ("sorted", _env(lambda ids: _joined(sorted(ids))), "'0,1,3' lists the ids in another order"),
    ("another variable", _env(_joined, OTHER="x"), "visible_gpus_env also sets OTHER"),
    ("a string", lambda ids: f"CUDA_VISIBLE_DEVICES={_joined(ids)}", "returned the string"),
    (
        "the whole environment",
        _env(_joined, **os.environ),
        "variables: return only the ones to set",
    ),
    ("bad order", _env(_joined, CUDA_DEVICE_ORDER="pci"), "CUDA_DEVICE_ORDER is 'pci'"),
    (
        "printed, not returned",
        lambda ids: print(f"CUDA_VISIBLE_DEVICES={_joined(ids)}"),
        "returned None",
    ),
    (
        "no CUDA_VISIBLE_DEVICES",
        lambda ids: {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        "no CUDA_VISIBLE_DEVICES",
    ),
]

TABLES = {
    check_use_all_gpus: USE_ALL,
    check_plain_state_dict: STATE,
    check_visible_gpus_env: ENV,
}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)
