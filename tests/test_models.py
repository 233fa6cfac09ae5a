import pytest
import torch
from conftest import requires_cuda

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


@requires_cuda
@pytest.mark.parametrize("model_class", [Tudui, CifarNet])
def test_models_run_on_the_gpu(model_class):
    model = model_class().cuda()
    assert model(torch.randn(2, 3, 32, 32, device="cuda")).is_cuda


@pytest.mark.parametrize("model_class", [Tudui, CifarNet])
@pytest.mark.parametrize(
    ("images", "error", "words"),
    [
        (torch.randn(3, 32, 32), ValueError, r"one image \(3, 32, 32\).*unsqueeze\(0\)"),
        (torch.randn(2, 32, 32, 3), ValueError, r"permute\(0, 3, 1, 2\)"),
        (torch.randn(2, 1, 28, 28), ValueError, r"\(N, 3, 32, 32\), CIFAR-10's, got \(2, 1, 28, 28\)"),
        (torch.randn(2, 3 * 32 * 32), ValueError, r"got \(2, 3072\)"),
        (
            torch.zeros(2, 3, 32, 32, dtype=torch.uint8),
            TypeError,
            r"float images, got torch.uint8.*x.float\(\) / 255",
        ),
        ([[0.0] * 32] * 3, TypeError, "of images .*got list"),
    ],
)
def test_inputs_the_models_cannot_take_are_named(model_class, images, error, words):
    with pytest.raises(error, match=f"{model_class.__name__} expects .*{words}"):
        model_class()(images)


def test_the_models_take_channels_last_and_half_precision_batches():
    images = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    assert CifarNet()(images).shape == (2, 10)
    assert Tudui().to(torch.bfloat16)(images.to(torch.bfloat16)).dtype == torch.bfloat16


@pytest.mark.parametrize("bad", [Tudui, "cifarnet", None, [torch.ones(2)]])
def test_count_parameters_of_something_else_than_a_model(bad):
    with pytest.raises(TypeError, match="count_parameters: model"):
        count_parameters(bad)
