"""helpers.fastpath: DeviceLoader gives DataLoader's batches, dataset_tensors gives ToTensor's values."""

import pytest
import torch
from conftest import requires_cuda
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset
from torchvision import transforms

from helpers.data import SyntheticCIFAR10
from helpers.fastpath import Autocast, DeviceLoader, bf16_supported, dataset_tensors
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
