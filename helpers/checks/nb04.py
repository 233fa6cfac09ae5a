"""Checks for the exercises of ``04_data_parallel``.

``use_all_gpus`` runs as on machines with no GPU, one, two and three GPUs (``meta`` stands in for
them, and an index beyond their count is refused), on a Mac, and on this machine's GPUs if any.
``plain_state_dict`` gets a model that ``nn.DataParallel`` wrapped; ``visible_gpus_env`` runs on
the CPU.
"""

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import Machine, describe, exercise, real_gpu, short
from helpers.models import Tudui

__all__ = ["check_plain_state_dict", "check_use_all_gpus", "check_visible_gpus_env"]

_WRAP_ONLY_SEVERAL = "wrap it only when torch.cuda.device_count() > 1"


def _small_model() -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))


def _gpu_machines() -> list[Machine]:
    """No GPU, one, two, three (stand-ins), a Mac, and this machine's own GPUs."""
    machines = [Machine.no_gpu(), *(Machine.stand_in_gpus(n) for n in (1, 2, 3))]
    machines.append(Machine.apple_stand_in())
    if real_gpu() is not None:
        machines.append(Machine.gpu(real_gpu()))
    return machines


def _count(m: Machine) -> int:
    if m.cuda == "real":
        return torch.cuda.device_count()
    return m.gpus


def _check_unwrapped(m: Machine, result: Any, model: nn.Module) -> None:
    """With one GPU or none: the model itself, on the GPU if there is one."""
    gpus = _count(m)
    if isinstance(result, nn.DataParallel):
        where = "with one GPU" if gpus == 1 else "without a CUDA GPU"
        fail(f"use_all_gpus wrapped the model in DataParallel {where}", _WRAP_ONLY_SEVERAL)
    if result is not model:
        fail(f"use_all_gpus returned {describe(result)}, not the model", "return the model")
    device = next(model.parameters()).device
    if gpus == 1 and device.type == "cpu":
        fail("with one GPU the model stayed on the CPU", "move it there, model.to('cuda')")
    if gpus == 0 and device.type == "meta" and not m.apple:
        fail(f"without a GPU the model went to {m.where(device)}", "leave it on the CPU")


def _check_wrapped(m: Machine, result: Any, model: nn.Module) -> None:
    """With two or more GPUs: a DataParallel over all of them, the model on cuda:0."""
    gpus = _count(m)
    if not isinstance(result, nn.DataParallel):
        fail(
            f"with {gpus} GPUs use_all_gpus returned {describe(result)}, not a DataParallel",
            "wrap the model, nn.DataParallel(model)",
        )
    if result.module is not model:
        fail("the DataParallel wraps another model", "wrap the model it is given")
    if list(result.device_ids) != list(range(gpus)):
        fail(
            f"with {gpus} GPUs DataParallel uses {result.device_ids}",
            "leave device_ids out: it then takes every GPU",
        )
    if next(model.parameters()).device.type == "cpu":
        fail(
            "the model stayed on the CPU, where DataParallel refuses to run it",
            "move it to the first GPU, .to('cuda')",
        )
    used = sorted(m.gpu_indices - {0})
    if used:
        fail(
            f"use_all_gpus moved the model to cuda:{used[0]}",
            "DataParallel copies it from device_ids[0]: move it to 'cuda', the first GPU",
        )


