import enum
import io
import os
import pickle
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import zipfile
from collections import Counter, OrderedDict, defaultdict, namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checkpoint import CheckpointError, current_rng_state, load_checkpoint, save_checkpoint
from helpers.models import CifarNet, SimpleModel

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_checkpoint.pt"
requires_mps = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="needs Apple silicon (MPS)")


def _data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(96, 3, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long() + (x[:, 0] > 1).long())


def _train(model, optimizer, loader, epochs):
    for _ in range(epochs):
        for x, y in loader:  # a shuffling loader draws from the global RNG each epoch
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def _fresh(seed):
    torch.manual_seed(seed)
    model = SimpleModel()
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def test_resume_equals_an_uninterrupted_run_exactly(tmp_path):
    dataset = _data()
    model, optimizer = _fresh(0)
    _train(model, optimizer, DataLoader(dataset, batch_size=16, shuffle=True), epochs=4)

    interrupted, optimizer = _fresh(0)
    _train(interrupted, optimizer, DataLoader(dataset, batch_size=16, shuffle=True), epochs=2)
    save_checkpoint(tmp_path / "ckpt.pt", interrupted, optimizer, epoch=2)
    torch.manual_seed(12345)  # the session is lost: everything is rebuilt, the RNG is elsewhere
    resumed, resumed_optimizer = _fresh(99)
    epoch, _ = load_checkpoint(tmp_path / "ckpt.pt", resumed, resumed_optimizer)
    assert epoch == 2
    _train(resumed, resumed_optimizer, DataLoader(dataset, batch_size=16, shuffle=True), epochs=2)

    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


def test_extras_round_trip_and_unsafe_extras_are_refused(tmp_path):
    model, optimizer = _fresh(0)
    save_checkpoint(tmp_path / "c.pt", model, optimizer, 5, history=[0.5, 0.25], best={"acc": 0.9})
    epoch, extra = load_checkpoint(tmp_path / "c.pt", SimpleModel())
    assert epoch == 5 and extra == {"history": [0.5, 0.25], "best": {"acc": 0.9}}
    with pytest.raises(TypeError, match="extra\\['when'\\].*object"):
        save_checkpoint(tmp_path / "d.pt", model, optimizer, 1, when=object())
    assert not (tmp_path / "d.pt").exists()


def test_gpu_checkpoint_loads_on_this_machine_through_map_location():
    """The fixture's storages are tagged cuda:0 (written so on a CPU machine: see make_gpu_checkpoint.py)."""
    with zipfile.ZipFile(FIXTURE) as archive:
        pickled = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    assert b"cuda:0" in pickled and b"'cpu'" not in pickled
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location"):
            torch.load(FIXTURE, weights_only=True)
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epoch, extra = load_checkpoint(FIXTURE, model, optimizer)
    assert epoch == 1 and model.fc.weight.device.type == "cpu"
    assert model.fc.weight.sum().item() == pytest.approx(extra["weight_sum"])
    assert all(s["momentum_buffer"].device.type == "cpu" for s in optimizer.state.values())


def test_a_crash_during_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    model, optimizer = _fresh(0)
    save_checkpoint(path, model, optimizer, epoch=1)
    before = path.read_bytes()

    real_save = torch.save

    def dies_half_way(obj, file, *args, **kwargs):
        file.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt("the session was lost mid-save")

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model, optimizer, epoch=2)
    monkeypatch.setattr(torch, "save", real_save)

    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"], "the temporary file is cleaned up"
    assert load_checkpoint(path, SimpleModel())[0] == 1


def test_a_truncated_file_gives_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(path, SimpleModel())


def test_a_missing_file_names_the_path_and_the_checkpoints_there(tmp_path):
    save_checkpoint(tmp_path / "epoch_1.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(FileNotFoundError, match=r"epoch_2\.pt.*epoch_1\.pt"):
        load_checkpoint(tmp_path / "epoch_2.pt", SimpleModel())


def test_a_checkpoint_of_another_model_names_keys_and_shapes(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "c.pt", CifarNet())
    message = str(info.value)
    assert "different model than CifarNet" in message
    assert "conv1.weight" in message and "fc.weight" in message

    class Wider(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 5)

    with pytest.raises(CheckpointError, match=r"fc.weight: checkpoint \(3, 3\), model \(5, 3\)"):
        load_checkpoint(tmp_path / "c.pt", Wider())


def test_files_that_are_not_checkpoints(tmp_path):
    torch.save(SimpleModel().state_dict(), tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="bare state_dict.*load_state_dict"):
        load_checkpoint(tmp_path / "bare.pt", SimpleModel())
    torch.save(SimpleModel(), tmp_path / "whole.pt")
    with pytest.raises(CheckpointError, match="pickled Python objects"):
        load_checkpoint(tmp_path / "whole.pt", SimpleModel())
    (tmp_path / "notes.pt").write_text("not a checkpoint at all")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "notes.pt", SimpleModel())


