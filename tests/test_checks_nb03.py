"""helpers.checks.nb03: right answers in other spellings pass, typical mistakes are refused by name."""

from pathlib import Path

import numpy as np
import pytest
import torch
from exercise_answers import right, right_cases, wrong, wrong_cases

from helpers.checks.nb03 import check_as_numpy, check_load_on_cpu, check_most_confused
from helpers.devices import pick_device, to_numpy
from helpers.models import SimpleModel

ROOT = Path(__file__).resolve().parent.parent


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


# ---- exercise 1: as_numpy ----


def _no_grad_then_numpy(t):
    with torch.no_grad():
        return t.cpu().numpy()


def _no_grad_numpy_only(t):
    with torch.no_grad():
        return t.numpy()


def _switches_off_grad(t):
    t.requires_grad_(False)
    return t.numpy()


AS_NUMPY_RIGHT = {
    "numpy(force=True)": lambda t: t.numpy(force=True),
    "to('cpu')": lambda t: t.detach().to("cpu").numpy(),
    "np.asarray": lambda t: np.asarray(t.cpu().detach()),
    "cpu first": lambda t: t.cpu().detach().numpy(),
    "helpers.to_numpy": to_numpy,
    "data": lambda t: t.data.cpu().numpy(),
    "np.array": lambda t: np.array(t.detach().cpu()),
    "no_grad": _no_grad_then_numpy,
    "a copy": lambda t: t.detach().cpu().numpy().copy(),
}

AS_NUMPY_WRONG = [
    ("numpy with grad", lambda t: t.numpy(), ".numpy() on a tensor that requires grad"),
    (
        "CPU only",
        lambda t: t.detach().numpy(),
        "as_numpy works only on a CPU tensor: .numpy() fails on a GPU",
    ),
    ("data.numpy", lambda t: t.data.numpy(), "add .cpu() before .numpy()"),
    ("no_grad, CPU only", _no_grad_numpy_only, "add .cpu() before .numpy()"),
    ("a tensor", lambda t: t.detach().cpu(), "as_numpy returned a float32 tensor"),
    ("a list", lambda t: t.tolist(), "returned a list of 4 items, not a NumPy array"),
    ("requires_grad_(False)", _switches_off_grad, "switch off requires_grad"),
    ("sliced", lambda t: t.detach().cpu().numpy()[:2], "of shape (2, 2)"),
    ("through a list", lambda t: np.array(t.tolist()), "the array is float64"),
    ("float64", lambda t: t.detach().cpu().numpy().astype(np.float64), "the array is float64"),
    ("transposed", lambda t: t.detach().cpu().numpy().T, "of shape (2, 4)"),
    ("to the GPU", lambda t: t.cuda().detach().cpu().numpy(), "used the GPU itself"),
    ("np.asarray with grad", lambda t: np.asarray(t), "requires grad"),
    ("zeros", lambda t: np.zeros((4, 2), dtype=np.float32), "does not hold the tensor's values"),
]


@pytest.mark.parametrize("answer", right_cases(AS_NUMPY_RIGHT))
def test_as_numpy_right(answer, capsys):
    right(check_as_numpy, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(AS_NUMPY_WRONG))
def test_as_numpy_wrong(answer, fragment):
    wrong(check_as_numpy, answer, fragment)


# ---- exercise 2: load_on_cpu ----


def _open_file(path):
    with open(path, "rb") as f:
        return torch.load(f, map_location="cpu")


def _load_then_cpu(path):
    return {k: v.cpu() for k, v in torch.load(path, map_location="cpu", weights_only=True).items()}


def _incompatible_keys(path):
    return SimpleModel().load_state_dict(torch.load(path, map_location="cpu"))


LOAD_RIGHT = {
    "torch.device('cpu')": lambda path: torch.load(path, map_location=torch.device("cpu")),
    "a function": lambda path: torch.load(path, map_location=lambda storage, location: storage),
    "a dict": lambda path: torch.load(path, map_location={"cuda:0": "cpu"}),
    "an open file": _open_file,
    "str(path)": lambda path: torch.load(str(path), map_location="cpu", weights_only=True),
    "positional": lambda path: torch.load(path, "cpu"),
    "then .cpu()": _load_then_cpu,
}

