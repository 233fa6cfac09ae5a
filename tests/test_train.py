import numpy as np
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


# --- a stale optimizer and a non-finite loss stop training, naming the step ----------------------


_DEFAULT = object()


def _fit(model, optimizer, loader=_DEFAULT, device="cpu", **kwargs):
    return train_one_epoch(
        model,
        _separable_loader() if loader is _DEFAULT else loader,
        nn.CrossEntropyLoss(),
        optimizer,
        device,
        progress=False,
        **kwargs,
    )


@pytest.mark.parametrize("make", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_an_optimizer_of_an_earlier_model_instance_is_refused(make):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = make(model.parameters(), lr=0.1)
    model = nn.Linear(4, 2)  # the cell that builds the model ran again
    before = model.weight.detach().clone()
    with pytest.raises(
        ValueError, match=r"optimizer holds none of the model's parameters.*epoch=3, before step 0"
    ):
        _fit(model, optimizer, epoch=3)
    assert torch.equal(model.weight, before)


def test_an_optimizer_of_another_model_is_refused():
    optimizer = torch.optim.SGD(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="make the optimizer again|Make the optimizer again"):
        _fit(nn.Linear(4, 2), optimizer)


def test_an_optimizer_that_leaves_a_replaced_layer_out_warns():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(8, 2)  # replaced after the optimizer was made
    with pytest.warns(
        UserWarning, match=r"does not hold 2 of the model's 4 trainable parameters \(2.weight, 2.bias\)"
    ):
        _fit(model, optimizer)


def test_wrappers_and_frozen_layers_are_not_stale():
    from helpers.fastpath import Autocast

    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    model[0].requires_grad_(False)  # frozen: not in the optimizer, on purpose
    optimizer = torch.optim.SGD(model[1].parameters(), lr=0.1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(model, optimizer)
        _fit(Autocast(model), optimizer)
        wrapped = nn.DataParallel(model)
        # With one GPU or more, DataParallel moves the model to cuda:0 as it wraps it, where the CPU's
        # batches would fail: train where it put the model.
        _fit(wrapped, optimizer, device=next(wrapped.parameters()).device)


@pytest.mark.parametrize(
    ("optimizer", "words"),
    [
        (torch.optim.SGD, r"class SGD.*SGD\(model.parameters\(\), lr=0.01\)"),
        ("sgd", "must be a torch.optim optimizer"),
        (None, "must be a torch.optim optimizer"),
    ],
)
def test_what_is_not_an_optimizer_is_named(optimizer, words):
    with pytest.raises(TypeError, match=words):
        _fit(nn.Linear(4, 2), optimizer)


def test_a_scheduler_in_place_of_the_optimizer_is_named():
    model = nn.Linear(4, 2)
    scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.SGD(model.parameters(), lr=0.1), step_size=1)
    with pytest.raises(TypeError, match="learning-rate scheduler"):
        _fit(model, scheduler)


def _loader_with(bad_index, value, n=96, batch_size=8):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] > 0).long()
    x[bad_index, 1] = value
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


@pytest.mark.parametrize("bad_index", [0, 21, 95])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("log_every", [1, 5, 100])
def test_a_non_finite_sample_stops_training_at_its_step(bad_index, value, log_every):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = bad_index // 8
    with pytest.raises(
        FloatingPointError, match=rf"NaN or infinite at epoch=2, step {step} \(batch {step + 1} of 12"
    ):
        _fit(model, optimizer, _loader_with(bad_index, value), epoch=2, log_every=log_every)


def test_divergence_from_a_learning_rate_too_high_is_caught():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e12)
    with pytest.raises(FloatingPointError, match="learning rate too high"):
        for epoch in range(5):
            _fit(model, optimizer, epoch=epoch)


def test_a_non_finite_loss_in_a_loader_without_len_is_named():
    batches = list(_loader_with(30, float("nan")))
    model = nn.Linear(4, 2)
    with pytest.raises(FloatingPointError, match=r"step 3 \(batch 4 of this epoch\)"):
        _fit(model, torch.optim.SGD(model.parameters(), lr=0.1), iter(batches))


# --- the loss reduction: a mean per sample, whichever way the loss reduces ------------------------


@pytest.mark.parametrize("batch_size", [1, 7, 8, 100])
def test_evaluate_reports_the_same_mean_for_every_reduction(batch_size):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    loader = _separable_loader(n=100, batch_size=batch_size)
    results = {
        reduction: evaluate(model, loader, nn.CrossEntropyLoss(reduction=reduction), "cpu", progress=False)
        for reduction in ("mean", "sum", "none")
    }
    x, y = loader.dataset.tensors
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(x), y).item()
    for reduction, (loss, _) in results.items():
        assert loss == pytest.approx(expected, rel=1e-5), reduction


def test_evaluate_with_a_plain_function_as_the_loss():
    model = nn.Linear(4, 2)
    loss, _ = evaluate(
        model, _separable_loader(n=50, batch_size=8), nn.functional.cross_entropy, "cpu", progress=False
    )
    x, y = _separable_loader(n=50).dataset.tensors
    with torch.no_grad():
        assert loss == pytest.approx(nn.functional.cross_entropy(model(x), y).item(), rel=1e-5)


