"""helpers.fastpath: DeviceLoader gives DataLoader's batches, dataset_tensors gives ToTensor's values, the
large-batch schedule's rates, the choice of mixed precision, and a real GradScaler that steps and skips."""

import copy
import math
import shutil

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset
from torchvision import transforms

from helpers.data import SyntheticCIFAR10
from helpers.fastpath import (
    ADAM_BASE_BATCH_SIZE,
    ADAM_BASE_LR,
    Autocast,
    DeviceLoader,
    LargeBatchSchedule,
    LossStep,
    PaddedInputConv2d,
    _precision_for,
    adam,
    added_weights_max,
    bf16_supported,
    choose_precision,
    cudnn_autotuner,
    dataset_tensors,
    grad_scaler,
    sgd,
    timed_epoch,
    train_epoch,
    widen_first_conv,
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


def test_the_schedule_warms_up_from_the_seeds_rate_to_the_scaled_peak_then_decays():
    schedule = LargeBatchSchedule(batch_size=512, steps_per_epoch=20, epochs=10)
    assert schedule.peak_lr == pytest.approx(0.08)  # 0.01 x 512 / 64: the linear scaling rule
    assert schedule.warmup_steps == 20 and schedule.total_steps == 200
    lrs = [schedule.lr_at(step) for step in range(schedule.total_steps)]
    assert lrs[0] == pytest.approx(0.01)  # the warm-up starts at the seed's rate
    assert lrs[10] == pytest.approx(0.045)  # linear: half-way at half the warm-up
    assert all(b > a for a, b in zip(lrs[:20], lrs[1:21], strict=True))
    assert lrs[20] == pytest.approx(0.08) == max(lrs)  # the peak, right after the warm-up
    assert all(b < a for a, b in zip(lrs[20:], lrs[21:], strict=False))  # then down at every step
    # half a cosine from the peak to 0, which it reaches just after the last step
    assert lrs[110] == pytest.approx(0.04)
    assert lrs[-1] == pytest.approx(0.08 * 0.5 * (1 + math.cos(math.pi * 179 / 180)))
    assert 0 < lrs[-1] < 1e-4
    with pytest.raises(ValueError, match="step 200 is past the last step \\(199\\)"):
        schedule.lr_at(200)


def test_the_schedules_other_shapes():
    linear = LargeBatchSchedule(batch_size=256, steps_per_epoch=10, epochs=3, decay="linear", final_lr=0.004)
    assert linear.peak_lr == pytest.approx(0.04) and linear.lr_at(0) == pytest.approx(0.01)
    assert linear.lr_at(10) == pytest.approx(0.04)
    assert linear.lr_at(20) == pytest.approx(0.04 + (0.004 - 0.04) * 10 / 20)
    plain = LargeBatchSchedule(batch_size=512, steps_per_epoch=20, epochs=2, warmup_epochs=0, decay="none")
    assert [plain.lr_at(step) for step in range(40)] == [pytest.approx(0.08)] * 40  # the peak from step 0
    capped = LargeBatchSchedule(batch_size=8192, steps_per_epoch=7, epochs=10, max_lr=0.5)
    assert capped.peak_lr == 0.5 and "max_lr; the rule gives 1.28" in capped.describe()
    small = LargeBatchSchedule(batch_size=32, steps_per_epoch=5, epochs=2, decay="none")
    assert small.peak_lr == pytest.approx(0.005) and small.lr_at(0) == pytest.approx(
        0.005
    )  # never above the peak
    short = LargeBatchSchedule(batch_size=512, steps_per_epoch=4, epochs=1, warmup_epochs=2)
    assert short.warmup_steps == 4 and short.lr_at(3) < short.peak_lr  # all warm-up, never past the end


def test_adams_schedule_scales_by_the_square_root_of_the_batch():
    adam_recipe = {"base_batch_size": ADAM_BASE_BATCH_SIZE, "base_lr": ADAM_BASE_LR, "scaling": "sqrt"}
    schedule = LargeBatchSchedule(batch_size=2048, steps_per_epoch=25, epochs=15, **adam_recipe)
    assert (ADAM_BASE_BATCH_SIZE, ADAM_BASE_LR) == (128, 0.001)
    assert schedule.peak_lr == pytest.approx(0.004)  # 0.001 x sqrt(2048 / 128) = 0.001 x 4
    assert schedule.lr_at(0) == pytest.approx(0.001) and schedule.lr_at(25) == pytest.approx(0.004)
    assert "lr 0.004 = 0.001 x sqrt(2048/128), a warm-up from 0.001 over 25 steps" in schedule.describe()
    assert LargeBatchSchedule(8192, 7, 15, **adam_recipe).peak_lr == pytest.approx(0.008)
    capped = LargeBatchSchedule(8192, 7, 15, max_lr=0.004, **adam_recipe)
    assert capped.peak_lr == 0.004 and "max_lr; the rule gives 0.008" in capped.describe()
    linear = LargeBatchSchedule(2048, 25, 15, base_batch_size=128, base_lr=0.001)
    assert linear.peak_lr == pytest.approx(0.016)  # the default: linear, 16x


def test_the_schedule_sets_the_rate_of_every_parameter_group():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=1.0
    )
    schedule = LargeBatchSchedule(batch_size=128, steps_per_epoch=4, epochs=2)
    assert schedule.apply(optimizer, 2) == pytest.approx(0.015)
    assert [group["lr"] for group in optimizer.param_groups] == [pytest.approx(0.015)] * 2
    assert "batch 128: lr 0.02 = 0.01 x 128/64, a warm-up from 0.01 over 4 steps" in schedule.describe()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be 1 or more"),
        ({"epochs": 2.5}, TypeError, "epochs must be a whole number"),
        ({"decay": "step"}, ValueError, "decay must be one of"),
        ({"base_lr": 0}, ValueError, "base_lr must be more than 0"),
        ({"max_lr": float("nan")}, TypeError, "max_lr must be a finite number"),
        ({"final_lr": 1.0}, ValueError, "final_lr 1.0 is above the peak"),
        ({"warmup_epochs": -1}, ValueError, "warmup_epochs must be at least 0"),
        ({"scaling": "log"}, ValueError, "scaling must be one of \\('linear', 'sqrt'\\) \\('linear' for SGD"),
    ],
)
def test_the_schedule_refuses_settings_that_make_no_sense(kwargs, error, words):
    with pytest.raises(error, match=words):
        LargeBatchSchedule(**{"batch_size": 512, "steps_per_epoch": 10, "epochs": 2, **kwargs})


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


