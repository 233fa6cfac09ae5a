from unittest.mock import Mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gpus import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers import train
from helpers.train import evaluate, train_one_epoch

LOSS = nn.CrossEntropyLoss()
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")


def _data(n=96, seed=0, targets=lambda y: y):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, targets((x[:, 0] > 0).long()))


def _loader(n=96, batch_size=32, targets=lambda y: y):
    return DataLoader(_data(n, targets=targets), batch_size=batch_size)


def test_training_learns_and_returns_python_floats():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = [
        train_one_epoch(model, _loader(), LOSS, optimizer, "cpu", progress=False) for _ in range(5)
    ]
    assert all(type(loss) is float and type(accuracy) is float for loss, accuracy in losses)
    assert losses[-1][0] < losses[0][0] and losses[-1][1] > 0.9 and model.training


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("batch_size", [1, 7, 96])
def test_evaluate_gives_the_mean_loss_per_sample_and_the_accuracy(reduction, batch_size):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    x, y = _data().tensors
    with torch.no_grad():
        expected_loss = nn.functional.cross_entropy(model(x), y).item()
        expected_accuracy = (model(x).argmax(1) == y).float().mean().item()
    loss_fn = nn.CrossEntropyLoss(reduction=reduction)
    loss, accuracy = evaluate(
        model.train(), _loader(batch_size=batch_size), loss_fn, "cpu", progress=False
    )
    assert loss == pytest.approx(expected_loss, rel=1e-5) and accuracy == pytest.approx(
        expected_accuracy
    )
    assert not model.training and all(p.grad is None for p in model.parameters())


def test_a_writer_gets_the_batch_loss_every_100_steps_and_each_epochs_means():
    model = nn.Linear(4, 2)
    writer = Mock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(
        model, _loader(250, 1), LOSS, optimizer, "cpu", writer=writer, epoch=2, progress=False
    )
    evaluate(model, _loader(), LOSS, "cpu", writer=writer, epoch=2, progress=False)
    logged = [(call.args[0], call.args[2]) for call in writer.add_scalar.call_args_list]
    assert [step for tag, step in logged if tag == "train/batch_loss"] == [500, 600, 700]
    means = [("train/loss", 2), ("train/accuracy", 2), ("test/loss", 2), ("test/accuracy", 2)]
    assert [(tag, step) for tag, step in logged if "batch" not in tag] == means


@pytest.mark.parametrize("progress", [True, False])
def test_each_call_makes_exactly_one_pass_over_the_loader(progress):
    class Counting:
        passes = 0

        def __len__(self):
            return 3

        def __iter__(self):
            Counting.passes += 1
            return iter([(torch.randn(2, 4), torch.tensor([0, 1]))] * 3)

    model = nn.Linear(4, 2)
    train_one_epoch(
        model,
        Counting(),
        LOSS,
        torch.optim.SGD(model.parameters(), lr=0.1),
        "cpu",
        progress=progress,
    )
    evaluate(model, Counting(), LOSS, "cpu", progress=progress)
    assert Counting.passes == 2


class _NoParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 2)]  # a plain list: not registered

    def forward(self, x):
        return self.layers[0](x)


class _Pair(nn.Linear):
    def forward(self, x):
        return super().forward(x), x


class _Halves(nn.Linear):
    def forward(self, x):
        return super().forward(x.view(-1, 8)[:, :4])  # a view that mixes the samples up


def _numpy_batches(n=32):
    x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    return [(x, (x[:, 0] > 0).astype(np.int64))]


