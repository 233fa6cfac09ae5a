import re

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


def test_docstrings_name_their_seed_and_notebook():
    for model_class in (Tudui, CifarNet, SimpleModel):
        doc = model_class.__doc__
        assert re.search(r"[Ss]eeds? 00\d", doc) and "``0" in doc, model_class.__name__


@requires_cuda
@pytest.mark.parametrize("model_class", [Tudui, CifarNet])
def test_models_run_on_the_gpu(model_class):
    model = model_class().cuda()
    assert model(torch.randn(2, 3, 32, 32, device="cuda")).is_cuda
