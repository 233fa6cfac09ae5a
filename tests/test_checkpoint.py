import errno
import os
import pickle
import random
import stat
import zipfile
from collections import OrderedDict, defaultdict, namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
from gpus import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from helpers.models import CifarNet, SimpleModel

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_checkpoint.pt"


def _fresh(seed):
    torch.manual_seed(seed)
    model = SimpleModel()
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def _train(model, optimizer, epochs):
    x = torch.randn(96, 3, generator=torch.Generator().manual_seed(1))
    loader = DataLoader(TensorDataset(x, (x.sum(1) > 0).long()), batch_size=16, shuffle=True)
    for _ in range(epochs):
        for inputs, targets in loader:  # the shuffle draws from the global random state
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()


def test_resume_equals_an_uninterrupted_run_exactly(tmp_path):
    straight, optimizer = _fresh(0)
    _train(straight, optimizer, epochs=4)
    interrupted, optimizer = _fresh(0)
    _train(interrupted, optimizer, epochs=2)
    save_checkpoint(tmp_path / "c.pt", interrupted, optimizer, epoch=2, note="half way")
    random.seed(7)
    torch.manual_seed(
        12345
    )  # the session is lost: everything is rebuilt, the random state is elsewhere
    resumed, resumed_optimizer = _fresh(99)
    assert load_checkpoint(tmp_path / "c.pt", resumed, resumed_optimizer) == (
        2,
        {"note": "half way"},
    )
    _train(resumed, resumed_optimizer, epochs=2)
    for name, tensor in straight.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


def test_restore_rng_false_leaves_the_random_state(tmp_path):
    model = SimpleModel()
    save_checkpoint(tmp_path / "c.pt", model, None, epoch=1)
    torch.manual_seed(5)
    expected = torch.rand(1)
    torch.manual_seed(5)
    load_checkpoint(tmp_path / "c.pt", model, restore_rng=False)
    assert torch.equal(torch.rand(1), expected)


def test_a_gpu_checkpoint_loads_on_the_models_device():
    """The fixture's storages are tagged cuda:0 (written so on a CPU: make_gpu_checkpoint.py)."""
    with zipfile.ZipFile(FIXTURE) as archive:
        assert b"cuda:0" in archive.read(
            next(n for n in archive.namelist() if n.endswith("data.pkl"))
        )
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epoch, extra = load_checkpoint(FIXTURE, model, optimizer)
    assert epoch == 1 and model.fc.weight.device.type == "cpu"
    assert model.fc.weight.sum().item() == pytest.approx(extra["weight_sum"])
    assert all(s["momentum_buffer"].device.type == "cpu" for s in optimizer.state.values())


