import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torchvision import transforms

from helpers import data
from helpers.data import SyntheticCIFAR10, load_cifar10, make_synthetic_cifar10, training_budget

# The calibrated stand-in: labels exactly, pixels by image mean and spread (CPUs may round a pixel apart).
FINGERPRINT_LABELS = "f0299de65f6a03903a590d46536ba154599a001ec92aac3b46caa941642490d2"
FINGERPRINT_MEANS = [75.51, 107.52, 161.54, 89.58, 180.7, 120.45, 119.75, 106.54]
FINGERPRINT_STDS = [41.63, 52.98, 55.34, 26.05, 33.13, 40.11, 54.09, 38.71]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
BUDGET, STAND_IN = data.Budget(100, 50, 1, "a test", "cpu"), SyntheticCIFAR10(size=1)
SIZES = {"cpu_train_size": 100, "cpu_test_size": 50, "quick_train_size": 20, "quick_test_size": 10}


def test_the_stand_in_is_the_calibrated_one():
    images, labels = make_synthetic_cifar10(1000, train=False)
    assert hashlib.sha256(bytes(labels)).hexdigest() == FINGERPRINT_LABELS
    np.testing.assert_allclose(images[:8].mean((1, 2, 3)), FINGERPRINT_MEANS, atol=0.05)
    np.testing.assert_allclose(images[:8].std((1, 2, 3)), FINGERPRINT_STDS, atol=0.05)


def test_the_recorded_calibration_is_of_this_stand_in_and_meets_its_targets():
    result = json.loads(
        (Path(__file__).parent.parent / "results" / "data-calibration.json").read_text()
    )
    images, labels = make_synthetic_cifar10(1_000, train=True)
    assert labels[:20] == result["data"]["fingerprint"]["first_labels"]
    assert np.allclose(
        images.mean((0, 1, 2)), result["data"]["fingerprint"]["mean_pixel"], atol=0.05
    )
    assert all(target["met"] for target in result["targets"].values())


def test_the_stand_in_is_deterministic_prefix_stable_and_cifar10_shaped():
    a, labels_a = make_synthetic_cifar10(1500, seed=3)
    b, labels_b = make_synthetic_cifar10(700, seed=3)
    assert a.shape == (1500, 32, 32, 3) and a.dtype == np.uint8 and set(labels_a) == set(range(10))
    assert np.array_equal(a[:700], b) and labels_a[:700] == labels_b
    test, _ = make_synthetic_cifar10(100, train=False)
    other, _ = make_synthetic_cifar10(100, seed=1)
    assert not np.array_equal(a[:100], test) and not np.array_equal(a[:100], other)
    assert (
        make_synthetic_cifar10(0)[0].shape == (0, 32, 32, 3) and make_synthetic_cifar10(0)[1] == []
    )
    with pytest.raises(TypeError, match="n=1_000"):
        make_synthetic_cifar10(1e3)


def test_the_stand_in_dataset_works_like_torchvision_cifar10():
    dataset = SyntheticCIFAR10(False, transforms.ToTensor(), size=10)
    image, label = dataset[3]
    assert (
        image.shape == (3, 32, 32)
        and 0 <= image.min() <= image.max() <= 1
        and label == dataset.targets[3]
    )
    assert (
        dataset.classes == list(data.CIFAR10_CLASSES) and len(dataset) == 10 and not dataset.train
    )
    images, labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64
    assert {frozenset(p) for p in dataset.pairs} >= {
        frozenset({"cat", "dog"}),
        frozenset({"car", "truck"}),
    }
    copy = pickle.loads(pickle.dumps(dataset))  # as DataLoader workers get it when spawned
    assert torch.equal(copy[3][0], image)


