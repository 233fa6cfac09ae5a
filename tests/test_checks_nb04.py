"""The checks of 04_data_parallel accept the reference solutions and reject typical wrong answers."""

import numpy as np
import pytest
import torch

from helpers.checks import CheckFailed, nb04
from solutions import nb04 as solution


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda x, y, d: (x, y), "still a NumPy array"),
        (
            lambda x, y, d: (torch.from_numpy(x).float(), torch.from_numpy(y).long()),
            "still on cpu",
        ),
        (
            lambda x, y, d: (torch.from_numpy(x).float().to(d), torch.from_numpy(y).long()),
            "targets of this batch were not moved",
        ),
        (lambda x, y, d: (torch.from_numpy(x).to(d), torch.from_numpy(y).long().to(d)), "inputs are float64"),
        (lambda x, y, d: (torch.from_numpy(x).float().to(d), torch.from_numpy(y).to(d)), "targets are int32"),
        (
            lambda x, y, d: (torch.from_numpy(x.T.copy()).float().to(d), torch.from_numpy(y).long().to(d)),
            "shapes changed",
        ),
        (lambda x, y, d: torch.from_numpy(x).float().to(d), "return two things"),
    ],
)
def test_wrong_numpy_batches_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb04.check_numpy_batch_to_device(answer)


def test_wrong_state_dicts_are_rejected():
    with pytest.raises(CheckFailed, match="keys start with 'module.'"):
        nb04.check_plain_state_dict(lambda wrapped: wrapped.state_dict())
    with pytest.raises(CheckFailed, match="that is a model"):
        nb04.check_plain_state_dict(lambda wrapped: wrapped.module)

    def fresh_weights(wrapped):
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)).state_dict()

    with pytest.raises(CheckFailed, match="not the wrapped model's weights"):
        nb04.check_plain_state_dict(fresh_weights)
    with pytest.raises(CheckFailed, match="does not accept"):
        nb04.check_plain_state_dict(lambda wrapped: {"weight": torch.zeros(1)})


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda ids: {"CUDA_VISIBLE_DEVICE": "1,2"}, "read by nothing"),
        (lambda ids: {"CUDA_VISIBLE_DEVICES": ids}, "are strings"),
        (lambda ids: {"CUDA_VISIBLE_DEVICES": str(ids)}, "no spaces or brackets"),
        (lambda ids: {"CUDA_VISIBLE_DEVICES": "1, 2"}, "no spaces or brackets"),
        (lambda ids: {"CUDA_VISIBLE_DEVICES": "1,2"}, "build it from gpu_ids"),
        (lambda ids: {"CUDA_VISIBLE_DEVICES": "1,2", "OTHER": "x"}, "exactly one variable"),
        (lambda ids: "CUDA_VISIBLE_DEVICES=1,2", "dict of environment variables"),
    ],
)
def test_wrong_gpu_choices_are_rejected(answer, message):
    with pytest.raises(CheckFailed, match=message):
        nb04.check_visible_gpus_env(answer)


def test_the_reference_batch_really_lands_on_the_device():
    inputs, targets = solution.numpy_batch_to_device(np.zeros((2, 3)), np.zeros(2, dtype=np.int32), "meta")
    assert inputs.device.type == targets.device.type == "meta"
