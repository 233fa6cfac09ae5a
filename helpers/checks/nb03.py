"""Checks for the exercises of ``03_results_errors_and_checkpoints``.

``as_numpy`` and ``resume`` run given the CPU, given ``meta`` standing in for a GPU, on a Mac
whose GPU the check stands in for, and on a real GPU where there is one. ``load_on_cpu`` and
``resume`` read a file the check writes as a GPU writes it: where there is no GPU, its tensors
are recorded as saved on ``cuda:0``.
"""

from collections.abc import Callable, Mapping
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.checks import fail
from helpers.checks.harness import (
    Machine,
    Told,
    describe,
    device_machines,
    exercise,
    real_gpu,
    short,
)
from helpers.models import SimpleModel

__all__ = ["check_as_numpy", "check_load_on_cpu", "check_resume"]

_DETACH = "use .detach(), which leaves the tensor as it is"
_AS_NUMPY_TOLD = (
    Told(r"leaf variables", "tried to switch off requires_grad of the tensor", _DETACH),
    Told(r"GpuRefusedError", "moved the tensor to the GPU", "use .cpu(), which works anywhere"),
)


def _tensors(device: torch.device) -> list[torch.Tensor]:
    """A model's output (in the graph), float64 values, and int64 predictions, on ``device``."""
    output = torch.arange(8.0, device=device).reshape(4, 2).requires_grad_() / 4
    values = torch.tensor([0.1, -2.5, 1e-8], dtype=torch.float64, device=device)
    predictions = torch.tensor([3, 0, 9], device=device)
    return [output, values, predictions]


def _check_array(result: Any, tensor: torch.Tensor) -> None:
    if not isinstance(result, np.ndarray):
        fail(
            f"as_numpy returned {describe(result)}, not a NumPy array",
            "return what .numpy() gives",
        )
    dtype = str(tensor.dtype).removeprefix("torch.")
    shape = tuple(tensor.shape)
    if result.shape != shape or str(result.dtype) != dtype:
        fail(
            f"the array is {result.dtype} of shape {result.shape}, not {dtype} of shape {shape}",
            "keep the tensor's shape and dtype, as .numpy() does",
        )
    if not tensor.is_meta and not np.array_equal(result, tensor.detach().cpu().numpy()):
        fail("the array does not hold the tensor's values", "convert the tensor, changing nothing")


@exercise(
    "write as_numpy(t) so that it returns a NumPy array of t, from any device, requiring grad "
    "or not"
)
def check_as_numpy(as_numpy: Callable[[torch.Tensor], np.ndarray]) -> str:
    for m in device_machines():
        with m.tried():
            for tensor in _tensors(m.device):
                not_there = (
                    Told(r"to numpy", f".numpy() fails on {m.where(m.device)}", "add .cpu() first"),
                )
                required = tensor.requires_grad
                result = m.run(as_numpy, tensor, told=_AS_NUMPY_TOLD + not_there)
                _check_array(result, tensor)
                if required and not tensor.requires_grad:
                    fail("as_numpy switched off requires_grad of the tensor it was given", _DETACH)
    return "as_numpy works for any tensor: out of the graph, onto the CPU, into NumPy"


# ---- files as a GPU writes them ---------------------------------------------------------------

_ON_GPU: set[int] = set()  # storages that torch.save records as saved on cuda:0
_TAGGER: list[bool] = []  # whether the tagger is registered with torch.serialization


def _tag(storage: Any) -> str | None:
    if storage.data_ptr() in _ON_GPU:
        return "cuda:0"
    return None


def _save_as_on_a_gpu(payload: Any, on_gpu: list[torch.Tensor], path: Path) -> None:
    """``torch.save(payload, path)``, with the tensors ``on_gpu`` recorded as saved on a GPU.

    Where there is a GPU they are saved from it; elsewhere torch.save records them as ``cuda:0``,
    so that loading them without ``map_location`` fails as it does with a real GPU's file.
    """
    if real_gpu() is not None:
        moved = {id(t): t.cuda() for t in on_gpu}
        torch.save(_replaced(payload, moved), path)
        return
    if not _TAGGER:
        torch.serialization.register_package(-1, _tag, lambda *args: None)
        _TAGGER.append(True)
    _ON_GPU.update(t.untyped_storage().data_ptr() for t in on_gpu)
    try:
        torch.save(payload, path)
    finally:
        _ON_GPU.clear()