def test_the_stand_in_is_used_when_asked_for_and_says_so(monkeypatch, capsys):
    dataset = load_cifar10(train=True, size=20, source="synthetic")
    assert isinstance(dataset, SyntheticCIFAR10) and len(dataset) == 20 and dataset.train
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert "synthetic" in line and "COURSE_DATA=synthetic" in line
    monkeypatch.setenv("COURSE_DATA", "synthetic")
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

    (folder := tmp_path / CIFAR10.base_folder).mkdir()
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
    [({"train": "test"}, TypeError, "train .*True or False")]
    + [({"train": None}, TypeError, "train .*True or False"), ({"size": 0}, ValueError, "size")]
    + [
        ({"size": 1e4}, TypeError, "size=10_000"),
        ({"transform": "to_tensor"}, TypeError, "transform"),
    ]
    + [({"transform": transforms.ToTensor}, TypeError, r"ToTensor\(\)")]
    + [({"source": "imagenet"}, ValueError, "'imagenet'.*'synthetic'")],
)
def test_load_cifar10_names_the_wrong_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        load_cifar10(**{"train": True, "source": "synthetic", "size": 5, **kwargs})


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), (" 1 ", True), ("0", False), ("", False)]
)
def test_quick_mode(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_QUICK", value)
    assert data.quick_mode() is expected
    monkeypatch.setenv("COURSE_QUICK", "true")
    with pytest.raises(ValueError, match="COURSE_QUICK='true'.* 1 or 0"):
        data.quick_mode()


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


@pytest.mark.parametrize(
    ("device", "quick", "small_on_gpu", "expected"),
    [("cpu", "0", None, (100, 50, 2, "cpu")), ("cuda", "0", None, (None, None, 5, "full"))]
    + [
        ("cuda:1", "0", "a batch of 4", (100, 50, 2, "cpu")),
        ("cuda", "1", None, (20, 10, 1, "quick")),
    ]
    + [(torch.device("cpu"), "1", None, (20, 10, 1, "quick"))],
)
def test_training_budget(two_gpus, monkeypatch, device, quick, small_on_gpu, expected):
    monkeypatch.setenv("COURSE_QUICK", quick)
    budget = training_budget(device, gpu_epochs=5, cpu_epochs=2, small_on_gpu=small_on_gpu, **SIZES)
    assert (budget.train_size, budget.test_size, budget.num_epochs, budget.mode) == expected
    assert str(budget).startswith("Training on ") and (small_on_gpu or "") in str(budget)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"device": "gpu"}, ValueError, "'gpu'.*'cuda'"),
        ({"quick_epochs": 2.5}, TypeError, "quick_epochs"),
    ]
    + [({"device": 0}, TypeError, "device must be a device.*pick_device")]
    + [pytest.param({"device": "cuda"}, ValueError, "no CUDA.*pick_device", marks=NO_CUDA)]
    + [({"gpu_epochs": 0}, ValueError, "gpu_epochs .*1 or more")]
    + [({"cpu_train_size": 2e3}, TypeError, "cpu_train_size=2_000")]
    + [({"small_on_gpu": True}, TypeError, "small_on_gpu")],
)
def test_training_budget_names_the_wrong_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        training_budget(**{"device": "cpu", "gpu_epochs": 3, "cpu_epochs": 1, **kwargs})


@pytest.mark.parametrize(
    ("device", "cores", "processes", "workers"),
    [("cpu", 16, 1, 0), ("cuda", 1, 1, 1), ("cuda", 3, 1, 2), ("cuda:0", 128, 1, 4)]
    + [("cuda", 16, 4, 3), ("cuda", 16, 8, 1), ("cuda", 4, 8, 1)],
)
def test_loader_workers(two_gpus, monkeypatch, device, cores, processes, workers):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert data.loader_workers(device, processes=processes) == workers


@pytest.mark.parametrize(
    ("device", "processes", "error"),
    [(4, 1, TypeError), ("gpu", 1, ValueError), ("cpu", 0, ValueError), ("cpu", "2", TypeError)]
    + [pytest.param("cuda", 1, ValueError, marks=NO_CUDA)],
)
def test_loader_workers_names_the_wrong_argument(device, processes, error):
    with pytest.raises(error, match="loader_workers"):
        data.loader_workers(device, processes=processes)


@pytest.mark.parametrize(
    ("accuracy", "stand_in", "raises"),
    [
        (0.30, True, False),
        (0.10, True, True),
        (0.90, True, True),
        (0.90, False, False),
        (0.11, False, True),
    ]
    + [(torch.tensor(0.3), True, False), (np.float32(0.3), True, False)],
)
def test_expect_accuracy(capsys, accuracy, stand_in, raises):
    budget = training_budget("cpu", gpu_epochs=3, cpu_epochs=1)
    dataset = SyntheticCIFAR10(size=1) if stand_in else TensorDataset(torch.zeros(1))
    if raises:
        with pytest.raises(AssertionError, match="test accuracy"):
            data.expect_accuracy(accuracy, budget, dataset, cpu=(0.2, 0.4))
    else:
        assert data.expect_accuracy(accuracy, budget, dataset, cpu=(0.2, 0.4), full=(0.5, 0.6)) == (
            0.2,
            0.4,
        )
        assert "test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bands",
    [{}, {"full": (0.2, 0.4)}, {"cpu": (0.5, 0.4)}, {"cpu": (0.2, 40)}, {"cpu": (0, 1), "gpu": 1}],
)
def test_expect_accuracy_needs_a_band_for_the_budget(bands):
    with pytest.raises(ValueError, match="cpu=\\(low, high\\)"):
        data.expect_accuracy(
            0.3, training_budget("cpu", gpu_epochs=3, cpu_epochs=1), STAND_IN, **bands
        )


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ((55, BUDGET, STAND_IN), ValueError, "0.55 for 55%"),
        ((BUDGET, 0.2, STAND_IN), ValueError, "fraction"),
    ]
    + [((0.2, None, STAND_IN), TypeError, "budget None.*training_budget")]
    + [((0.2, BUDGET, DataLoader(STAND_IN)), TypeError, "a DataLoader.*test set")],
)
def test_expect_accuracy_names_a_wrong_argument(arguments, error, words):
    with pytest.raises(error, match=words):
        data.expect_accuracy(*arguments, cpu=(0.2, 0.4))
