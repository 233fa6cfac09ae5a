"""Checks for the exercises of ``04_data_parallel``.

``check_numpy_batch_to_device`` runs the learner's function on the machines of
``helpers.checks.harness.device_machines`` (the CPU, ``meta`` standing in for a GPU, and this
machine's GPU when it has one). ``check_plain_state_dict`` unwraps a ``DataParallel`` made on a
machine without a GPU, and, on a machine with one, one that ``DataParallel`` has put on ``cuda:0``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, describe, device_machines, exercise, real_gpu, short, where
from helpers.models import Tudui

__all__ = ["check_numpy_batch_to_device", "check_plain_state_dict", "check_visible_gpus_env"]


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


@exercise(
    "write numpy_batch_to_device(x, y, device) so that it returns (inputs, targets): float32 and int64 "
    "tensors of x and y, on device"
)
def check_numpy_batch_to_device(numpy_batch_to_device: Callable) -> str:
    """Exercise 1: float64 features and int32 labels from NumPy become float32/int64 tensors on the device."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 6))  # float64, as NumPy makes it
    y = rng.integers(0, 3, size=5).astype(np.int32)  # what many loaders produce
    for m in device_machines():
        with m.tried():
            answer = m.run(numpy_batch_to_device, x.copy(), y.copy(), m.device)
            if answer is None:
                fail("numpy_batch_to_device returned None", "return (inputs, targets)")
            if not (isinstance(answer, tuple | list) and len(answer) == 2):
                fail(
                    f"numpy_batch_to_device returned {describe(answer)}",
                    "return two tensors, (inputs, targets)",
                )
            inputs, targets = answer
            for name, value in (("inputs", inputs), ("targets", targets)):
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
            if inputs.dtype != torch.float32:
                fail(
                    f"the inputs are {_dtype(inputs)}, but a model's weights are float32",
                    "convert them, with x.astype(np.float32) before torch.from_numpy, or .float()",
                )
            if targets.dtype != torch.int64:
                fail(
                    f"the targets are {_dtype(targets)}, but CrossEntropyLoss wants int64 class indices",
                    "convert them with .long() (or y.astype(np.int64))",
                )
            for name, value, array in (("inputs", inputs, x), ("targets", targets, y)):
                if tuple(value.shape) != array.shape:
                    fail(
                        f"the {name} have shape {tuple(value.shape)}, not {array.shape}",
                        "convert the array as it is",
                    )
            if not inputs.is_meta and not np.allclose(inputs.detach().cpu().numpy(), x.astype(np.float32)):
                fail("the inputs hold other values than x", "convert x as it is, only to float32")
            if not targets.is_meta and not np.array_equal(targets.cpu().numpy(), y):
                fail("the targets hold other values than y", "convert y as it is, only to int64")
    return "float32 inputs and int64 targets, on the device given"


def _state_dict_machines() -> list[Machine]:
    machines = [Machine.without_gpu()]
    if real_gpu() is not None and real_gpu().type == "cuda":
        machines.append(Machine.gpu(real_gpu()))
    for m in machines:
        m.cuda_fix = "weights load across devices: return the state_dict as it is"
    return machines


@exercise(
    "write plain_state_dict(wrapped) so that it returns the weights of a DataParallel-wrapped model in a "
    "form that load_state_dict of the unwrapped model accepts"
)
def check_plain_state_dict(plain_state_dict: Callable) -> str:
    """Exercise 2: the weights of a DataParallel model, loadable into the unwrapped model."""
    for m in _state_dict_machines():
        with torch.random.fork_rng(devices=[]), m.patches():  # without a GPU, DataParallel sees none
            torch.manual_seed(0)
            wrapped = nn.DataParallel(Tudui())
        answer = m.run(plain_state_dict, wrapped)
        if answer is None:
            fail("plain_state_dict returned None", "return the state_dict")
        if isinstance(answer, nn.Module):
            fail(
                "plain_state_dict returned a model, not its weights",
                "return a state_dict, with .state_dict()",
            )
        if not isinstance(answer, Mapping):
            fail(f"plain_state_dict returned {describe(answer)}", "return a state_dict, a dict of tensors")
        keys = list(answer)
        if not all(isinstance(key, str) for key in keys):
            fail(
                "some keys of the state_dict are not strings",
                "keep the keys as the model's state_dict names them",
            )
        if any(key.startswith("module.") for key in keys):
            fail(
                "the keys start with 'module.', which only the wrapper has",
                "take the state_dict of wrapped.module, or remove the prefix from each key",
            )
        expected = {key: value.detach().cpu() for key, value in wrapped.module.state_dict().items()}
        if set(keys) != set(expected):
            _wrong_keys(keys, list(expected))
        for key, value in answer.items():
            if not isinstance(value, torch.Tensor):
                fail(f"the state_dict's {key} is {describe(value)}", "keep the tensors as the model has them")
            if value.shape != expected[key].shape or not torch.equal(value.detach().cpu(), expected[key]):
                fail(
                    "the keys are right, but the tensors are not the wrapped model's weights",
                    "take them from the wrapped model, unchanged",
                )
    plain = Tudui()
    plain.load_state_dict(answer)  # the keys and shapes are right: this cannot fail
    return "the unwrapped model loads these weights"