@requires_cuda
def test_a_cpu_checkpoint_loads_onto_a_gpu_model(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    model = SimpleModel().cuda()
    load_checkpoint(tmp_path / "c.pt", model)
    assert model.fc.weight.is_cuda


@pytest.mark.parametrize(
    ("wrap", "prefix"), [(nn.DataParallel, "module."), (torch.compile, "_orig_mod.")]
)
def test_wrapped_models_are_saved_plain_and_load_either_way(tmp_path, wrap, prefix):
    wrapped = wrap(SimpleModel().to("cuda:0" if torch.cuda.device_count() == 1 else "cpu"))
    save_checkpoint(tmp_path / "dp.pt", wrapped, None, epoch=1)
    assert not any(key.startswith(prefix) for key in torch.load(tmp_path / "dp.pt")["model"])
    plain = SimpleModel()
    load_checkpoint(tmp_path / "dp.pt", plain)
    assert torch.equal(plain.fc.weight, wrapped.state_dict()[f"{prefix}fc.weight"].cpu())
    rewrapped = wrap(SimpleModel())
    load_checkpoint(tmp_path / "dp.pt", rewrapped)
    assert torch.equal(rewrapped.state_dict()[f"{prefix}fc.weight"].cpu(), plain.fc.weight)
    prefixed = torch.load(tmp_path / "dp.pt")  # a state_dict saved with the prefix loads too
    prefixed["model"] = {f"{prefix}{key}": value for key, value in prefixed["model"].items()}
    torch.save(prefixed, tmp_path / "prefixed.pt")
    load_checkpoint(tmp_path / "prefixed.pt", SimpleModel())


ACCEPTED = {
    "numpy numbers": ([np.float64(0.25), np.int64(7), np.bool_(True)], [0.25, 7, True]),
    "nested": ({"a": (1, [2.5, None]), 3: "x"}, {"a": (1, [2.5, None]), 3: "x"}),
    "ordered dict": (OrderedDict(b=1, a=2), OrderedDict(b=1, a=2)),
    "torch types": ((torch.float16, torch.device("cpu"), torch.Size([2])),) * 2,
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_extras_load_back_as_they_were_given(tmp_path, name):
    value, expected = ACCEPTED[name]
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, 1, value=value, weights=torch.arange(3))
    _, extra = load_checkpoint(tmp_path / "c.pt", SimpleModel())
    assert extra["value"] == expected and type(extra["value"]) is type(expected)
    assert torch.equal(extra["weights"], torch.arange(3))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (object(), r"extra\['value'\], a object"),
        (np.zeros(3), "ndarray.*torch.from_numpy"),
        ({1, 2}, "a set"),
        (namedtuple("Point", "x y")(1, 2), r"a Point: store tuple\(value\), or value._asdict\(\)"),
        (defaultdict(int, a=1), r"a defaultdict: store dict\(value\)"),
        (nn.Linear(2, 2), r"a Linear: store value.state_dict\(\)"),
        (Path("runs"), r"(PosixPath|WindowsPath): store str\(value\)"),
        ({(1, 2j): 3}, r"extra\['value'\]\[1\], a complex"),
        (torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1), r"store value.state_dict\(\)"),
    ],
)
def test_an_extra_that_would_not_load_is_refused_and_the_file_kept(tmp_path, value, words):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    before = (tmp_path / "c.pt").read_bytes()
    with pytest.raises(TypeError, match="save_checkpoint cannot store .*" + words):
        save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=2, value=value)
    assert (tmp_path / "c.pt").read_bytes() == before and os.listdir(tmp_path) == ["c.pt"]


def test_numpy_numbers_in_the_optimizer_state_are_stored_as_numbers(tmp_path):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.param_groups[0]["lr"] = np.float64(0.05)  # as a hand-written schedule might set it
    save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    again = torch.optim.SGD(model.parameters(), lr=0.1)
    load_checkpoint(tmp_path / "c.pt", model, again)
    assert again.param_groups[0]["lr"] == 0.05


def test_a_crash_during_a_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    before = path.read_bytes()

    def dies_half_way(obj, file, *args, **kwargs):
        file.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt("the session was lost mid-save")

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, SimpleModel(), None, epoch=2)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.pt"]


def test_a_symbolic_link_is_followed_not_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "last.pt").symlink_to(tmp_path / "runs" / "real.pt")
    save_checkpoint(tmp_path / "last.pt", SimpleModel(), None, epoch=3)
    assert (tmp_path / "last.pt").is_symlink()
    assert load_checkpoint(tmp_path / "runs" / "real.pt", SimpleModel())[0] == 3


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"epoch": 2.5}, TypeError, "epoch is the number of epochs done"),
        ({"epoch": "3"}, TypeError, "epoch=3"),
        ({"epoch": None}, TypeError, "epoch"),
        ({"epoch": -1}, ValueError, "0 or more"),
        ({"path": ""}, ValueError, "path must be a file path"),
        ({"path": "   "}, ValueError, "path must be a file path"),
        ({"model": SimpleModel}, TypeError, "model must be an nn.Module"),
        ({"model": SimpleModel().state_dict()}, TypeError, "model must be an nn.Module"),
        ({"optimizer": "sgd"}, TypeError, "optimizer must be a torch.optim optimizer or None"),
        ({"optimizer": torch.optim.SGD}, TypeError, "optimizer must be a torch.optim optimizer"),
        ({"path": 3}, TypeError, "path must be a file path"),
        ({"path": "folder/"}, IsADirectoryError, "is a folder; add a file name"),
        ({"path": "folder"}, IsADirectoryError, "is a folder; add a file name"),
        ({"path": "notes.txt/c.pt"}, NotADirectoryError, "notes.txt is a file, not a folder"),
        ({"path": "notes.txt"}, FileExistsError, "notes.txt exists and is no checkpoint"),
    ],
)
def test_save_checkpoint_names_a_wrong_argument(tmp_path, monkeypatch, arguments, error, words):
    monkeypatch.chdir(tmp_path)
    Path("folder").mkdir()
    Path("notes.txt").write_text("notes")
    with pytest.raises(error, match=words):
        save_checkpoint(
            **{"path": "c.pt", "model": SimpleModel(), "optimizer": None, "epoch": 1} | arguments
        )
    assert Path("notes.txt").read_text() == "notes" and not Path("c.pt").exists()


