"""One epoch of training and one pass of evaluation, on any device.

Introduced in ``02_to_device_method``, where the loop written out by hand in ``01_cuda_method``
becomes these two functions. Both check what they are given before the first step (a dataset
where a loader goes, a loss class where an instance goes, an optimizer made for another model)
and each batch as it comes (NumPy arrays, dicts, targets that do not match the outputs), and
stop with an error that names the argument or the step and says what to do.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset
from tqdm.auto import tqdm

from helpers import _args
from helpers.devices import _move, as_device

__all__ = ["evaluate", "train_one_epoch"]


def _check_model_on(model: nn.Module, device: torch.device) -> None:
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.device.type != device.type or (
            device.index is not None and tensor.device.index not in (None, device.index)
        ):
            raise ValueError(
                f"The model's {name!r} is on {tensor.device}, but the batches go to {device}. "
                f"Move the model first: model.to({str(device)!r})."
            )


def _check_common(
    caller: str, model: Any, loader: Any, loss_fn: Any, device: Any, writer: Any, epoch: Any, progress: Any
) -> torch.device:
    """Check the arguments both loops take; return the device."""
    if isinstance(model, type):
        raise TypeError(f"{caller}: model is the class {model.__name__}; pass a model: {model.__name__}().")
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"{caller}: model must be an nn.Module, got {type(model).__name__} {_args.shown(model)}."
        )
    if isinstance(loader, torch.Tensor):
        raise TypeError(
            f"{caller}: loader is a tensor {tuple(loader.shape)}, not batches of (inputs, targets). "
            "Use DataLoader(TensorDataset(images, labels), batch_size=64) or "
            "DeviceLoader(images, labels, batch_size=64)."
        )
    if isinstance(loader, Dataset) and not isinstance(loader, IterableDataset):
        raise TypeError(
            f"{caller}: loader is a dataset ({type(loader).__name__}), which gives one sample at a time, "
            "not batches. Wrap it in a DataLoader: DataLoader(dataset, batch_size=64, shuffle=True) for "
            "training, shuffle=False for evaluation."
        )
    if not isinstance(loader, Iterable):
        raise TypeError(
            f"{caller}: loader must give batches of (inputs, targets), e.g. a DataLoader; "
            f"got {type(loader).__name__} {_args.shown(loader)}."
        )
    if isinstance(loss_fn, type):
        raise TypeError(
            f"{caller}: loss_fn is the class {loss_fn.__name__}; pass an instance: "
            f"{loss_fn.__name__}() (e.g. criterion = nn.CrossEntropyLoss())."
        )
    if not callable(loss_fn):
        raise TypeError(
            f"{caller}: loss_fn must be a loss such as nn.CrossEntropyLoss(), "
            f"got {type(loss_fn).__name__} {_args.shown(loss_fn)}."
        )
    reduction = getattr(loss_fn, "reduction", "mean")
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{caller}: loss_fn has reduction={reduction!r}; use 'mean' (the default) or 'sum'.")
    target = as_device(device, name="device", caller=caller, check_available=True)
    _check_model_on(model, target)
    if writer is not None and not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(
            f"{caller}: writer must be a TensorBoard SummaryWriter (or None), got {type(writer).__name__}."
        )
    _args.integer(epoch, "epoch", caller, minimum=0, meaning="the epoch number, from 0")
    _args.boolean(progress, "progress", caller, meaning="whether to show a progress bar")
    return target


def _check_optimizer(optimizer: Any, model: nn.Module, epoch: int) -> None:
    """Refuse an optimizer that would train nothing; warn when it leaves some of the model out.

    Done once per call, before the first step: a set of ``id``s, no work on the device.
    """
    if isinstance(optimizer, type):
        raise TypeError(
            f"train_one_epoch: optimizer is the class {optimizer.__name__}; pass an instance made from the "
            f"model's parameters: {optimizer.__name__}(model.parameters(), lr=0.01)."
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        hint = (
            " That is a learning-rate scheduler: pass its optimizer; call scheduler.step() after epochs."
            if hasattr(optimizer, "get_last_lr")
            else ""
        )
        raise TypeError(
            f"train_one_epoch: optimizer must be a torch.optim optimizer, e.g. "
            f"torch.optim.SGD(model.parameters(), lr=0.01); got {type(optimizer).__name__}.{hint}"
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    left_out = [name for name, p in trainable if id(p) not in held]
    if trainable and len(left_out) == len(trainable):
        raise ValueError(
            f"train_one_epoch: the optimizer holds none of the model's parameters, so optimizer.step() would "
            f"change nothing (epoch={epoch}, before step 0). It was made for another instance of the model: "
            "the cell that builds the model ran again after the optimizer was made. Make the optimizer again "
            "from this model, e.g. optimizer = torch.optim.SGD(model.parameters(), lr=0.01)."
        )
    if left_out:
        names = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        warnings.warn(
            f"train_one_epoch: the optimizer does not hold {len(left_out)} of the model's {len(trainable)} "
            f"trainable parameters ({names}); they will not change. If that is not on purpose (a layer "
            "replaced after the optimizer was made), make the optimizer again from model.parameters().",
            stacklevel=3,
        )


def _numpy_advice(part: str, value: np.ndarray, step: int, caller: str) -> TypeError:
    kind = "float()" if part == "inputs" else "long()"
    return TypeError(
        f"{caller}: batch {step} holds NumPy arrays ({part}: {value.dtype} {value.shape}); the loop needs "
        f"tensors. Convert in the dataset, e.g. torch.from_numpy(x).{kind} "
        "(float32 inputs as the weights, int64 class indices as the targets), or batch the samples with "
        "a DataLoader, whose default collate_fn turns NumPy arrays into tensors."
    )


def _unpack(batch: Any, step: int, caller: str) -> tuple[Any, torch.Tensor]:
    """``(inputs, targets)`` of one batch, or an error that says what the batch is and what is expected."""
    if isinstance(batch, Mapping):
        keys = ", ".join(repr(k) for k in list(batch)[:6])
        raise TypeError(
            f"{caller}: batch {step} is a dict (keys {keys}); the loop expects (inputs, targets) pairs. "
            "Make the dataset return (input, target) tuples, or pass a generator that makes the pairs, e.g. "
            "((b['image'], b['label']) for b in loader)."
        )
    if isinstance(batch, torch.Tensor):
        raise TypeError(
            f"{caller}: batch {step} is one tensor {tuple(batch.shape)}, inputs without targets; the loop "
            "expects (inputs, targets) pairs, e.g. from DataLoader(TensorDataset(images, labels), ...)."
        )
    if not isinstance(batch, list | tuple) or len(batch) != 2:
        size = f" of {len(batch)} items" if isinstance(batch, list | tuple) else ""
        raise TypeError(
            f"{caller}: batch {step} is a {type(batch).__name__}{size}; the loop expects (inputs, targets) "
            "pairs. Make the dataset return (input, target), or pass ((x, y) for x, y, *_ in loader)."
        )
    inputs, targets = batch
    for part, value in (("inputs", inputs), ("targets", targets)):
        if isinstance(value, np.ndarray):
            raise _numpy_advice(part, value, step, caller)
    if not isinstance(targets, torch.Tensor):
        raise TypeError(
            f"{caller}: batch {step}'s targets are a {type(targets).__name__}, not a tensor; convert them, "
            "e.g. torch.as_tensor(targets), or batch the samples with a DataLoader."
        )
    if targets.dim() == 0:
        raise ValueError(
            f"{caller}: batch {step} holds a single sample (its target is a number, not a batch of them). "
            "Batch the samples: DataLoader(dataset, batch_size=64)."
        )
    return inputs, targets


def _batch_loss(loss: Any, step: int, caller: str, *, scalar: bool) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"{caller}: loss_fn returned a {type(loss).__name__} at batch {step}, not a tensor; it must "
            "compute the loss with torch operations, as nn.CrossEntropyLoss() does."
        )
    if scalar and loss.dim() != 0:
        raise ValueError(
            f"{caller}: loss_fn returned {tuple(loss.shape)} losses at batch {step}, one per sample "
            "(reduction='none'?); backward() needs one number per batch. Use reduction='mean' (the default) "
            "or wrap it: lambda outputs, targets: loss_fn(outputs, targets).mean()."
        )
    return loss


def _batch_total(loss: torch.Tensor, reduction: str, batch_size: int) -> torch.Tensor:
    """The loss summed over the batch's samples, whichever way ``loss_fn`` reduces it."""
    loss = loss.detach()
    if reduction == "sum":
        return loss if loss.dim() == 0 else loss.sum()
    return (loss if loss.dim() == 0 else loss.mean()) * batch_size  # 'mean', 'batchmean'; 'none' averaged


