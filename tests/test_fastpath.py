"""helpers.fastpath: DeviceLoader, dataset_tensors, mixed precision, GradScaler and the fast path's
training loop."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchvision import transforms

from helpers import fastpath
from helpers.fastpath import (
    Autocast,
    DeviceLoader,
    dataset_tensors,
    fast_path_epoch,
    grad_scaler,
    timed_epoch,
)


def _same_batches(a, b):
    if len(a) != len(b):
        return False
    pairs = zip(a, b, strict=True)
    return all(torch.equal(p, q) for x, y in pairs for p, q in zip(x, y, strict=True))


@pytest.mark.parametrize(("n", "seed"), [(103, None), (100, None), (103, 5)])
def test_same_batches_and_random_streams_as_a_dataloader_over_a_tensordataset(n, seed):
    x = torch.randn(n, 3)
    y = torch.arange(n)
    streams = []
    makers = [
        lambda g: DataLoader(TensorDataset(x, y), batch_size=10, shuffle=True, generator=g),
        lambda g: DeviceLoader(x, y, batch_size=10, shuffle=True, generator=g),
    ]
    for make in makers:
        torch.manual_seed(1)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        loader = make(generator)
        iter(loader)  # an iterator made and dropped (as tqdm does) draws, in both
        streams.append(
            ([b for _ in range(3) for b in loader], len(loader), torch.rand(3), generator)
        )
    expected, length, after, g_reference = streams[0]
    got, our_length, our_after, g_ours = streams[1]
    assert _same_batches(got, expected) and our_length == length
    assert torch.equal(our_after, after)  # the global stream is left as a DataLoader leaves it
    if seed is not None:
        assert torch.equal(g_ours.get_state(), g_reference.get_state())


def test_every_sample_once_per_epoch_paired_with_its_label_on_its_device():
    labels = torch.arange(103)
    images = labels.float().view(103, 1, 1, 1).expand(103, 3, 2, 2)
    last = images.contiguous(memory_format=torch.channels_last)
    first = list(DeviceLoader(last, labels, batch_size=10, shuffle=True))
    second = list(DeviceLoader(last, labels, batch_size=10, shuffle=True))
    assert [len(b[1]) for b in first] == [10] * 10 + [3] and not _same_batches(first, second)
    assert sorted(torch.cat([b[1] for b in first]).tolist()) == list(range(103))
    assert all(torch.equal(x[:, 0, 0, 0].long(), y) for x, y in first)
    assert first[0][0].is_contiguous(memory_format=torch.channels_last)
    in_order = list(DeviceLoader(images, labels, batch_size=10))  # not shuffled: views, in order
    assert _same_batches(in_order, list(DataLoader(TensorDataset(images, labels), batch_size=10)))
    assert in_order[0][0].data_ptr() == images.data_ptr()
    meta = DeviceLoader(torch.empty(30, 3, device="meta"), batch_size=8, shuffle=True)  # a GPU
    assert all(b[0].device.type == "meta" for b in meta)


class _Images:
    """A dataset as CIFAR-10's: uint8 images N x H x W x 3 in .data, class numbers in .targets."""

    def __init__(self, targets, shape=(4, 4, 3), dtype=np.uint8, n=None):
        self.data = (
            np.random.default_rng(0).integers(0, 256, (n or len(targets), *shape)).astype(dtype)
        )
        self.targets = targets


def test_dataset_tensors_gives_what_totensor_gives():
    dataset = _Images([3, 1, 4.0, 1, 5])
    images, labels = dataset_tensors(dataset, "cpu")
    assert (
        images.shape == (5, 3, 4, 4)
        and labels.tolist() == [3, 1, 4, 1, 5]
        and labels.dtype == torch.int64
    )
    assert all(torch.equal(images[i], transforms.ToTensor()(dataset.data[i])) for i in range(5))
    last, _ = dataset_tensors(dataset, memory_format=torch.channels_last)
    assert last.is_contiguous(memory_format=torch.channels_last) and torch.equal(last, images)


Z = torch.zeros(4)


L = nn.Linear(4, 2)
SGD_L = torch.optim.SGD(L.parameters(), lr=0.1)
SGD_ELSEWHERE = torch.optim.SGD(nn.Linear(4, 2).parameters(), lr=0.1)


