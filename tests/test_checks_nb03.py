"""helpers.checks.nb03: right answers in other spellings pass, typical mistakes are refused by
name."""

import pickle

import numpy as np
import pytest
import torch
from exercise_answers import judge, right, table_cases

from helpers.checks.nb03 import check_as_numpy, check_load_on_cpu, check_resume
from helpers.devices import pick_device, to_numpy
from helpers.models import SimpleModel
from solutions import nb03 as solution

AS_NUMPY = [  # (name, answer, a fragment of the message; None for a right answer)
    ("numpy(force=True)", lambda t: t.numpy(force=True), None),
    ("to('cpu')", lambda t: t.detach().to("cpu").numpy(), None),
    ("helpers.to_numpy", to_numpy, None),
    (
        "np.array, float32 always",
        lambda t: np.array(t.detach().cpu().tolist(), dtype=np.float32),
        "not float64",
    ),
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
    ("float32 always", lambda t: t.detach().cpu().numpy().astype(np.float32), "not float64"),
    ("reshaped", lambda t: t.detach().cpu().numpy().reshape(4, 2), "raised ValueError"),
    ("pick_device", lambda t: t.detach().to(pick_device()).cpu().numpy(), None),
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
        "map_location='cpu'",
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


def _resume(*, location="cpu", model=True, optimizer=True, rng=True, epoch=lambda e: e):
    """The reference resume with one part changed: the map_location, a restore left out, the
    epoch returned."""

    def resume(path, net, opt):
        where = location(net) if callable(location) else location
        checkpoint = torch.load(path, map_location=where)
        if model:
            net.load_state_dict(checkpoint["model"])
        if optimizer:
            opt.load_state_dict(checkpoint["optimizer"])
        if rng:
            torch.set_rng_state(checkpoint["rng_state"])
        return epoch(checkpoint["epoch"])

    return resume


def _assigned(path, net, opt):
    checkpoint = torch.load(path, map_location="cpu")
    net.load_state_dict(checkpoint["model"], assign=True)
    opt.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return checkpoint["epoch"]


def _seeded_by_epoch(path, net, opt):
    epoch = solution.resume(path, net, opt)
    torch.manual_seed(epoch)
    return epoch


def _swapped(path, net, opt):
    checkpoint = torch.load(path, map_location="cpu")
    net.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def _model_device(net):
    return next(net.parameters()).device


RESUME = [
    (
        "a function as map_location",
        _resume(location=lambda net: lambda storage, where: storage),
        None,
    ),
    ("a dict as map_location", _resume(location={"cuda:0": "cpu"}), None),
    ("rng state moved back", _resume(location=_model_device, rng=False), "random state is not"),
    ("an int", lambda p, n, o: int(solution.resume(p, n, o)), None),
    ("no map_location", _resume(location=None), "loads onto the GPU: load the file with map_"),
    ("the model's device", _resume(location=_model_device), "set_rng_state a random state"),
    ("pick_device", _resume(location=lambda net: pick_device()), "map_location='cpu'"),
    ("model only", _resume(optimizer=False, rng=False), "the optimizer was not restored"),
    (
        "no optimizer",
        _resume(optimizer=False),
        "optimizer.load_state_dict(checkpoint['optimizer'])",
    ),
    ("no random state", _resume(rng=False), "torch.set_rng_state(checkpoint['rng_state'])"),
    ("seeded by the epoch", _seeded_by_epoch, "the random state is not the saved one"),
    ("no model", _resume(model=False), "the model's weights are not the saved ones"),
    ("epoch + 1", _resume(epoch=lambda e: e + 1), "epochs are done, so epoch 3 comes next"),
    ("epoch - 1", _resume(epoch=lambda e: e - 1), "not the saved epoch 3"),
    ("the checkpoint", _resume(epoch=lambda e: {"epoch": e}), "returned a dict of 1 item"),
    ("a float", _resume(epoch=float), "returned the float 3.0"),
    ("assign=True", _assigned, "the optimizer holds the old ones"),
    ("swapped", _swapped, "loaded the wrong part of the checkpoint"),
    ("to cuda", _resume(location="cuda"), "load the file with map_location='cpu'"),
]


TABLES = {check_as_numpy: AS_NUMPY, check_load_on_cpu: LOAD, check_resume: RESUME}


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
