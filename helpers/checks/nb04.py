"""Checks for the exercises of ``04_data_parallel``."""

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

from helpers.checks import fail, harness
from helpers.checks.harness import (
    LearnerError,
    Machine,
    describe,
    device_machines,
    exercise,
    short,
    where,
)
from helpers.models import Tudui

__all__ = ["check_numpy_batch_to_device", "check_plain_state_dict", "check_visible_gpus_env"]


def _check_batch(m: Machine, numpy_batch_to_device: Callable, x: np.ndarray, y: np.ndarray) -> None:
    try:
        answer = m.run(numpy_batch_to_device, x.copy(), y.copy(), m.device)
    except LearnerError as error:
        if "'numpy.ndarray' object has no attribute" in str(error.error):
            mistake = "numpy_batch_to_device called a tensor's method on a NumPy array"
            raise error.instead(mistake, "make a tensor first, with torch.from_numpy(x)") from None
        raise
    if not (isinstance(answer, tuple | list) and len(answer) == 2):
        fail(
            f"numpy_batch_to_device returned {describe(answer)}",
            "return two tensors, (inputs, targets)",
        )
    wanted = [
        ("inputs", x, torch.float32, "a model wants"),
        ("targets", y, torch.int64, "a loss wants"),
    ]
    for (name, array, dtype, who), value in zip(wanted, answer, strict=True):
        if isinstance(value, np.ndarray):
            fail(
                f"the {name} are still a NumPy array",
                "make a tensor of them with torch.from_numpy(...)",
            )
        if not isinstance(value, torch.Tensor):
            fail(f"the {name} are {describe(value)}, not a tensor", "make a tensor of them")
        if value.device.type != m.device.type:
            fail(
                f"the {name} are on {value.device}, not on {where(m.device)}",
                "move them with .to(device)",
            )
        if value.dtype != dtype:
            fail(
                f"the {name} are {str(value.dtype)[6:]}, but {who} {str(dtype)[6:]}", "convert them"
            )
        if tuple(value.shape) != array.shape:
            fail(f"the {name} have shape {tuple(value.shape)}, not {array.shape}", "keep the shape")
        if not value.is_meta and not np.allclose(value.detach().cpu().numpy(), array):
            fail(f"the {name} hold other values than the array", "change only its dtype")


@exercise(
    "write numpy_batch_to_device(x, y, device) so that it returns float32 and int64 tensors on device"
)
def check_numpy_batch_to_device(numpy_batch_to_device: Callable) -> str:
    rng = np.random.default_rng(0)
    x, y = (
        rng.normal(size=(5, 6)),
        rng.integers(0, 3, size=5).astype(np.int32),
    )  # as many loaders make them
    for m in device_machines():  # the CPU, meta standing in for a GPU, and the GPU if any
        with m.tried():
            _check_batch(m, numpy_batch_to_device, x, y)
    return "float32 inputs and int64 targets, on the device given"


def _wrapped_models() -> list[tuple[Machine, nn.DataParallel]]:
    """A DataParallel of a Tudui made where there is no GPU, and one on this machine's GPU if any."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        models = [(Machine.without_gpu(), Machine.without_gpu().run(nn.DataParallel, Tudui()))]
        if gpu := harness.real_gpu():
            models.append((Machine.gpu(gpu), nn.DataParallel(Tudui().to(gpu))))
    return models


@exercise(
    "write plain_state_dict(wrapped) so that it returns weights that the unwrapped model can load"
)
def check_plain_state_dict(plain_state_dict: Callable) -> str:
    for m, wrapped in _wrapped_models():
        answer = m.run(plain_state_dict, wrapped)
        expected = {key: value.cpu() for key, value in wrapped.module.state_dict().items()}
        if isinstance(answer, nn.Module):
            fail("plain_state_dict returned a model, not its weights", "return its .state_dict()")
        if not isinstance(answer, Mapping):
            fail(
                f"plain_state_dict returned {describe(answer)}",
                "return a state_dict, a dict of tensors",
            )
        keys = [str(key) for key in answer]
        if any(key.startswith("module.") for key in keys):
            fail(
                "the keys start with 'module.', the wrapper's prefix",
                "take wrapped.module.state_dict()",
            )
        if sorted(keys) == sorted(("module." + key).lstrip("module.") for key in expected):
            fail(
                "str.lstrip('module.') strips any of those letters, not the prefix",
                "use .removeprefix",
            )
        if odd := sorted(set(expected) ^ set(keys)):
            fail(
                f"the keys are not the model's, such as {short(repr(odd[0]), 30)}",
                "keep the model's names",
            )
        for key, value in answer.items():
            if not isinstance(value, torch.Tensor):
                fail(
                    f"the state_dict's {key} is {describe(value)}",
                    "keep the tensors as the model has them",
                )
            if (
                value.is_meta
                or value.dtype != expected[key].dtype
                or not expected[key].equal(value.cpu())
            ):
                fail(
                    "the keys are right, but not the tensors",
                    "take the wrapped model's own, unchanged",
                )
    return "the unwrapped model loads these weights"


@exercise(
    "write visible_gpus_env(gpu_ids) so that it returns the environment variables a new process needs"
)
def check_visible_gpus_env(visible_gpus_env: Callable) -> str:
    for ids in ([1, 2], [0], [3, 0, 1]):
        answer, expected = Machine.cpu().run(visible_gpus_env, list(ids)), ",".join(map(str, ids))
        if not isinstance(answer, Mapping) or not all(isinstance(key, str) for key in answer):
            fail(
                f"visible_gpus_env returned {describe(answer)}",
                "return a dict, variable name to value",
            )
        if len(answer) > 8:
            fail(
                f"visible_gpus_env returned {len(answer)} variables", "return only the ones to set"
            )
        if typo := {"CUDA_VISIBLE_DEVICE", "cuda_visible_devices"} & set(answer):
            fail(f"{typo.pop()} is read by nothing", "the variable is CUDA_VISIBLE_DEVICES")
        if extra := ", ".join(sorted(set(answer) - {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})):
            fail(
                f"visible_gpus_env also sets {short(extra, 40)}",
                "return only those that choose GPUs",
            )
        if "CUDA_VISIBLE_DEVICES" not in answer:
            fail(
                "the dict has no CUDA_VISIBLE_DEVICES", "set that variable, which chooses the GPUs"
            )
        if (order := answer.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")) not in {
            "PCI_BUS_ID",
            "FASTEST_FIRST",
        }:
            fail(
                f"CUDA_DEVICE_ORDER is {short(repr(order), 30)}",
                "set it to 'PCI_BUS_ID' or leave it out",
            )
        if not isinstance(value := answer["CUDA_VISIBLE_DEVICES"], str):
            fail(
                f"CUDA_VISIBLE_DEVICES is {describe(value)}, not a string",
                "join the ids into one string",
            )
        if value.replace(" ", "") == expected != value:
            fail(
                f"for gpu_ids={ids} the value {value!r} has spaces",
                f"use commas alone, {expected!r}",
            )
        if value != expected and sorted(value.split(",")) == sorted(expected.split(",")):
            fail(
                f"{value!r} lists the ids in another order",
                "keep theirs, as the first becomes cuda:0",
            )
        if value != expected:
            fail(
                f"for gpu_ids={ids} the value is {value[:40]!r}",
                f"build it from gpu_ids, {expected!r}",
            )
    return "CUDA_VISIBLE_DEVICES, set before the process starts CUDA, chooses the GPUs"