@pytest.mark.parametrize(
    ("make", "args", "options", "error", "words"),
    [
        (DeviceLoader, (), {}, TypeError, "takes tensors"),
        (Autocast, (nn.Linear,), {}, TypeError, "nn.Module"),
        (Autocast, (nn.Linear(2, 2), "bf16"), {}, ValueError, "torch.bfloat16 or torch.float16"),
        (DeviceLoader, (TensorDataset(Z),), {}, TypeError, "dataset_tensors"),
        (DeviceLoader, (np.zeros(4),), {}, TypeError, "ndarray.*torch.from_numpy"),
        (DeviceLoader, (Z, 64), {}, TypeError, "by name: batch_size=64"),
        (DeviceLoader, (Z, torch.zeros(5)), {}, ValueError, "one row per sample"),
        (DeviceLoader, (torch.zeros(0, 3),), {}, ValueError, "at least one"),
        (DeviceLoader, (Z, Z.to("meta")), {}, ValueError, "different devices"),
        (DeviceLoader, (Z,), {"batch_size": 0}, ValueError, "batch_size"),
        (DeviceLoader, (Z,), {"batch_size": -8}, ValueError, "batch_size"),
        (DeviceLoader, (Z,), {"batch_size": 2.0}, TypeError, "batch_size"),
        (DeviceLoader, (Z,), {"shuffle": "yes"}, TypeError, "shuffle"),
        (DeviceLoader, (Z,), {"generator": 5}, TypeError, "torch.Generator"),
        (dataset_tensors, (TensorDataset(Z),), {}, TypeError, ".data and .targets"),
        (dataset_tensors, (_Images([0, 1], dtype=np.float32),), {}, ValueError, "uint8"),
        (dataset_tensors, (_Images([0, 1], shape=(4, 4)),), {}, ValueError, "uint8 images"),
        (dataset_tensors, (_Images([0, 1.7]),), {}, TypeError, "class numbers"),
        (dataset_tensors, (_Images([1, float("nan")]),), {}, TypeError, "class numbers"),
        (dataset_tensors, (_Images([-1, 3]),), {}, TypeError, "class numbers"),
        (dataset_tensors, (_Images(["cat", "dog"]),), {}, TypeError, "class numbers"),
        (dataset_tensors, (_Images([0, 1], n=3),), {}, ValueError, "3 images but"),
        (dataset_tensors, (_Images([0, 1]), "gpu"), {}, ValueError, "cuda"),
        (dataset_tensors, (_Images([0, 1]), "CPU"), {}, ValueError, "lower case: 'cpu'"),
        (
            dataset_tensors,
            (_Images([0, 1]),),
            {"memory_format": "channels_last"},
            TypeError,
            "'channels_last'.*torch.channels_last",
        ),
        (grad_scaler, ("cpu",), {"enabled": "yes"}, TypeError, "enabled .*'yes'"),
        (timed_epoch, (L, [], SGD_L, "cpu"), {"compiled": True}, TypeError, "'compiled'.*scaler"),
        (fast_path_epoch, (L, [], SGD_ELSEWHERE, "cpu"), {}, ValueError, "another model"),
        (fast_path_epoch, (L, [], "sgd", "cpu"), {}, TypeError, "optimizer is 'sgd'"),
        (fast_path_epoch, (L, [], SGD_L, "cpu"), {"scaler": 1.0}, TypeError, "grad_scaler"),
        (fast_path_epoch, (L, [], SGD_L, "cpu"), {"loss_step": "ce"}, TypeError, "loss_step"),
        (fast_path_epoch, ("L", [], SGD_L, "cpu"), {}, TypeError, "nn.Module"),
    ],
)
def test_bad_input_is_refused_clearly(make, args, options, error, words):
    with pytest.raises(error, match=words):
        make(*args, **({"batch_size": 2} if make is DeviceLoader else {}) | options)


@pytest.mark.parametrize(
    ("device", "bf16", "cuda", "name", "dtype", "scaler"),
    [
        ("cpu", False, False, "float32", None, False),
        ("mps", False, False, "float32", None, False),
        ("cpu", True, False, "bf16 autocast", torch.bfloat16, False),
        ("cuda", True, True, "bf16 autocast", torch.bfloat16, False),
        ("cuda", False, True, "fp16 autocast + GradScaler", torch.float16, True),  # a T4
        ("cuda", False, False, "float32", None, False),
    ],
)
def test_the_precision_follows_what_the_device_computes(
    monkeypatch, device, bf16, cuda, name, dtype, scaler
):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": bf16}, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: bf16)
    precision = fastpath.choose_precision(device)
    assert fastpath.bf16_supported(device) is (bf16 and (device == "cpu" or cuda))
    assert (precision.name, precision.dtype, precision.scaler) == (name, dtype, scaler)
    assert precision.why


def test_the_fp16_pick_names_the_call_that_found_no_native_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: False)
    precision = fastpath.choose_precision("cuda")
    assert precision.dtype == torch.float16
    assert "torch.cuda.is_bf16_supported(including_emulation=False)" in precision.why


