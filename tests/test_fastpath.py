"""helpers.fastpath: DeviceLoader gives DataLoader's batches, dataset_tensors gives ToTensor's values, the
choice of mixed precision, a real GradScaler that steps and skips, and train_epoch's loop."""

import math

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset
from torchvision import transforms

from helpers.data import SyntheticCIFAR10
from helpers.fastpath import (
    Autocast,
    DeviceLoader,
    _precision_for,
    bf16_supported,
    choose_precision,
    dataset_tensors,
    grad_scaler,
    sgd,
    timed_epoch,
    train_epoch,
)
from helpers.models import Tudui
from helpers.train import train_one_epoch


def _epochs(loader, epochs=3):
    return [batch for _ in range(epochs) for batch in loader]


def _same_batches(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(p, q) for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("n", [103, 100])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("seed", [None, 5])
def test_same_batches_as_a_dataloader_over_a_tensordataset(n, drop_last, seed):
    x, y = torch.randn(n, 3), torch.arange(n)

    def generator():
        return None if seed is None else torch.Generator().manual_seed(seed)

    torch.manual_seed(1)
    g_reference = generator()
    reference = DataLoader(
        TensorDataset(x, y), batch_size=10, shuffle=True, drop_last=drop_last, generator=g_reference
    )
    expected = _epochs(reference)
    global_after_reference = torch.rand(3)

    torch.manual_seed(1)
    g_ours = generator()
    ours = DeviceLoader(x, y, batch_size=10, shuffle=True, drop_last=drop_last, generator=g_ours)
    got = _epochs(ours)
    assert len(ours) == len(reference)
    assert _same_batches(got, expected)
    # The random streams are left in the same state, so what follows (initialisation, dropout) agrees too.
    assert torch.equal(torch.rand(3), global_after_reference)
    if seed is not None:
        assert torch.equal(g_ours.get_state(), g_reference.get_state())


def test_same_batches_without_shuffling():
    x, y = torch.randn(23, 2), torch.arange(23)
    expected = list(DataLoader(TensorDataset(x, y), batch_size=5))
    got = list(DeviceLoader(x, y, batch_size=5))
    assert _same_batches(got, expected)
    assert got[0][0].data_ptr() == x.data_ptr()  # unshuffled batches are views, no copy


def test_same_batches_as_the_per_sample_pil_pipeline():
    dataset = SyntheticCIFAR10(train=True, transform=transforms.ToTensor(), size=300)
    torch.manual_seed(3)
    expected = list(DataLoader(dataset, batch_size=64, shuffle=True))
    torch.manual_seed(3)
    got = list(DeviceLoader(*dataset_tensors(dataset), batch_size=64, shuffle=True))
    assert _same_batches(got, expected)


def test_training_on_either_loader_gives_identical_weights():
    x = torch.randn(200, 4)
    y = (x[:, 0] > 0).long()

    def train(make_loader):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = make_loader()
        for epoch in range(3):
            train_one_epoch(
                model, loader, nn.CrossEntropyLoss(), optimizer, "cpu", epoch=epoch, progress=False
            )
        return model.weight.detach().clone()

    with_dataloader = train(lambda: DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True))
    with_device_loader = train(lambda: DeviceLoader(x, y, batch_size=16, shuffle=True))
    assert torch.equal(with_dataloader, with_device_loader)


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_sample_once_per_epoch(drop_last):
    n, batch_size = 103, 10
    labels = torch.arange(n)
    loader = DeviceLoader(torch.randn(n, 2), labels, batch_size=batch_size, shuffle=True, drop_last=drop_last)
    orders = []
    for _ in range(3):
        batches = list(loader)
        assert len(batches) == len(loader)
        seen = torch.cat([b[1] for b in batches])
        if drop_last:
            assert [len(b[1]) for b in batches] == [batch_size] * (n // batch_size)
            assert len(seen) == loader.samples_per_epoch == n - n % batch_size
            assert len(set(seen.tolist())) == len(seen)  # none twice
        else:
            assert [len(b[1]) for b in batches] == [batch_size] * (n // batch_size) + [n % batch_size]
            assert sorted(seen.tolist()) == list(range(n)) and loader.samples_per_epoch == n
        orders.append(seen)
    assert not torch.equal(orders[0], orders[1]) and not torch.equal(orders[0], torch.arange(len(orders[0])))


def test_images_and_labels_stay_paired():
    labels = torch.arange(50)
    images = labels.float().view(50, 1, 1, 1).expand(50, 3, 2, 2).contiguous()
    for x, y in DeviceLoader(images, labels, batch_size=8, shuffle=True):
        assert torch.equal(x[:, 0, 0, 0].long(), y)


def test_a_generator_fixes_the_order():
    x = torch.arange(40)
    first = [
        b[0] for b in DeviceLoader(x, batch_size=7, shuffle=True, generator=torch.Generator().manual_seed(9))
    ]
    again = [
        b[0] for b in DeviceLoader(x, batch_size=7, shuffle=True, generator=torch.Generator().manual_seed(9))
    ]
    other = [
        b[0] for b in DeviceLoader(x, batch_size=7, shuffle=True, generator=torch.Generator().manual_seed(10))
    ]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_batches_stay_on_the_tensors_device():
    meta = torch.device("meta")  # stands in for a GPU: nothing may come back to the CPU
    loader = DeviceLoader(
        torch.empty(30, 3, 8, 8, device=meta),
        torch.empty(30, dtype=torch.long, device=meta),
        batch_size=8,
        shuffle=True,
    )
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(8, 3, 8, 8)] * 3 + [(6, 3, 8, 8)]
    assert all(t.device == meta for b in batches for t in b)
    assert loader.device == meta and "meta" in repr(loader)


def test_channels_last_survives_batching():
    images = torch.randn(20, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    batch, _ = next(iter(DeviceLoader(images, torch.arange(20), batch_size=6, shuffle=True)))
    assert batch.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((), {"batch_size": 4}, ValueError, "at least one tensor"),
        ((SyntheticCIFAR10(size=4),), {"batch_size": 4}, TypeError, "dataset_tensors"),
        ((torch.zeros(4), torch.zeros(5)), {"batch_size": 2}, ValueError, "same first dimension"),
        ((torch.zeros(4), torch.zeros(4, device="meta")), {"batch_size": 2}, ValueError, "different devices"),
        ((torch.zeros(4),), {"batch_size": 0}, ValueError, "positive int"),
        ((torch.zeros(4),), {"batch_size": True}, ValueError, "positive int"),
        ((torch.zeros(0, 3),), {"batch_size": 2}, ValueError, "no samples"),
    ],
)
def test_bad_input_is_refused_clearly(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        DeviceLoader(*args, **kwargs)


def test_dataset_tensors_gives_what_totensor_gives():
    dataset = SyntheticCIFAR10(train=False, transform=transforms.ToTensor(), size=20)
    images, labels = dataset_tensors(dataset)
    assert images.shape == (20, 3, 32, 32) and images.dtype == torch.float32 and labels.dtype == torch.int64
    for i in range(20):
        image, label = dataset[i]
        assert torch.equal(images[i], image) and labels[i].item() == label
    last, _ = dataset_tensors(dataset, memory_format=torch.channels_last)
    assert last.is_contiguous(memory_format=torch.channels_last) and torch.equal(last, images)


def test_dataset_tensors_refuses_what_it_cannot_convert():
    dataset = SyntheticCIFAR10(size=10)
    with pytest.raises(TypeError, match=r"Subset has no \.data or \.targets"):
        dataset_tensors(Subset(dataset, range(5)))
    dataset.data = dataset.data.astype("float32")
    with pytest.raises(ValueError, match="uint8"):
        dataset_tensors(dataset)
    dataset = SyntheticCIFAR10(size=10)
    dataset.targets = dataset.targets[:9]
    with pytest.raises(ValueError, match="10 images but"):
        dataset_tensors(dataset)


def test_bf16_supported_follows_the_hardware():
    capabilities = getattr(torch.cpu, "get_capabilities", None)
    native = capabilities is not None and any(
        capabilities().get(k, False) for k in ("avx512_bf16", "amx_bf16", "bf16", "sve_bf16")
    )
    assert bf16_supported("cpu") is native
    assert bf16_supported("meta") is False
    if not torch.cuda.is_available():
        assert bf16_supported("cuda") is False


@requires_cuda
def test_bf16_supported_on_the_gpu():
    assert bf16_supported("cuda") == (torch.cuda.get_device_capability() >= (8, 0))


def test_autocast_runs_the_forward_in_bf16_and_returns_float32():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
    seen = {}
    model[0].register_forward_hook(lambda module, inputs, output: seen.update(dtype=output.dtype))
    wrapped = Autocast(model)
    outputs = wrapped(torch.randn(2, 3, 8, 8))
    assert seen["dtype"] == torch.bfloat16 and outputs.dtype == torch.float32
    nn.functional.cross_entropy(outputs, torch.tensor([1, 2])).backward()
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert list(wrapped.state_dict()) == [f"model.{k}" for k in model.state_dict()]
    with pytest.raises(ValueError, match="bfloat16 or torch.float16"):
        Autocast(model, dtype=torch.float32)


def test_an_iterator_made_and_dropped_draws_as_a_dataloaders_does():
    # tqdm.auto makes an iterator of what it wraps and drops it (tqdm issue #1598); a DataLoader
    # draws its worker seed at that moment, and so does DeviceLoader, so they stay in step.
    x = torch.arange(30)
    torch.manual_seed(4)
    reference = DataLoader(TensorDataset(x), batch_size=7, shuffle=True)
    iter(reference)
    expected = list(reference)
    torch.manual_seed(4)
    ours = DeviceLoader(x, batch_size=7, shuffle=True)
    iter(ours)
    assert _same_batches(list(ours), expected)


# --- nothing silently wrong: no epoch without batches, no label cut to an integer ----------------


@pytest.mark.parametrize(("n", "batch_size"), [(300, 512), (1, 2), (63, 64)])
def test_drop_last_with_a_batch_larger_than_the_data_is_refused(n, batch_size):
    with pytest.raises(ValueError, match=rf"batch_size={batch_size} with drop_last=True gives no batch.*{n}"):
        DeviceLoader(torch.zeros(n, 2), torch.zeros(n), batch_size=batch_size, drop_last=True)
    assert len(DeviceLoader(torch.zeros(n, 2), batch_size=batch_size)) == 1  # without drop_last: one batch
    assert len(DeviceLoader(torch.zeros(n, 2), batch_size=n, drop_last=True)) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"shuffle": "yes"}, TypeError, "shuffle must be True or False"),
        ({"drop_last": 1}, TypeError, "drop_last must be True or False"),
        ({"generator": 5}, TypeError, r"generator must be a torch.Generator"),
        ({"generator": torch.manual_seed}, TypeError, r"generator must be a torch.Generator"),
    ],
)
def test_device_loader_options_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        DeviceLoader(torch.zeros(8), batch_size=2, **kwargs)


