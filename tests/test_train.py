import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter

from helpers.train import evaluate, train_one_epoch


def _separable_loader(n=256, batch_size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


def test_training_learns_and_returns_python_floats():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    loader = _separable_loader()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = nn.CrossEntropyLoss()
    first_loss, _ = evaluate(model, loader, loss_fn, "cpu", progress=False)
    for epoch in range(5):
        loss, accuracy = train_one_epoch(
            model, loader, loss_fn, optimizer, "cpu", epoch=epoch, progress=False
        )
        assert isinstance(loss, float) and isinstance(accuracy, float)
    test_loss, test_accuracy = evaluate(model, loader, loss_fn, "cpu", progress=False)
    assert isinstance(test_loss, float) and isinstance(test_accuracy, float)
    assert test_loss < first_loss and test_accuracy > 0.9


def test_evaluate_matches_a_hand_computation():
    model = nn.Linear(4, 2)
    loader = _separable_loader(n=100, batch_size=7)  # last batch smaller: per-sample weighting matters
    loss_fn = nn.CrossEntropyLoss()
    loss, accuracy = evaluate(model, loader, loss_fn, "cpu", progress=False)
    x, y = loader.dataset.tensors
    with torch.no_grad():
        out = model(x)
    assert loss == pytest.approx(loss_fn(out, y).item(), rel=1e-5)
    assert accuracy == pytest.approx((out.argmax(1) == y).float().mean().item())


def test_evaluate_leaves_no_gradients_and_sets_eval_mode():
    model = nn.Sequential(nn.Linear(4, 2), nn.Dropout(0.5))
    evaluate(model, _separable_loader(), nn.CrossEntropyLoss(), "cpu", progress=False)
    assert not model.training and all(p.grad is None for p in model.parameters())


def test_a_model_on_another_device_is_refused_clearly():
    model = nn.Linear(4, 2).to("meta")
    with pytest.raises(ValueError, match=r"on meta, but the batches go to cpu.*model.to\('cpu'\)"):
        evaluate(model, _separable_loader(), nn.CrossEntropyLoss(), "cpu", progress=False)


def test_empty_loader_is_refused():
    empty = DataLoader(TensorDataset(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match="no batches"):
        evaluate(nn.Linear(4, 2), empty, nn.CrossEntropyLoss(), "cpu", progress=False)


def test_tensorboard_logging(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = nn.Linear(4, 2)
    loader = _separable_loader()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with SummaryWriter(tmp_path) as writer:
        train_one_epoch(
            model, loader, nn.CrossEntropyLoss(), optimizer, "cpu", writer=writer, log_every=2, progress=False
        )
        evaluate(model, loader, nn.CrossEntropyLoss(), "cpu", writer=writer, progress=False)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/batch_loss", "train/loss", "train/accuracy", "test/loss", "test/accuracy"} <= tags
    assert [e.step for e in events.Scalars("train/batch_loss")] == [0, 2, 4, 6]


@requires_cuda
def test_training_on_the_gpu():
    model = nn.Linear(4, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss, accuracy = train_one_epoch(
        model, _separable_loader(), nn.CrossEntropyLoss(), optimizer, "cuda", progress=False
    )
    assert isinstance(loss, float) and next(model.parameters()).is_cuda


class _CountingLoader:
    """A loader that counts how many passes are started over it."""

    def __init__(self, loader):
        self.loader, self.passes = loader, 0

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.passes += 1
        return iter(self.loader)


@pytest.mark.parametrize("progress", [True, False])
def test_each_call_starts_exactly_one_pass_over_the_loader(progress):
    model = nn.Linear(4, 2)
    loader = _CountingLoader(_separable_loader())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, loader, nn.CrossEntropyLoss(), optimizer, "cpu", progress=progress)
    assert loader.passes == 1
    evaluate(model, loader, nn.CrossEntropyLoss(), "cpu", progress=progress)
    assert loader.passes == 2