def _check_unchanged(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for key, value in model.state_dict().items():
        was = before[key]
        if value.dtype != was.dtype:
            fail(
                f"the model's {key} changed from {was.dtype} to {value.dtype}",
                "move the model, and change nothing else",
            )
        if not value.is_meta and not torch.equal(value.cpu(), was):
            fail("the model's weights changed", "move the model, and change nothing else")


@exercise(
    "write use_all_gpus(model) to return the model ready to train on every GPU: in DataParallel "
    "with several, on the GPU with one, as it is with none"
)
def check_use_all_gpus(use_all_gpus: Callable[[nn.Module], nn.Module]) -> str:
    for m in _gpu_machines():
        model = _small_model()
        before = {key: value.clone() for key, value in model.state_dict().items()}
        result = m.run(use_all_gpus, model)
        if _count(m) > 1:
            _check_wrapped(m, result, model)
        else:
            _check_unwrapped(m, result, model)
        _check_unchanged(model, before)
    return "one GPU or none: the model itself, where it can run; several: DataParallel over all"


# ---- exercise 2: plain_state_dict -------------------------------------------------------------


def _wrapped_models() -> list[tuple[Machine, nn.DataParallel]]:
    """A DataParallel of a Tudui made without a GPU, and one on this machine's GPU if any."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        models = [(Machine.no_gpu(), Machine.no_gpu().run(nn.DataParallel, Tudui()))]
        gpu = real_gpu()
        if gpu is not None:
            models.append((Machine.gpu(gpu), nn.DataParallel(Tudui().to(gpu))))
    return models


def _check_keys(answer: Any, expected: dict[str, torch.Tensor]) -> None:
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
    stripped = sorted(("module." + key).lstrip("module.") for key in expected)
    if sorted(keys) == stripped and stripped != sorted(expected):
        fail(
            "str.lstrip('module.') strips any of those letters, not the prefix",
            "use .removeprefix",
        )
    odd = sorted(set(expected) ^ set(keys))
    if odd:
        fail(
            f"the keys are not the model's, such as {short(repr(odd[0]), 30)}",
            "keep the model's names",
        )


@exercise(
    "write plain_state_dict(wrapped) so that it returns weights that the unwrapped model can load"
)
def check_plain_state_dict(plain_state_dict: Callable) -> str:
    for m, wrapped in _wrapped_models():
        answer = m.run(plain_state_dict, wrapped)
        expected = {key: value.cpu() for key, value in wrapped.module.state_dict().items()}
        _check_keys(answer, expected)
        for key, value in answer.items():
            if not isinstance(value, torch.Tensor):
                fail(
                    f"the state_dict's {key} is {describe(value)}",
                    "keep the tensors as the model has them",
                )
            same = value.dtype == expected[key].dtype and expected[key].equal(value.cpu())
            if value.is_meta or not same:
                fail(
                    "the keys are right, but not the tensors",
                    "take the wrapped model's own, unchanged",
                )
    return "the unwrapped model loads these weights"


# ---- exercise 3: visible_gpus_env -------------------------------------------------------------

_CHOOSING = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
_MISSPELT = {"CUDA_VISIBLE_DEVICE", "cuda_visible_devices"}


def _check_variables(answer: Any) -> None:
    """A dict of only the variables that choose GPUs, spelt right."""
    if not isinstance(answer, Mapping) or not all(isinstance(key, str) for key in answer):
        fail(
            f"visible_gpus_env returned {describe(answer)}",
            "return a dict, variable name to value",
        )
    if len(answer) > 8:
        fail(f"visible_gpus_env returned {len(answer)} variables", "return only the ones to set")
    misspelt = sorted(_MISSPELT & set(answer))
    if misspelt:
        fail(f"{misspelt[0]} is read by nothing", "the variable is CUDA_VISIBLE_DEVICES")
    extra = ", ".join(sorted(set(answer) - _CHOOSING))
    if extra:
        fail(
            f"visible_gpus_env also sets {short(extra, 40)}",
            "return only those that choose GPUs",
        )
    if "CUDA_VISIBLE_DEVICES" not in answer:
        fail("the dict has no CUDA_VISIBLE_DEVICES", "set that variable, which chooses the GPUs")
    order = answer.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if order not in {"PCI_BUS_ID", "FASTEST_FIRST"}:
        fail(
            f"CUDA_DEVICE_ORDER is {short(repr(order), 30)}",
            "set it to 'PCI_BUS_ID' or leave it out",
        )


def _check_value(value: Any, ids: list[int]) -> None:
    """The value of CUDA_VISIBLE_DEVICES for ``ids``: the ids, joined by commas, in their order."""
    expected = ",".join(map(str, ids))
    if not isinstance(value, str):
        fail(
            f"CUDA_VISIBLE_DEVICES is {describe(value)}, not a string",
            "join the ids into one string",
        )
    if value == expected:
        return
    if value.replace(" ", "") == expected:
        fail(f"for gpu_ids={ids} the value {value!r} has spaces", f"use commas alone, {expected!r}")
    if sorted(value.split(",")) == sorted(expected.split(",")):
        fail(
            f"{value!r} lists the ids in another order",
            "keep theirs, as the first becomes cuda:0",
        )
    fail(f"for gpu_ids={ids} the value is {value[:40]!r}", f"build it from gpu_ids, {expected!r}")


@exercise(
    "write visible_gpus_env(gpu_ids) so that it returns the environment variables a new process "
    "needs"
)
def check_visible_gpus_env(visible_gpus_env: Callable) -> str:
    for ids in ([1, 2], [0], [3, 0, 1], [12, 10]):
        answer = Machine.cpu().run(visible_gpus_env, list(ids))
        _check_variables(answer)
        _check_value(answer["CUDA_VISIBLE_DEVICES"], ids)
    return "CUDA_VISIBLE_DEVICES, set before the process starts CUDA, chooses the GPUs"
