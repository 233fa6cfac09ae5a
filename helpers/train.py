"""One epoch of training and one pass of evaluation, on any device.

Introduced in ``02_to_device_method``, where the loop written out by hand in ``01_cuda_method``
becomes these two functions.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from tqdm.auto import tqdm

__all__ = ["evaluate", "train_one_epoch"]


def _check_model_on(model: nn.Module, device: torch.device | str) -> torch.device:
    device = torch.device(device)
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.device.type != device.type or (
            device.index is not None and tensor.device.index not in (None, device.index)
        ):
            raise ValueError(
                f"The model's {name!r} is on {tensor.device}, but the batches go to {device}. "
                f"Move the model first: model.to({str(device)!r})."
            )
    return device


def _progress(loader: Iterable, desc: str, show: bool) -> tqdm:
    """A progress bar over ``loader`` that starts exactly one pass over it.

    ``tqdm.auto`` given a loader calls ``iter()`` on it once more than it uses (tqdm issue 1598):
    for a ``DataLoader`` that is an extra draw from the random stream and, with workers, a set of
    worker processes started for nothing. Handing it the iterator avoids both.
    """
    total = len(loader) if hasattr(loader, "__len__") else None
    return tqdm(iter(loader), total=total, desc=desc, leave=False, disable=not show)


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
    loop does not wait for the GPU at every step. With a TensorBoard ``writer``, the batch loss is
    logged as ``train/batch_loss`` every ``log_every`` steps (the global step counts from
    ``epoch * len(loader)``) and the epoch's means as ``train/loss`` and ``train/accuracy``.
    """
    device = _check_model_on(model, device)
    model.train()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    seen = 0
    steps_per_epoch = len(loader) if hasattr(loader, "__len__") else 0
    bar = _progress(loader, f"epoch {epoch + 1} train", progress)
    for step, (inputs, targets) in enumerate(bar):
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        total_loss += loss.detach() * targets.size(0)
        correct += (outputs.argmax(dim=1) == targets).sum()
        seen += targets.size(0)
        if step % log_every == 0:
            batch_loss = loss.item()  # one wait for the GPU every log_every steps, not every step
            bar.set_postfix(loss=f"{batch_loss:.3f}")
            if writer is not None:
                writer.add_scalar("train/batch_loss", batch_loss, epoch * steps_per_epoch + step)
    if seen == 0:
        raise ValueError("The training loader produced no batches: is the dataset empty?")
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
    depends on the batch size). With a ``writer``, logs ``test/loss`` and ``test/accuracy``.
    """
    device = _check_model_on(model, device)
    model.eval()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    seen = 0
    for inputs, targets in _progress(loader, "evaluate", progress):
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = model(inputs)
        total_loss += loss_fn(outputs, targets) * targets.size(0)
        correct += (outputs.argmax(dim=1) == targets).sum()
        seen += targets.size(0)
    if seen == 0:
        raise ValueError("The evaluation loader produced no batches: is the dataset empty?")
    mean_loss, accuracy = total_loss.item() / seen, correct.item() / seen
    if writer is not None:
        writer.add_scalar("test/loss", mean_loss, epoch)
        writer.add_scalar("test/accuracy", accuracy, epoch)
    return mean_loss, accuracy