def _write_numpy(path):
    np.save(path.with_suffix(".npy"), np.zeros(3))
    path.with_suffix(".npy").rename(path)


def _write_folder(path):
    path.mkdir()
    save_checkpoint(path / "inside.pt", SimpleModel(), None, epoch=1)


# How each file that load_checkpoint is asked to read is written (missing.pt: not at all).
NOT_CHECKPOINTS = {
    "truncated.pt": lambda p: p.write_bytes((p.parent / "epoch_1.pt").read_bytes()[:300]),
    "notes.pt": lambda p: p.write_text("not a checkpoint"),
    "empty.pt": lambda p: p.write_text(""),
    "whole.pt": lambda p: torch.save(SimpleModel(), p),
    "bare.pt": lambda p: torch.save(SimpleModel().state_dict(), p),
    "list.pt": lambda p: torch.save([torch.ones(1)], p),
    "pointer.pt": lambda p: p.write_text("version https://git-lfs.github.com/spec/v1\noid x\n"),
    "page.pt": lambda p: p.write_text("<!DOCTYPE html><html><body>Sign in</body></html>"),
    "array.pt": _write_numpy,
    "pickled.pt": lambda p: p.write_bytes(pickle.dumps({"model": [1, 2]})),
    "binary.pt": lambda p: p.write_bytes(bytes(range(256))),
    "folder": _write_folder,
    "missing.pt": lambda p: None,
    "string_epoch.pt": lambda p: _edited(p, epoch="3"),
    "no_weights.pt": lambda p: _edited(p, model=None),
    "notes.txt/c.pt": lambda p: p.parent.write_text("notes"),
}


def _edited(path, **changes):
    """A file of save_checkpoint whose entries were changed by hand."""
    payload = torch.load(path.parent / "epoch_1.pt", weights_only=True)
    torch.save(payload | changes, path)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("truncated.pt", "truncated or corrupt"),
        ("notes.pt", "is a text file"),
        ("empty.pt", "is empty"),
        ("whole.pt", r"pickled Python objects.*torch.save\(model\)"),
        ("bare.pt", r"bare state_dict.*model.load_state_dict\(torch.load"),
        ("list.pt", "holds a list.*torch.load"),
        ("pointer.pt", "Git LFS.*git lfs pull"),
        ("page.pt", "web page"),
        ("array.pt", r"np.load\(path\)"),
        ("pickled.pt", "pickle, not a file of torch.save"),
        ("binary.pt", "not a file of torch.save"),
        ("folder", "is a folder, not a checkpoint file. Checkpoints in .*folder: inside.pt"),
        ("missing.pt", r"missing.pt does not exist. Checkpoints in .*: epoch_1.pt"),
        ("string_epoch.pt", r"epoch is '3'.*save_checkpoint\("),
        ("no_weights.pt", "no model weights.*save_checkpoint"),
        ("notes.txt/c.pt", "notes.txt is a file, not a folder"),
    ],
)
def test_what_is_not_a_checkpoint_is_refused_saying_what_it_is(tmp_path, name, words):
    save_checkpoint(tmp_path / "epoch_1.pt", SimpleModel(), None, epoch=1)
    path = tmp_path / name
    NOT_CHECKPOINTS[name](path)
    model = SimpleModel()
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(path, model)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_checkpoint_of_another_model_names_the_layers_that_differ(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(CheckpointError, match="different model.*conv1.weight: checkpoint -, model"):
        load_checkpoint(tmp_path / "c.pt", CifarNet())
    with pytest.raises(CheckpointError, match=r"fc.weight: checkpoint \(3, 3\), model \(5, 3\)"):
        load_checkpoint(tmp_path / "c.pt", nn.Sequential(OrderedDict(fc=nn.Linear(3, 5))))


@pytest.mark.parametrize(
    ("saved", "given", "words"),
    [
        (None, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), "holds no optimizer state"),
        ("sgd", lambda m: torch.optim.Adam(m.parameters()), "state of a SGD .* than this Adam"),
        (
            "sgd",
            lambda m: torch.optim.SGD(SimpleModel().parameters(), lr=0.1),
            "none of the model's param",
        ),
        (
            "sgd",
            lambda m: torch.optim.SGD([m.fc.weight], lr=0.1),
            "of other parameters than this SGD",
        ),
    ],
)
def test_an_optimizer_that_does_not_fit_is_refused_before_anything_changes(
    tmp_path, saved, given, words
):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1) if saved else None
    save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    fresh = SimpleModel()
    before = fresh.fc.weight.clone()
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(tmp_path / "c.pt", fresh, given(fresh))
    assert torch.equal(fresh.fc.weight, before)


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"model": SimpleModel}, TypeError, r"model must be an nn.Module.*SimpleModel\(\)"),
        ({"model": {"fc.weight": torch.ones(3, 3)}}, TypeError, "model must be an nn.Module"),
        ({"optimizer": "sgd"}, TypeError, "optimizer must be a torch.optim optimizer"),
        ({"restore_rng": "no"}, TypeError, "restore_rng must be True or False"),
        ({"path": ""}, ValueError, "path must be a file path"),
        ({"path": None}, TypeError, "path must be a file path"),
    ],
)
def test_load_checkpoint_names_a_wrong_argument(tmp_path, arguments, error, words):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(error, match=words):
        load_checkpoint(**{"path": tmp_path / "c.pt", "model": SimpleModel(), **arguments})