def _correct(outputs: Any, targets: torch.Tensor, step: int, caller: str) -> torch.Tensor:
    """How many predictions of the batch are right (a tensor on the device: no waiting for it)."""
    if not isinstance(outputs, torch.Tensor) or outputs.dim() < 2:
        shape = tuple(outputs.shape) if isinstance(outputs, torch.Tensor) else type(outputs).__name__
        raise ValueError(
            f"{caller}: the model returned {shape} at batch {step}; the accuracy needs scores of shape "
            "(batch, classes), one row per sample, as a classifier's last nn.Linear gives."
        )
    predicted = outputs.argmax(dim=1)
    if targets.shape == outputs.shape and targets.is_floating_point():  # one-hot or class probabilities
        targets = targets.argmax(dim=1)
    if targets.shape != predicted.shape:
        raise ValueError(
            f"{caller}: at batch {step} the targets have shape {tuple(targets.shape)}, the model's outputs "
            f"{tuple(outputs.shape)}: expected class indices of shape {tuple(predicted.shape)} (one per "
            "sample), or one-hot targets shaped like the outputs."
        )
    return (predicted == targets).sum()


def _progress(loader: Iterable, desc: str, show: bool) -> tqdm:
    """A progress bar over ``loader`` that starts exactly one pass over it.

    ``tqdm.auto`` given a loader calls ``iter()`` on it once more than it uses:
    for a ``DataLoader`` that is an extra draw from the random stream and, with workers, a set of
    worker processes started for nothing. Handing it the iterator avoids both.
    """
    total = len(loader) if hasattr(loader, "__len__") else None
    return tqdm(iter(loader), total=total, desc=desc, leave=False, disable=not show)


