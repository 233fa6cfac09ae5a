"""helpers.standin: the synthetic stand-in for CIFAR-10, on which the recorded runs were made."""

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers.standin import CIFAR10_CLASSES, SyntheticCIFAR10, make_synthetic_cifar10

# The calibrated stand-in: labels exactly, pixels by image mean and spread (CPUs may round a pixel
# apart).
FINGERPRINT_LABELS = "f0299de65f6a03903a590d46536ba154599a001ec92aac3b46caa941642490d2"
FINGERPRINT_MEANS = [75.51, 107.52, 161.54, 89.58, 180.7, 120.45, 119.75, 106.54]
FINGERPRINT_STDS = [41.63, 52.98, 55.34, 26.05, 33.13, 40.11, 54.09, 38.71]


def test_the_stand_in_is_the_calibrated_one():
    images, labels = make_synthetic_cifar10(1000, train=False)
    assert hashlib.sha256(bytes(labels)).hexdigest() == FINGERPRINT_LABELS
    np.testing.assert_allclose(images[:8].mean((1, 2, 3)), FINGERPRINT_MEANS, atol=0.05)
    np.testing.assert_allclose(images[:8].std((1, 2, 3)), FINGERPRINT_STDS, atol=0.05)


def test_the_recorded_calibration_is_of_this_stand_in_and_meets_its_targets():
    path = Path(__file__).parent.parent / "results" / "data-calibration.json"
    result = json.loads(path.read_text())
    images, labels = make_synthetic_cifar10(1_000, train=True)
    assert labels[:20] == result["data"]["fingerprint"]["first_labels"]
    mean_pixel = result["data"]["fingerprint"]["mean_pixel"]
    assert np.allclose(images.mean((0, 1, 2)), mean_pixel, atol=0.05)
    assert all(target["met"] for target in result["targets"].values())


def test_the_stand_in_is_deterministic_prefix_stable_and_cifar10_shaped():
    a, labels_a = make_synthetic_cifar10(1500, seed=3)
    b, labels_b = make_synthetic_cifar10(700, seed=3)
    assert a.shape == (1500, 32, 32, 3) and a.dtype == np.uint8 and set(labels_a) == set(range(10))
    assert np.array_equal(a[:700], b) and labels_a[:700] == labels_b
    test, _ = make_synthetic_cifar10(100, train=False)
    other, _ = make_synthetic_cifar10(100, seed=1)
    assert not np.array_equal(a[:100], test) and not np.array_equal(a[:100], other)
    empty_images, empty_labels = make_synthetic_cifar10(0)
    assert empty_images.shape == (0, 32, 32, 3) and empty_labels == []


def test_the_stand_in_dataset_works_like_torchvision_cifar10():
    dataset = SyntheticCIFAR10(False, transforms.ToTensor(), size=10)
    image, label = dataset[3]
    assert image.shape == (3, 32, 32) and 0 <= image.min() <= image.max() <= 1
    assert label == dataset.targets[3]
    assert dataset.classes == list(CIFAR10_CLASSES) and len(dataset) == 10 and not dataset.train
    images, labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64
    pairs = {frozenset(p) for p in dataset.pairs}
    assert pairs >= {frozenset({"cat", "dog"}), frozenset({"car", "truck"})}
    copy = pickle.loads(pickle.dumps(dataset))  # as DataLoader workers get it when spawned
    assert torch.equal(copy[3][0], image)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: make_synthetic_cifar10(1e3), TypeError, "n=1_000"),
        (lambda: make_synthetic_cifar10("100"), TypeError, "n=100"),
        (lambda: make_synthetic_cifar10(-1), ValueError, "0 or more"),
        (lambda: make_synthetic_cifar10(5, train="no"), TypeError, "train must be True or False"),
        (lambda: make_synthetic_cifar10(5, seed=0.5), TypeError, "seed"),
        (lambda: SyntheticCIFAR10(size=-3), ValueError, "size"),
        (lambda: SyntheticCIFAR10(size=2.0), TypeError, "size=2"),
        (lambda: SyntheticCIFAR10("test"), TypeError, "train must be True or False"),
        (lambda: SyntheticCIFAR10(transform=transforms.ToTensor), TypeError, r"ToTensor\(\)"),
        (lambda: SyntheticCIFAR10(transform="to_tensor"), TypeError, "transforms.ToTensor()"),
    ],
)
def test_a_wrong_argument_is_named(call, error, words):
    with pytest.raises(error, match=words):
        call()
