import inspect
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch
from conftest import requires_cuda, requires_two_gpus
from torch import nn

from helpers.devices import describe_devices, pick_device, to_device, to_numpy

requires_accelerator_api = pytest.mark.skipif(
    not hasattr(torch, "accelerator"), reason="torch.accelerator came with PyTorch 2.6"
)

# --- pick_device -----------------------------------------------------------------------------


def test_default_is_an_available_device_with_an_index_for_accelerators():
    device = pick_device()
    assert isinstance(device, torch.device)
    if torch.cuda.is_available():
        assert device == torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        assert device.index is not None
    assert torch.zeros(1, device=device).device == device


@requires_accelerator_api
def test_default_is_torch_accelerators_choice_plus_the_index():
    accelerator = torch.accelerator
    # the line PyTorch's tutorials choose the device with: a type, without an index
    tutorials = accelerator.current_accelerator().type if accelerator.is_available() else "cpu"
    device = pick_device()
    assert device.type == tutorials
    if tutorials == "cpu":
        assert device == torch.device("cpu")
    else:
        assert accelerator.current_accelerator().index is None
        assert device == torch.device(tutorials, accelerator.current_device_index())
        assert device != torch.device(tutorials) and torch.zeros(1, device=tutorials).device == device


@requires_accelerator_api
def test_an_accelerator_pytorch_was_built_for_but_cannot_use_is_not_chosen():
    accelerator = torch.accelerator
    if accelerator.is_available():
        pytest.skip("this machine has an accelerator")
    if "check_available" in inspect.signature(accelerator.current_accelerator).parameters:  # 2.7 and later
        built_for = accelerator.current_accelerator()  # the build's accelerator, usable or not
        assert accelerator.current_accelerator(check_available=True) is None
        if torch.version.cuda is not None:
            assert built_for == torch.device("cuda")  # a CUDA build without a GPU, as here in CI
    assert accelerator.device_count() == 0
    assert pick_device() == torch.device("cpu")


def test_without_torch_accelerator_the_choice_and_the_description_are_the_same(monkeypatch):
    chosen, described = pick_device(), describe_devices()
    monkeypatch.delattr(torch, "accelerator", raising=False)  # as on PyTorch before 2.6
    assert not hasattr(torch, "accelerator")
    assert pick_device() == chosen
    assert describe_devices() == described
    assert torch.zeros(1, device=pick_device()).device == chosen


def test_cpu_by_string_and_by_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")
    assert pick_device(" cpu ") == torch.device("cpu")


def test_meta_is_always_available():
    assert pick_device("meta") == torch.device("meta")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cuda:-1", "", "CUDA 0"])
