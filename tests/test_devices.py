import dataclasses
from collections import OrderedDict, defaultdict, namedtuple

import numpy as np
import pytest
import torch
from gpus import requires_cuda
from torch import nn

from helpers.devices import as_device, describe_devices, pick_device, to_device, to_numpy

# --- pick_device and as_device ----------------------------------------------------------------


def test_the_default_is_an_available_device_with_the_index_tensors_report(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    device = pick_device()
    assert torch.zeros(1, device=device).device == device
    if torch.cuda.is_available():
        assert device == torch.device("cuda", torch.cuda.current_device())
    accelerator = getattr(torch, "accelerator", None)
    tutorials = (
        accelerator.current_accelerator().type
        if accelerator and accelerator.is_available()
        else "cpu"
    )
    assert device.type == tutorials  # the choice of PyTorch's tutorials, plus the index


@pytest.mark.parametrize("value", ["cpu", " cpu\n"])
def test_course_device_chooses_the_device_of_every_notebook(monkeypatch, value):
    monkeypatch.setenv("COURSE_DEVICE", value)
    assert pick_device() == torch.device("cpu")
    assert "COURSE_DEVICE='cpu'" in describe_devices()
    assert pick_device("cpu") == torch.device("cpu")  # an argument still decides


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_course_device_counts_as_unset(monkeypatch, value):
    monkeypatch.setenv("COURSE_DEVICE", value)
    expected = pick_device()
    monkeypatch.delenv("COURSE_DEVICE")
    assert expected == pick_device()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("CPU", "lower case: 'cpu'"),
        ("gpu", "called 'cuda'"),
        ("cuda0", "'cuda:0'"),
        ("meta", "no values"),
        ("tpu:0", "not a device name"),
        (f"cuda:{torch.cuda.device_count()}", "COURSE_DEVICE"),
    ],
)
def test_a_wrong_course_device_names_the_variable_and_what_to_set(monkeypatch, value, words):
    monkeypatch.setenv("COURSE_DEVICE", value)
    with pytest.raises(ValueError, match=words) as caught:
        pick_device()
    assert "COURSE_DEVICE" in str(caught.value)
    assert "unset" in str(caught.value)


@pytest.mark.parametrize(("asked", "expected"), [("cpu", "cpu"), (" cpu\n", "cpu")])
def test_names_and_devices_that_every_machine_has(asked, expected):
    assert pick_device(asked) == pick_device(torch.device(asked.strip())) == torch.device(expected)


@pytest.mark.parametrize(
    ("asked", "words"),
    [
        ("gpu", "called 'cuda'"),
        ("GPU:0", "called 'cuda'"),
        ("CPU", "lower case: 'cpu'"),
        ("Cuda:0", "lower case: 'cuda:0'"),
        ("", "empty"),
        ("   ", "empty"),
        ("cuda0", "'cuda:0'"),
        ("CUDA 1", "'cuda:1'"),
        ("cuda: 0", "'cuda:0'"),
        ("cuda:-1", "from 0: 'cuda:0'"),
        ("cuda:x", "'cuda:N'"),
        (f"cuda:{torch.cuda.device_count()}", "This machine has"),  # one past the last GPU
        pytest.param(
            "cuda", "Colab", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU")
        ),
        pytest.param(
            "mps", "MPS", marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS")
        ),
        pytest.param(
            "xpu:7", "no XPU", marks=pytest.mark.skipif(torch.xpu.is_available(), reason="an XPU")
        ),
    ],
)
def test_a_device_the_machine_lacks_or_a_wrong_name_says_what_there_is(asked, words):
    with pytest.raises(ValueError) as info:
        pick_device(asked)
    message = str(info.value)
    assert repr(asked) in message and "This machine has" in message and words in message, message


def test_each_mistaken_device_name_gets_its_own_hint():
    hints = {}
    for asked in ("CPU", "cuda0", "", "gpu"):
        with pytest.raises(ValueError) as info:
            pick_device(asked)
        hints[asked] = str(info.value).split(": ")[2]  # after "pick_device: preferred '...'"
    assert len(set(hints.values())) == 4, hints


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (0, "'cuda:0' for GPU number 0"),
        (True, "'cpu' or 'cuda'"),
        (1.5, "torch.device"),
        (None, r"device=pick_device\(\)"),
        (["cuda"], "swap two arguments of to_device"),
        (torch.ones(2), "swap two arguments of to_device"),
        (np.zeros(2), "swap two arguments of to_device"),
        (nn.Linear(2, 2), "swap two arguments of to_device"),
    ],
)
def test_a_device_of_the_wrong_type_names_the_argument_and_the_caller(wrong, words):
    with pytest.raises(TypeError, match="to_device: device must be a device, e.g. pick_device()"):
        to_device(torch.ones(1), wrong)
    with pytest.raises(TypeError, match=words):
        to_device(torch.ones(1), wrong)
    with pytest.raises(TypeError, match="timer: device must"):
        as_device(wrong, caller="timer")


