"""Checks for the exercises of ``04_data_parallel``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

from helpers.checks import correct, fail, not_answered

__all__ = ["check_numpy_batch_to_device", "check_plain_state_dict", "check_visible_gpus_env"]

_TARGET = torch.device("meta")  # stands in for a GPU: it exists on every machine


def _tiny_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))


def check_numpy_batch_to_device(numpy_batch_to_device: Callable) -> bool:
    """Exercise 1: float64 features and int32 labels from NumPy become float32/int64 tensors on the device."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 6))  # float64, as NumPy makes it
    y = rng.integers(0, 3, size=5).astype(np.int32)  # what many loaders produce
    answer = numpy_batch_to_device(x, y, _TARGET)
    if answer is None:
        return not_answered("return (inputs, targets) as tensors on `device`")
    if not (isinstance(answer, tuple | list) and len(answer) == 2):
        fail(f"return two things, (inputs, targets); got {type(answer).__name__}")
    inputs, targets = answer
    for name, value in (("inputs", inputs), ("targets", targets)):
        if isinstance(value, np.ndarray):
            fail(f"the {name} are still a NumPy array: turn them into a tensor with torch.from_numpy(...)")
        if not isinstance(value, torch.Tensor):
            fail(f"the {name} should be a torch.Tensor, got {type(value).__name__}")
    if inputs.device.type == "cpu":
        fail("the inputs are still on cpu: move them with .to(device)")
    if targets.device.type == "cpu":
        fail("the targets of this batch were not moved: call .to(device) on them too")
    if inputs.dtype != torch.float32:
        fail(
            f"the inputs are {str(inputs.dtype).removeprefix('torch.')}, but the model's weights are "
            "float32: convert with x.astype(np.float32) before torch.from_numpy, or .float()"
        )
    if targets.dtype != torch.int64:
        fail(
            f"the targets are {str(targets.dtype).removeprefix('torch.')}: CrossEntropyLoss wants int64 "
            "class indices; convert with .long() (or y.astype(np.int64))"
        )
    if tuple(inputs.shape) != x.shape or tuple(targets.shape) != y.shape:
        fail(
            f"the shapes changed: inputs {tuple(inputs.shape)} (expected {x.shape}), "
            f"targets {tuple(targets.shape)} (expected {y.shape})"
        )
    return correct("float32 inputs and int64 targets, both on the device")


def check_plain_state_dict(plain_state_dict: Callable) -> bool:
    """Exercise 2: the weights of a DataParallel model, loadable into the unwrapped model."""
    wrapped = nn.DataParallel(_tiny_net())
    answer = plain_state_dict(wrapped)
    if answer is None:
        return not_answered("return a state_dict that the unwrapped model accepts")
    if isinstance(answer, nn.Module):
        fail("that is a model, not its weights: return a state_dict (call .state_dict() on the right module)")
    if not isinstance(answer, Mapping):
        fail(f"return a state_dict (a dict of tensors), got {type(answer).__name__}")
    if any(str(key).startswith("module.") for key in answer):
        fail(
            "the keys start with 'module.', which only the wrapper has: take the state_dict of "
            "wrapped.module, or strip the prefix"
        )
    plain = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    try:
        plain.load_state_dict(answer)
    except RuntimeError as error:
        fail(f"the unwrapped model does not accept these weights: {str(error).splitlines()[-1].strip()}")
    # with one GPU, DataParallel has moved the wrapped model to cuda:0: compare on the CPU
    expected = {key: value.cpu() for key, value in wrapped.module.state_dict().items()}
    if any(not torch.equal(plain.state_dict()[key], expected[key]) for key in expected):
        fail("the weights load, but they are not the wrapped model's weights: do not re-initialise them")
    return correct("the unwrapped model loads these weights")


def check_visible_gpus_env(visible_gpus_env: Callable) -> bool:
    """Exercise 3: the environment variables that let a new process see only the given GPUs."""
    answer = visible_gpus_env([1, 2])
    if answer is None:
        return not_answered("return a dict such as {'NAME': 'value'} for the GPUs in gpu_ids")
    if not isinstance(answer, Mapping):
        fail(f"return a dict of environment variables, got {type(answer).__name__}")
    if "CUDA_VISIBLE_DEVICE" in answer:
        fail("CUDA_VISIBLE_DEVICE is read by nothing (seed 001's typo): the variable is CUDA_VISIBLE_DEVICES")
    if set(answer) != {"CUDA_VISIBLE_DEVICES"}:
        fail(f"set exactly one variable, CUDA_VISIBLE_DEVICES; got {sorted(map(str, answer))}")
    value = answer["CUDA_VISIBLE_DEVICES"]
    if not isinstance(value, str):
        fail(f"environment variables are strings: got {value!r} ({type(value).__name__}); e.g. '1,2'")
    if value != "1,2":
        fail(
            f"for GPUs [1, 2] the value is '1,2' (ids joined by commas, no spaces or brackets); got {value!r}"
        )
    single = visible_gpus_env([0])
    if not isinstance(single, Mapping) or single.get("CUDA_VISIBLE_DEVICES") != "0":
        fail(f"for GPUs [0] expected {{'CUDA_VISIBLE_DEVICES': '0'}}, got {single!r}: build it from gpu_ids")
    return correct("CUDA_VISIBLE_DEVICES, set before the process starts CUDA, chooses the GPUs")
