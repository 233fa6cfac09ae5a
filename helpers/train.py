"""One epoch of training and one pass of evaluation, on any device: the loop of ``01``, written once.
Both take a model already on ``device``, a loader of ``(inputs, targets)`` batches, a loss such as
``nn.CrossEntropyLoss()`` and the device; they return (mean loss per sample, accuracy) as floats."""

from collections.abc import Iterable

import torch
from torch import nn
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from helpers import _args, devices

__all__ = ["evaluate", "train_one_epoch"]
LOG_EVERY = 100  # steps between two readings of the batch loss (a wait for the GPU each)
_CLASS_NUMBERS = "class numbers, ints (batch,): use labels.long(), .squeeze(1) if (batch, 1), .argmax(1) if one-hot"


def _check(caller: str, model, loader, loss_fn, device, writer, epoch, progress) -> torch.device:
    """Check the arguments both loops take, before the first batch; return the device."""
    device = devices.as_device(device, caller=caller, check_available=True)
    _args.integer(epoch, "epoch", caller, minimum=0, meaning="the number of epochs done")
    _args.boolean(progress, "progress", caller)
    if writer is not None and not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(
            f"{caller}: writer is {writer!r:.40}; pass SummaryWriter('runs/name') or None."
        )
    if not isinstance(model, nn.Module):
        fix = f"{model.__name__}()" if isinstance(model, type) else "a model (an nn.Module)"
        raise TypeError(f"{caller}: model is {model!r:.60}; pass {fix}.")
    where = {p.device for p in model.parameters()}
    if not where:
        raise ValueError(
            f"{caller}: the model has no parameters; keep its layers in an nn.Sequential."
        )
    if any(d.type != device.type or device.index not in (None, d.index) for d in where):
        raise ValueError(
            f"{caller}: the model is on {where.pop()}, not {device}: use model.to(device)."
        )
    if isinstance(loader, Dataset) or not isinstance(loader, Iterable):
        raise TypeError(
            f"{caller}: loader is a {type(loader).__name__}; use a DataLoader(dataset, ...)."
        )
    if isinstance(loss_fn, type) or not callable(loss_fn):
        raise TypeError(f"{caller}: loss_fn is {loss_fn!r:.60}; use e.g. nn.CrossEntropyLoss().")
    return device


def _loop(
    caller, model, loader, loss_fn, device, optimizer, writer, epoch, progress
) -> tuple[float, float]:
    """One pass over ``loader``, training when there is an ``optimizer``; the sums stay on the device."""
    total_loss, correct, seen = torch.zeros((), device=device), torch.zeros((), device=device), 0
    per_batch = getattr(loss_fn, "reduction", "mean") == "sum"  # else the loss is the batch's mean
    steps, split = (
        len(loader) if hasattr(loader, "__len__") else None,
        "train" if optimizer else "test",
    )
    desc = f"epoch {epoch + 1} {split}"  # tqdm gets an iterator: given the loader, it would go over it twice
    bar = tqdm(iter(loader), total=steps, desc=desc, leave=False, disable=not progress)
    for step, batch in enumerate(bar):
        if not (isinstance(batch, list | tuple) and len(batch) == 2):
            raise TypeError(
                f"{caller}: batch {step} is a {type(batch).__name__}, not (inputs, targets)."
            )
        inputs, targets = batch
        if (
            not isinstance(targets, torch.Tensor)
            or targets.dim() != 1
            or targets.is_floating_point()
        ):
            got = (
                f"{targets.dtype} {tuple(targets.shape)}"
                if isinstance(targets, torch.Tensor)
                else targets
            )
            raise TypeError(
                f"{caller}: batch {step}'s targets are {got!s:.30}, not {_CLASS_NUMBERS}."
            )
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = model(inputs)
        if not isinstance(outputs, torch.Tensor) or outputs.dim() != 2 or outputs.shape[1] < 2:
            got = (
                tuple(outputs.shape)
                if isinstance(outputs, torch.Tensor)
                else type(outputs).__name__
            )
            raise TypeError(
                f"{caller}: the model returned {got}; return one tensor (batch, classes >= 2)."
            )
        correct += (outputs.argmax(dim=1) == targets).sum()
        loss = loss_fn(outputs, targets)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ValueError(
                f"{caller}: loss_fn gave {loss!r:.40}, not one number; use reduction='mean'."
            )
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total_loss += loss.detach().reshape(()) * (1 if per_batch else len(targets))
        seen += len(targets)
        if optimizer is not None and step % LOG_EVERY == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if writer is not None:
                writer.add_scalar("train/batch_loss", loss.item(), epoch * (steps or 0) + step)
    if seen == 0:
        raise ValueError(
            f"{caller}: the loader gave no batches: is the dataset empty (or drop_last=True)?"
        )
    mean_loss, accuracy = total_loss.item() / seen, correct.item() / seen
    if writer is not None:
        writer.add_scalar(f"{split}/loss", mean_loss, epoch)
        writer.add_scalar(f"{split}/accuracy", accuracy, epoch)
    return mean_loss, accuracy


def train_one_epoch(
    model, loader, loss_fn, optimizer, device, *, writer=None, epoch=0, progress=True
):
    """Train ``model`` for one pass over ``loader``; return (mean loss, accuracy). With a TensorBoard
    ``writer``, logs ``train/batch_loss`` every 100 steps and the epoch's ``train/loss`` and
    ``train/accuracy``; ``progress=False`` hides the progress bar."""
    device = _check("train_one_epoch", model, loader, loss_fn, device, writer, epoch, progress)
    example = "torch.optim.SGD(model.parameters(), lr=0.01)"
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"train_one_epoch: optimizer is {optimizer!r:.40}; use e.g. {example}.")
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if held.isdisjoint(map(id, model.parameters())):
        raise ValueError(
            f"train_one_epoch: the optimizer is for another model; make it again: {example}."
        )
    model.train()
    return _loop(
        "train_one_epoch", model, loader, loss_fn, device, optimizer, writer, epoch, progress
    )


@torch.no_grad()
def evaluate(model, loader, loss_fn, device, *, writer=None, epoch=0, progress=True):
    """Evaluate ``model`` on ``loader`` without gradients; return (mean loss, accuracy). With a
    TensorBoard ``writer``, logs ``test/loss`` and ``test/accuracy`` for ``epoch``."""
    device = _check("evaluate", model, loader, loss_fn, device, writer, epoch, progress)
    model.eval()
    return _loop("evaluate", model, loader, loss_fn, device, None, writer, epoch, progress)
