import os
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from helpers.models import CifarNet, SimpleModel

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_checkpoint.pt"


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
    # With exactly one visible GPU, DataParallel moves the module to cuda:0 as it is built (the H100
    # run of 2026-11-22 failed here by comparing across devices): compare on the CPU.
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