def _replaced(value: Any, moved: dict[int, torch.Tensor]) -> Any:
    """``value`` with every tensor whose ``id`` is in ``moved`` replaced by its moved copy."""
    if isinstance(value, torch.Tensor):
        return moved.get(id(value), value)
    if isinstance(value, dict):
        return {key: _replaced(item, moved) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_replaced(item, moved) for item in value)
    return value


# ---- exercise 2: load_on_cpu ------------------------------------------------------------------

_TO_GPU = Told(r"CUDA|cuda|NVIDIA", "loads onto the GPU", "pass map_location='cpu'")
_TO_MPS = Told(r"mps|MPS", "loads onto the Mac's GPU", "pass map_location='cpu'")


def _check_state_dict(loaded: Any, state: dict[str, torch.Tensor]) -> None:
    if not isinstance(loaded, Mapping):
        fail(f"load_on_cpu returned {describe(loaded)}", "return the state_dict torch.load gives")
    if set(loaded) != set(state):
        keys = short(sorted(map(str, loaded)), 50)
        fail(f"the state_dict has the keys {keys}", "return it whole, as torch.load gives it")
    for key, value in loaded.items():
        if not isinstance(value, torch.Tensor):
            fail(f"the state_dict's {key} is {describe(value)}", "return the tensors as loaded")
        if value.device.type != "cpu":
            fail(f"the tensors are on {value.device}", "pass map_location='cpu'")
        if value.dtype != state[key].dtype or not torch.equal(value, state[key]):
            fail(f"the tensor {key} differs from the one saved", "return the tensors as saved")


@exercise(
    "write load_on_cpu(path) so that it returns the state_dict in the file, all on the CPU, "
    "anywhere"
)
def check_load_on_cpu(load_on_cpu: Callable[[Path], Any]) -> str:
    with torch.random.fork_rng(devices=[]):
        state = SimpleModel().state_dict()
    machines = (Machine.no_gpu(), Machine.stand_in_gpus(1), Machine.apple_stand_in())
    with TemporaryDirectory() as folder:
        path = Path(folder) / "gpu_weights.pt"
        _save_as_on_a_gpu(state, list(state.values()), path)
        for m in machines:
            with m.tried():
                loaded = m.run(load_on_cpu, path, told=(_TO_GPU, _TO_MPS))
                if isinstance(loaded, Mapping) and any(
                    isinstance(v, torch.Tensor) and v.is_meta for v in loaded.values()
                ):
                    fail(
                        f"the tensors are on {m.where(torch.device('meta'))}",
                        "pass map_location='cpu'",
                    )
                _check_state_dict(loaded, state)
    return "a checkpoint saved on a GPU loads onto the CPU, on a machine with a GPU or without"


# ---- exercise 3: resume -----------------------------------------------------------------------


