from unittest.mock import Mock

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

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
    model, (x, y) = nn.Linear(4, 2), _data().tensors
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
    model, writer = nn.Linear(4, 2), Mock()
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


@pytest.mark.parametrize("loop", ["train", "evaluate"])
@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"model": nn.Linear}, TypeError, r"Linear\(\)"),
        ({"model": "model"}, TypeError, "nn.Module"),
        ({"model": _NoParameters()}, ValueError, "no parameters.*nn.Sequential"),
        ({"model": nn.Linear(4, 2, device="meta")}, ValueError, "on meta, not cpu.*model.to"),
        ({"model": _Pair(4, 2)}, TypeError, "returned tuple.*one tensor"),
        ({"model": nn.Sequential(nn.Linear(4, 1), nn.Flatten(0))}, TypeError, r"returned \(32,\)"),
        ({"loader": _data()}, TypeError, "TensorDataset.*DataLoader"),
        ({"loader": 3}, TypeError, "DataLoader"),
        ({"loader": _loader(0)}, ValueError, "no batches"),
        ({"loader": [torch.randn(2, 4)]}, TypeError, "batch 0 is a Tensor"),
        ({"loader": [{"x": 1, "y": 2}]}, TypeError, "batch 0 is a dict"),
        ({"loss_fn": nn.CrossEntropyLoss}, TypeError, r"nn.CrossEntropyLoss\(\)"),
        (
            {"loss_fn": nn.CrossEntropyLoss(reduction="none")},
            ValueError,
            "not one number.*reduction='mean'",
        ),
        ({"loss_fn": lambda outputs, targets: 1.0}, ValueError, "not one number"),
        ({"device": "gpu"}, ValueError, "'gpu'.*'cuda'"),
        ({"device": None}, TypeError, "device must be a device.*pick_device"),
        ({"device": 0}, TypeError, "device must be a device"),
        pytest.param({"device": "cuda"}, ValueError, "no CUDA.*pick_device", marks=NO_CUDA),
        ({"writer": "runs/x"}, TypeError, "writer is 'runs/x'.*SummaryWriter"),
        ({"epoch": 1.5}, TypeError, "epoch"),
        ({"epoch": -1}, ValueError, "epoch"),
        ({"progress": "no"}, TypeError, "progress must be True or False"),
        ({"model": nn.Linear(4, 1)}, TypeError, r"returned \(32, 1\).*classes >= 2"),
        (
            {"loader": _loader(targets=lambda y: y.float())},
            TypeError,
            r"float32 \(32,\).*labels.long\(\)",
        ),
        ({"loader": _loader(targets=lambda y: y[:, None])}, TypeError, r"\(32, 1\).*squeeze\(1\)"),
        (
            {"loader": _loader(targets=lambda y: nn.functional.one_hot(y).float())},
            TypeError,
            "argmax",
        ),
        ({"loader": [(torch.randn(2, 4), [0, 1])]}, TypeError, r"\[0, 1\], not class numbers"),
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


@pytest.mark.parametrize(
    ("optimizer", "error", "words"),
    [
        (
            torch.optim.SGD,
            TypeError,
            "optimizer is <class.*SGD\\(model.parameters\\(\\), lr=0.01\\)",
        ),
        ("sgd", TypeError, "optimizer is 'sgd'"),
        (
            torch.optim.SGD(nn.Linear(4, 2).parameters(), lr=0.1),
            ValueError,
            "another model.*make it again",
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
