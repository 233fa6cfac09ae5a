import time

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers.data import (
    SyntheticCIFAR10,
    data_dir,
    load_cifar10,
    make_synthetic_cifar10,
    quick_mode,
    training_budget,
)
from helpers.models import CifarNet


def test_synthetic_has_cifar10_shapes_and_types():
    images, labels = make_synthetic_cifar10(50)
    assert images.shape == (50, 32, 32, 3) and images.dtype == np.uint8
    assert len(labels) == 50 and set(labels) <= set(range(10))


def test_synthetic_is_deterministic_and_prefix_stable():
    a, la = make_synthetic_cifar10(1500, seed=3)
    b, lb = make_synthetic_cifar10(1500, seed=3)
    c, lc = make_synthetic_cifar10(700, seed=3)
    assert np.array_equal(a, b) and la == lb
    assert np.array_equal(a[:700], c) and la[:700] == lc


def test_synthetic_train_test_and_seeds_differ():
    train, _ = make_synthetic_cifar10(100, train=True)
    test, _ = make_synthetic_cifar10(100, train=False)
    other, _ = make_synthetic_cifar10(100, seed=1)
    assert not np.array_equal(train, test) and not np.array_equal(train, other)


def test_synthetic_classes_are_balanced_enough():
    _, labels = make_synthetic_cifar10(5000)
    counts = np.bincount(labels, minlength=10)
    assert counts.min() > 400 and counts.max() < 600


def test_synthetic_is_not_noise_a_small_convnet_learns_it():
    """The promise of the stand-in: a small convnet gets well above chance (>= 80%) fast on a CPU."""
    torch.manual_seed(0)
    train = SyntheticCIFAR10(True, size=8000)
    test = SyntheticCIFAR10(False, size=2000)
    x_train = torch.from_numpy(train.data).permute(0, 3, 1, 2).float() / 255
    y_train = torch.tensor(train.targets)
    x_test = torch.from_numpy(test.data).permute(0, 3, 1, 2).float() / 255
    y_test = torch.tensor(test.targets)
    model = CifarNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start = time.perf_counter()
    for _ in range(5):
        for idx in torch.randperm(len(x_train)).split(64):
            loss = nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    print(
        f"synthetic stand-in: CifarNet test accuracy {accuracy:.1%} after {time.perf_counter() - start:.1f} s"
    )
    assert accuracy >= 0.80


def test_synthetic_dataset_works_like_torchvision_cifar10():
    dataset = SyntheticCIFAR10(False, transforms.ToTensor(), size=10)
    image, label = dataset[3]
    assert image.shape == (3, 32, 32) and image.min() >= 0 and image.max() <= 1
    assert label == dataset.targets[3] and len(dataset.classes) == 10
    images, labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64
    assert SyntheticCIFAR10(True, target_transform=lambda y: y + 100, size=2)[0][1] >= 100


def test_forced_synthetic_prints_one_line_saying_so(capsys):
    dataset = load_cifar10(train=True, size=20, source="synthetic")
    assert isinstance(dataset, SyntheticCIFAR10) and len(dataset) == 20
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "synthetic" in out[0] and "COURSE_DATA=synthetic" in out[0]


def test_env_var_selects_the_source(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DATA", "synthetic")
    assert isinstance(load_cifar10(train=False, size=5), SyntheticCIFAR10)


def _offline(monkeypatch):
    """Make every download fail as it does without a network (the real code path, no network)."""
    import torchvision.datasets.utils as tv_utils

    def no_network(*args, **kwargs):
        raise OSError("network unreachable (simulated by the test)")

    monkeypatch.setattr(tv_utils, "_urlretrieve", no_network)


def test_auto_falls_back_offline_and_says_why(monkeypatch, tmp_path, capsys):
    _offline(monkeypatch)
    dataset = load_cifar10(train=True, size=30, root=tmp_path)
    assert isinstance(dataset, SyntheticCIFAR10) and len(dataset) == 30
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("Dataset:")]
    assert len(lines) == 1 and "synthetic" in lines[0] and str(tmp_path) in lines[0]


def test_cifar10_forced_offline_is_a_clear_error(monkeypatch, tmp_path):
    _offline(monkeypatch)
    monkeypatch.setenv("COURSE_DATA", "cifar10")
    with pytest.raises(FileNotFoundError) as info:
        load_cifar10(train=True, root=tmp_path)
    message = str(info.value)
    assert "COURSE_DATA=cifar10" in message and str(tmp_path) in message
    assert "COURSE_DATA=auto" in message and "cifar-10-batches-py" in message


