"""Checks for the exercises of ``01_cuda_method``.

The ``.cuda()`` exercises must work on two machines: one without a GPU, where nothing may call
``.cuda()``, and one with a GPU, where everything must. Each check runs the learner's function as
on both. The machine this runs on plays itself; the other one is played: on a machine without a
GPU, ``torch.cuda.is_available()`` answers ``True`` for the duration of the call and ``.cuda()``
moves to the ``meta`` device, which stands in for the GPU; on a machine with a GPU,
``torch.cuda.is_available()`` answers ``False`` and ``.cuda()`` fails as it does without a driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from helpers.checks import correct, fail, not_answered
from helpers.checks.nb00 import TorchCalls, where
from helpers.models import Tudui, count_parameters

__all__ = ["check_cuda_batch", "check_cuda_model_and_loss", "check_tudui_with_relu"]

_NO_DRIVER = "Found no NVIDIA driver on your system (the check is playing a machine without a GPU)"
_UNGUARDED = (
    ".cuda() ran on a machine without a GPU, and failed: put the moves behind "
    "`if torch.cuda.is_available():`, so that the code runs on every machine"
)


def _is_cuda(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    if isinstance(value, str):
        try:
            return torch.device(value).type == "cuda"
        except RuntimeError:
            return False
    return False


class _PlayedMachine(TorchCalls):
    """Records calls, and redirects (``gpu=True``) or refuses (``gpu=False``) every move to CUDA."""

    def __init__(self, gpu: bool) -> None:
        super().__init__()
        self.gpu = gpu

    def _run(self, func: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
        name = getattr(func, "__name__", "")
        to_cuda = name == "cuda" or (
            name == "to" and (any(_is_cuda(a) for a in args[1:]) or _is_cuda(kwargs.get("device")))
        )
        if not to_cuda:
            return func(*args, **kwargs)
        if not self.gpu:
            raise RuntimeError(_NO_DRIVER)
        if name == "cuda":
            return args[0].to("meta")
        args = tuple(torch.device("meta") if _is_cuda(a) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs = {**kwargs, "device": torch.device("meta")}
        return func(*args, **kwargs)


@contextmanager
def _machine(gpu: bool) -> Iterator[tuple[torch.device, TorchCalls]]:
    """Run the body as on a machine with (``gpu=True``) or without a GPU; yield (its GPU, the calls)."""
    real_gpu = torch.cuda.is_available()
    if gpu == real_gpu:  # this machine plays itself
        with TorchCalls() as calls:
            yield (torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")), calls
        return
    is_available, device_count = torch.cuda.is_available, torch.cuda.device_count
    torch.cuda.is_available = lambda: gpu  # type: ignore[assignment]
    torch.cuda.device_count = lambda: int(gpu)  # type: ignore[assignment]
    try:
        with _PlayedMachine(gpu) as calls:
            yield (torch.device("meta") if gpu else torch.device("cpu")), calls
    finally:
        torch.cuda.is_available, torch.cuda.device_count = is_available, device_count


def _no_cuda(error: BaseException) -> bool:
    message = str(error)
    return any(
        s in message for s in ("NVIDIA driver", "not compiled with CUDA", "CUDA driver", "no CUDA GPUs")
    )


def _call_without_gpu(function: Callable, *args: Any) -> Any:
    with _machine(gpu=False):
        try:
            return function(*args)
        except (RuntimeError, AssertionError) as error:  # a CPU-only build of PyTorch raises AssertionError
            if _no_cuda(error):
                fail(_UNGUARDED)
            raise


def _pair(result: Any, function: str) -> tuple[Any, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"{function} should return two things, got {result!r:.80}")
    return result[0], result[1]


def check_cuda_batch(cuda_batch: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """Exercise 1: ``cuda_batch(imgs, targets)`` moves both with ``.cuda()`` if there is a GPU, else none."""
    imgs, targets = torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    result = _call_without_gpu(cuda_batch, imgs, targets)
    if result is None:
        return not_answered(
            "write cuda_batch(imgs, targets) so that it returns the batch, moved with .cuda() when a GPU is "
            "available and as it is otherwise"
        )
    out_imgs, out_targets = _pair(result, "cuda_batch")
    for name, tensor in (("images", out_imgs), ("targets", out_targets)):
        if not isinstance(tensor, torch.Tensor):
            fail(f"the {name} returned are a {type(tensor).__name__}, not a tensor")
        if tensor.device.type != "cpu":
            fail(f"without a GPU the {name} should stay on the CPU, but they are on {tensor.device}")

    with _machine(gpu=True) as (gpu, calls):
        out_imgs, out_targets = _pair(cuda_batch(imgs, targets), "cuda_batch")
    for name, variable, given, tensor in (
        ("images", "imgs", imgs, out_imgs),
        ("targets", "targets", targets, out_targets),
    ):
        if tensor.device.type != gpu.type:
            hint = ""
            if tensor is given and any(source is given for source in calls.moved):
                hint = (
                    f": .cuda() returns a moved copy and leaves the tensor where it was; reassign it, "
                    f"{variable} = {variable}.cuda()"
                )
            fail(f"the {name} of this batch were not moved to {where(gpu)}{hint}")
    return correct("the batch goes to the GPU when there is one, and stays on the CPU when there is not")


def check_cuda_model_and_loss(cuda_model_and_loss: Callable[[nn.Module, nn.Module], Any]) -> bool:
    """Exercise 2: ``cuda_model_and_loss(model, loss_fn)`` moves both with ``.cuda()``, behind the guard."""
    result = _call_without_gpu(cuda_model_and_loss, Tudui(), nn.CrossEntropyLoss(weight=torch.ones(10)))
    if result is None:
        return not_answered(
            "write cuda_model_and_loss(model, loss_fn) so that it returns (model, loss_fn), both moved with "
            ".cuda() when a GPU is available"
        )
    model, loss_fn = _pair(result, "cuda_model_and_loss")
    if not isinstance(model, nn.Module) or not isinstance(loss_fn, nn.Module):
        fail("cuda_model_and_loss should return (model, loss_fn), the two modules it was given")
    with _machine(gpu=True) as (gpu, _):
        model, loss_fn = _pair(
            cuda_model_and_loss(Tudui(), nn.CrossEntropyLoss(weight=torch.ones(10))), "cuda_model_and_loss"
        )
    stray = [name for name, p in model.named_parameters() if p.device.type != gpu.type]
    if stray:
        fail(
            f"the model's parameters are still on cpu ({stray[0]}, ...), not on {where(gpu)}: "
            "call model.cuda()"
        )
    weight = getattr(loss_fn, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.device.type != gpu.type:
        fail(
            f"the loss function's class weights are still on {weight.device}: a loss made with weight= holds "
            "a tensor, so it must move too (loss_fn = loss_fn.cuda())"
        )
    return correct("model and loss go to the GPU when there is one, behind the guard")


def check_tudui_with_relu(tudui_with_relu: Callable[[], nn.Module]) -> bool:
    """Exercise 3: ``Tudui`` with ``nn.ReLU()`` after each convolution and after the first linear layer."""
    model = tudui_with_relu()
    if model is None:
        return not_answered(
            "write tudui_with_relu() so that it returns Tudui's network with nn.ReLU() after each "
            "convolution and after the first linear layer"
        )
    if not isinstance(model, nn.Module):
        fail(f"tudui_with_relu returned a {type(model).__name__}, not a network (an nn.Module)")
    expected = count_parameters(Tudui())
    if count_parameters(model) != expected:
        fail(
            f"the network has {count_parameters(model):,} parameters, Tudui has {expected:,}; a ReLU adds "
            "none, so a layer changed: keep Tudui's layers as they are"
        )
    model.to("cpu")
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        outputs = model(torch.randn(16, 3, 32, 32))
    if tuple(outputs.shape) != (16, 10):
        fail(
            f"for 16 images the network gives shape {tuple(outputs.shape)}, expected (16, 10): "
            "one score per class"
        )
    relus = sum(isinstance(m, nn.ReLU) for m in model.modules())
    if relus == 0:
        fail(
            "the network has no nn.ReLU module: add nn.ReLU() to the nn.Sequential after each convolution "
            "and after the first linear layer"
        )
    if bool((outputs >= 0).all()):
        fail(
            "the network's outputs are never negative: a ReLU after the last Linear layer clips the class "
            "scores (logits) at 0; end with the Linear layer"
        )
    if relus != 4:
        fail(
            f"the network has {relus} ReLUs; the exercise asks for 4: one after each of the three "
            "convolutions and one after the first linear layer"
        )
    return correct("Tudui with four ReLUs: the same 145,578 parameters, now with non-linearities")
