"""helpers.checks.nb04: right answers in other spellings pass, typical mistakes are refused by name."""

import copy
import os
from collections import OrderedDict

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from helpers.checks.nb04 import check_numpy_batch_to_device, check_plain_state_dict, check_visible_gpus_env
from helpers.models import Tudui
from solutions import nb04 as solution

# ---- exercise 1: numpy_batch_to_device ----

BATCH_RIGHT = {
    "torch.tensor": lambda x, y, d: (
        torch.tensor(x, dtype=torch.float32, device=d),
        torch.tensor(y, dtype=torch.long, device=d),
    ),
    "as_tensor": lambda x, y, d: (
        torch.as_tensor(x, dtype=torch.float32, device=d),
        torch.as_tensor(y, dtype=torch.int64, device=d),
    ),
    ".float(), .long()": lambda x, y, d: (
        torch.from_numpy(x).float().to(d),
        torch.from_numpy(y).long().to(d),
    ),
    "to(device, dtype)": lambda x, y, d: (
        torch.from_numpy(x).to(d, torch.float32),
        torch.from_numpy(y).to(d, torch.int64),
    ),
    "move, then convert": lambda x, y, d: (
        torch.from_numpy(x).to(d).float(),
        torch.from_numpy(y).to(d).long(),
    ),
    "torch.Tensor": lambda x, y, d: (torch.Tensor(x).to(d), torch.from_numpy(y.astype(np.int64)).to(d)),
}

BATCH_WRONG = [
    ("NumPy as it is", lambda x, y, d: (x, y), "the inputs are still a NumPy array"),
    (
        "not moved",
        lambda x, y, d: (torch.from_numpy(x).float(), torch.from_numpy(y).long()),
        "the inputs are on cpu, not on meta",
    ),
    (
        "targets not moved",
        lambda x, y, d: (torch.from_numpy(x).float().to(d), torch.from_numpy(y).long()),
        "the targets are on cpu, not on meta",
    ),
    (
        "float64",
        lambda x, y, d: (torch.from_numpy(x).to(d), torch.from_numpy(y).long().to(d)),
        "the inputs are float64",
    ),
    (
        "int32",
        lambda x, y, d: (torch.from_numpy(x).float().to(d), torch.from_numpy(y).to(d)),
        "the targets are int32",
    ),
    (
        ".int()",
        lambda x, y, d: (torch.from_numpy(x).float().to(d), torch.from_numpy(y).int().to(d)),
        "the targets are int32",
    ),
    (
        "Variable",
        lambda x, y, d: (
            torch.autograd.Variable(torch.from_numpy(x)).to(d),
            torch.from_numpy(y).long().to(d),
        ),
        "the inputs are float64",
    ),
    (
        "transposed",
        lambda x, y, d: (torch.from_numpy(x.T.copy()).float().to(d), torch.from_numpy(y).long().to(d)),
        "the inputs have shape (6, 5), not (5, 6)",
    ),
    ("inputs alone", lambda x, y, d: torch.from_numpy(x).float().to(d), "returned a float32 tensor"),
    (
        "hard-coded cuda",
        lambda x, y, d: (torch.from_numpy(x).float().cuda(), torch.from_numpy(y).long().cuda()),
        "used the GPU itself, .cuda()",
    ),
    (
        "rounded",
        lambda x, y, d: (torch.from_numpy(x.round()).float().to(d), torch.from_numpy(y).long().to(d)),
        "the inputs hold other values than x",
    ),
    ("ndarray.to", lambda x, y, d: (x.to(d), y.to(d)), "on a NumPy array"),
]


@pytest.mark.parametrize("answer", right_cases(BATCH_RIGHT))
def test_numpy_batch_to_device_right(answer, capsys):
    right(check_numpy_batch_to_device, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(BATCH_WRONG))
def test_numpy_batch_to_device_wrong(answer, fragment):
    wrong(check_numpy_batch_to_device, answer, fragment)


def test_the_reference_batch_really_lands_on_the_device():
    inputs, targets = solution.numpy_batch_to_device(np.zeros((2, 3)), np.zeros(2, dtype=np.int32), "meta")
    assert inputs.device.type == targets.device.type == "meta"


# ---- exercise 2: plain_state_dict ----


def _consume_prefix(wrapped):
    state = wrapped.state_dict()
    consume_prefix_in_state_dict_if_present(state, "module.")
    return state


def _fresh_weights(wrapped):
    torch.manual_seed(1)
    return Tudui().state_dict()