def test_real_cifar10_folder_is_used_when_present(tmp_path, monkeypatch):
    """Writes a tiny folder in the real CIFAR-10 format (no download) and loads it through torchvision."""
    import pickle

    from torchvision.datasets import CIFAR10

    folder = tmp_path / CIFAR10.base_folder
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, _ in CIFAR10.train_list + CIFAR10.test_list:
        batch = {"data": rng.integers(0, 256, (5, 3072), dtype=np.uint8), "labels": list(range(5))}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / CIFAR10.meta["filename"]).write_bytes(pickle.dumps({"label_names": ["a"] * 10}))
    import torchvision.datasets.cifar

    # Our files do not have the real ones' checksums; everything else is torchvision's own code.
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda *args, **kwargs: True)
    dataset = load_cifar10(train=True, size=7, root=tmp_path, source="cifar10")
    assert isinstance(dataset, CIFAR10) and len(dataset) == 7 and len(dataset.targets) == 7


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="'imagenet'"):
        load_cifar10(train=True, source="imagenet")


def test_bad_size_is_refused():
    with pytest.raises(ValueError, match="size"):
        load_cifar10(train=True, size=0, source="synthetic")


def test_data_dir_default_and_override(monkeypatch, tmp_path):
    default = data_dir()
    assert default.name == "data" and (default.parent / "pyproject.toml").is_file()
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_quick_mode_values(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_QUICK", value)
    assert quick_mode() is expected


def test_quick_mode_refuses_nonsense(monkeypatch):
    monkeypatch.setenv("COURSE_QUICK", "maybe")
    with pytest.raises(ValueError, match="COURSE_QUICK='maybe'"):
        quick_mode()


def test_budget_depends_on_device_and_quick_mode(monkeypatch):
    cpu = training_budget("cpu", gpu_epochs=10, cpu_epochs=3, cpu_train_size=1000)
    assert (cpu.train_size, cpu.num_epochs) == (1000, 3) and "CPU" in str(cpu) and "10 epochs" in str(cpu)
    gpu = training_budget(torch.device("cuda", 0), gpu_epochs=10, cpu_epochs=3)
    assert gpu.train_size is None and gpu.num_epochs == 10 and "all" in str(gpu)
    monkeypatch.setenv("COURSE_QUICK", "1")
    quick = training_budget("cuda:0", gpu_epochs=10, cpu_epochs=3, quick_train_size=64, quick_epochs=1)
    assert (quick.train_size, quick.num_epochs) == (64, 1) and "quick" in str(quick)


# --- bad arguments: each refused with the argument named, never a split picked by truthiness ------


@pytest.mark.parametrize(
    ("train", "fix"),
    [
        ("test", "train=False"),
        ("val", "train=False"),
        ("train", "train=True"),
        (1, "train=True"),
        (0, "train=False"),
        (None, "train=True"),
        ([True], "train=True"),
    ],
)
def test_train_must_be_a_bool_not_a_split_name(train, fix):
    with pytest.raises(TypeError, match=rf"train must be True.*got .*{fix}"):
        load_cifar10(train, source="synthetic", size=5)


def test_a_numpy_bool_picks_the_split():
    assert not load_cifar10(np.bool_(False), source="synthetic", size=3).train


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"size": 1e4}, TypeError, "size=10_000"),
        ({"size": "100"}, TypeError, "size"),
        ({"size": -3}, ValueError, "size .*1 or more, got -3"),
        ({"size": True}, TypeError, "size"),
        ({"transform": transforms.ToTensor}, TypeError, r"class ToTensor.*ToTensor\(\)"),
        ({"transform": "to_tensor"}, TypeError, "transform must be a function"),
        ({"source": 1}, TypeError, "source must be"),
        ({"root": 3}, TypeError, "root must be a folder"),
        ({"seed": 0.5}, TypeError, "seed"),
    ],
)
def test_load_cifar10_names_the_wrong_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        load_cifar10(True, **{"source": "synthetic", **kwargs})


def test_a_numpy_integer_size_is_a_size():
    assert len(load_cifar10(True, source="synthetic", size=np.int64(4))) == 4


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"gpu_epochs": -1}, ValueError, "gpu_epochs .*1 or more, got -1"),
        ({"cpu_epochs": 0}, ValueError, "cpu_epochs .*1 or more"),
        ({"quick_epochs": 2.5}, TypeError, "quick_epochs"),
        ({"cpu_train_size": -100}, ValueError, "cpu_train_size .*1 or more, got -100"),
        ({"cpu_test_size": 0}, ValueError, "cpu_test_size"),
        ({"quick_train_size": 2e3}, TypeError, "quick_train_size=2_000"),
        ({"quick_test_size": "500"}, TypeError, "quick_test_size"),
    ],
)
def test_training_budget_refuses_negative_and_non_integer_sizes_and_epochs(kwargs, error, words):
    with pytest.raises(error, match=words):
        training_budget("cpu", **{"gpu_epochs": 3, "cpu_epochs": 1, **kwargs})


def test_training_budget_takes_none_for_all_images_and_numpy_integers():
    budget = training_budget("cpu", gpu_epochs=np.int64(4), cpu_epochs=np.int32(2), cpu_train_size=None)
    assert budget.train_size is None and budget.num_epochs == 2 and type(budget.num_epochs) is int