def test_the_numpy_random_state_is_saved_and_restored(tmp_path):
    np.random.seed(3)
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    expected = np.random.rand(4)
    np.random.seed(99)  # a new session, another state
    load_checkpoint(tmp_path / "c.pt", SimpleModel())
    assert np.array_equal(np.random.rand(4), expected)
    np.random.seed(99)
    load_checkpoint(tmp_path / "c.pt", SimpleModel(), restore_rng=False)
    assert not np.array_equal(np.random.rand(4), expected)


def test_a_checkpoint_without_numpy_state_still_loads(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    payload = torch.load(tmp_path / "c.pt")
    del payload["rng"]["numpy"]  # as written before the NumPy state was saved
    torch.save(payload, tmp_path / "old.pt")
    assert load_checkpoint(tmp_path / "old.pt", SimpleModel())[0] == 1


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks a machine without MPS")
def test_an_apple_gpu_state_loaded_without_one_is_said_to_be_left_out(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    payload = torch.load(tmp_path / "c.pt")
    payload["rng"]["mps"] = torch.get_rng_state()  # as a Mac writes it: a state tensor
    torch.save(payload, tmp_path / "mac.pt")
    with pytest.warns(UserWarning, match="Apple GPU"):
        load_checkpoint(tmp_path / "mac.pt", SimpleModel())


def test_the_random_states_of_the_machines_devices_are_saved(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    rng = torch.load(tmp_path / "c.pt")["rng"]
    assert {"torch", "numpy", "python"} <= set(rng)
    assert ("cuda" in rng) == torch.cuda.is_available()
    assert ("mps" in rng) == torch.backends.mps.is_available()


@pytest.mark.parametrize(
    ("number", "words"),
    [(errno.ENOSPC, "the disk is full"), (errno.EDQUOT, "quota"), (errno.EROFS, "read-only")],
)
def test_a_full_disk_is_named_and_the_previous_checkpoint_kept(
    tmp_path, monkeypatch, number, words
):
    path = tmp_path / "c.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    before = path.read_bytes()

    def disk_full(obj, file, *args, **kwargs):
        file.write(b"PK\x03\x04 a part")
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match=f"could not write .*c.pt \\(.*{words}.*previous checkpoint"):
        save_checkpoint(path, SimpleModel(), None, epoch=2)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.pt"]


def test_what_a_killed_save_left_is_removed_at_the_next_save(tmp_path):
    import subprocess
    import sys

    # a process that exists no more (it ran and ended) left its temporary file behind
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead = int(done.stdout)
    from helpers.checkpoint import _HOST

    left = tmp_path / f".c.pt.{_HOST}-{dead}.0123abcd.tmp"
    left.write_bytes(b"PK half")
    other = tmp_path / ".other.pt.elsewhere-1.0123abcd.tmp"  # another file's, or another machine's
    other.write_bytes(b"PK half")
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    assert not left.exists() and other.exists()


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_replaced_checkpoint_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # as torch.save would make it
    path.chmod(0o640)
    save_checkpoint(path, SimpleModel(), None, epoch=2)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
