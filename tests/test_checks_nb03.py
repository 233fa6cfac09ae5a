"""helpers.checks.nb03: right answers in other spellings pass, typical mistakes are refused by name."""

import pickle

import numpy as np
import pytest
import torch
from exercise_answers import judge, right, table_cases

from helpers.checks.nb03 import check_as_numpy, check_load_on_cpu, check_most_confused
from helpers.devices import pick_device, to_numpy
from helpers.models import SimpleModel
from solutions import nb03 as solution

AS_NUMPY = [  # (name, answer, a fragment of the message; None for a right answer)
    ("numpy(force=True)", lambda t: t.numpy(force=True), None),
    ("to('cpu')", lambda t: t.detach().to("cpu").numpy(), None),
    ("helpers.to_numpy", to_numpy, None),
    ("np.array, a copy", lambda t: np.array(t.detach().cpu().tolist(), dtype=np.float32), None),
    ("numpy with grad", lambda t: t.numpy(), "called .numpy() on a tensor that requires grad"),
    (
        "CPU only",
        lambda t: t.detach().numpy(),
        ".numpy() fails on meta (the check's stand-in for a GPU)",
    ),
    ("a tensor", lambda t: t.detach().cpu(), "as_numpy returned a float32 tensor of shape (4, 2)"),
    ("forgot ()", lambda t: t.detach().cpu().numpy, "the method numpy itself (without the ()"),
    ("a list", lambda t: t.tolist(), "returned a list of 4 items, not a NumPy array"),
    (
        "requires_grad_(False)",
        lambda t: t.requires_grad_(False).numpy(),
        "switch off requires_grad",
    ),
    (
        "detach_, in place",
        lambda t: t.detach_().numpy(),
        "switched off requires_grad of the tensor it was",
    ),
    ("transposed", lambda t: t.detach().cpu().numpy().T, "of shape (2, 4)"),
    ("through a list", lambda t: np.array(t.tolist()), "the array is float64"),
    ("half", lambda t: t.detach().cpu().half().numpy(), "the array is float16"),
    ("to the GPU", lambda t: t.cuda().detach().cpu().numpy(), "used the GPU itself"),
    ("zeros", lambda t: np.zeros((4, 2), dtype=np.float32), "does not hold the tensor's values"),
]

LOAD = [
    ("torch.device('cpu')", lambda path: torch.load(path, map_location=torch.device("cpu")), None),
    (
        "a function",
        lambda path: torch.load(path, map_location=lambda storage, location: storage),
        None,
    ),
    ("a dict", lambda path: torch.load(path, map_location={"cuda:0": "cpu"}), None),
    ("an open file", lambda path: torch.load(path.open("rb"), map_location="cpu"), None),
    ("str(path), positional", lambda path: torch.load(str(path), "cpu", weights_only=True), None),
    ("no map_location", lambda path: torch.load(path, weights_only=True), "loads onto the GPU"),
    (
        "load, then .cpu()",
        lambda path: {k: v.cpu() for k, v in torch.load(path).items()},
        "location='cpu'",
    ),
    ("cuda", lambda path: torch.load(path, map_location="cuda:0"), "loads onto the GPU"),
    (
        "pick_device",
        lambda path: torch.load(path, map_location=pick_device()),
        "loads onto the GPU",
    ),
    ("a model", lambda path: SimpleModel(), "load_on_cpu returned a SimpleModel module"),
    ("one tensor", lambda path: torch.load(path, "cpu")["fc.weight"], "returned a float32 tensor"),
    ("other keys", lambda path: {"fc.weight": torch.zeros(3, 3)}, "the state_dict has the keys"),
    (
        "meta",
        lambda path: {k: v.to("meta") for k, v in torch.load(path, "cpu").items()},
        "are on meta",
    ),
    ("values", lambda path: torch.load(path, "cpu").values(), "dict_values: return the state_dict"),
    (
        "load_state_dict's result",
        lambda p: SimpleModel().load_state_dict(torch.load(p, "cpu")),
        "_Incompat",
    ),
    (
        "zeros",
        lambda path: {k: torch.zeros_like(v) for k, v in torch.load(path, "cpu").items()},
        "differs",
    ),
    (
        "half",
        lambda path: {k: v.half() for k, v in torch.load(path, "cpu").items()},
        "differs from",
    ),
    ("pickle", lambda path: pickle.loads(path.read_bytes()), "load_on_cpu raised UnpicklingError"),
]


def _off(c):
    return np.where(np.eye(len(c), dtype=bool), -1, c)


def _in_place(c):
    np.fill_diagonal(c, -1)
    return np.unravel_index(c.argmax(), c.shape)


CONFUSED = [
    (
        "largest row first",
        lambda c: (i := int(_off(c).sum(1).argmax()), int(_off(c)[i].argmax())),
        "larger",
    ),
    (
        "subtract the diagonal",
        lambda c: np.unravel_index((c - np.diag(np.diag(c))).argmax(), c.shape),
        None,
    ),
    ("loops", lambda c: max((c[i, j], i, j) for i, j in np.ndindex(c.shape) if i != j)[1:], None),
    ("torch", lambda c: divmod(torch.from_numpy(_off(c)).argmax().item(), len(c)), None),
    ("a list of np.int64", lambda c: list(np.unravel_index(_off(c).argmax(), c.shape)), None),
    ("np.argwhere", lambda c: np.argwhere(_off(c) == _off(c).max())[0], None),
    ("the diagonal", lambda c: np.unravel_index(c.argmax(), c.shape), "is on the diagonal"),
    ("transposed", lambda c: np.unravel_index(_off(c.T).argmax(), c.shape), "is the mirror image"),
    ("flat index", lambda c: _off(c).argmax(), "returned a number, 13: return (row, column)"),
    ("in place", _in_place, "changed the matrix it was given"),
    (
        "second largest",
        lambda c: np.unravel_index(np.argsort(_off(c), None)[-2], c.shape),
        "but 12 off",
    ),
    ("a string", lambda c: "cat", "returned the string 'cat'"),
    (
        "counted from 1",
        lambda c: tuple(i + 1 for i in solution.most_confused(c)),
        "(4, 2) is outside",
    ),
    (
        "floats",
        lambda c: tuple(map(float, solution.most_confused(c))),
        "returned (3.0, 1.0), not two ints",
    ),
    (
        "argmax per column",
        lambda c: c.argmax(axis=0),
        "returned a NumPy array (int64) of shape (4,)",
    ),
    ("the count", lambda c: _off(c).max(), "returned a number, 12"),
    ("a dict", lambda c: {"actual": 3, "predicted": 1}, "returned a dict of 2 items"),
]


TABLES = {check_as_numpy: AS_NUMPY, check_load_on_cpu: LOAD, check_most_confused: CONFUSED}


@pytest.mark.parametrize(("check", "answer", "fragment"), table_cases(TABLES))
def test_an_answer(check, answer, fragment, capsys):
    judge(check, answer, fragment, capsys)


def test_the_checks_file_fails_as_a_gpu_checkpoint_does_and_other_saves_are_left_alone(
    tmp_path, request
):
    kept = tmp_path / "gpu.pt"
    right(
        check_load_on_cpu,
        lambda path: kept.write_bytes(path.read_bytes()) and torch.load(path, "cpu"),
    )
    for path in (kept, request.path.parent / "fixtures" / "gpu_checkpoint.pt"):
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            torch.load(path, weights_only=True)
    torch.save(torch.ones(2), tmp_path / "cpu.pt")
    assert torch.load(tmp_path / "cpu.pt").device.type == "cpu"