class _Images:
    def __init__(self, targets):
        self.data = torch.zeros(len(targets), 4, 4, 3, dtype=torch.uint8).numpy()
        self.targets = targets


@pytest.mark.parametrize(
    ("targets", "where"),
    [
        ([0, 1.7, 2], "targets\\[1\\] is 1.7"),
        ([0.5, 1.0], "targets\\[0\\] is 0.5"),
        ([1, float("nan")], "nan"),
    ],
)
def test_dataset_tensors_refuses_labels_that_converting_would_change(targets, where):
    with pytest.raises(ValueError, match=f"{where}.*not a whole number"):
        dataset_tensors(_Images(targets))


@pytest.mark.parametrize(
    "targets", [[0.0, 2.0, 9.0], torch.tensor([0.0, 2.0, 9.0]), [0, 2, 9], (0, 2, 9), torch.tensor([0, 2, 9])]
)
def test_dataset_tensors_takes_whole_numbers_in_any_form(targets):
    _, labels = dataset_tensors(_Images(targets))
    assert labels.dtype == torch.int64 and labels.tolist() == [0, 2, 9]


@pytest.mark.parametrize("targets", [["cat", "dog"], [object(), object()]])
def test_dataset_tensors_refuses_labels_that_are_not_numbers(targets):
    with pytest.raises(TypeError, match="dataset.targets must be class numbers"):
        dataset_tensors(_Images(targets))


