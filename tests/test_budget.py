"""helpers.budget: how much each notebook trains on this run, and the accuracy it should reach."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers.budget import Budget, expect_accuracy, quick_mode, training_budget
from helpers.standin import SyntheticCIFAR10

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
BUDGET = Budget(100, 50, 1, "a test", "cpu")
STAND_IN = SyntheticCIFAR10(size=1)
SIZES = {"cpu_train_size": 100, "cpu_test_size": 50, "quick_train_size": 20, "quick_test_size": 10}


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), (" 1 ", True), ("0", False), ("", False), (" ", False)]
)
def test_quick_mode_reads_course_quick(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_QUICK", value)
    assert quick_mode() is expected


@pytest.mark.parametrize("value", ["true", "yes", "2", "on", "QUICK"])
def test_quick_mode_refuses_a_value_it_does_not_know(monkeypatch, value):
    monkeypatch.setenv("COURSE_QUICK", value)
    with pytest.raises(ValueError, match=f"COURSE_QUICK='{value}'.*0, 1"):
        quick_mode()


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "a stand-in GPU")


@pytest.mark.parametrize(
    ("device", "quick", "small_on_gpu", "expected"),
    [
        ("cpu", "0", None, (100, 50, 2, "cpu")),
        ("cuda", "0", None, (None, None, 5, "full")),
        ("cuda:1", "0", "a batch of 4", (100, 50, 2, "cpu")),
        ("cuda", "1", None, (20, 10, 1, "quick")),
        (torch.device("cpu"), "1", None, (20, 10, 1, "quick")),
    ],
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
        ({"device": "CPU"}, ValueError, "'cpu'"),
        ({"quick_epochs": 2.5}, TypeError, "quick_epochs"),
        ({"device": 0}, TypeError, "device must be a device.*pick_device"),
        pytest.param({"device": "cuda"}, ValueError, "no CUDA.*pick_device", marks=NO_CUDA),
        ({"gpu_epochs": 0}, ValueError, "gpu_epochs .*1 or more"),
        ({"cpu_epochs": -2}, ValueError, "cpu_epochs .*1 or more"),
        ({"cpu_epochs": None}, TypeError, "cpu_epochs"),
        ({"cpu_train_size": 2e3}, TypeError, "cpu_train_size=2_000"),
        ({"cpu_test_size": "500"}, TypeError, "cpu_test_size=500"),
        ({"small_on_gpu": True}, TypeError, "small_on_gpu"),
        ({"small_on_gpu": " "}, TypeError, "small_on_gpu"),
    ],
)
def test_training_budget_names_the_wrong_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        training_budget(**{"device": "cpu", "gpu_epochs": 3, "cpu_epochs": 1, **kwargs})


@pytest.mark.parametrize(
    ("accuracy", "stand_in", "raises"),
    [
        (0.30, True, False),
        (0.10, True, True),
        (0.90, True, True),
        (0.90, False, False),
        (0.11, False, True),
        (torch.tensor(0.3), True, False),
        (np.float32(0.3), True, False),
    ],
)
def test_expect_accuracy(capsys, accuracy, stand_in, raises):
    dataset = STAND_IN if stand_in else TensorDataset(torch.zeros(1))
    if raises:
        with pytest.raises(AssertionError, match="test accuracy"):
            expect_accuracy(accuracy, BUDGET, dataset, cpu=(0.2, 0.4))
    else:
        band = expect_accuracy(accuracy, BUDGET, dataset, cpu=(0.2, 0.4), full=(0.5, 0.6))
        assert band == (0.2, 0.4)
        assert "test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("bands", "error", "words"),
    [
        ({}, TypeError, r"cpu=\(low, high\)"),
        ({"full": (0.2, 0.4)}, TypeError, r"cpu=\(low, high\)"),
        ({"cpu": (0.5, 0.4)}, ValueError, r"cpu=\(0.5, 0.4\)"),
        ({"cpu": (0.2, 40)}, ValueError, r"0 <= low <= high <= 1"),
        ({"cpu": 0.3}, ValueError, r"\(low, high\)"),
        ({"cpu": ("0.2", "0.4")}, ValueError, r"\(low, high\)"),
        ({"cpu": (0, 1), "gpu": (0, 1)}, TypeError, "gpu is no budget mode"),
    ],
)
def test_expect_accuracy_needs_a_band_for_the_budget(bands, error, words):
    with pytest.raises(error, match=words):
        expect_accuracy(0.3, BUDGET, STAND_IN, **bands)


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ((55, BUDGET, STAND_IN), ValueError, "0.55 for 55%"),
        ((float("nan"), BUDGET, STAND_IN), ValueError, "fraction"),
        ((BUDGET, 0.2, STAND_IN), TypeError, "give a number"),
        (("55%", BUDGET, STAND_IN), TypeError, "give a number"),
        ((torch.tensor([0.2, 0.3]), BUDGET, STAND_IN), TypeError, "give a number"),
        ((0.2, None, STAND_IN), TypeError, "budget is None.*training_budget"),
        ((0.2, BUDGET, DataLoader(STAND_IN)), TypeError, "a DataLoader.*test set"),
    ],
)
def test_expect_accuracy_names_a_wrong_argument(arguments, error, words):
    with pytest.raises(error, match=words):
        expect_accuracy(*arguments, cpu=(0.2, 0.4))