def test_train_epoch_follows_the_schedule_and_counts_what_it_trained():
    x, y = torch.randn(100, 3, 8, 8), torch.randint(0, 10, (100,))
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 1.0)
    loader = DeviceLoader(x, y, batch_size=32, shuffle=True)
    schedule = LargeBatchSchedule(batch_size=32, steps_per_epoch=len(loader), epochs=2, base_lr=0.05)
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
    whole, whole_stats = _two_epochs(LossStep)
    for a, b in zip(plain.parameters(), whole.parameters(), strict=True):
        assert torch.equal(a, b)
    assert [(s.loss, s.accuracy, s.samples) for s in plain_stats] == [
        (s.loss, s.accuracy, s.samples) for s in whole_stats
    ]
    # its own loss function, not train_epoch's
    smoothed, _ = _two_epochs(lambda m: LossStep(m, nn.CrossEntropyLoss(label_smoothing=0.5)))
    assert not torch.equal(next(smoothed.parameters()), next(plain.parameters()))


@pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++")), reason="torch.compile on a CPU needs a C++ compiler"
)
def test_a_compiled_loss_step_trains_as_the_eager_one():
    # torch.compile on the CPU (a C++ compiler, as in CI): the whole step as one graph
    eager, eager_stats = _two_epochs(LossStep)
    compiled, compiled_stats = _two_epochs(LossStep, compile_step=True)
    for a, b in zip(eager.parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert compiled_stats[-1].loss == pytest.approx(eager_stats[-1].loss, rel=1e-4)


def test_a_loss_step_that_is_not_callable_is_named():
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 0.1)
    loader = DeviceLoader(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,)), batch_size=4)
    with pytest.raises(TypeError, match="loss_step must be a LossStep of the model.*got str"):
        train_epoch(model, loader, optimizer, "cpu", loss_step="LossStep")
    with pytest.raises(TypeError, match="LossStep wraps a model"):
        LossStep("model")


def test_train_epoch_stops_a_run_whose_loss_became_nan():
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    model = _small_model()
    optimizer, _ = sgd(model.parameters(), 1e12)  # one step throws the weights to infinity
    with pytest.raises(FloatingPointError, match="training diverged in this epoch .*steps 0 to 7"):
        train_epoch(model, DeviceLoader(x, y, batch_size=8), optimizer, "cpu")


def test_fused_adam_is_used_where_torch_has_it_and_falls_back_where_not():
    model = nn.Linear(2, 2)
    optimizer, kind = adam(model.parameters(), 0.004, fused=True)
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.defaults["lr"] == 0.004
    assert kind == "fused" and optimizer.defaults["fused"] is True  # on the CPU since torch 2.4
    meta = nn.Linear(2, 2, device="meta")
    optimizer, kind = adam(meta.parameters(), 0.004, fused=True)
    assert kind.startswith("default (no fused Adam here") and not optimizer.defaults.get("fused")
    optimizer, kind = adam(model.parameters(), 0.004)
    assert kind == "default" and not optimizer.defaults.get("fused")


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