def test_dataset_tensors_checks_its_options():
    with pytest.raises(TypeError, match="memory_format must be"):
        dataset_tensors(_Images([0, 1]), memory_format="channels_last")
    with pytest.raises(ValueError, match="dataset_tensors: device 'cuda:99'.*This machine has"):
        dataset_tensors(_Images([0, 1]), "cuda:99")


@pytest.mark.parametrize("model", [None, nn.Linear, "resnet"])
def test_autocast_wraps_models_only(model):
    with pytest.raises(TypeError, match="Autocast wraps a model"):
        Autocast(model)


# --- the large-batch recipe ------------------------------------------------------------------------


# --- mixed precision that works everywhere ---------------------------------------------------------


@pytest.mark.parametrize(
    ("device_type", "bf16_native", "cuda_available", "name", "scaler"),
    [
        ("cuda", True, True, "bf16 autocast", False),  # A100, H100
        ("cuda", False, True, "fp16 autocast + GradScaler", True),  # Colab's T4
        ("cpu", True, False, "bf16 autocast", False),  # a CPU with AVX512-BF16 or AMX
        ("cpu", False, False, "float32", False),
        ("mps", False, False, "float32", False),
        ("cuda", False, False, "float32", False),  # no GPU after all
    ],
)
def test_the_precision_follows_what_the_device_computes_natively(
    device_type, bf16_native, cuda_available, name, scaler
):
    choice = _precision_for(device_type, bf16_native=bf16_native, cuda_available=cuda_available)
    assert choice.name == name and choice.scaler is scaler and choice.why