def test_training_with_reduction_sum_reports_the_mean_per_sample():
    def run(reduction, lr):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss(reduction=reduction)
        return train_one_epoch(
            model, _separable_loader(batch_size=32), loss_fn, optimizer, "cpu", progress=False
        )

    mean_loss, mean_accuracy = run("mean", 0.32)
    sum_loss, sum_accuracy = run("sum", 0.01)  # the same steps: the gradient of a sum is 32 times larger
    assert sum_loss == pytest.approx(mean_loss, rel=1e-4) and sum_accuracy == mean_accuracy


@pytest.mark.parametrize(
    "loss_fn",
    [
        nn.CrossEntropyLoss(reduction="none"),
        lambda out, y: nn.functional.cross_entropy(out, y, reduction="none"),
    ],
)
def test_training_on_per_sample_losses_says_how_to_reduce(loss_fn):
    model = nn.Linear(4, 2)
    with pytest.raises(ValueError, match=r"\(32,\) losses at batch 0.*reduction='mean'"):
        train_one_epoch(
            model,
            _separable_loader(),
            loss_fn,
            torch.optim.SGD(model.parameters(), lr=0.1),
            "cpu",
            progress=False,
        )


# --- batches and arguments the loops cannot use: named, with the fix -----------------------------


def _numpy_batches():
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(8, 4)), rng.integers(0, 2, size=8).astype(np.int32)) for _ in range(3)]


@pytest.mark.parametrize(
    ("loader", "error", "words"),
    [
        (_numpy_batches(), TypeError, r"batch 0 holds NumPy arrays \(inputs: float64 \(8, 4\)\).*from_numpy"),
        ([(torch.zeros(8, 4), np.zeros(8, dtype=np.int64))], TypeError, "targets: int64"),
        (
            [{"image": torch.zeros(8, 4), "label": torch.zeros(8, dtype=torch.long)}],
            TypeError,
            "dict.*'image', 'label'",
        ),
        ([(torch.zeros(8, 4), torch.zeros(8).long(), torch.arange(8))], TypeError, "tuple of 3 items"),
        ([torch.zeros(8, 4)], TypeError, r"one tensor \(8, 4\), inputs without targets"),
        ([(torch.zeros(8, 4), [0] * 8)], TypeError, "targets are a list"),
        ([(torch.zeros(4), torch.tensor(1))], ValueError, "single sample"),
        ([(torch.zeros(8, 4), torch.zeros(8, 1).long())], ValueError, r"targets have shape \(8, 1\).*\(8,\)"),
        (
            TensorDataset(torch.zeros(8, 4), torch.zeros(8).long()),
            TypeError,
            "TensorDataset.*DataLoader\\(dataset",
        ),
        (torch.zeros(8, 4), TypeError, "loader is a tensor"),
        (None, TypeError, "loader must give batches"),
        (5, TypeError, "loader must give batches"),
    ],
)
@pytest.mark.parametrize("loop", ["train", "evaluate"])
def test_batches_the_loop_cannot_use_are_named(loader, error, words, loop):
    model = nn.Linear(4, 2)
    with pytest.raises(error, match=words):
        if loop == "train":
            _fit(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
        else:
            evaluate(model, loader, nn.CrossEntropyLoss(), "cpu", progress=False)


def test_a_dataset_of_cifar_images_in_place_of_a_loader():
    from helpers.data import SyntheticCIFAR10

    with pytest.raises(TypeError, match="SyntheticCIFAR10.*one sample at a time"):
        evaluate(nn.Linear(4, 2), SyntheticCIFAR10(size=4), nn.CrossEntropyLoss(), "cpu", progress=False)


def test_one_hot_targets_count_as_their_class():
    x = torch.randn(16, 4)
    y = nn.functional.one_hot((x[:, 0] > 0).long(), 2).float()
    model = nn.Linear(4, 2)
    _, accuracy = evaluate(model, [(x, y)], nn.CrossEntropyLoss(), "cpu", progress=False)
    with torch.no_grad():
        assert accuracy == (model(x).argmax(1) == y.argmax(1)).float().mean().item()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (
            {"loss_fn": nn.CrossEntropyLoss},
            TypeError,
            r"class CrossEntropyLoss; pass an instance: CrossEntropyLoss\(\)",
        ),
        ({"loss_fn": nn.MSELoss}, TypeError, r"MSELoss\(\)"),
        ({"loss_fn": "cross_entropy"}, TypeError, "loss_fn must be a loss"),
        ({"log_every": 0}, ValueError, "log_every .*1 or more, got 0"),
        ({"log_every": -5}, ValueError, "log_every"),
        ({"log_every": 2.5}, TypeError, "log_every"),
        ({"log_every": None}, TypeError, "log_every"),
        ({"epoch": -1}, ValueError, "epoch"),
        ({"progress": "no"}, TypeError, "progress .*must be True or False"),
        ({"writer": "runs/"}, TypeError, "SummaryWriter"),
        ({"model": nn.Linear}, TypeError, "model is the class Linear"),
        ({"model": "cifarnet"}, TypeError, "model must be an nn.Module"),
        ({"device": None}, TypeError, r"train_one_epoch expects device.*pick_device\(\)"),
        ({"device": "cuda:99"}, ValueError, "train_one_epoch: device 'cuda:99'.*This machine has"),
    ],
)
def test_wrong_arguments_are_named(kwargs, error, words):
    model = nn.Linear(4, 2)
    arguments = {
        "model": model,
        "loader": _separable_loader(),
        "loss_fn": nn.CrossEntropyLoss(),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "device": "cpu",
        "progress": False,
        **kwargs,
    }
    with pytest.raises(error, match=words):
        train_one_epoch(**arguments)
