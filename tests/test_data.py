"""helpers.data: CIFAR-10 or the stand-in, the variables that choose it, and loader workers;
helpers.paths: where the course is."""

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision import transforms

from helpers import data
from helpers.data import data_dir, load_cifar10
from helpers.paths import course_root
from helpers.standin import SyntheticCIFAR10

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
ROOT = Path(__file__).resolve().parent.parent


def test_the_stand_in_is_used_when_asked_for_and_says_so(monkeypatch, capsys):
    dataset = load_cifar10(train=True, size=20, source="synthetic")
    assert isinstance(dataset, SyntheticCIFAR10) and len(dataset) == 20 and dataset.train
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert "synthetic" in line and "COURSE_DATA=synthetic" in line
    monkeypatch.setenv("COURSE_DATA", " synthetic ")
    assert not load_cifar10(train=np.bool_(False), size=5).train


def test_offline_auto_falls_back_and_cifar10_is_a_clear_error(monkeypatch, tmp_path, capsys):
    def no_network(*args, **kwargs):
        raise OSError("network unreachable (simulated by the test)")

    monkeypatch.setattr("torchvision.datasets.utils._urlretrieve", no_network)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert isinstance(load_cifar10(train=True, size=30), SyntheticCIFAR10)
    assert str(tmp_path) in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py.*COURSE_DATA=auto"):
        load_cifar10(train=True, source="cifar10")


def test_real_cifar10_on_disk_is_used(tmp_path, monkeypatch):
    """A tiny folder in the real CIFAR-10 format, loaded by torchvision's own code."""
    from torchvision.datasets import CIFAR10

    folder = tmp_path / CIFAR10.base_folder
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, _ in CIFAR10.train_list + CIFAR10.test_list:
        batch = {"data": rng.integers(0, 256, (5, 3072), dtype=np.uint8), "labels": list(range(5))}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / CIFAR10.meta["filename"]).write_bytes(pickle.dumps({"label_names": ["a"] * 10}))
    monkeypatch.setattr("torchvision.datasets.cifar.check_integrity", lambda *args, **kwargs: True)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    dataset = load_cifar10(train=True, size=7, source="cifar10")
    assert isinstance(dataset, CIFAR10) and len(dataset) == 7 and len(dataset.targets) == 7


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"train": "test"}, TypeError, "train .*True or False"),
        ({"train": None}, TypeError, "train .*True or False"),
        ({"size": 0}, ValueError, "size"),
        ({"size": -5}, ValueError, "size"),
        ({"size": 1e4}, TypeError, "size=10_000"),
        ({"transform": "to_tensor"}, TypeError, "transform"),
        ({"transform": transforms.ToTensor}, TypeError, r"ToTensor\(\)"),
        ({"source": "imagenet"}, ValueError, "'imagenet'.*'synthetic'"),
        ({"source": "SYNTHETIC"}, ValueError, "'SYNTHETIC'.*'synthetic'"),
        ({"size": 50_001}, ValueError, "size=50_001.*size=50_000"),
        ({"train": False, "size": 10_001}, ValueError, "size=10_001.*size=10_000"),
    ],
)
def test_load_cifar10_names_the_wrong_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        load_cifar10(**{"train": True, "source": "synthetic", "size": 5, **kwargs})


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("SYNTHETIC", "COURSE_DATA='SYNTHETIC'.*lower case: COURSE_DATA=synthetic"),
        ("cifar", "COURSE_DATA='cifar'.*auto, cifar10, synthetic"),
        ("1", "COURSE_DATA='1'.*auto, cifar10, synthetic"),
    ],
)
def test_a_course_data_it_does_not_know_is_named(monkeypatch, value, words):
    monkeypatch.setenv("COURSE_DATA", value)
    with pytest.raises(ValueError, match=words):
        load_cifar10(train=True, size=5)


def test_an_empty_course_data_is_the_default(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DATA", "")
    monkeypatch.setattr(data, "_cifar10", lambda *args: "cifar10")
    assert load_cifar10(train=True, size=5) == "cifar10"  # auto: CIFAR-10 first


def test_the_data_folder(monkeypatch, tmp_path):
    assert data_dir() == ROOT / "data"  # the checkout's data/, from any current folder
    monkeypatch.setenv("COURSE_DATA_DIR", "  ")
    assert data_dir() == ROOT / "data"
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "new" / "folder"))
    assert data_dir() == tmp_path / "new" / "folder"  # made when CIFAR-10 is downloaded there
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COURSE_DATA_DIR", "~/cifar")
    assert data_dir() == tmp_path / "cifar"


@pytest.mark.parametrize("where", ["notes.txt", "notes.txt/cifar"])
def test_a_data_folder_that_is_a_file_is_named(monkeypatch, tmp_path, where):
    (tmp_path / "notes.txt").write_text("notes")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / where))
    with pytest.raises(NotADirectoryError, match="COURSE_DATA_DIR=.*notes.txt is a file"):
        load_cifar10(train=True, size=5, source="auto")


def test_the_course_root_is_the_checkout_or_the_one_colab_fetched(monkeypatch, tmp_path):
    assert course_root() == ROOT
    checkout = tmp_path / "gpu-course"
    (checkout / "notebooks").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setenv("GPU_COURSE_CHECKOUT", str(checkout))
    assert course_root() == checkout
    monkeypatch.setenv("GPU_COURSE_CHECKOUT", "")
    assert course_root() == ROOT


@pytest.mark.parametrize("where", ["elsewhere", "notes.txt"])
def test_a_checkout_variable_that_names_no_course_is_refused(monkeypatch, tmp_path, where):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "notes.txt").write_text("notes")
    monkeypatch.setenv("GPU_COURSE_CHECKOUT", str(tmp_path / where))
    with pytest.raises(FileNotFoundError, match=f"GPU_COURSE_CHECKOUT=.*{where}.*unset it"):
        course_root()


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "a stand-in GPU")


@pytest.mark.parametrize(
    ("device", "cores", "processes", "workers"),
    [
        ("cpu", 16, 1, 0),
        ("cuda", 1, 1, 1),
        ("cuda", 3, 1, 2),
        ("cuda:0", 128, 1, 4),
        ("cuda", 16, 4, 3),
        ("cuda", 16, 8, 1),
        ("cuda", 4, 8, 1),
    ],
)
def test_loader_workers(two_gpus, monkeypatch, device, cores, processes, workers):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert data.loader_workers(device, processes=processes) == workers


@pytest.mark.parametrize(
    ("device", "processes", "error"),
    [
        (4, 1, TypeError),
        ("gpu", 1, ValueError),
        ("cpu", 0, ValueError),
        ("cpu", -1, ValueError),
        ("cpu", "2", TypeError),
        pytest.param("cuda", 1, ValueError, marks=NO_CUDA),
    ],
)
def test_loader_workers_names_the_wrong_argument(device, processes, error):
    with pytest.raises(error, match="loader_workers"):
        data.loader_workers(device, processes=processes)