def test_the_precision_chosen_for_this_machine():
    for device in ("cpu", "meta", "cuda"):
        choice = choose_precision(device)
        expected = _precision_for(
            torch.device(device).type,
            bf16_native=bf16_supported(device),
            cuda_available=torch.cuda.is_available(),
        )
        assert choice == expected
    assert choose_precision("cpu").dtype == (torch.bfloat16 if bf16_supported("cpu") else None)


def _small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


def _batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(16, 3, 8, 8, generator=generator), torch.randint(0, 10, (16,), generator=generator)


@pytest.mark.parametrize("fused", [False, True])
def test_a_grad_scaler_steps_on_finite_gradients_as_plain_sgd_would(fused):
    x, y = _batch()
    reference = _small_model()
    optimizer, _ = sgd(reference.parameters(), 0.1)
    train_epoch(reference, [(x, y)], optimizer, "cpu")
    model = _small_model()
    optimizer, kind = sgd(model.parameters(), 0.1, fused=fused)
    assert kind == ("fused" if fused else "default")
    scaler = grad_scaler("cpu", init_scale=2.0**16)
    assert isinstance(scaler, torch.amp.GradScaler)
    stats = train_epoch(model, [(x, y)], optimizer, "cpu", scaler=scaler)
    assert stats.scale == 2.0**16 and scaler.get_scale() == 2.0**16  # no overflow: the scale stays
    for scaled, plain in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(scaled, plain)  # the step used the unscaled gradients


@pytest.mark.parametrize("fused", [False, True])
def test_a_grad_scaler_skips_the_step_and_lowers_its_scale_when_fp16_gradients_overflow(fused):
    """fp16 autocast, the T4's recipe: a scale of 2**40 makes the fp16 gradients overflow (> 65,504)."""
    x, y = _batch()
    model = _small_model()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer, _ = sgd(model.parameters(), 0.1, fused=fused)
    scaler = grad_scaler("cpu", init_scale=2.0**40)
    stats = train_epoch(Autocast(model, torch.float16), [(x, y)], optimizer, "cpu", scaler=scaler)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))  # skipped
    assert stats.scale == 2.0**39 and stats.nonfinite_losses == 0  # halved; the loss itself was finite
    # with a scale the gradients fit in, the next step is taken
    scaler = grad_scaler("cpu", init_scale=2.0**8)
    train_epoch(Autocast(model, torch.float16), [(x, y)], optimizer, "cpu", scaler=scaler)
    assert not all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert scaler.get_scale() == 2.0**8


class _Schedule:
    """A learning rate per step, set before it, as train_epoch expects of a schedule."""

    def lr_at(self, step):
        return 0.01 * (step + 1)

    def apply(self, optimizer, step):
        for group in optimizer.param_groups:
            group["lr"] = self.lr_at(step)
        return self.lr_at(step)


class _LossStep(nn.Module):
    """The model, the loss and the count of right answers in one call, as train_epoch's loss_step."""

    def __init__(self, model, loss_fn=None):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn or nn.CrossEntropyLoss()

    def forward(self, inputs, targets):
        outputs = self.model(inputs)
        return self.loss_fn(outputs, targets), (outputs.argmax(dim=1) == targets).sum()


