import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers import data as data_module
from helpers.data import (
    CIFAR10_CLASSES,
    SyntheticCIFAR10,
    data_dir,
    load_cifar10,
    loader_workers,
    make_synthetic_cifar10,
    quick_mode,
    training_budget,
)
from helpers.models import CifarNet


@pytest.fixture(autouse=True)
def one_thread():
    """Every test here generates, trains and times on one thread: on two cores that other work
    also uses, two threads can run several times slower than one (each of the generator's many
    small operations waits for both), which would make these tests slow and their timings flaky."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_synthetic_has_cifar10_shapes_and_types():
    images, labels = make_synthetic_cifar10(50)
    assert images.shape == (50, 32, 32, 3) and images.dtype == np.uint8
    assert len(labels) == 50 and set(labels) <= set(range(10))


def test_synthetic_is_deterministic_and_prefix_stable():
    # generated each time (cache=False): read back from data/, any generator would look deterministic
    a, la = make_synthetic_cifar10(1500, seed=3, cache=False)
    b, lb = make_synthetic_cifar10(1500, seed=3, cache=False)
    c, lc = make_synthetic_cifar10(700, seed=3, cache=False)
    assert np.array_equal(a, b) and la == lb
    assert np.array_equal(a[:700], c) and la[:700] == lc


def test_synthetic_train_test_and_seeds_differ():
    train, _ = make_synthetic_cifar10(100, train=True, cache=False)
    test, _ = make_synthetic_cifar10(100, train=False, cache=False)
    other, _ = make_synthetic_cifar10(100, seed=1, cache=False)
    assert not np.array_equal(train, test) and not np.array_equal(train, other)


def test_synthetic_classes_are_balanced_enough():
    _, labels = make_synthetic_cifar10(5000)
    counts = np.bincount(labels, minlength=10)
    assert counts.min() > 400 and counts.max() < 600


def _as_tensors(n: int, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = make_synthetic_cifar10(n, train=train)
    return torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255, torch.tensor(labels)


def _fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, **sgd) -> nn.Module:
    optimizer = torch.optim.SGD(model.parameters(), **sgd)
    for _ in range(epochs):
        for index in torch.randperm(len(x)).split(64):
            loss = nn.functional.cross_entropy(model(x[index]), y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model


def test_synthetic_is_learnable_and_not_trivial_on_a_small_budget():
    """A small version of ``benchmarks/calibrate_data.py``'s calibration.

    CifarNet, trained briefly on 8,000 images (batch 64, lr 0.05, momentum 0.9), lands well above
    chance and well below perfect; a linear model on the pixels and one on colour alone do much
    worse; and the mistakes fall on the look-alike pairs (plane/ship, car/truck, cat/dog, deer/horse).
    """
    torch.manual_seed(0)
    x_train, y_train = _as_tensors(8_000, train=True)
    x_test, y_test = _as_tensors(2_000, train=False)
    start = time.perf_counter()
    model = _fit(CifarNet(), (x_train - 0.5) / 0.5, y_train, epochs=6, lr=0.05, momentum=0.9)
    with torch.no_grad():
        predicted = model((x_test - 0.5) / 0.5).argmax(1)
    accuracy = (predicted == y_test).float().mean().item()
    seconds = time.perf_counter() - start

    def linear_accuracy(features):
        f_train, f_test = features(x_train), features(x_test)
        mean, std = f_train.mean(0), f_train.std(0) + 1e-6
        linear = _fit(nn.Linear(f_train.shape[1], 10), (f_train - mean) / std, y_train, epochs=3, lr=0.01)
        with torch.no_grad():
            return (linear((f_test - mean) / std).argmax(1) == y_test).float().mean().item()

    pixels = linear_accuracy(lambda x: x.flatten(1))
    colour = linear_accuracy(lambda x: torch.cat([x.mean((2, 3)), x.std((2, 3))], 1))
    confusion = torch.zeros(10, 10, dtype=torch.long)
    confusion.index_put_((y_test, predicted), torch.ones_like(y_test), accumulate=True)
    mistakes = confusion + confusion.T  # each pair of classes, both ways
    pairs = sorted(
        ((int(mistakes[i, j]), CIFAR10_CLASSES[i], CIFAR10_CLASSES[j]) for i in range(10) for j in range(i)),
        reverse=True,
    )
    look_alikes = {frozenset(pair) for pair in SyntheticCIFAR10.pairs}
    share = sum(count for count, *names in pairs if frozenset(names) in look_alikes) / sum(
        c for c, *_ in pairs
    )
    print(
        f"stand-in: CifarNet {accuracy:.1%} ({seconds:.0f} s), linear on pixels {pixels:.1%}, "
        f"on colour {colour:.1%}; {share:.0%} of the mistakes on the 4 look-alike pairs; most confused "
        f"{pairs[:4]}"
    )
    assert 0.38 <= accuracy <= 0.70, "CifarNet should learn it well above chance (10%), and not perfectly"
    assert pixels <= 0.35 and accuracy - pixels >= 0.12, "a linear model on the pixels should do much worse"
    assert colour <= 0.28, "colour alone should not tell the classes apart"
    # 4 pairs of 45: by chance they would get 9% of the mistakes
    assert share >= 0.30, f"only {share:.0%} of the mistakes on the look-alike pairs"
    assert frozenset(pairs[0][1:]) in look_alikes, f"the most confused pair is not a look-alike: {pairs[:4]}"
    assert sum(frozenset(names) in look_alikes for _, *names in pairs[:4]) >= 3, pairs[:4]


def test_the_recorded_calibration_is_of_this_stand_in_and_meets_its_targets():
    """``results/data-calibration.json`` (written by ``benchmarks/calibrate_data.py``) must be measured
    on the stand-in as it is now, and meet its targets."""
    path = Path(__file__).resolve().parent.parent / "results" / "data-calibration.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    images, labels = make_synthetic_cifar10(1_000, train=True)
    recorded = result["data"]["fingerprint"]
    stale = "the stand-in changed since it was calibrated: run python benchmarks/calibrate_data.py"
    assert labels[:20] == recorded["first_labels"], stale
    assert np.allclose(images.mean((0, 1, 2)), recorded["mean_pixel"], atol=0.05), stale
    missed = {name: target for name, target in result["targets"].items() if not target["met"]}
    assert not missed, f"calibration targets missed: {missed}"
    tutorial = result["runs"]["cifarnet_tutorial"]
    assert 0.45 <= tutorial["test_accuracy"] <= 0.65 and tutorial["train_size"] == 50_000


def test_look_alike_pairs_are_named():
    dataset = SyntheticCIFAR10(size=1)
    assert len(dataset.pairs) == 4 and all(set(pair) <= set(dataset.classes) for pair in dataset.pairs)
    assert {frozenset(pair) for pair in dataset.pairs} >= {
        frozenset({"cat", "dog"}),
        frozenset({"car", "truck"}),
    }


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


def test_a_recipe_a_gpu_does_not_speed_up_keeps_the_cpu_budget_there(monkeypatch):
    monkeypatch.delenv("COURSE_QUICK", raising=False)
    args = {"gpu_epochs": 2, "cpu_epochs": 2, "cpu_train_size": 20_000, "cpu_test_size": 5_000}
    why = "a batch of 4 is launch-bound"
    gpu = training_budget("cuda:0", small_on_gpu=why, **args)
    assert (gpu.train_size, gpu.test_size, gpu.num_epochs, gpu.mode) == (20_000, 5_000, 2, "cpu")
    assert why in str(gpu) and "cuda:0" in str(gpu)
    cpu = training_budget("cpu", small_on_gpu=why, **args)
    assert (cpu.train_size, cpu.test_size, cpu.num_epochs, cpu.mode) == (20_000, 5_000, 2, "cpu")
    assert f"a GPU run uses the same subset: {why}" in str(cpu) and "all of it" not in str(cpu)
    with pytest.raises(TypeError, match="small_on_gpu is the reason"):
        training_budget("cuda:0", small_on_gpu=True, **args)
    with pytest.raises(TypeError, match="small_on_gpu is the reason"):
        training_budget("cuda:0", small_on_gpu=" ", **args)


def test_loader_workers_only_where_a_gpu_waits_for_the_loader(monkeypatch):
    assert loader_workers("cpu") == 0 and loader_workers(torch.device("meta")) == 0
    for cores, workers in ((1, 1), (2, 1), (3, 2), (16, 4), (128, 4)):
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert loader_workers("cuda:0") == workers, cores
    # processes sharing the machine (DDP: one per GPU) share its cores, at least one worker each
    for cores, processes, workers in ((16, 1, 4), (16, 2, 4), (16, 4, 3), (16, 8, 1), (8, 8, 1), (4, 8, 1)):
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert loader_workers("cuda:0", processes=processes) == workers, (cores, processes)
    assert loader_workers("cpu", processes=2) == 0
    with pytest.raises(TypeError, match="loader_workers"):
        loader_workers(4)
    with pytest.raises(ValueError, match="loader_workers: processes must be 1 or more"):
        loader_workers("cuda:0", processes=0)


def test_workers_serve_the_stand_in_as_the_training_process_does():
    # the stand-in with the notebooks' transform goes to worker processes, forked or (macOS,
    # Windows) spawned, which pickles it; the batches are the same as without workers
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    data = load_cifar10(train=True, transform=normalize, size=256)
    batches = {}
    for workers, context in ((0, None), (2, "fork"), (1, "spawn")):
        torch.manual_seed(3)
        loader = DataLoader(
            data, batch_size=64, shuffle=True, num_workers=workers, multiprocessing_context=context
        )
        batches[workers] = list(loader)
    for other in (2, 1):
        for (x, y), (wx, wy) in zip(batches[0], batches[other], strict=True):
            assert torch.equal(x, wx) and torch.equal(y, wy)


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


# The stand-in kept on disk (make_synthetic_cifar10's cache): read back unchanged, never trusted
# when damaged or made by another generator, and never in the way when it cannot be written.


def _use_data_folder(monkeypatch, folder):
    monkeypatch.setenv("COURSE_DATA_DIR", str(folder))
    return folder / "synthetic-cifar10"


def _no_generating(monkeypatch):
    def refuse(n, seed):
        raise AssertionError(f"chunk {seed} was generated again instead of read from the data folder")

    monkeypatch.setattr(data_module, "_synthetic_chunk", refuse)


def _same(got, expected):
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def test_the_stand_in_is_kept_in_the_data_folder_and_read_back_unchanged(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    fresh = make_synthetic_cifar10(2_500, train=False, seed=5, cache=False)
    assert not root.exists(), "cache=False keeps nothing"
    _same(make_synthetic_cifar10(2_500, train=False, seed=5), fresh)
    (folder,) = root.iterdir()
    assert sorted(path.name for path in folder.iterdir()) == [
        f"chunk-{(5 * 2 + 1) * 1_000_003 + k}.npz"
        for k in range(3)  # 2,500 images: three chunks
    ]
    _no_generating(monkeypatch)
    _same(make_synthetic_cifar10(2_500, train=False, seed=5), fresh)
    _same(make_synthetic_cifar10(1_200, train=False, seed=5), (fresh[0][:1_200], fresh[1][:1_200]))
    dataset = SyntheticCIFAR10(False, size=2_500, seed=5)
    _same((dataset.data, dataset.targets), fresh)


@pytest.mark.parametrize(
    "damage", ["not a zip file", "cut in half", "wrong shape", "wrong dtype", "an array, not a chunk"]
)
def test_a_damaged_chunk_is_generated_again_and_replaced(monkeypatch, tmp_path, damage):
    root = _use_data_folder(monkeypatch, tmp_path)
    fresh = make_synthetic_cifar10(1_000, seed=2, cache=False)
    make_synthetic_cifar10(1_000, seed=2)
    (path,) = root.glob("*/chunk-*.npz")
    if damage == "not a zip file":
        path.write_bytes(b"a chunk overwritten by something else")
    elif damage == "cut in half":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "wrong shape":
        np.savez(path, images=fresh[0][:10], labels=np.asarray(fresh[1][:10]))
    elif damage == "wrong dtype":
        np.savez(path, images=fresh[0].astype(np.float32) / 255, labels=np.asarray(fresh[1]))
    else:
        with open(path, "wb") as file:  # np.save: one array (.npy format) under the chunk's name
            np.save(file, fresh[0])
    _same(make_synthetic_cifar10(1_000, seed=2), fresh)
    with np.load(path) as stored:  # written again, whole
        assert stored["images"].dtype == np.uint8
        np.testing.assert_array_equal(stored["images"], fresh[0])
    assert not list(root.glob("*/.*partial")), "no half-written file is left behind"


def test_without_a_writable_data_folder_the_stand_in_is_generated_all_the_same(monkeypatch, tmp_path):
    blocker = tmp_path / "a file, not a folder"
    blocker.write_text("the data folder cannot be made inside a file")
    _use_data_folder(monkeypatch, blocker)
    _same(make_synthetic_cifar10(1_500, seed=1), make_synthetic_cifar10(1_500, seed=1, cache=False))


def test_course_data_cache_0_keeps_nothing_and_other_values_are_refused(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    monkeypatch.setenv("COURSE_DATA_CACHE", "0")
    _same(make_synthetic_cifar10(10, seed=4), make_synthetic_cifar10(10, seed=4, cache=False))
    assert not root.exists()
    monkeypatch.setenv("COURSE_DATA_CACHE", "sometimes")
    with pytest.raises(ValueError, match="COURSE_DATA_CACHE='sometimes'.*set it to 0"):
        make_synthetic_cifar10(10)
    with pytest.raises(TypeError, match="cache .* must be True or False"):
        make_synthetic_cifar10(10, cache="no")


def test_chunks_of_another_version_of_the_generator_are_removed(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    old = root / "0123456789abcdef"
    old.mkdir(parents=True)
    np.savez(
        old / "chunk-0.npz", images=np.zeros((1_000, 32, 32, 3), np.uint8), labels=np.zeros(1_000, np.int64)
    )
    mine = root / "notes"  # not a version folder: left alone
    mine.mkdir()
    _same(make_synthetic_cifar10(1_000), make_synthetic_cifar10(1_000, cache=False))
    assert not old.exists() and mine.is_dir()
    assert len(list(root.iterdir())) == 2


def test_the_version_folder_changes_with_the_generators_text_and_with_torch(monkeypatch, tmp_path):
    source = Path(data_module.__file__)
    now = data_module._generator_fingerprint(source)
    assert now == data_module._GENERATOR_VERSION and len(now) == 16
    edited = tmp_path / "data.py"
    edited.write_text(source.read_text() + "\n_EDITED = True\n")
    assert edited.read_text() != source.read_text(), "the edit must change the generator"
    assert data_module._generator_fingerprint(edited) != now
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert data_module._generator_fingerprint(source) != now


def test_an_edit_after_import_does_not_change_the_version_the_running_code_uses(monkeypatch, tmp_path):
    """A kernel that imported the generator keeps storing its images under its own version, even after
    the file is edited (the version is taken at import, not read from the file later)."""
    root = _use_data_folder(monkeypatch, tmp_path)
    monkeypatch.setattr(Path, "read_bytes", lambda self: b"an edited file")  # too late to matter
    make_synthetic_cifar10(10, seed=6)
    assert [folder.name for folder in root.iterdir()] == [data_module._GENERATOR_VERSION]


def test_a_chunk_is_written_to_a_file_of_its_own_then_renamed(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    written = []
    savez = np.savez

    def spy(file, **arrays):
        written.append(Path(file.name).name)
        assert not Path(file.name).name.startswith("chunk-"), "written in place: a reader could see half"
        savez(file, **arrays)

    monkeypatch.setattr(np, "savez", spy)
    make_synthetic_cifar10(1_500, seed=8)
    assert len(written) == 2 and all(name.endswith(".partial") for name in written)
    assert sorted(path.name for path in root.glob("*/*")) == [
        f"chunk-{8 * 2 * 1_000_003 + k}.npz" for k in range(2)
    ]


def test_a_chunk_that_cannot_be_written_is_generated_all_the_same_and_leaves_nothing(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    fresh = make_synthetic_cifar10(1_000, seed=9, cache=False)

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(data_module.os, "replace", full_disk)
    _same(make_synthetic_cifar10(1_000, seed=9), fresh)
    assert [path for path in root.glob("*/*")] == [], "neither the chunk nor its half-written file"


def test_a_half_written_chunk_left_by_a_killed_process_is_removed_after_an_hour(monkeypatch, tmp_path):
    root = _use_data_folder(monkeypatch, tmp_path)
    folder = root / data_module._GENERATOR_VERSION
    folder.mkdir(parents=True)
    old, recent = folder / ".chunk-0.npz.abc.partial", folder / ".chunk-1.npz.def.partial"
    for path in (old, recent):
        path.write_bytes(b"half a chunk")
    os.utime(old, (time.time() - 2 * 3600,) * 2)
    make_synthetic_cifar10(10)
    assert not old.exists() and recent.exists(), "a recent one may still be being written"


def test_processes_writing_the_same_chunks_at_once_agree(tmp_path):
    """Two fresh processes (two torchrun ranks, say) generate and keep the same chunks at the same time."""
    script = (
        "import sys, numpy as np\n"
        "from helpers.data import make_synthetic_cifar10\n"
        "images, labels = make_synthetic_cifar10(3_000, seed=7)\n"
        "np.save(sys.argv[1], images)\n"
    )
    env = {**os.environ, "COURSE_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    env.pop("COURSE_DATA_CACHE", None)
    outs = [tmp_path / f"process{k}.npy" for k in range(2)]
    processes = [subprocess.Popen([sys.executable, "-c", script, str(out)], env=env) for out in outs]
    assert [process.wait(timeout=120) for process in processes] == [0, 0]
    fresh, _ = make_synthetic_cifar10(3_000, seed=7, cache=False)
    for out in outs:
        np.testing.assert_array_equal(np.load(out), fresh)
    chunks = sorted((tmp_path / "data" / "synthetic-cifar10").glob("*/*"))
    assert [path.name.startswith("chunk-") for path in chunks] == [True] * 3, chunks
    for path in chunks:
        with np.load(path) as stored:
            assert stored["images"].shape == (1_000, 32, 32, 3)