def _network() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _trained(epoch: int) -> dict[str, Any]:
    """A checkpoint after ``epoch`` epochs: the weights, SGD's momentum and learning rate, the epoch
    and the random state, all different from what a new model, optimizer and session have."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(epoch)
        model = _network()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.randn(6, 4)).square().mean().backward()
            optimizer.step()
        optimizer.param_groups[0]["lr"] = 0.1 / (epoch + 1)  # as a learning-rate schedule does
        torch.rand(epoch + 3)  # the state moves on, as the batches' shuffling moves it
        rng_state = torch.get_rng_state()
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
        "rng_state": rng_state,
    }


def _fresh(device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A new model and optimizer on ``device``, as a restarted session builds them."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        model = _network().to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


_RESUME_TOLD = (
    Told(
        r"set_rng_state|ByteTensor|RNG state",
        "gave torch.set_rng_state a random state that is not on the CPU",
        "load the file with map_location='cpu'",
    ),
    Told(r"CUDA|cuda|NVIDIA", "loads onto the GPU", "load the file with map_location='cpu'"),
    Told(r"mps|MPS", "loads onto the Mac's GPU", "load the file with map_location='cpu'"),
    Told(
        r"Missing key|Unexpected key|size mismatch",
        "loaded the wrong part of the checkpoint into the model",
        "load checkpoint['model'] into the model, checkpoint['optimizer'] into the optimizer",
    ),
)


def _check_epoch(result: Any, epoch: int) -> None:
    if isinstance(result, bool) or not isinstance(result, int | np.integer):
        fail(f"resume returned {describe(result)}", "return the epoch to start from, an int")
    if result == epoch + 1:
        fail(
            f"resume returned {result}, but {epoch} epochs are done, so epoch {epoch} comes next",
            "return checkpoint['epoch'] as it is",
        )
    if result != epoch:
        fail(f"resume returned {result}, not the saved epoch {epoch}", "return checkpoint['epoch']")


def _check_model(m: Machine, model: nn.Module, before: list, saved: dict) -> None:
    now = list(model.parameters())
    if any(p is not q for p, q in zip(now, before, strict=True)):
        fail(
            "the model's parameters were replaced, and the optimizer holds the old ones",
            "load with model.load_state_dict(...), without assign=True",
        )
    for key, value in model.state_dict().items():
        if value.device.type != m.device.type:
            fail(
                f"the model's {key} is on {m.where(value.device)}, not where the model was",
                "leave the model on its device: load_state_dict copies into it",
            )
        if not value.is_meta and not torch.equal(value.cpu(), saved[key]):
            fail("the model's weights are not the saved ones", "model.load_state_dict(...)")


def _check_optimizer(m: Machine, optimizer: torch.optim.Optimizer, saved: dict) -> None:
    group = optimizer.param_groups[0]
    state = optimizer.state_dict()["state"]
    restored = group["lr"] == saved["param_groups"][0]["lr"] and len(state) == len(saved["state"])
    if not restored:
        fail(
            "the optimizer was not restored (its learning rate and momentum are new)",
            "optimizer.load_state_dict(checkpoint['optimizer'])",
        )
    for index, values in state.items():
        buffer = values["momentum_buffer"]
        if buffer.device.type != m.device.type:
            fail(f"the momentum is on {m.where(buffer.device)}", "leave it where the model is")
        if not buffer.is_meta and not torch.equal(
            buffer.cpu(), saved["state"][index]["momentum_buffer"]
        ):
            fail("the momentum is not the saved one", "load the optimizer's state as it is")


def _resume_on(m: Machine, resume: Callable, path: Path, checkpoint: dict) -> None:
    model, optimizer = _fresh(m.device)
    before = list(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(99)  # a new session: another random state
        result = m.run(resume, path, model, optimizer, told=_RESUME_TOLD)
        restored = torch.equal(torch.get_rng_state(), checkpoint["rng_state"])
    _check_model(m, model, before, checkpoint["model"])
    _check_optimizer(m, optimizer, checkpoint["optimizer"])
    if not restored:
        fail(
            "the random state is not the saved one, so the shuffling differs",
            "torch.set_rng_state(checkpoint['rng_state'])",
        )
    _check_epoch(result, checkpoint["epoch"])


@exercise(
    "write resume(path, model, optimizer) to load a checkpoint saved on a GPU into both, restore "
    "the random state and return the epoch"
)
def check_resume(resume: Callable[[Path, nn.Module, torch.optim.Optimizer], int]) -> str:
    with TemporaryDirectory() as folder:
        for epoch in (3, 0):
            checkpoint = _trained(epoch)
            path = Path(folder) / f"epoch_{epoch}.pt"
            on_gpu = [*checkpoint["model"].values(), *_buffers(checkpoint["optimizer"])]
            _save_as_on_a_gpu(checkpoint, on_gpu, path)
            for m in device_machines():
                with m.tried():
                    _resume_on(m, resume, path, checkpoint)
    return "the model, its optimizer and the random state continue where they stopped, anywhere"


def _buffers(optimizer_state: dict) -> list[torch.Tensor]:
    return [values["momentum_buffer"] for values in optimizer_state["state"].values()]