def test_optimizer_requested_but_not_saved(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    model = SimpleModel()
    with pytest.raises(CheckpointError, match="without optimizer state"):
        load_checkpoint(tmp_path / "c.pt", model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_data_parallel_checkpoints_load_into_plain_models_and_back(tmp_path):
    wrapped = nn.DataParallel(SimpleModel())  # on a CPU-only machine it simply calls the module
    # With exactly one visible GPU, DataParallel moves the module to cuda:0 as it is built, so a
    # comparison with tensors made here would cross devices: compare on the CPU.
    expected = torch.device("cuda", 0) if torch.cuda.device_count() == 1 else torch.device("cpu")
    assert wrapped.module.fc.weight.device == expected
    save_checkpoint(tmp_path / "dp.pt", wrapped, None, epoch=1)
    plain = SimpleModel()
    load_checkpoint(tmp_path / "dp.pt", plain)
    assert plain.fc.weight.device.type == "cpu"
    assert torch.equal(plain.fc.weight, wrapped.module.fc.weight.cpu())

    # a state_dict saved the old way, with the "module." prefix, inside a checkpoint
    checkpoint = torch.load(tmp_path / "dp.pt", weights_only=True)
    checkpoint["model"] = {f"module.{k}": v for k, v in checkpoint["model"].items()}
    torch.save(checkpoint, tmp_path / "prefixed.pt")
    again = SimpleModel()
    load_checkpoint(tmp_path / "prefixed.pt", again)
    assert torch.equal(again.fc.weight, plain.fc.weight)

    rewrapped = nn.DataParallel(SimpleModel())
    save_checkpoint(tmp_path / "plain.pt", plain, None, epoch=1)
    load_checkpoint(tmp_path / "plain.pt", rewrapped)
    assert torch.equal(rewrapped.module.fc.weight.cpu(), plain.fc.weight)


@requires_cuda
def test_cpu_checkpoint_loads_onto_the_gpu_model(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    model = SimpleModel().cuda()
    load_checkpoint(tmp_path / "c.pt", model)
    assert model.fc.weight.is_cuda


# --- what save_checkpoint accepts, load_checkpoint reads back -----------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _child(script, *args, env=None, **kwargs):
    """Run ``script`` in a new Python that imports these helpers (this worktree's, not an installed copy)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


ACCEPTED = {
    "numpy float": (np.float64(0.25), 0.25),
    "numpy float32": (np.float32(1.5), 1.5),
    "numpy int": (np.int64(7), 7),
    "numpy bool": (np.bool_(True), True),
    "history of numpy means": ([np.mean([1.0, 2.0]), np.float64(3)], [1.5, 3.0]),
    "nested": ({"a": (1, [2.5, None]), 3: "x"}, {"a": (1, [2.5, None]), 3: "x"}),
    "ordered dict": (OrderedDict(b=1, a=2), OrderedDict(b=1, a=2)),
    "torch types": ((torch.float16, torch.device("cpu"), torch.Size([2, 3])),) * 2,
    "tensor in a dict": ({"w": torch.arange(3)}, {"w": torch.arange(3)}),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_whatever_is_accepted_loads_back(tmp_path, name):
    value, expected = ACCEPTED[name]
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1, value=value)
    _, extra = load_checkpoint(tmp_path / "c.pt", SimpleModel())
    loaded = extra["value"]
    if isinstance(expected, dict) and any(isinstance(v, torch.Tensor) for v in expected.values()):
        assert all(torch.equal(loaded[k], v) for k, v in expected.items())
    else:
        assert loaded == expected and type(loaded) is type(expected)


class Color(enum.Enum):
    RED = 1


Point = namedtuple("Point", "x y")


def _itself():
    loop = [1]
    loop.append(loop)
    return loop


REFUSED = {
    "namedtuple": (Point(1, 2), r"Point: store tuple\(value\), or value._asdict\(\)"),
    "defaultdict": (defaultdict(list, a=[1]), r"defaultdict: store dict\(value\)"),
    "Counter": (Counter("aab"), r"Counter: store dict\(value\)"),
    "set": ({1, 2}, r"set: store sorted\(value\)"),
    "frozenset": (frozenset({1}), "frozenset"),
    "numpy array": (np.zeros(3), r"ndarray: store torch.from_numpy\(value\)"),
    "enum": (Color.RED, "store value.name or value.value"),
    "path": (Path("runs/a"), r"store str\(value\)"),
    "module": (nn.Linear(2, 2), r"store value.state_dict\(\)"),
    "lambda": (lambda: 1, "function"),
    "object": (object(), "object"),
    "complex": (1 + 2j, "complex"),
    "itself": (_itself(), "contains itself"),
    "a key": ({Point(1, 2): 3}, r"a key of extra\['value'\]"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_would_not_load_is_refused_at_the_save(tmp_path, name):
    value, words = REFUSED[name]
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    before = (tmp_path / "c.pt").read_bytes()
    with pytest.raises(TypeError, match=r"save_checkpoint cannot store .*" + words):
        save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=2, value=value)
    assert (tmp_path / "c.pt").read_bytes() == before and os.listdir(tmp_path) == ["c.pt"]


def test_numpy_values_in_the_optimizer_state_are_stored_as_numbers(tmp_path):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.param_groups[0]["lr"] = np.float64(0.05)  # as a hand-written schedule might set it
    save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    again = torch.optim.SGD(model.parameters(), lr=0.1)
    load_checkpoint(tmp_path / "c.pt", model, again)
    assert again.param_groups[0]["lr"] == 0.05


def test_a_model_whose_state_would_not_load_is_refused(tmp_path):
    class WithExtraState(SimpleModel):
        def get_extra_state(self):
            return {"when": object()}

        def set_extra_state(self, state):
            pass

    with pytest.raises(TypeError, match=r"the model's state_dict\(\)\['_extra_state'\]\['when'\]"):
        save_checkpoint(tmp_path / "c.pt", WithExtraState(), None, epoch=1)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"epoch": 2.5}, TypeError, "epoch"),
        ({"epoch": -1}, ValueError, "epoch .*0 or more"),
        ({"epoch": "3"}, TypeError, "epoch"),
        ({"model": SimpleModel}, TypeError, "model is the class SimpleModel"),
        ({"model": {"fc.weight": torch.ones(1)}}, TypeError, "model must be an nn.Module"),
        ({"optimizer": torch.optim.SGD}, TypeError, "optimizer is the class SGD"),
        ({"optimizer": "sgd"}, TypeError, "optimizer must be a torch.optim optimizer or None"),
        ({"path": 3}, TypeError, "path must be a file path"),
        ({"path": ""}, ValueError, "path is empty"),
        ({"rng_state": [1, 2]}, TypeError, r"rng_state\[0\] must be"),
        ({"rng_state": []}, ValueError, "empty list"),
    ],
)
def test_save_checkpoint_names_a_wrong_argument(tmp_path, kwargs, error, words):
    arguments = {"path": tmp_path / "c.pt", "model": SimpleModel(), "optimizer": None, "epoch": 1, **kwargs}
    with pytest.raises(error, match=words):
        save_checkpoint(**arguments)


# --- where and how the file is written ----------------------------------------------------------


@pytest.mark.parametrize("as_text", [True, False])
def test_a_folder_as_the_path_is_refused(tmp_path, as_text):
    (tmp_path / "runs").mkdir()
    path = f"{tmp_path}/runs/" if as_text else tmp_path / "runs"
    with pytest.raises(IsADirectoryError, match="is a folder; give a file name in it"):
        save_checkpoint(path, SimpleModel(), None, epoch=1)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        save_checkpoint(f"{tmp_path}/new_folder/", SimpleModel(), None, epoch=1)
    assert os.listdir(tmp_path / "runs") == []


def test_tilde_means_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    written = save_checkpoint("~/ckpt/c.pt", SimpleModel(), None, epoch=3)
    assert written == tmp_path / "home" / "ckpt" / "c.pt" and written.is_file()
    assert not (tmp_path / "~").exists()
    assert load_checkpoint("~/ckpt/c.pt", SimpleModel())[0] == 3


def test_a_symbolic_link_is_followed_not_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    save_checkpoint(tmp_path / "runs" / "epoch_1.pt", SimpleModel(), None, epoch=1)
    (tmp_path / "latest.pt").symlink_to(Path("runs") / "epoch_1.pt")
    save_checkpoint(tmp_path / "latest.pt", SimpleModel(), None, epoch=2)
    assert (tmp_path / "latest.pt").is_symlink()
    assert load_checkpoint(tmp_path / "runs" / "epoch_1.pt", SimpleModel())[0] == 2
    assert sorted(os.listdir(tmp_path / "runs")) == ["epoch_1.pt"]
    (tmp_path / "dangling.pt").symlink_to(tmp_path / "runs" / "epoch_9.pt")
    save_checkpoint(tmp_path / "dangling.pt", SimpleModel(), None, epoch=9)
    assert load_checkpoint(tmp_path / "runs" / "epoch_9.pt", SimpleModel())[0] == 9


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_the_file_gets_the_mode_the_umask_gives_as_torch_save_does(tmp_path, umask):
    previous = os.umask(umask)
    try:
        torch.save({"a": 1}, tmp_path / "plain.pt")
        save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    finally:
        os.umask(previous)
    mode = stat.S_IMODE(os.stat(tmp_path / "c.pt").st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE(os.stat(tmp_path / "plain.pt").st_mode)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_a_replaced_checkpoint_keeps_its_mode(tmp_path, mode):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    os.chmod(tmp_path / "c.pt", mode)
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=2)
    assert stat.S_IMODE(os.stat(tmp_path / "c.pt").st_mode) == mode


def test_concurrent_saves_from_threads_leave_one_whole_checkpoint(tmp_path):
    path = tmp_path / "c.pt"
    errors = []

    def save(epoch):
        try:
            for _ in range(5):
                save_checkpoint(path, SimpleModel(), None, epoch=epoch, big=torch.zeros(100_000))
        except BaseException as error:  # pragma: no cover - the assertion below shows it
            errors.append(error)

    threads = [threading.Thread(target=save, args=(epoch,)) for epoch in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert load_checkpoint(path, SimpleModel())[0] in (1, 2, 3)
    assert os.listdir(tmp_path) == ["c.pt"]


_SAVE_BIG = """
import sys, torch
from helpers.checkpoint import save_checkpoint
from helpers.models import SimpleModel
print("saving", flush=True)
save_checkpoint(sys.argv[1], SimpleModel(), None, epoch=2, big=torch.ones(100_000_000))  # 400 MB
print("saved", flush=True)
"""


def _interrupt_a_save(path, signal_number):
    """Start a 400 MB save of ``path`` in another process; send it ``signal_number`` mid-write."""
    child = _child(_SAVE_BIG, path)
    deadline = time.monotonic() + 60
    temporary = None
    while time.monotonic() < deadline and child.poll() is None:
        found = [
            p
            for p in path.parent.iterdir()
            if p.name.startswith(f".{path.name}.") and p.name.endswith(".tmp")
        ]
        if found and found[0].stat().st_size > 1_000_000:
            temporary = found[0]
            break
        time.sleep(0.005)
    child.send_signal(signal_number)
    output = child.communicate(timeout=60)[0]
    if temporary is None or "saved" in output:
        pytest.skip(f"the save ended before the signal could interrupt it: {output[-300:]}")
    return temporary, output


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_a_hard_kill_mid_save_keeps_the_previous_checkpoint_and_its_leftover_is_removed(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    before = path.read_bytes()
    leftover, _ = _interrupt_a_save(path, signal.SIGKILL)

    assert path.read_bytes() == before and load_checkpoint(path, SimpleModel())[0] == 1
    assert leftover.exists(), "a killed process cleans nothing up: its temporary file stays"
    with pytest.raises(FileNotFoundError) as info:
        load_checkpoint(tmp_path / "other.pt", SimpleModel())
    assert "ckpt.pt" in str(info.value) and ".tmp" not in str(info.value), "the leftover is not listed"

    save_checkpoint(path, SimpleModel(), None, epoch=3)  # the next save of that file removes it
    assert os.listdir(tmp_path) == ["ckpt.pt"] and load_checkpoint(path, SimpleModel())[0] == 3


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_a_first_save_killed_says_so_when_loaded(tmp_path):
    _interrupt_a_save(tmp_path / "first.pt", signal.SIGKILL)
    with pytest.raises(FileNotFoundError, match="killed before it finished"):
        load_checkpoint(tmp_path / "first.pt", SimpleModel())


@pytest.mark.skipif(os.name != "posix", reason="SIGINT from outside is POSIX")
def test_ctrl_c_mid_save_keeps_the_previous_checkpoint_and_cleans_up(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    _, output = _interrupt_a_save(path, signal.SIGINT)
    assert "KeyboardInterrupt" in output
    assert os.listdir(tmp_path) == ["ckpt.pt"] and load_checkpoint(path, SimpleModel())[0] == 1


def test_a_save_that_stays_alive_keeps_its_temporary_file(tmp_path):
    """Another process's save in progress is never taken for a leftover (its process is alive)."""
    path = tmp_path / "c.pt"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"
        alive = tmp_path / f".c.pt.{host}-{sleeper.pid}.0123abcd.tmp"
        alive.write_bytes(b"PK\x03\x04 a save in progress")
        other_host = tmp_path / ".c.pt.elsewhere-1.0123abcd.tmp"
        other_host.write_bytes(b"PK\x03\x04 a save on another machine")
        save_checkpoint(path, SimpleModel(), None, epoch=1)
        assert alive.exists() and other_host.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    save_checkpoint(path, SimpleModel(), None, epoch=2)
    assert not alive.exists() and other_host.exists()


_FILL_UP = """
import resource, signal, sys, torch
from helpers.checkpoint import save_checkpoint
from helpers.models import SimpleModel
with_previous, without = sys.argv[1:]
save_checkpoint(with_previous, SimpleModel(), None, epoch=1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
for path in (with_previous, without):
    try:
        save_checkpoint(path, SimpleModel(), None, epoch=2, big=torch.zeros(1_000_000))
    except OSError as error:
        print("OSError:", " ".join(str(error).split()))
    else:
        print("saved")
"""


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="RLIMIT_FSIZE as on Linux")
def test_a_write_that_fails_for_space_says_so_and_keeps_the_previous(tmp_path):
    previous, none = tmp_path / "previous", tmp_path / "none"
    for folder in (previous, none):
        folder.mkdir()
    output = _child(_FILL_UP, previous / "ckpt.pt", none / "ckpt.pt").communicate(timeout=120)[0]
    lines = [line for line in output.splitlines() if line.startswith(("OSError:", "saved"))]
    assert [line[:40] for line in lines] == ["OSError: save_checkpoint could not write"] * 2, output
    leads = [line.split("(The error:")[0] for line in lines]
    assert not any("enforce fail" in lead for lead in leads), "the message leads with what happened"
    assert "the previous checkpoint is intact" in lines[0] and "nothing was written there" in lines[1]
    assert load_checkpoint(previous / "ckpt.pt", SimpleModel())[0] == 1
    assert os.listdir(previous) == ["ckpt.pt"]
    assert os.listdir(none) == []


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MB file system (tmpfs), where the machine lets this test mount one (Linux, as root)."""
    mount = shutil.which("mount")
    if sys.platform != "linux" or os.geteuid() != 0 or mount is None:
        pytest.skip("mounting a small tmpfs needs Linux and root")
    folder = tmp_path / "disk"
    folder.mkdir()
    result = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_really_full_disk_says_so_and_keeps_the_previous(small_disk):
    path = small_disk / "ckpt.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    with pytest.raises(
        OSError, match=r"could not write .*disk (is )?full.*the previous checkpoint is intact"
    ):
        save_checkpoint(path, SimpleModel(), None, epoch=2, big=torch.zeros(1_000_000))
    assert load_checkpoint(path, SimpleModel())[0] == 1 and os.listdir(small_disk) == ["ckpt.pt"]


def test_a_read_only_folder_says_so_and_keeps_the_previous(small_disk, tmp_path):
    path = small_disk / "ckpt.pt"
    save_checkpoint(path, SimpleModel(), None, epoch=1)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    with pytest.raises(OSError, match=r"cannot create a file in .*\(Read-only file system\)"):
        save_checkpoint(path, SimpleModel(), None, epoch=2)
    assert load_checkpoint(path, SimpleModel())[0] == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_folder_without_write_permission_says_so(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(PermissionError, match="cannot create a file in"):
            save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=2)
    finally:
        os.chmod(tmp_path, 0o755)
    assert load_checkpoint(tmp_path / "c.pt", SimpleModel())[0] == 1


# --- files that are not checkpoints: each named for what it is -----------------------------------


def _zip_of(**files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _real_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "real.pt", SimpleModel(), None, epoch=1, big=torch.zeros(10_000))
    return (tmp_path / "real.pt").read_bytes()


NOT_CHECKPOINTS = {
    "empty": (lambda real: b"", "is empty"),
    "random bytes": (lambda real: bytes(range(7, 256)) * 4, "is not a PyTorch file: it starts with"),
    "LFS pointer": (
        lambda real: b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 251001\n",
        "Git LFS pointer.*git lfs pull",
    ),
    "HTML page": (lambda real: b"<!DOCTYPE html>\n<html><body>Sign in</body></html>", "web page"),
    "HTML without doctype": (lambda real: b"\n  <html lang='en'><head></head></html>", "web page"),
    "zip of other files": (
        lambda real: _zip_of(**{"notes.txt": "hi", "b.csv": "1,2"}),
        "zip archive, but not",
    ),
    "first 500 bytes": (lambda real: real[:500], "truncated or corrupt"),
    "last bytes cut": (lambda real: real[:-100], "truncated or corrupt"),
    "half": (lambda real: real[: len(real) // 2], "truncated or corrupt"),
    "a pickle": (lambda real: pickle.dumps({"weights": [1, 2]}), "Python pickle"),
    "a NumPy file": (lambda real: b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}", r"np.load"),
    "text": (lambda real: b"epoch,loss\n1,0.5\n", "text file.*epoch,loss"),
    "gzip": (lambda real: b"\x1f\x8b\x08\x00" + bytes(20), "gzip"),
}


@pytest.mark.parametrize("name", sorted(NOT_CHECKPOINTS))
def test_files_that_are_not_checkpoints_are_named_for_what_they_are(tmp_path, name):
    make, words = NOT_CHECKPOINTS[name]
    path = tmp_path / "model.pt"
    path.write_bytes(make(_real_checkpoint(tmp_path)))
    model = SimpleModel()
    before = model.fc.weight.detach().clone()
    with pytest.raises(CheckpointError, match=words) as info:
        load_checkpoint(path, model)
    assert "weights_only=False" not in str(info.value), "no unsafe advice for a file of unknown origin"
    assert str(path) in str(info.value) and torch.equal(model.fc.weight, before)


def test_a_folder_in_place_of_the_file_lists_the_checkpoints_in_it(tmp_path):
    save_checkpoint(tmp_path / "runs" / "epoch_1.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(
        CheckpointError, match=r"is a folder, not a checkpoint file. Checkpoints in it: epoch_1.pt"
    ):
        load_checkpoint(tmp_path / "runs", SimpleModel())


def test_a_whole_model_pickled_is_refused_naming_its_class(tmp_path):
    torch.save(SimpleModel(), tmp_path / "whole.pt")
    with pytest.raises(
        CheckpointError, match=r"pickled Python objects \(helpers.models.SimpleModel\).*trust"
    ):
        load_checkpoint(tmp_path / "whole.pt", SimpleModel())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_says_permission(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    os.chmod(tmp_path / "c.pt", 0)
    with pytest.raises(PermissionError, match="permission denied"):
        load_checkpoint(tmp_path / "c.pt", SimpleModel())


@pytest.mark.parametrize(
    ("map_location", "error", "words"),
    [
        ("cuda:7", ValueError, "load_checkpoint: map_location 'cuda:7'.*This machine has"),
        ("gpu", ValueError, "map_location 'gpu'.*called 'cuda'"),
        ("mps:2", ValueError, "map_location"),
        (3, TypeError, "map_location must be"),
    ],
)
def test_a_map_location_the_machine_lacks_is_not_called_corrupt(tmp_path, map_location, error, words):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    with pytest.raises(error, match=words) as info:
        load_checkpoint(tmp_path / "c.pt", SimpleModel(), map_location=map_location)
    assert "corrupt" not in str(info.value)


# --- the optimizer: the state of another optimizer is refused before anything changes -----------


def _saved_with(tmp_path, make, **kwargs):
    model = SimpleModel()
    optimizer = make(model.parameters(), lr=0.1, **kwargs)
    _train(model, optimizer, DataLoader(_data(), batch_size=16), epochs=1)
    save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1)
    return tmp_path / "c.pt"


@pytest.mark.parametrize(
    ("saved", "given"),
    [
        ((torch.optim.SGD, {"momentum": 0.9}), torch.optim.Adam),
        ((torch.optim.Adam, {}), torch.optim.SGD),
        ((torch.optim.Adam, {}), torch.optim.AdamW),
        ((torch.optim.RMSprop, {}), torch.optim.Adagrad),
    ],
)
@pytest.mark.parametrize("recorded", [True, False])
def test_the_state_of_another_kind_of_optimizer_is_refused(tmp_path, saved, given, recorded):
    path = _saved_with(tmp_path, saved[0], **saved[1])
    if not recorded:  # a checkpoint written before the optimizer's class was recorded
        payload = torch.load(path, weights_only=True)
        del payload["optimizer_class"]
        torch.save(payload, path)
        if {k for k in torch.optim.Adam([torch.zeros(1)]).defaults} <= set(
            torch.optim.AdamW([torch.zeros(1)]).defaults
        ) and given is torch.optim.AdamW:
            pytest.skip("Adam and AdamW have the same settings: only the recorded class tells them apart")
    model = SimpleModel()
    optimizer = given(model.parameters(), lr=0.1)
    weights, state = model.fc.weight.detach().clone(), optimizer.state_dict()
    with pytest.raises(CheckpointError, match=rf"{saved[0].__name__}|another kind of optimizer"):
        load_checkpoint(path, model, optimizer)
    assert torch.equal(model.fc.weight, weights) and optimizer.state_dict() == state, "nothing changed"


def test_an_optimizer_of_other_parameters_is_refused(tmp_path):
    path = _saved_with(tmp_path, torch.optim.Adam)
    model = SimpleModel()
    with pytest.raises(CheckpointError, match="holds none of the model's parameters"):
        load_checkpoint(path, model, torch.optim.Adam(SimpleModel().parameters()))
    with pytest.raises(CheckpointError, match=r"groups of sizes \[2\]; the optimizer given has \[1, 1\]"):
        load_checkpoint(
            path, model, torch.optim.Adam([{"params": [model.fc.weight]}, {"params": [model.fc.bias]}])
        )
    with pytest.raises(
        CheckpointError, match=r"'exp_avg' for parameter 0 has shape \(3, 3\), the parameter \(3,\)"
    ):
        load_checkpoint(path, model, torch.optim.Adam([model.fc.bias, model.fc.weight]))


def test_the_repository_fixture_written_before_the_class_was_recorded_still_loads():
    model = SimpleModel()
    load_checkpoint(FIXTURE, model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    with pytest.raises(CheckpointError, match="another kind of optimizer than Adam"):
        load_checkpoint(FIXTURE, model, torch.optim.Adam(model.parameters()))


# --- the random state: said when it cannot be restored; each DDP rank's own ----------------------


def _with_cuda_states(tmp_path, count):
    """A checkpoint as a machine with ``count`` GPUs writes it (its CUDA generator states are 16 bytes)."""
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    payload = torch.load(tmp_path / "c.pt", weights_only=True)
    payload["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8) for _ in range(count)]
    torch.save(payload, tmp_path / "c.pt")
    return tmp_path / "c.pt"


@pytest.mark.parametrize("saved_gpus", [1, 2, 8])
def test_cuda_random_state_that_cannot_be_restored_is_reported(tmp_path, saved_gpus):
    here = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if here == saved_gpus:
        pytest.skip("this machine has as many GPUs as the checkpoint")
    path = _with_cuda_states(tmp_path, saved_gpus)
    with pytest.warns(
        UserWarning, match=rf"CUDA random state of {saved_gpus} GPU\(s\), and this machine has {here}"
    ):
        load_checkpoint(path, SimpleModel())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_checkpoint(path, SimpleModel(), restore_rng=False)


def test_a_checkpoint_without_cuda_state_restores_quietly(tmp_path):
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_checkpoint(tmp_path / "c.pt", SimpleModel())


def test_the_mps_random_state_is_read_only_where_mps_is_available(monkeypatch):
    state = current_rng_state()
    assert ("mps" in state) == torch.backends.mps.is_available()
    if not torch.backends.mps.is_built():  # say MPS is there: the state is read, and without MPS it raises
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        with pytest.raises(RuntimeError, match="MPS"):
            current_rng_state()


def test_a_checkpoint_without_an_mps_state_loads_quietly(tmp_path):
    # as every checkpoint written before the MPS state was saved, or on a machine without MPS
    torch.manual_seed(3)
    state = {key: value for key, value in current_rng_state().items() if key != "mps"}
    expected = torch.rand(4)
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1, rng_state=state)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_checkpoint(FIXTURE, SimpleModel())  # the repository's fixture, written before too
        torch.manual_seed(99)
        load_checkpoint(tmp_path / "c.pt", SimpleModel())
    assert torch.equal(torch.rand(4), expected)  # the CPU stream is restored all the same


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_an_mps_random_state_is_skipped_and_reported_where_there_is_no_mps(tmp_path):
    torch.manual_seed(5)
    expected = torch.rand(4)
    torch.manual_seed(5)
    state = current_rng_state() | {"mps": torch.zeros(44, dtype=torch.uint8)}  # as a Mac writes it
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1, rng_state=state)
    torch.manual_seed(99)
    with pytest.warns(
        UserWarning, match=r"random state of an Apple GPU \(MPS\), and this machine has no MPS"
    ):
        load_checkpoint(tmp_path / "c.pt", SimpleModel())
    assert torch.equal(torch.rand(4), expected)  # everything else is restored
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_checkpoint(tmp_path / "c.pt", SimpleModel(), restore_rng=False)


@requires_mps
def test_on_an_apple_gpu_the_mps_random_stream_resumes(tmp_path):
    model = SimpleModel().to("mps")
    torch.manual_seed(7)
    save_checkpoint(tmp_path / "c.pt", model, None, epoch=1)
    expected = torch.rand(4, device="mps").cpu()
    torch.manual_seed(12345)
    load_checkpoint(tmp_path / "c.pt", model)  # maps the state to mps, as the model lives there
    assert torch.equal(torch.rand(4, device="mps").cpu(), expected)


def test_per_rank_random_states_restore_each_ranks_own(tmp_path):
    states = []
    for rank in range(3):
        torch.manual_seed(100 + rank)
        states.append(current_rng_state())
    expected = []
    for rank in range(3):
        torch.manual_seed(100 + rank)
        expected.append(torch.rand(4))
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1, rng_state=states)
    for rank in (2, 0, 1):
        torch.manual_seed(999)
        load_checkpoint(tmp_path / "c.pt", SimpleModel(), rank=rank)
        assert torch.equal(torch.rand(4), expected[rank]), rank


_RANK = """
import os, sys, torch, torch.distributed as dist
from pathlib import Path
from helpers.checkpoint import gather_rng_states, load_checkpoint, save_checkpoint
from helpers.models import SimpleModel
rank, folder = int(sys.argv[1]), Path(sys.argv[2])
dist.init_process_group("gloo", init_method=f"file://{folder / 'store'}", rank=rank, world_size=2)
torch.manual_seed(100 + rank)  # the ranks' streams differ, as with per-rank augmentation
states = gather_rng_states()  # every rank calls it
expected = torch.rand(4)
if rank == 0:
    save_checkpoint(folder / "ddp.pt", SimpleModel(), None, epoch=1, rng_state=states)
dist.barrier()
torch.manual_seed(12345)  # a new session
load_checkpoint(folder / "ddp.pt", SimpleModel())  # each rank takes its own state
print(f"rank {rank}:", torch.equal(torch.rand(4), expected), flush=True)
dist.destroy_process_group()
"""


def test_under_ddp_each_rank_saves_and_restores_its_own_random_state(tmp_path):
    ranks = [_child(_RANK, rank, tmp_path) for rank in range(2)]
    outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    assert "rank 0: True" in outputs[0] and "rank 1: True" in outputs[1], outputs
    payload = torch.load(tmp_path / "ddp.pt", weights_only=True)
    assert len(payload["rng_per_rank"]) == 2


def test_a_rank_the_checkpoint_has_no_state_of_is_reported(tmp_path):
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "c.pt", SimpleModel(), None, epoch=1, rng_state=[current_rng_state()] * 2)
    with pytest.warns(UserWarning, match="ranks 0 to 1, none of rank 2"):
        load_checkpoint(tmp_path / "c.pt", SimpleModel(), rank=2)
    with pytest.raises(ValueError, match="rank"):
        load_checkpoint(tmp_path / "c.pt", SimpleModel(), rank=-1)