def _wrong_keys(keys: list[str], expected: list[str]) -> None:
    stripped = ["module." + key for key in expected]
    if sorted(keys) == sorted(key.lstrip("module.") for key in stripped):
        fail(
            f"the keys are damaged, such as {short(repr(sorted(set(keys) - set(expected))[0]), 30)} "
            "(str.lstrip('module.') strips any of those letters, not the prefix)",
            "remove exactly 'module.', with key.removeprefix('module.') or key[len('module.'):]",
        )
    missing = sorted(set(expected) - set(keys))
    unexpected = sorted(set(keys) - set(expected))
    shown = f"it lacks {short(repr(missing[0]), 30)}" if missing else "it has too many"
    if unexpected:
        shown += f" and has {short(repr(unexpected[0]), 30)}"
    fail(
        f"the keys do not match the unwrapped model's: {shown}",
        "keep each key as the model names it, without the 'module.' prefix",
    )


_KEPT = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}


@exercise(
    "write visible_gpus_env(gpu_ids) so that it returns the environment variables to set, as a dict of "
    "strings, for a new process to see only the GPUs in gpu_ids"
)
def check_visible_gpus_env(visible_gpus_env: Callable) -> str:
    """Exercise 3: the environment variables that let a new process see only the given GPUs."""
    m = Machine.cpu()
    m.cuda_fix = "build the dict from gpu_ids alone; a new process reads it"
    for ids in ([1, 2], [0], [3, 0, 1]):
        answer = m.run(visible_gpus_env, list(ids))
        expected = ",".join(map(str, ids))
        if answer is None:
            fail("visible_gpus_env returned None", "return a dict, variable name to value")
        if not isinstance(answer, Mapping):
            fail(f"visible_gpus_env returned {describe(answer)}", "return a dict, variable name to value")
        if not all(isinstance(key, str) for key in answer):
            fail("some names in the dict are not strings", "name each variable with a string")
        if "CUDA_VISIBLE_DEVICE" in answer:
            fail(
                "CUDA_VISIBLE_DEVICE, without the final S, is read by nothing",
                "the variable is CUDA_VISIBLE_DEVICES",
            )
        extra = sorted(set(answer) - _KEPT)
        if len(answer) > 8:
            fail(
                f"visible_gpus_env returned {len(answer)} variables, the whole environment perhaps",
                "return only the variables to set, which the caller adds to its environment",
            )
        if extra:
            fail(
                f"visible_gpus_env also sets {short(', '.join(extra), 60)}",
                "return only the variables that choose GPUs",
            )
        if "CUDA_VISIBLE_DEVICES" not in answer:
            fail("the dict has no CUDA_VISIBLE_DEVICES", "set that variable, which chooses the GPUs")
        order = answer.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        if order not in {"PCI_BUS_ID", "FASTEST_FIRST"}:
            fail(f"CUDA_DEVICE_ORDER is {short(repr(order), 30)}", "set it to 'PCI_BUS_ID' or leave it out")
        value = answer["CUDA_VISIBLE_DEVICES"]
        if not isinstance(value, str):
            fail(
                f"CUDA_VISIBLE_DEVICES is {describe(value)}, but variables are strings",
                "join the ids into one string",
            )
        if value == expected:
            continue
        if value.replace(" ", "") == expected:
            fail(
                f"for gpu_ids={ids} the value {value!r} has spaces",
                f"join the ids with commas alone, {expected!r}",
            )
        if sorted(value.split(",")) == sorted(expected.split(",")):
            fail(
                f"for gpu_ids={ids} the value is {value!r}, in another order",
                f"keep the order given, {expected!r} (the first id becomes cuda:0)",
            )
        fail(
            f"for gpu_ids={ids} the value is {short(repr(value), 40)}", f"build it from gpu_ids, {expected!r}"
        )
    return "CUDA_VISIBLE_DEVICES, set before the process starts CUDA, chooses the GPUs"