def test_autocast_runs_the_forward_in_bf16_and_returns_float32():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
    seen = {}
    model[0].register_forward_hook(lambda module, inputs, output: seen.update(dtype=output.dtype))
    outputs = Autocast(model)(torch.randn(2, 3, 8, 8))
    assert seen["dtype"] == torch.bfloat16 and outputs.dtype == torch.float32
    F.cross_entropy(outputs, torch.tensor([1, 2])).backward()
    assert all(
        p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters()
    )
    with pytest.raises(ValueError, match="bfloat16 or torch.float16"):
        Autocast(model, dtype=torch.float32)


def test_autocast_takes_a_model_without_parameters_and_outputs_of_any_structure():
    outputs = Autocast(nn.Flatten())(torch.randn(2, 3, 4))
    assert outputs.dtype == torch.float32 and outputs.shape == (2, 12)

    class Two(nn.Linear):
        def forward(self, x):
            y = super().forward(x)
            return {"scores": y, "labels": y.argmax(1)}, (y,)

    scores, (again,) = Autocast(Two(4, 3))(torch.randn(2, 4))
    assert scores["scores"].dtype == again.dtype == torch.float32
    assert scores["labels"].dtype == torch.int64
    with pytest.raises(TypeError, match="no parameters and was given no tensor"):
        Autocast(nn.Flatten())()


@pytest.mark.parametrize("fused", [False, True])
def test_a_grad_scaler_steps_as_plain_sgd_and_skips_a_step_whose_gradients_overflow(fused):
    torch.manual_seed(0)
    layer = nn.Linear(4, 2)
    plain = nn.Linear(4, 2)
    plain.load_state_dict(layer.state_dict())
    optimizer = torch.optim.SGD(layer.parameters(), 0.1, fused=fused)
    scaler = grad_scaler("cpu", init_scale=2.0**16)
    for times in (1.0, float("inf")):  # a step as plain SGD's, then one that overflows: skipped
        optimizer.zero_grad()
        scaler.scale(layer(torch.ones(2, 4)).sum() * times).backward()
        scaler.step(optimizer)
        scaler.update()
    plain(torch.ones(2, 4)).sum().backward()
    torch.optim.SGD(plain.parameters(), 0.1).step()
    torch.testing.assert_close(layer.weight, plain.weight)
    assert scaler.get_scale() == 2.0**15


def _train(epochs=1, inf_at=None, make_step=None, **options):
    """A linear model trained with fast_path_epoch on an easy problem: the model and each epoch's
    stats."""
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    model = nn.Linear(4, 2)
    loader = DeviceLoader(x, (x[:, 0] > 0).long(), batch_size=16)
    if inf_at is not None:
        x[inf_at] = float("inf")  # a NaN loss in that batch
    optimizer = torch.optim.SGD(model.parameters(), 0.5)
    step = make_step(model) if make_step else None
    stats = []
    for _ in range(epochs):
        stats.append(fast_path_epoch(model, loader, optimizer, "cpu", loss_step=step, **options))
    return model, stats


def test_the_fast_path_trains_and_counts_and_a_loss_step_replaces_the_model_loss_and_count():
    model, stats = _train(epochs=5)
    assert stats[-1].loss < stats[0].loss and stats[-1].accuracy > 0.8 and stats[-1].samples == 64
    assert stats[0].nonfinite_losses == 0 and stats[0].scale is None
    # what bench.py compiles: the model, the loss and the count in one function
    again, again_stats = _train(
        5, make_step=lambda m: lambda x, y: (F.cross_entropy(m(x), y), (m(x).argmax(1) == y).sum())
    )
    assert torch.equal(again.weight, model.weight) and again_stats == stats


def test_the_fast_path_stops_a_diverged_run_unless_a_scaler_skipped_the_steps():
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        _train(inf_at=0)
    _, (stats,) = _train(inf_at=0, scaler=grad_scaler("cpu"))
    assert stats.nonfinite_losses == 1 and stats.scale == 2.0**15
    model = nn.Linear(4, 2)
    with pytest.raises(ValueError, match="no batches"):
        fast_path_epoch(model, [], torch.optim.SGD(model.parameters(), lr=0.1), "cpu")


def test_timed_epoch_warms_up_then_times_one_whole_epoch():
    model = nn.Linear(4, 2)
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    optimizer = torch.optim.SGD(model.parameters(), 0.1, fused=True)
    loader = DeviceLoader(torch.randn(64, 4), torch.zeros(64, dtype=torch.long), batch_size=16)
    rate, stats = fastpath.timed_epoch(model, loader, optimizer, "cpu", scaler=grad_scaler("cpu"))
    assert len(calls) == 2 + 4 and stats.samples == 64 and rate > 0 and stats.scale is not None