@requires_cuda
def test_cuda_gets_the_current_index_and_every_gpu_can_be_picked():
    assert pick_device("cuda") == torch.device("cuda", torch.cuda.current_device())
    last = torch.cuda.device_count() - 1
    assert pick_device(f"cuda:{last}") == torch.device("cuda", last)


# --- describe_devices ------------------------------------------------------------------------


def test_describe_devices_names_torch_the_hardware_and_the_visible_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    text = describe_devices()
    assert torch.__version__ in text and "CPU:" in text and "CUDA_VISIBLE_DEVICES=''" in text
    for i in range(torch.cuda.device_count()):
        assert torch.cuda.get_device_name(i) in text
    if pick_device().type == "cpu":
        assert "No GPU" in text and "Colab" in text


# --- to_device -------------------------------------------------------------------------------

Pair = namedtuple("Pair", "x y")


def test_to_device_moves_nested_structures_and_keeps_their_types():
    target = pick_device()
    batch = {
        "a": torch.ones(2),
        "b": [torch.zeros(1), (torch.zeros(3), "label", 7, None, np.float32(1))],
        "c": Pair(torch.ones(1), 2.5),
        "d": OrderedDict(k=torch.ones(1)),
    }
    moved = to_device(batch, target)
    assert (
        moved["a"].device == target
        and moved["b"][0].device == target
        and moved["b"][1][0].device == target
    )
    assert isinstance(moved["b"], list) and moved["b"][1][1:] == ("label", 7, None, np.float32(1))
    assert isinstance(moved["c"], Pair) and moved["c"].x.device == target and moved["c"].y == 2.5
    assert moved["d"]["k"].device == target and type(moved["d"]) is OrderedDict
    assert batch["a"].device.type == "cpu", "the input is not changed"
    counts = to_device(defaultdict(int, {"n": torch.ones(1)}), target)
    assert counts["other"] == 0 and counts["n"].device == target  # still a defaultdict
    assert to_device(Batch(torch.ones(1), "cat"), target).x.device == target
    assert to_device({1, "a"}, target) == {1, "a"}


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    name: str


def test_to_device_returns_a_tensor_already_there_and_moves_modules_in_place():
    t = torch.ones(3)
    model = nn.Linear(2, 2)
    assert to_device(t, "cpu") is t and to_device(model, pick_device()) is model


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (np.zeros(3), "torch.from_numpy"),
        (object(), "cannot move a object"),
        (iter([torch.ones(1)]), "cannot move a list_iterator"),
    ],
)
def test_to_device_refuses_what_it_cannot_move(wrong, words):
    with pytest.raises(TypeError, match=words):
        to_device({"x": wrong}, "cpu")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda model: to_device(model, "cuda:99"), "to_device: device 'cuda:99'"),
        (
            lambda model: to_device(model, "meta"),
            "on 'meta' a model keeps its shapes, not its weights",
        ),
        (lambda model: pick_device("meta"), "'meta' has shapes but no values"),
    ],
)
def test_a_device_the_machine_lacks_or_that_loses_the_weights_is_refused(call, words):
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=words):
        call(model)
    assert model.weight.device.type == "cpu" and to_device(torch.ones(1), "meta").is_meta


@requires_cuda
def test_to_device_to_gpu_and_back():
    on_gpu = to_device((torch.ones(2), {"y": torch.zeros(2)}), "cuda")
    assert on_gpu[0].is_cuda and on_gpu[1]["y"].is_cuda
    assert to_device(on_gpu, "cpu")[0].device.type == "cpu"


# --- to_numpy --------------------------------------------------------------------------------


def test_to_numpy_detaches_and_shares_memory_on_the_cpu():
    assert to_numpy(torch.zeros(2, 3, requires_grad=True) * 2).shape == (2, 3)
    plain = torch.zeros(3)
    to_numpy(plain)[0] = 5
    assert plain[0].item() == 5


def test_to_numpy_gives_bfloat16_as_float32_and_refuses_a_meta_tensor():
    assert to_numpy(torch.tensor([1.5], dtype=torch.bfloat16)).dtype == np.float32
    with pytest.raises(NotImplementedError, match="to_numpy cannot be called on meta tensors"):
        to_numpy(torch.ones(2, device="meta"))


@pytest.mark.parametrize("wrong", [[1.0, 2.0], 3.0, np.zeros(2), None])
def test_to_numpy_refuses_non_tensors(wrong):
    with pytest.raises(TypeError, match=f"expects a torch.Tensor, got {type(wrong).__name__}"):
        to_numpy(wrong)


@requires_cuda
def test_to_numpy_from_the_gpu_is_a_copy():
    t = torch.zeros(3, device="cuda")
    to_numpy(t)[0] = 5
    assert t[0].item() == 0