def test_train_epoch_follows_the_schedule_and_counts_what_it_trained():
    x, y = torch.randn(100, 3, 8, 8), torch.randint(0, 10, (100,))
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 1.0)
    loader = DeviceLoader(x, y, batch_size=32, shuffle=True)
    schedule = _Schedule()
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(opt.param_groups[0]["lr"]))
    first = train_epoch(model, loader, optimizer, "cpu", schedule=schedule)
    second = train_epoch(model, loader, optimizer, "cpu", schedule=schedule, first_step=len(loader))
    assert seen == [pytest.approx(schedule.lr_at(step)) for step in range(8)]
    assert (first.steps, first.samples, second.samples) == (4, 100, 100) and second.lr == seen[-1]
    assert 0 <= first.accuracy <= 1 and math.isfinite(first.loss) and first.scale is None
    # at lr 0 the weights stay put: the epoch's loss is the mean over all samples (the last batch of
    # 4 weighted by its size) and its accuracy the model's on all of them
    frozen = _small_model()
    optimizer, _ = sgd(frozen.parameters(), 0.0)
    stats = train_epoch(frozen, DeviceLoader(x, y, batch_size=32, shuffle=True), optimizer, "cpu")
    with torch.no_grad():
        outputs = frozen(x)
    assert stats.loss == pytest.approx(nn.functional.cross_entropy(outputs, y).item(), rel=1e-5)
    assert stats.accuracy == pytest.approx((outputs.argmax(dim=1) == y).double().mean().item())


def _two_epochs(loss_step_of=None, compile_step=False):
    torch.manual_seed(0)
    x, y = torch.randn(100, 3, 8, 8), torch.randint(0, 10, (100,))
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 0.1)
    loader = DeviceLoader(x, y, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    step = None
    if loss_step_of is not None:
        step = loss_step_of(model)
        step = torch.compile(step, dynamic=False) if compile_step else step
    stats = [train_epoch(model, loader, optimizer, "cpu", loss_step=step) for _ in range(2)]
    return model, stats


def test_a_loss_step_trains_exactly_as_the_model_loss_and_count_one_after_the_other():
    plain, plain_stats = _two_epochs()
    whole, whole_stats = _two_epochs(_LossStep)
    for a, b in zip(plain.parameters(), whole.parameters(), strict=True):
        assert torch.equal(a, b)
    assert [(s.loss, s.accuracy, s.samples) for s in plain_stats] == [
        (s.loss, s.accuracy, s.samples) for s in whole_stats
    ]
    # its own loss function, not train_epoch's
    smoothed, _ = _two_epochs(lambda m: _LossStep(m, nn.CrossEntropyLoss(label_smoothing=0.5)))
    assert not torch.equal(next(smoothed.parameters()), next(plain.parameters()))


def test_a_loss_step_that_is_not_callable_is_named():
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 0.1)
    loader = DeviceLoader(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,)), batch_size=4)
    with pytest.raises(TypeError, match="loss_step must be a callable.*got str"):
        train_epoch(model, loader, optimizer, "cpu", loss_step="LossStep")


def test_train_epoch_stops_a_run_whose_loss_became_nan():
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 1e12)  # one step throws the weights to infinity
    with pytest.raises(FloatingPointError, match="training diverged in this epoch .*steps 0 to 7"):
        train_epoch(model, DeviceLoader(x, y, batch_size=8), optimizer, "cpu")


def test_fused_sgd_is_used_where_torch_has_it_and_refused_clearly_where_not():
    model = nn.Linear(2, 2)
    optimizer, kind = sgd(model.parameters(), 0.1, fused=True)
    assert (
        kind == "fused" and optimizer.defaults["fused"] is True
    )  # on the CPU since pytorch PR 123629 (2024)
    meta = nn.Linear(2, 2, device="meta")
    optimizer, kind = sgd(meta.parameters(), 0.1, fused=True)
    assert kind.startswith("default (no fused SGD here") and not optimizer.defaults.get("fused")
    for fused in (False, True):  # momentum is passed on, fused or not, and the fallback keeps it
        optimizer, _ = sgd(model.parameters(), 0.1, fused=fused, momentum=0.9)
        assert optimizer.defaults["momentum"] == 0.9
    optimizer, _ = sgd(meta.parameters(), 0.1, fused=True, momentum=0.9)
    assert optimizer.defaults["momentum"] == 0.9