def test_malformed_strings_get_a_clear_value_error(bad):
    with pytest.raises(ValueError) as info:
        pick_device(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert "This machine has" in message and "'cpu'" in message


def test_gpu_gets_a_hint_that_pytorch_calls_it_cuda():
    with pytest.raises(ValueError, match="called 'cuda'"):
        pick_device("gpu")


def test_a_gpu_number_past_the_last_is_refused():
    asked = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(ValueError) as info:
        pick_device(asked)
    assert asked in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_on_a_cpu_only_machine_says_what_to_do():
    with pytest.raises(ValueError) as info:
        pick_device("cuda")
    message = str(info.value)
    assert "'cuda'" in message and "no GPU" in message and "pick_device()" in message and "Colab" in message


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks the no-MPS message")
def test_mps_without_apple_silicon_is_refused():
    with pytest.raises(ValueError, match="MPS"):
        pick_device("mps")


def test_a_device_type_this_machine_lacks_is_refused():
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    with pytest.raises(ValueError, match="no xpu device"):
        pick_device("xpu")


@pytest.mark.parametrize("bad", [0, 1.5, ["cuda"]])
def test_wrong_argument_types_get_a_type_error(bad):
    with pytest.raises(TypeError, match="pick_device expects"):
        pick_device(bad)


@requires_cuda
def test_cuda_without_index_gets_the_current_index():
    assert pick_device("cuda") == torch.device("cuda", torch.cuda.current_device())
    assert pick_device("cuda:0") == torch.device("cuda:0")


@requires_two_gpus
def test_second_gpu():
    assert pick_device("cuda:1") == torch.device("cuda:1")


# --- describe_devices ------------------------------------------------------------------------


def test_describe_devices_names_torch_and_the_hardware():
    text = describe_devices()
    assert torch.__version__ in text
    assert "CPU:" in text
    if torch.cuda.is_available():
        assert torch.cuda.get_device_name(0) in text and "GiB" in text
    elif not torch.backends.mps.is_available():
        assert "No GPU" in text and "Colab" in text


def test_describe_devices_reports_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES=''" in describe_devices()


# --- to_device -------------------------------------------------------------------------------

Pair = namedtuple("Pair", "x y")


def test_to_device_moves_nested_structures_and_keeps_their_types():
    target = torch.device("meta")  # a second device on every machine
    batch = {
        "a": torch.ones(2),
        "b": [torch.zeros(1), (torch.zeros(3), "label", 7, None)],
        "c": Pair(torch.ones(1), 2.5),
        "d": OrderedDict(k=torch.ones(1)),
    }
    moved = to_device(batch, target)
    assert moved["a"].device == target
    assert isinstance(moved["b"], list) and isinstance(moved["b"][1], tuple)
    assert moved["b"][0].device == target and moved["b"][1][0].device == target
    assert moved["b"][1][1:] == ("label", 7, None)
    assert isinstance(moved["c"], Pair) and moved["c"].x.device == target and moved["c"].y == 2.5
    assert isinstance(moved["d"], OrderedDict) and moved["d"]["k"].device == target
    assert batch["a"].device.type == "cpu", "the input is not changed"


def test_to_device_returns_the_same_tensor_when_already_there():
    t = torch.ones(3)
    assert to_device(t, "cpu") is t


def test_to_device_moves_modules_in_place():
    model = nn.Linear(2, 2)
    assert to_device(model, "meta") is model
    assert model.weight.device.type == "meta"


def test_to_device_refuses_numpy_arrays_with_advice():
    with pytest.raises(TypeError, match="torch.from_numpy"):
        to_device(np.zeros(3), "cpu")


@requires_cuda
def test_to_device_to_gpu_and_back():
    batch = (torch.ones(2), {"y": torch.zeros(2)})
    on_gpu = to_device(batch, "cuda")
    assert on_gpu[0].is_cuda and on_gpu[1]["y"].is_cuda
    back = to_device(on_gpu, "cpu")
    assert torch.equal(back[0], batch[0])


# --- to_numpy --------------------------------------------------------------------------------


def test_to_numpy_detaches_and_converts():
    t = torch.ones(2, 3, requires_grad=True) * 2
    array = to_numpy(t)
    assert isinstance(array, np.ndarray) and array.shape == (2, 3) and (array == 2).all()


def test_to_numpy_shares_memory_on_the_cpu():
    t = torch.zeros(3)
    to_numpy(t)[0] = 5
    assert t[0].item() == 5


@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, np.zeros(2), None])
def test_to_numpy_refuses_non_tensors(bad):
    with pytest.raises(TypeError, match=f"got {type(bad).__name__}"):
        to_numpy(bad)


def test_to_numpy_explains_bfloat16():
    with pytest.raises(TypeError, match="bfloat16"):
        to_numpy(torch.ones(2, dtype=torch.bfloat16))


@requires_cuda
def test_to_numpy_from_the_gpu_is_a_copy():
    t = torch.zeros(3, device="cuda")
    array = to_numpy(t)
    array[0] = 5
    assert t[0].item() == 0


# --- one parser for every device argument ------------------------------------------------------


def _device_takers():
    """Every public helper that takes a device, as a function of that device alone."""
    from helpers.data import training_budget
    from helpers.fastpath import bf16_supported, dataset_tensors
    from helpers.timing import synchronize
    from helpers.train import evaluate

    class Tiny:
        data = np.zeros((2, 4, 4, 3), dtype=np.uint8)
        targets = [0, 1]

    batches = [(torch.zeros(2, 3), torch.tensor([0, 1]))]
    return {
        "pick_device": pick_device,
        "to_device": lambda d: to_device(torch.ones(1), d),
        "training_budget": lambda d: training_budget(d, gpu_epochs=2, cpu_epochs=1),
        "dataset_tensors": lambda d: dataset_tensors(Tiny(), d),
        "bf16_supported": bf16_supported,
        "synchronize": synchronize,
        "evaluate": lambda d: evaluate(nn.Linear(3, 2), batches, nn.CrossEntropyLoss(), d, progress=False),
    }


@pytest.mark.parametrize("name", sorted(_device_takers()))
@pytest.mark.parametrize("spelling", ["cpu", " cpu", "cpu\n", torch.device("cpu")])
def test_every_device_argument_accepts_the_same_spellings(name, spelling):
    _device_takers()[name](spelling)