STATE_RIGHT = {
    "removeprefix": lambda w: {k.removeprefix("module."): v for k, v in w.state_dict().items()},
    "slice": lambda w: {k[len("module.") :]: v for k, v in w.state_dict().items()},
    "replace once": lambda w: {k.replace("module.", "", 1): v for k, v in w.state_dict().items()},
    "OrderedDict": lambda w: OrderedDict((k[7:], v) for k, v in w.state_dict().items()),
    "consume_prefix_in_state_dict_if_present": _consume_prefix,
    "split": lambda w: {k.split(".", 1)[1]: v for k, v in w.state_dict().items()},
    "getattr": lambda w: getattr(w, "module", w).state_dict(),
    "a copy on the CPU": lambda w: copy.deepcopy(w.module).cpu().state_dict(),
}

STATE_WRONG = [
    ("the wrapper's", lambda w: w.state_dict(), "the keys start with 'module.'"),
    ("the model", lambda w: w.module, "returned a model, not its weights"),
    ("new weights", _fresh_weights, "not the wrapped model's weights"),
    ("other keys", lambda w: {"weight": torch.zeros(1)}, "the keys do not match the unwrapped model's"),
    (
        "lstrip",
        lambda w: {k.lstrip("module."): v for k, v in w.state_dict().items()},
        "str.lstrip('module.')",
    ),
    ("the method", lambda w: w.module.state_dict, "the method Tudui.state_dict itself"),
    ("parameters()", lambda w: w.module.parameters(), "returned a generator"),
    ("a list", lambda w: list(w.module.state_dict().values()), "returned a list of 10 items"),
    (
        "NumPy values",
        lambda w: {k: v.cpu().numpy() for k, v in w.module.state_dict().items()},
        "is a NumPy array",
    ),
    (
        "zeroed",
        lambda w: {k: torch.zeros_like(v) for k, v in w.module.state_dict().items()},
        "not the wrapped model's weights",
    ),
]


@pytest.mark.parametrize("answer", right_cases(STATE_RIGHT))
def test_plain_state_dict_right(answer, capsys):
    right(check_plain_state_dict, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(STATE_WRONG))
def test_plain_state_dict_wrong(answer, fragment):
    wrong(check_plain_state_dict, answer, fragment)


# ---- exercise 3: visible_gpus_env ----


def _sets_os_environ(gpu_ids):
    os.environ["COURSE_TEST_UNUSED"] = ",".join(map(str, gpu_ids))  # the mistake: the result is lost
    del os.environ["COURSE_TEST_UNUSED"]


ENV_RIGHT = {
    "map(str)": lambda ids: {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))},
    "with CUDA_DEVICE_ORDER": lambda ids: {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in ids),
    },
    "from str(list)": lambda ids: {"CUDA_VISIBLE_DEVICES": str(ids)[1:-1].replace(" ", "")},
    "dict()": lambda ids: dict(CUDA_VISIBLE_DEVICES=",".join(f"{i}" for i in ids)),
}

ENV_WRONG = [
    ("typo", lambda ids: {"CUDA_VISIBLE_DEVICE": "1,2"}, "read by nothing"),
    ("a list", lambda ids: {"CUDA_VISIBLE_DEVICES": ids}, "but variables are strings"),
    ("str(list)", lambda ids: {"CUDA_VISIBLE_DEVICES": str(ids)}, "the value is '[1, 2]'"),
    ("spaces", lambda ids: {"CUDA_VISIBLE_DEVICES": ", ".join(map(str, ids))}, "has spaces"),
    ("hard-coded", lambda ids: {"CUDA_VISIBLE_DEVICES": "1,2"}, "build it from gpu_ids, '0'"),
    ("another variable", lambda ids: {"CUDA_VISIBLE_DEVICES": "1,2", "OTHER": "x"}, "also sets OTHER"),
    ("a string", lambda ids: "CUDA_VISIBLE_DEVICES=1,2", "returned the string"),
    (
        "the whole environment",
        lambda ids: {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))},
        "the whole environment perhaps",
    ),
    ("sorted", lambda ids: {"CUDA_VISIBLE_DEVICES": ",".join(map(str, sorted(ids)))}, "in another order"),
    ("ints", lambda ids: {"CUDA_VISIBLE_DEVICES": int("".join(map(str, ids)))}, "the int 12"),
    (
        "bad order",
        lambda ids: {"CUDA_DEVICE_ORDER": "pci", "CUDA_VISIBLE_DEVICES": "1,2"},
        "CUDA_DEVICE_ORDER is 'pci'",
    ),
    ("only os.environ", _sets_os_environ, "visible_gpus_env returned None"),
    ("no CUDA_VISIBLE_DEVICES", lambda ids: {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "no CUDA_VISIBLE_DEVICES"),
]


@pytest.mark.parametrize("answer", right_cases(ENV_RIGHT))
def test_visible_gpus_env_right(answer, capsys):
    right(check_visible_gpus_env, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(ENV_WRONG))
def test_visible_gpus_env_wrong(answer, fragment):
    wrong(check_visible_gpus_env, answer, fragment)
