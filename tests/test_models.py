import pytest
import torch
from gpus import requires_cuda

from helpers.models import CifarNet, SimpleModel, Tudui, count_parameters


@pytest.mark.parametrize(
    ("model_class", "parameters", "input_shape", "output_shape"),
    [
        (Tudui, 145_578, (2, 3, 32, 32), (2, 10)),
        (CifarNet, 62_006, (2, 3, 32, 32), (2, 10)),
        (SimpleModel, 12, (4, 3), (4, 3)),
    ],
)
def test_parameter_counts_and_shapes(model_class, parameters, input_shape, output_shape):
    model = model_class()
    assert count_parameters(model) == parameters
    assert model(torch.randn(input_shape)).shape == output_shape


def test_count_parameters_skips_frozen_ones():
    model = SimpleModel()
    model.fc.bias.requires_grad_(False)
    assert count_parameters(model) == 9


@pytest.mark.parametrize(
    ("bad", "words"), [(Tudui, r"Tudui\(\)"), ("cifarnet", "pass a model"), (None, "model")]
)
def test_count_parameters_of_something_else_than_a_model(bad, words):
    with pytest.raises(TypeError, match=words):
        count_parameters(bad)


@pytest.mark.parametrize("model_class", [Tudui, CifarNet])
@pytest.mark.parametrize(
    ("images", "error", "words"),
    [
        (torch.rand(3, 32, 32), ValueError, r"unsqueeze\(0\)"),
        (torch.rand(2, 32, 32, 3), ValueError, "permute"),
        (torch.rand(2, 1, 28, 28), ValueError, r"\(2, 1, 28, 28\)"),
        (torch.zeros(2, 3, 32, 32, dtype=torch.uint8), TypeError, "float"),
        ([[0.0] * 32] * 32, TypeError, "tensor"),
    ],
)
def test_inputs_the_models_cannot_take_are_named(model_class, images, error, words):
    with pytest.raises(error, match=f"{model_class.__name__}.*{words}"):
        model_class()(images)


def test_the_models_take_channels_last_batches():
    x = torch.rand(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    assert Tudui()(x).shape == CifarNet()(x).shape == (2, 10)


@requires_cuda
@pytest.mark.parametrize("model_class", [Tudui, CifarNet])
def test_models_run_on_the_gpu(model_class):
    assert model_class().cuda()(torch.randn(2, 3, 32, 32, device="cuda")).is_cuda