LOAD_WRONG = [
    ("no map_location", lambda path: torch.load(path, weights_only=True), "torch.load puts each tensor back"),
    ("then .cpu()", lambda path: {k: v.cpu() for k, v in torch.load(path).items()}, "map_location='cpu'"),
    ("map_location='cuda'", lambda path: torch.load(path, map_location="cuda"), "map_location='cuda' loads"),
    ("cuda:0", lambda path: torch.load(path, map_location="cuda:0"), "loads the tensors onto the GPU"),
    (
        "pick_device",
        lambda path: torch.load(path, map_location=pick_device()),
        "loads the tensors onto the GPU",
    ),
    ("device('cuda')", lambda path: torch.load(path, map_location=torch.device("cuda")), "onto the GPU"),
    ("a model", lambda path: SimpleModel(), "load_on_cpu returned a model"),
    (
        "one tensor",
        lambda path: torch.load(path, map_location="cpu")["fc.weight"],
        "load_on_cpu returned a float32 tensor",
    ),
    ("other keys", lambda path: {"fc.weight": torch.zeros(3, 3)}, "the state_dict has the keys"),
    (
        "onto meta",
        lambda path: {k: v.to("meta") for k, v in torch.load(path, map_location="cpu").items()},
        "the tensors were loaded onto meta",
    ),
    (
        "values",
        lambda path: torch.load(path, map_location="cpu").values(),
        "dict_values: return the state_dict",
    ),  # torch 2.11 says dict_values, 2.14 odict_values
    ("load_state_dict's result", _incompatible_keys, "returned a _IncompatibleKeys"),
    (
        "zeros",
        lambda path: {k: torch.zeros_like(v) for k, v in torch.load(path, "cpu").items()},
        "differs from",
    ),
]


@pytest.mark.parametrize("answer", right_cases(LOAD_RIGHT))
def test_load_on_cpu_right(answer, capsys):
    right(check_load_on_cpu, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(LOAD_WRONG))
def test_load_on_cpu_wrong(answer, fragment):
    wrong(check_load_on_cpu, answer, fragment)


def test_torch_load_is_itself_again_after_the_check():
    load = torch.load
    wrong(check_load_on_cpu, lambda path: torch.load(path, map_location="cuda"), "onto the GPU")
    assert torch.load is load and torch.serialization.load is load


# ---- exercise 3: most_confused ----


def _off_diagonal_by_subtraction(confusion):
    off = confusion - np.diag(np.diag(confusion))
    return tuple(int(i) for i in np.unravel_index(off.argmax(), off.shape))


def _masked(confusion):
    off = np.where(~np.eye(len(confusion), dtype=bool), confusion, -1)
    row, column = np.unravel_index(np.argmax(off), off.shape)
    return row, column


def _loops(confusion):
    best, pair = -1, None
    for i in range(len(confusion)):
        for j in range(len(confusion)):
            if i != j and confusion[i, j] > best:
                best, pair = confusion[i, j], (i, j)
    return pair


def _torch(confusion):
    t = torch.from_numpy(confusion.copy())
    t.fill_diagonal_(-1)
    return divmod(t.argmax().item(), t.shape[1])


def _a_list(confusion):
    off = confusion * (1 - np.eye(len(confusion), dtype=confusion.dtype))
    return list(np.unravel_index(off.argmax(), off.shape))


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


def _alias(confusion):
    off = confusion
    np.fill_diagonal(off, 0)
    return tuple(int(i) for i in np.unravel_index(off.argmax(), off.shape))


def _diag_indices(confusion):
    confusion[np.diag_indices_from(confusion)] = 0
    return tuple(int(i) for i in np.unravel_index(confusion.argmax(), confusion.shape))


def _second_largest(confusion):
    off = confusion.copy()
    np.fill_diagonal(off, -1)
    flat = np.argsort(off, axis=None)[-2]
    return tuple(int(i) for i in np.unravel_index(flat, off.shape))


def _floats(confusion):
    off = confusion.astype(float)
    np.fill_diagonal(off, -1)
    return tuple(float(i) for i in np.unravel_index(off.argmax(), off.shape))


CONFUSED_RIGHT = {
    "subtract the diagonal": _off_diagonal_by_subtraction,
    "np.where mask": _masked,
    "loops": _loops,
    "torch": _torch,
    "a list": _a_list,
}

CONFUSED_WRONG = [
    ("the diagonal", _diagonal, "is on the diagonal"),
    ("transposed", _transposed, "is the mirror image"),
    ("flat index", _flat_index, "returned one number"),
    ("in place", _in_place, "changed the matrix it was given"),
    ("an alias", _alias, "changed the matrix it was given"),
    ("diag_indices", _diag_indices, "work on a copy"),
    ("second largest", _second_largest, "but 12 off the diagonal is larger"),
    ("a string", lambda confusion: "cat", "returned the string 'cat'"),
    ("outside", lambda confusion: (10, 10), "(10, 10) is outside the 4x4 matrix"),
    ("floats", _floats, "returned (3.0, 1.0), not two ints"),
    (
        "argmax per column",
        lambda confusion: confusion.argmax(axis=0),
        "returned a NumPy array (int64) of shape (4,)",
    ),
    ("one value", lambda confusion: confusion.max(), "perhaps a flat index"),
]


@pytest.mark.parametrize("answer", right_cases(CONFUSED_RIGHT))
def test_most_confused_right(answer, capsys):
    right(check_most_confused, answer, capsys)


@pytest.mark.parametrize(("answer", "fragment"), wrong_cases(CONFUSED_WRONG))
def test_most_confused_wrong(answer, fragment):
    wrong(check_most_confused, answer, fragment)