def test_timed_epoch_warms_up_then_times_one_whole_epoch_with_fp16_and_a_scaler():
    # 06's fp16 step for GPUs without native bf16 (a T4), here on the CPU, whose autocast takes fp16 too
    torch.manual_seed(0)
    images, labels = torch.rand(256, 3, 32, 32), torch.randint(0, 10, (256,))
    loader = DeviceLoader(
        images, labels, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    model = Tudui()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.08)
    scaler = grad_scaler("cpu")
    rate, stats = timed_epoch(Autocast(model, torch.float16), loader, optimizer, "cpu", scaler=scaler)
    assert rate > 0 and stats.samples == 256 and stats.steps == 4  # the whole epoch, not the warm-up
    assert stats.scale == scaler.get_scale() and math.isfinite(stats.loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    _, again = timed_epoch(model, loader, optimizer, "cpu", warmup_batches=0)
    assert again.samples == 256
    with pytest.raises(ValueError, match="warmup_batches"):
        timed_epoch(model, loader, optimizer, "cpu", warmup_batches=-1)


def test_06s_fp16_cell_runs_its_t4_branch(capsys):
    # 06-24c trains with fp16 and a scaler only on a CUDA GPU without native bf16, which CI never has:
    # its code is run here as such a GPU would run it, on the CPU (whose autocast takes fp16 too)
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).parent.parent / "notebooks/06_performance.ipynb").read_text())["cells"]
    source = "".join(next(c for c in cells if c.get("id") == "06-24c")["source"])
    images, labels = torch.rand(512, 3, 32, 32), torch.randint(0, 10, (512,))
    images = images.contiguous(memory_format=torch.channels_last)
    scope = {
        "torch": torch,
        "Tudui": Tudui,
        "Autocast": Autocast,
        "grad_scaler": grad_scaler,
        "sgd": sgd,
        "device": torch.device("cpu"),
        "on_gpu": True,  # as on a T4
        "use_bf16": False,
        "fast_loader": DeviceLoader(images, labels, batch_size=128, shuffle=True),
        "speed": {"+ channels_last": 1_000.0},
    }
    exec(compile(source, "06-24c", "exec"), scope)
    printed = capsys.readouterr().out
    assert (
        printed.startswith("fp16 autocast with a GradScaler: ") and "x float32 with channels_last" in printed
    )
    assert scope["stats"].samples == 512 and scope["fp16_speed"] > 0


@pytest.mark.parametrize("fused", [False, True])
def test_a_scaler_reads_the_overflow_flag_back_at_every_step_unless_the_optimizer_is_fused(
    fused, monkeypatch
):
    # 06-24a says it and 06-24c trains with a fused optimizer for it: GradScaler.step calls .item() on
    # the overflow flag for a plain optimizer (a wait for the GPU there), and none for a fused one
    torch.manual_seed(0)
    model = Tudui()
    optimizer, kind = sgd(model.parameters(), lr=0.01, fused=fused)
    if fused and kind != "fused":
        pytest.skip(f"no fused SGD on this torch's CPU: {kind}")
    images, labels = torch.rand(64, 3, 32, 32), torch.randint(0, 10, (64,))
    loader = DeviceLoader(images, labels, batch_size=16)
    scaler = grad_scaler("cpu")
    reads, stepping = [], []
    item, step = torch.Tensor.item, scaler.step
    monkeypatch.setattr(
        torch.Tensor, "item", lambda t: (reads.append(t.shape) if stepping else None) or item(t)
    )
    monkeypatch.setattr(
        scaler, "step", lambda *a, **k: stepping.append(1) or step(*a, **k) or stepping.clear()
    )
    stats = train_epoch(Autocast(model, torch.float16), loader, optimizer, "cpu", scaler=scaler)
    monkeypatch.undo()
    assert stats.steps == 4
    assert len(reads) == (0 if fused else stats.steps), reads  # reads made inside scaler.step


def test_dataset_tensors_converts_on_the_host_as_its_docstring_says():
    assert "once, on the host" in dataset_tensors.__doc__
    assert "on the device" not in dataset_tensors.__doc__.split("ToTensor")[-1]


def test_train_epoch_does_not_claim_that_non_blocking_overlaps_copies_with_compute():
    doc = " ".join(train_epoch.__doc__.split())
    assert "overlaps the copy" not in doc and "second CUDA stream" in doc