@pytest.mark.parametrize("loop", ["train", "evaluate"])
@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"model": nn.Linear}, TypeError, r"Linear\(\)"),
        ({"model": "model"}, TypeError, "nn.Module"),
        ({"model": _NoParameters()}, ValueError, "no parameters.*nn.Sequential"),
        ({"model": nn.Linear(4, 2, device="meta")}, ValueError, "on meta, not cpu.*model.to"),
        ({"model": _Pair(4, 2)}, TypeError, "returned a tuple.*one tensor"),
        ({"model": nn.Sequential(nn.Linear(4, 1), nn.Flatten(0))}, TypeError, r"returned \(32,\)"),
        ({"model": nn.Linear(4, 1)}, TypeError, r"returned \(32, 1\).*classes >= 2"),
        ({"model": _Halves(4, 2)}, ValueError, "16 rows for 32 samples.*flatten"),
        ({"loader": _data()}, TypeError, "TensorDataset.*DataLoader"),
        ({"loader": 3}, TypeError, "DataLoader"),
        ({"loader": torch.randn(8, 4)}, TypeError, r"shape \(8, 4\).*TensorDataset"),
        ({"loader": _loader(0)}, ValueError, "no batches"),
        ({"loader": [torch.randn(2, 4)]}, TypeError, "batch 0 is a Tensor"),
        ({"loader": [{"x": 1, "y": 2}]}, TypeError, "batch 0 is a dict.*'x', 'y'"),
        ({"loader": [(torch.randn(2, 4), torch.zeros(2).long(), 0)]}, TypeError, "3 items"),
        ({"loader": _numpy_batches()}, TypeError, "inputs are a ndarray.*DataLoader"),
        ({"loader": [(torch.randn(2, 4), [0, 1])]}, TypeError, "targets are a list"),
        ({"loader": [(torch.randn(3, 4), torch.tensor([0, 1]))]}, ValueError, "3 inputs and 2"),
        ({"loader": [(torch.randn(1, 4), torch.tensor(1))]}, ValueError, "one sample's"),
        ({"loader": [(torch.randn(0, 4), torch.zeros(0).long())]}, ValueError, "batch 0 is empty"),
        ({"loader": _loader(targets=lambda y: y.float())}, TypeError, r"float32 \(32,\).*long\(\)"),
        ({"loader": _loader(targets=lambda y: y[:, None])}, TypeError, r"\(32, 1\).*squeeze\(1\)"),
        ({"loader": _loader(targets=lambda y: F.one_hot(y).float())}, TypeError, "argmax"),
        ({"loader": _loader(targets=lambda y: y + 1)}, ValueError, "class 2.*2 classes, 0 to 1"),
        ({"loader": _loader(targets=lambda y: y - 1)}, ValueError, "class -1"),
        ({"loss_fn": nn.CrossEntropyLoss}, TypeError, r"nn.CrossEntropyLoss\(\)"),
        ({"loss_fn": "cross_entropy"}, TypeError, r"nn.CrossEntropyLoss\(\)"),
        ({"loss_fn": nn.CrossEntropyLoss(reduction="none")}, ValueError, "reduction='mean'"),
        ({"loss_fn": lambda outputs, targets: 1.0}, TypeError, "returned a float.*no .item"),
        ({"loss_fn": lambda o, t: F.cross_entropy(o, t, reduction="none")}, ValueError, r"\(32,\)"),
        ({"device": "gpu"}, ValueError, "'gpu'.*'cuda'"),
        ({"device": "CPU"}, ValueError, "lower case: 'cpu'"),
        ({"device": None}, TypeError, "device must be a device.*pick_device"),
        ({"device": 0}, TypeError, "device must be a device"),
        pytest.param({"device": "cuda"}, ValueError, "no CUDA.*pick_device", marks=NO_CUDA),
        ({"writer": "runs/x"}, TypeError, "writer is 'runs/x'.*SummaryWriter"),
        ({"epoch": 1.5}, TypeError, "epoch"),
        ({"epoch": -1}, ValueError, "epoch"),
        ({"progress": "no"}, TypeError, "progress must be True or False"),
    ],
)
def test_what_the_loops_cannot_use_is_named_and_changes_nothing(loop, change, error, words):
    model = nn.Linear(4, 2)
    kwargs = {
        "model": model,
        "loader": _loader(),
        "loss_fn": LOSS,
        "device": "cpu",
        "progress": False,
    }
    kwargs.update(change)
    if loop == "train":  # an optimizer for the model given, where it has parameters
        given = list(kwargs["model"].parameters()) if isinstance(kwargs["model"], nn.Module) else []
        kwargs["optimizer"] = torch.optim.SGD(given or model.parameters(), lr=0.1)
    before = model.weight.clone()
    with pytest.raises(error, match=words):
        (train_one_epoch if loop == "train" else evaluate)(**kwargs)
    assert torch.equal(model.weight, before)