def _non_finite(epoch: int, step: int, steps: int) -> FloatingPointError:
    of = f" of {steps}" if steps else ""
    return FloatingPointError(
        f"train_one_epoch stopped: the loss was NaN or infinite at epoch={epoch}, step {step} (batch "
        f"{step + 1}{of} of this epoch). The optimizer stepped with it, so the weights are probably NaN "
        "too: reload the last checkpoint or build the model again. Usual causes: a NaN or inf in that "
        "batch's inputs (check torch.isfinite(inputs).all() on the data), a learning rate too high, "
        "or log(0) in a hand-written loss."
    )


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
    *,
    writer=None,
    epoch: int = 0,
    log_every: int = 100,
    progress: bool = True,
) -> tuple[float, float]:
    """Train ``model`` for one pass over ``loader``; return (mean loss, accuracy) as Python floats.

    Each batch ``(inputs, targets)`` is moved to ``device``; the model must already be there.
    Loss and correct predictions are summed on the device and read back once at the end, so the
    loop adds no ``.item()`` wait of its own at each step (a plain copy of a batch from pageable
    memory still waits for the GPU, unless the loader pins memory and ``non_blocking=True``). With a
    TensorBoard ``writer``, the batch loss is logged as ``train/batch_loss`` every ``log_every``
    steps (the global step counts from ``epoch * len(loader)``) and the epoch's means as
    ``train/loss`` and ``train/accuracy``. The mean loss is per sample, for ``reduction='mean'``
    and ``'sum'`` alike.

    Stops with an error before the first step if ``optimizer`` holds none of ``model``'s
    parameters (it was made for an earlier instance of the model), and with a
    ``FloatingPointError`` naming the step if the loss becomes NaN or infinite.
    """
    target = _check_common("train_one_epoch", model, loader, loss_fn, device, writer, epoch, progress)
    log_every = _args.integer(
        log_every, "log_every", "train_one_epoch", minimum=1, meaning="how many steps between loss readings"
    )
    _check_optimizer(optimizer, model, epoch)
    reduction = getattr(loss_fn, "reduction", "mean")
    model.train()
    total_loss = torch.zeros((), device=target)
    correct = torch.zeros((), device=target, dtype=torch.long)
    # A NaN or inf loss is watched on the device, not with loss.item() at every step (which would make
    # the loop wait for the GPU each time): `finite` stays 1 until the first bad loss and then 0 for
    # good, and `good_steps` counts the steps before it. Both are read where the loop waits for the
    # GPU anyway (every log_every steps, and at the end), so a bad loss is caught at most log_every
    # steps late and still named exactly. Three tiny kernels a step, no synchronisation.
    finite = torch.ones((), device=target, dtype=torch.long)
    good_steps = torch.zeros((), device=target, dtype=torch.long)
    seen = 0
    steps_per_epoch = len(loader) if hasattr(loader, "__len__") else 0
    bar = _progress(loader, f"epoch {epoch + 1} train", progress)
    for step, batch in enumerate(bar):
        inputs, targets = _unpack(batch, step, "train_one_epoch")
        inputs, targets = _move(inputs, target, False), targets.to(target)
        outputs = model(inputs)
        right = _correct(outputs, targets, step, "train_one_epoch")  # checks the shapes before the loss
        loss = _batch_loss(loss_fn(outputs, targets), step, "train_one_epoch", scalar=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        total_loss += _batch_total(loss, reduction, targets.size(0))
        correct += right
        finite.mul_(torch.isfinite(loss.detach()))
        good_steps.add_(finite)
        seen += targets.size(0)
        if step % log_every == 0:
            batch_loss = loss.item()  # one extra wait for the GPU every log_every steps
            if not finite.item():
                raise _non_finite(epoch, int(good_steps.item()), steps_per_epoch)
            bar.set_postfix(loss=f"{batch_loss:.3f}")
            if writer is not None:
                writer.add_scalar("train/batch_loss", batch_loss, epoch * steps_per_epoch + step)
    if seen == 0:
        raise ValueError(
            "train_one_epoch: the loader produced no batches: is the dataset empty, or is the batch "
            "larger than the dataset with drop_last=True?"
        )
    if not finite.item():
        raise _non_finite(epoch, int(good_steps.item()), steps_per_epoch)
    mean_loss, accuracy = total_loss.item() / seen, correct.item() / seen
    if writer is not None:
        writer.add_scalar("train/loss", mean_loss, epoch)
        writer.add_scalar("train/accuracy", accuracy, epoch)
    return mean_loss, accuracy


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: Iterable,
    loss_fn: nn.Module,
    device: torch.device | str,
    *,
    writer=None,
    epoch: int = 0,
    progress: bool = True,
) -> tuple[float, float]:
    """Evaluate ``model`` on ``loader`` without gradients; return (mean loss, accuracy) as floats.

    The mean loss is per sample (the seed's notebooks sum the per-batch means instead, which
    depends on the batch size), whether ``loss_fn`` reduces with ``'mean'``, ``'sum'`` or
    ``'none'``. With a ``writer``, logs ``test/loss`` and ``test/accuracy``.
    """
    target = _check_common("evaluate", model, loader, loss_fn, device, writer, epoch, progress)
    reduction = getattr(loss_fn, "reduction", "mean")
    model.eval()
    total_loss = torch.zeros((), device=target)
    correct = torch.zeros((), device=target, dtype=torch.long)
    seen = 0
    for step, batch in enumerate(_progress(loader, "evaluate", progress)):
        inputs, targets = _unpack(batch, step, "evaluate")
        inputs, targets = _move(inputs, target, False), targets.to(target)
        outputs = model(inputs)
        right = _correct(outputs, targets, step, "evaluate")  # checks the shapes before the loss
        loss = _batch_loss(loss_fn(outputs, targets), step, "evaluate", scalar=False)
        total_loss += _batch_total(loss, reduction, targets.size(0))
        correct += right
        seen += targets.size(0)
    if seen == 0:
        raise ValueError(
            "evaluate: the loader produced no batches: is the dataset empty, or is the batch larger "
            "than the dataset with drop_last=True?"
        )
    mean_loss, accuracy = total_loss.item() / seen, correct.item() / seen
    if writer is not None:
        writer.add_scalar("test/loss", mean_loss, epoch)
        writer.add_scalar("test/accuracy", accuracy, epoch)
    return mean_loss, accuracy