def test_a_first_convolution_widened_with_zeros_is_the_same_network():
    # the candidate for the slow first-layer kernel of the H100 profile: Tudui with its first
    # convolution over 8 input channels (zero weights, zero channels added to its input) must compute
    # what Tudui computes, train as it trains, and keep the added weights at zero
    torch.manual_seed(0)
    tudui = Tudui()
    wide = widen_first_conv(copy.deepcopy(tudui), 8)
    first = wide.model[0]
    assert isinstance(first, PaddedInputConv2d) and first.in_channels == 8 and first.given_channels == 3
    assert torch.equal(first.weight[:, :3], tudui.model[0].weight) and not first.weight[:, 3:].any()
    assert sum(p.numel() for p in wide.parameters()) == 145_578 + 32 * 5 * 5 * 5
    images, labels = torch.rand(32, 3, 32, 32), torch.randint(0, 10, (32,))
    torch.testing.assert_close(wide(images), tudui(images), rtol=1e-5, atol=1e-5)
    for layout in (torch.contiguous_format, torch.channels_last):  # either layout in, the same out
        net = copy.deepcopy(wide).to(memory_format=layout)
        given = images.contiguous(memory_format=layout)
        padded = net.model[0].pad_input(given)  # what the convolution gets: 8 channels, the layout kept
        assert padded.shape == (32, 8, 32, 32) and padded.is_contiguous(memory_format=layout)
        assert torch.equal(padded[:, :3], images) and not padded[:, 3:].any()
        torch.testing.assert_close(net(given), tudui(images), rtol=1e-5, atol=1e-5)
    one = wide.model[0](images[0])  # an unbatched image, as nn.Conv2d takes it
    torch.testing.assert_close(one, tudui.model[0](images[0]), rtol=1e-5, atol=1e-5)
    assert added_weights_max(wide) == 0.0 and added_weights_max(tudui) is None
    for kind in (torch.optim.SGD, torch.optim.Adam):
        nets = {"tudui": copy.deepcopy(tudui), "wide": copy.deepcopy(wide)}
        for net in nets.values():
            optimizer = kind(net.parameters(), lr=0.01)
            for _ in range(3):
                optimizer.zero_grad()
                nn.functional.cross_entropy(net(images), labels).backward()
                optimizer.step()
        assert added_weights_max(nets["wide"]) == 0.0, f"{kind.__name__}: the added weights must stay 0"
        if (
            kind is torch.optim.SGD
        ):  # Adam's division by the root of tiny squared gradients magnifies rounding
            for mine, theirs in zip(nets["wide"].parameters(), nets["tudui"].parameters(), strict=True):
                kept = mine[:, :3] if mine.shape[1:2] == (8,) and mine.dim() == 4 else mine
                torch.testing.assert_close(kept, theirs, rtol=1e-5, atol=1e-6)


def test_widening_refuses_what_it_cannot_widen():
    with pytest.raises(ValueError, match="cannot widen a convolution of 3 input channels to 2"):
        widen_first_conv(Tudui(), 2)
    with pytest.raises(ValueError, match="in 2 groups"):
        PaddedInputConv2d(nn.Conv2d(4, 4, 3, groups=2), 8)
    with pytest.raises(ValueError, match="has no nn.Conv2d"):
        widen_first_conv(nn.Linear(3, 4), 8)
    with pytest.raises(TypeError, match="is a convolution itself"):
        widen_first_conv(nn.Conv2d(3, 4, 3), 8)
    with pytest.raises(TypeError, match="copies an nn.Conv2d"):
        PaddedInputConv2d(nn.Linear(3, 4), 8)


def test_added_weights_max_sees_an_added_weight_that_moved():
    wide = widen_first_conv(Tudui(), 4)
    with torch.no_grad():
        wide.model[0].weight[5, 3, 2, 2] = -0.25
    assert added_weights_max(wide) == 0.25


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


@pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++")), reason="torch.compile on a CPU needs a C++ compiler"
)
def test_a_widened_first_convolution_compiles_to_the_same_network():
    torch.manual_seed(0)
    tudui = Tudui()
    wide = widen_first_conv(copy.deepcopy(tudui), 8)
    images = torch.rand(16, 3, 32, 32)
    compiled = torch.compile(wide, dynamic=False)  # inductor on the CPU: the padding inside the graph
    torch.testing.assert_close(compiled(images), tudui(images), rtol=1e-4, atol=1e-4)


def test_the_cudnn_autotuner_is_on_inside_its_block_and_put_back_after_even_on_an_error():
    before = torch.backends.cudnn.benchmark
    for enabled in (True, False):
        with cudnn_autotuner(enabled) as value:
            assert torch.backends.cudnn.benchmark is enabled and value is enabled
        assert torch.backends.cudnn.benchmark is before
    with pytest.raises(ZeroDivisionError), cudnn_autotuner(not before):
        raise ZeroDivisionError("inside the block")
    assert torch.backends.cudnn.benchmark is before
    torch.backends.cudnn.benchmark = True  # a setting of the user's own is put back too
    try:
        with cudnn_autotuner(False):
            assert torch.backends.cudnn.benchmark is False
        assert torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.benchmark = before


@pytest.mark.parametrize("wrong", ["on", 1, None])
def test_the_cudnn_autotuner_takes_only_true_or_false(wrong):
    before = torch.backends.cudnn.benchmark
    with pytest.raises(TypeError, match=r"cudnn_autotuner\(enabled\) takes True or False, got "):
        cudnn_autotuner(wrong).__enter__()  # the check is made on entering, before the flag is touched
    assert torch.backends.cudnn.benchmark is before
