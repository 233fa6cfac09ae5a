"""helpers.checks.nb03: wrong answers are refused with their messages."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.checks import CheckFailed
from helpers.checks.nb03 import check_as_numpy, check_load_on_cpu, check_most_confused
from helpers.models import SimpleModel

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "answer",
    [
        lambda t: t.numpy(force=True),
        lambda t: t.detach().to("cpu").numpy(),
        lambda t: np.asarray(t.cpu().detach()),
        lambda t: t.cpu().detach().numpy(),
    ],
    ids=["numpy(force=True)", "to('cpu')", "np.asarray", "cpu first"],
)
def test_other_correct_conversions_pass(answer):
    assert check_as_numpy(answer) is True


@pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-in file is for machines without a GPU")
def test_the_checkpoint_of_the_check_fails_like_a_real_gpu_checkpoint(tmp_path):
    """Without map_location the check's file fails as tests/fixtures/gpu_checkpoint.pt does."""
    from helpers.checks.nb03 import _save_gpu_checkpoint

    state = SimpleModel().state_dict()
    _save_gpu_checkpoint(state, tmp_path / "gpu.pt")
    for path in (tmp_path / "gpu.pt", ROOT / "tests" / "fixtures" / "gpu_checkpoint.pt"):
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            torch.load(path, weights_only=True)
    torch.save(state, tmp_path / "cpu.pt")  # the tagger is off outside the check
    assert all(t.device.type == "cpu" for t in torch.load(tmp_path / "cpu.pt", weights_only=True).values())


# --- wrong answers ----------------------------------------------------------------------------


def _switches_off_grad(t):
    t.requires_grad_(False)
    return t.numpy()


def _diagonal(confusion):
    return tuple(int(i) for i in np.unravel_index(confusion.argmax(), confusion.shape))


def _transposed(confusion):
    off = confusion.T.copy()
    np.fill_diagonal(off, -1)
    return tuple(int(i) for i in np.unravel_index(off.argmax(), off.shape))


def _flat_index(confusion):
    off = confusion.copy()
    np.fill_diagonal(off, -1)
    return off.argmax()


def _in_place(confusion):
    np.fill_diagonal(confusion, -1)
    return tuple(int(i) for i in np.unravel_index(confusion.argmax(), confusion.shape))


def _second_largest(confusion):
    off = confusion.copy()
    np.fill_diagonal(off, -1)
    flat = np.argsort(off, axis=None)[-2]
    return tuple(int(i) for i in np.unravel_index(flat, off.shape))


WRONG = [
    (check_as_numpy, lambda t: t.numpy(), "this tensor requires grad: call .detach() first"),
    (
        check_as_numpy,
        lambda t: t.detach().numpy(),
        "this works only because the tensor is already on the CPU",
    ),
    (check_as_numpy, lambda t: t.data.numpy(), "add .cpu() before .numpy()"),
    (check_as_numpy, lambda t: t.detach().cpu(), "as_numpy returned a tensor"),
    (check_as_numpy, lambda t: t.tolist(), "returned a list, not a NumPy array"),
    (check_as_numpy, _switches_off_grad, "this tensor requires grad: call .detach() first"),
    (check_as_numpy, lambda t: t.detach().cpu().numpy()[:2], "does not hold the tensor's values"),
    (check_load_on_cpu, lambda path: torch.load(path, weights_only=True), "map_location='cpu'"),
    (check_load_on_cpu, lambda path: SimpleModel(), "load_on_cpu returned a model"),
    (
        check_load_on_cpu,
        lambda path: torch.load(path, map_location="cpu", weights_only=True)["fc.weight"],
        "load_on_cpu returned a Tensor; return the state_dict",
    ),
    (check_load_on_cpu, lambda path: {"fc.weight": torch.zeros(3, 3)}, "the state_dict has the keys"),
    (
        check_load_on_cpu,
        lambda path: {
            k: v.to("meta") for k, v in torch.load(path, map_location="cpu", weights_only=True).items()
        },
        "the tensors were loaded onto meta",
    ),
    (check_most_confused, _diagonal, "is on the diagonal"),
    (check_most_confused, _transposed, "is the mirror image"),
    (check_most_confused, _flat_index, "returned one number"),
    (check_most_confused, _in_place, "changed the matrix it was given"),
    (check_most_confused, _second_largest, "but another count off the diagonal is larger (12)"),
    (check_most_confused, lambda confusion: "cat", "should return a pair (actual, predicted)"),
]


@pytest.mark.parametrize(("check", "answer", "message"), WRONG, ids=[m for _, _, m in WRONG])
def test_a_wrong_answer_is_refused_with_its_message(check, answer, message):
    with pytest.raises(CheckFailed, match=re.escape(message)):
        check(answer)