def test_a_loss_without_gradient_is_named_before_backward():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    detached = lambda outputs, targets: LOSS(outputs.detach(), targets)  # noqa: E731
    with pytest.raises(ValueError, match="no gradient"):
        train_one_epoch(model, _loader(), detached, optimizer, "cpu", progress=False)


@pytest.mark.parametrize(
    ("optimizer", "error", "words"),
    [
        (
            torch.optim.SGD,
            TypeError,
            r"the class SGD.*SGD\(model.parameters\(\), lr=0.01\)",
        ),
        ("sgd", TypeError, "optimizer is 'sgd'"),
        (None, TypeError, "optimizer is None"),
        (
            torch.optim.lr_scheduler.StepLR(torch.optim.SGD([nn.Parameter(torch.ones(1))]), 1),
            TypeError,
            "learning-rate scheduler",
        ),
        (
            torch.optim.SGD(nn.Linear(4, 2).parameters(), lr=0.1),
            ValueError,
            "another model.*Make it again",
        ),
    ],
)
def test_an_optimizer_that_cannot_train_this_model_is_named(optimizer, error, words):
    with pytest.raises(error, match=words):
        train_one_epoch(nn.Linear(4, 2), _loader(), LOSS, optimizer, "cpu", progress=False)


@requires_cuda
def test_training_on_the_gpu():
    model = nn.Linear(4, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss, accuracy = train_one_epoch(model, _loader(), LOSS, optimizer, "cuda", progress=False)
    assert (
        isinstance(loss, float)
        and evaluate(model, _loader(), LOSS, torch.device("cuda:0"))[1] > 0.5
    )


def test_an_optimizer_that_leaves_part_of_the_model_out_is_warned_of():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model[1].parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="does not hold 2 of the model's 4.*0.weight"):
        train_one_epoch(model, _loader(), LOSS, optimizer, "cpu", progress=False)


# --- a loss that becomes NaN or infinite stops the training, naming the step -------------------


def _loader_with(bad_index, value, n=96, batch_size=8):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] > 0).long()
    x[bad_index, 1] = value
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


@pytest.mark.parametrize("bad_index", [0, 21, 95])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("log_every", [1, 5, 100])
def test_a_non_finite_sample_stops_training_at_its_step(monkeypatch, bad_index, value, log_every):
    monkeypatch.setattr(train, "LOG_EVERY", log_every)
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = bad_index // 8
    loader = _loader_with(bad_index, value)
    named = rf"NaN or infinite at epoch=2, step {step} \(batch {step + 1} of 12"
    with pytest.raises(FloatingPointError, match=named):
        train_one_epoch(model, loader, LOSS, optimizer, "cpu", epoch=2, progress=False)


def test_divergence_from_a_learning_rate_too_high_is_caught():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e12)
    with pytest.raises(FloatingPointError, match="learning rate"):
        for epoch in range(5):
            train_one_epoch(model, _loader(), LOSS, optimizer, "cpu", epoch=epoch, progress=False)


def test_a_non_finite_loss_in_a_loader_without_len_is_named():
    batches = list(_loader_with(30, float("nan")))
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(FloatingPointError, match=r"step 3 \(batch 4 of this epoch\)"):
        train_one_epoch(model, iter(batches), LOSS, optimizer, "cpu", progress=False)


def test_the_loss_is_read_back_only_every_log_every_steps(monkeypatch):
    """No wait for the device per step: the loop reads the loss at its logging points only."""
    reads = []
    original = torch.Tensor.item
    batches = list(_loader(250, 1))

    def counted(tensor):
        reads.append(tensor.shape)
        return original(tensor)

    monkeypatch.setattr(torch.Tensor, "item", counted)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, batches, LOSS, optimizer, "cpu", progress=False)
    # steps 0, 100 and 200: the loss and the finite flag; the end: the flag, the two sums
    assert len(reads) == 3 * 2 + 3