@pytest.mark.parametrize("name", sorted(_device_takers()))
@pytest.mark.parametrize(
    ("bad", "error", "words"),
    [
        ("CPU", ValueError, "lower case: 'cpu'"),
        ("gpu", ValueError, "called 'cuda'"),
        ("cuda0", ValueError, "'cuda:0'"),
        ("cuda 1", ValueError, "'cuda:1'"),
        ("", ValueError, "empty"),
        (0, TypeError, "'cuda:0'"),
        (True, TypeError, "'cpu'"),
        (1.5, TypeError, "torch.device"),
        (torch.ones(2), TypeError, "swap"),
    ],
)
def test_every_device_argument_refuses_the_same_mistakes_naming_the_argument(name, bad, error, words):
    with pytest.raises(error) as info:
        _device_takers()[name](bad)
    message = str(info.value)
    assert words in message, message
    assert name in message or "Device" in message, message


@pytest.mark.parametrize("name", sorted(set(_device_takers()) - {"pick_device"}))
def test_none_as_a_device_says_what_to_pass(name):
    with pytest.raises(TypeError, match="pick_device()"):
        _device_takers()[name](None)


@pytest.mark.parametrize("name", ["to_device", "dataset_tensors", "synchronize", "evaluate"])
@pytest.mark.parametrize("absent", ["cuda:99", "mps:3", "xpu:7"])
def test_a_device_the_machine_lacks_is_refused_where_data_would_go_there(name, absent):
    if absent.startswith("xpu") and hasattr(torch, "xpu") and torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    with pytest.raises(ValueError, match="This machine has"):
        _device_takers()[name](absent)


# --- to_device: nothing comes back unmoved -------------------------------------------------------


@pytest.mark.parametrize(
    "swapped", [("cpu", torch.ones(2)), (torch.device("cpu"), torch.ones(2)), ("meta", nn.Linear(2, 2))]
)
def test_to_device_with_swapped_arguments_says_so(swapped):
    with pytest.raises(TypeError, match="swap two arguments of to_device"):
        to_device(*swapped)


class _BatchWithTo:
    """A batch class with its own .to(), as many libraries have (the keyword non_blocking included)."""

    def __init__(self, x):
        self.x = x

    def to(self, device, non_blocking=False):
        return _BatchWithTo(self.x.to(device, non_blocking=non_blocking))


class _MovesInPlace:
    def __init__(self, x):
        self.x = x

    def to(self, device):  # no non_blocking, returns None
        self.x = self.x.to(device)


def test_to_device_calls_a_batch_objects_own_to():
    moved = to_device({"batch": _BatchWithTo(torch.ones(2))}, "meta")
    assert moved["batch"].x.device.type == "meta"
    in_place = _MovesInPlace(torch.ones(2))
    assert to_device(in_place, "meta", non_blocking=True) is in_place and in_place.x.device.type == "meta"


def test_to_device_moves_dataclasses_sets_and_keeps_a_defaultdicts_factory():
    import dataclasses
    from collections import defaultdict

    @dataclasses.dataclass(frozen=True)
    class Sample:
        image: torch.Tensor
        label: int

    moved = to_device([Sample(torch.ones(1), 3)], "meta")[0]
    assert isinstance(moved, Sample) and moved.image.device.type == "meta" and moved.label == 3
    counts = defaultdict(list, a=torch.ones(1))
    moved = to_device(counts, "meta")
    assert isinstance(moved, defaultdict) and moved.default_factory is list and moved["a"].is_meta
    assert {t.device.type for t in to_device({torch.ones(1)}, "meta")} == {"meta"}


def test_to_device_passes_plain_values_through():
    from pathlib import Path

    values = ("name", b"raw", 3, 2.5, None, np.float32(1.5), torch.float16, Path("a.png"), range(3))
    assert to_device(values, "cpu") == values


@pytest.mark.parametrize("opaque", [object(), lambda: 1, type("Holder", (), {"t": torch.ones(1)})()])
def test_to_device_refuses_what_it_cannot_see_into(opaque):
    with pytest.raises(TypeError, match=r"to_device cannot move a .*\.to\(device\)"):
        to_device([opaque], "cpu")


def test_to_device_refuses_a_non_bool_non_blocking():
    with pytest.raises(TypeError, match="non_blocking"):
        to_device(torch.ones(1), "cpu", non_blocking="yes")
