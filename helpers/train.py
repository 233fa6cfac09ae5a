"""One epoch of training and one pass of evaluation, on any device: the loop of ``01``, written once
(from ``02`` on).

Both take a model already on ``device``, a loader of ``(inputs, targets)`` batches, a loss such as
``nn.CrossEntropyLoss()`` and the device. They return (mean loss per sample, accuracy) as floats.
The arguments are checked before the first step, and the first batch when it comes; the loop
itself is the tutorial's. The sums stay on the device, which the loop waits for only every
``LOG_EVERY`` steps and at the end.
"""

import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset
from tqdm.auto import tqdm

from helpers import _args, devices

__all__ = ["LOG_EVERY", "evaluate", "train_one_epoch"]

LOG_EVERY = 100  # steps between two readings of the batch loss (a wait for the GPU each)
_OPTIMIZER = "torch.optim.SGD(model.parameters(), lr=0.01)"


# --- the checks, before the first step --------------------------------------------------------


def _check_model(caller: str, model, device: torch.device) -> None:
    if isinstance(model, type):
        raise TypeError(f"{caller}: model is the class {model.__name__}; pass {model.__name__}().")
    if not isinstance(model, nn.Module):
        raise TypeError(f"{caller}: model must be an nn.Module, got {_args.shown(model)}.")
    tensors = [*model.named_parameters(), *model.named_buffers()]
    if not tensors:
        raise ValueError(
            f"{caller}: the model has no parameters; keep its layers in nn.Sequential or as "
            "attributes (self.fc = nn.Linear(...)), not in a plain list."
        )
    for name, tensor in tensors:
        elsewhere = tensor.device.type != device.type
        other_index = device.index is not None and tensor.device.index not in (None, device.index)
        if elsewhere or other_index:
            raise ValueError(
                f"{caller}: the model's {name!r} is on {tensor.device}, not {device}, where the "
                f"batches go. Move the model first: model.to({str(device)!r})."
            )


def _check_loader(caller: str, loader) -> None:
    if isinstance(loader, torch.Tensor | np.ndarray):
        raise TypeError(
            f"{caller}: loader is an array of shape {tuple(loader.shape)}, not batches of "
            "(inputs, targets); use DataLoader(TensorDataset(images, labels), batch_size=64)."
        )
    if isinstance(loader, Dataset) and not isinstance(loader, IterableDataset):
        raise TypeError(
            f"{caller}: loader is a dataset ({type(loader).__name__}), which gives one sample at "
            "a time; wrap it: DataLoader(dataset, batch_size=64, shuffle=True)."
        )
    if not isinstance(loader, Iterable):
        raise TypeError(
            f"{caller}: loader must give batches of (inputs, targets), e.g. a DataLoader; "
            f"got {_args.shown(loader)}."
        )


def _check_loss_fn(caller: str, loss_fn) -> str:
    """The loss's reduction, 'mean' or 'sum', after checking ``loss_fn``."""
    if isinstance(loss_fn, type):
        name = loss_fn.__name__
        if loss_fn.__module__.startswith("torch.nn"):
            name = f"nn.{name}"
        raise TypeError(f"{caller}: loss_fn is the class {name}; pass one: {name}().")
    if not callable(loss_fn):
        raise TypeError(
            f"{caller}: loss_fn must be a loss such as nn.CrossEntropyLoss(), "
            f"got {_args.shown(loss_fn)}."
        )
    reduction = getattr(loss_fn, "reduction", "mean")
    if reduction not in ("mean", "sum", "batchmean"):
        raise ValueError(
            f"{caller}: loss_fn has reduction={reduction!r}, not one number per batch; "
            "use reduction='mean' (the default)."
        )
    return reduction


def _check_arguments(caller: str, model, loader, loss_fn, device, **options) -> torch.device:
    """Check what both loops take but the loss; return the device. ``options``: writer, epoch,
    progress."""
    device = devices.as_device(device, caller=caller, check_available=True)
    _check_model(caller, model, device)
    _check_loader(caller, loader)
    writer = options["writer"]
    if writer is not None and not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(
            f"{caller}: writer is {_args.shown(writer)}; pass SummaryWriter('runs/name') or None."
        )
    _args.integer(options["epoch"], "epoch", caller, minimum=0, meaning="the epoch's number")
    _args.boolean(options["progress"], "progress", caller)
    return device


def _check_optimizer(optimizer, model: nn.Module) -> None:
    caller = "train_one_epoch"
    if isinstance(optimizer, type):
        raise TypeError(
            f"{caller}: optimizer is the class {optimizer.__name__}; make one from the model: "
            f"{optimizer.__name__}(model.parameters(), lr=0.01)."
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        hint = ""
        if hasattr(optimizer, "get_last_lr"):
            hint = " That is a learning-rate scheduler: pass its optimizer."
        raise TypeError(
            f"{caller}: optimizer is {_args.shown(optimizer)}; use e.g. {_OPTIMIZER}.{hint}"
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    left_out = [name for name, p in trainable if id(p) not in held]
    if trainable and len(left_out) == len(trainable):
        raise ValueError(
            f"{caller}: the optimizer holds none of the model's parameters: it was made for "
            f"another model (did the cell that builds the model run again?). Make it again: "
            f"{_OPTIMIZER}."
        )
    if left_out:
        warnings.warn(
            f"{caller}: the optimizer does not hold {len(left_out)} of the model's "
            f"{len(trainable)} trainable parameters ({', '.join(left_out[:5])}); they will not "
            "change. Make the optimizer again from model.parameters() if that is not on purpose.",
            stacklevel=3,
        )


# --- the checks of the first batch ----------------------------------------------------------


def _check_batch(caller: str, batch) -> None:
    """Refuse a first batch that is not ``(inputs, targets)``: tensors, targets class numbers."""
    if isinstance(batch, Mapping):
        raise TypeError(
            f"{caller}: batch 0 is a dict (keys {', '.join(map(repr, list(batch)[:6]))}); the "
            "loop expects (inputs, targets) pairs: pass ((b['image'], b['label']) for b in loader)."
        )
    if isinstance(batch, torch.Tensor):
        raise TypeError(
            f"{caller}: batch 0 is a Tensor {tuple(batch.shape)}, inputs without targets; use "
            "DataLoader(TensorDataset(images, labels), ...), which gives (inputs, targets)."
        )
    if not isinstance(batch, list | tuple) or len(batch) != 2:
        size = f" of {len(batch)} items" if isinstance(batch, list | tuple) else ""
        raise TypeError(
            f"{caller}: batch 0 is a {type(batch).__name__}{size}, not (inputs, targets); make "
            "the dataset return (input, target) pairs."
        )
    inputs, targets = batch
    for part, value in (("inputs", inputs), ("targets", targets)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{caller}: batch 0's {part} are a {type(value).__name__}, not a tensor; make "
                "tensors in the dataset (torch.from_numpy(x), transforms.ToTensor()), or batch the "
                "samples with a DataLoader, which makes tensors of numbers and NumPy arrays."
            )
    _check_targets(caller, targets)
    if len(targets) == 0:
        raise ValueError(f"{caller}: batch 0 is empty; give batches of at least one sample.")
    if len(inputs) != len(targets):
        raise ValueError(
            f"{caller}: batch 0 holds {len(inputs)} inputs and {len(targets)} targets; give one "
            "target per input."
        )


def _check_targets(caller: str, targets: torch.Tensor) -> None:
    got = f"batch 0's targets are {targets.dtype} {tuple(targets.shape)}"
    if targets.dim() == 0:
        raise ValueError(
            f"{caller}: {got}, one sample's; batch the samples: DataLoader(dataset, batch_size=64)."
        )
    if targets.dim() == 2 and targets.shape[1] == 1:
        raise TypeError(f"{caller}: {got}, not class numbers (batch,): use targets.squeeze(1).")
    if targets.dim() == 2:
        raise TypeError(f"{caller}: {got}, one-hot? give class numbers: targets.argmax(1).")
    if targets.dim() != 1 or targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"{caller}: {got}, not class numbers, ints (batch,): use targets.long().")


def _check_outputs(caller: str, outputs, targets: torch.Tensor) -> None:
    """Refuse outputs that are not one score per class for each sample."""
    if not isinstance(outputs, torch.Tensor):
        raise TypeError(
            f"{caller}: the model returned a {type(outputs).__name__}; return one tensor of "
            "scores (batch, classes >= 2)."
        )
    if outputs.dim() != 2 or outputs.shape[1] < 2:
        raise TypeError(
            f"{caller}: the model returned {tuple(outputs.shape)}; return scores (batch, classes "
            ">= 2), one row per sample, as a classifier's last nn.Linear gives."
        )
    if len(outputs) != len(targets):
        raise ValueError(
            f"{caller}: the model returned {len(outputs)} rows for {len(targets)} samples: its "
            "forward mixes the batch up (x.view(-1, ...) with the wrong size? use "
            "torch.flatten(x, 1))."
        )
    classes = outputs.shape[1]
    low = int(targets.min())  # a wait for the device, on the first batch only
    high = int(targets.max())
    if low < 0 or high >= classes:
        raise ValueError(
            f"{caller}: batch 0 holds the class {low if low < 0 else high}, and the model scores "
            f"{classes} classes, 0 to {classes - 1}: number the classes from 0, or give the "
            "model's last layer one output per class."
        )


def _check_loss(caller: str, loss, training: bool) -> None:
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"{caller}: loss_fn returned a {type(loss).__name__}, not a tensor; compute the loss "
            "with torch operations, as nn.CrossEntropyLoss() does (no .item())."
        )
    if loss.numel() != 1:
        raise ValueError(
            f"{caller}: loss_fn returned {tuple(loss.shape)} losses, not one number per batch; "
            "use reduction='mean' (the default), or .mean() on its result."
        )
    if training and not loss.requires_grad:
        raise ValueError(
            f"{caller}: the loss has no gradient to follow back (computed under torch.no_grad(), "
            "or from detached outputs, or every parameter frozen): backward() would fail."
        )


# --- during the loop --------------------------------------------------------------------------


def _progress(loader: Iterable, desc: str, show: bool) -> tqdm:
    """A progress bar over one pass of ``loader``. tqdm gets an iterator: given the loader, it
    would start a pass it does not use (a draw of the random order, workers started for nothing)."""
    total = len(loader) if hasattr(loader, "__len__") else None
    return tqdm(iter(loader), total=total, desc=desc, leave=False, disable=not show)


def _loss_sum(loss: torch.Tensor, batch_size: int, reduction: str) -> torch.Tensor:
    """The batch's loss summed over its samples, as a 0-d tensor without gradient."""
    loss = loss.detach().reshape(())
    if reduction == "sum":
        return loss
    return loss * batch_size


def _not_finite(epoch: int, step: int, steps: int | None) -> FloatingPointError:
    of = f" of {steps}" if steps else ""
    return FloatingPointError(
        f"train_one_epoch stopped: the loss was NaN or infinite at epoch={epoch}, step {step} "
        f"(batch {step + 1}{of} of this epoch). The optimizer stepped with it, so the weights are "
        "probably NaN too: load the last checkpoint or build the model again. Usual causes: a "
        "NaN or inf in that batch's inputs (check torch.isfinite(inputs).all()), a learning rate "
        "too high, or log(0) in a loss written by hand."
    )


def _means(caller: str, total_loss: torch.Tensor, correct: torch.Tensor, samples: int):
    """The mean loss per sample and the accuracy, read from the device (one wait)."""
    if samples == 0:
        raise ValueError(
            f"{caller}: the loader gave no batches: is the dataset empty, or the batch larger "
            "than it with drop_last=True?"
        )
    return total_loss.item() / samples, correct.item() / samples


def _log_epoch(writer, split: str, mean_loss: float, accuracy: float, epoch: int) -> None:
    if writer is not None:
        writer.add_scalar(f"{split}/loss", mean_loss, epoch)
        writer.add_scalar(f"{split}/accuracy", accuracy, epoch)


# --- the two loops ----------------------------------------------------------------------------


def train_one_epoch(
    model, loader, loss_fn, optimizer, device, *, writer=None, epoch=0, progress=True
) -> tuple[float, float]:
    """Train ``model`` for one pass over ``loader``; return (mean loss, accuracy). With a
    TensorBoard ``writer``, log ``train/batch_loss`` every ``LOG_EVERY`` steps and the epoch's
    ``train/loss`` and ``train/accuracy``; ``progress=False`` hides the progress bar. A NaN or
    infinite loss stops it with a ``FloatingPointError`` naming the step."""
    caller = "train_one_epoch"
    options = {"writer": writer, "epoch": epoch, "progress": progress}
    device = _check_arguments(caller, model, loader, loss_fn, device, **options)
    _check_optimizer(optimizer, model)
    reduction = _check_loss_fn(caller, loss_fn)
    steps = len(loader) if hasattr(loader, "__len__") else None
    model.train()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    samples = 0
    # A NaN or inf loss is watched on the device, not with loss.item() at every step (a wait for
    # the GPU each): `finite` stays True until the first bad loss, and `finite_steps` counts the
    # steps before it. Both are read where the loop waits anyway, every LOG_EVERY steps.
    finite = torch.ones((), device=device, dtype=torch.bool)
    finite_steps = torch.zeros((), device=device, dtype=torch.long)
    bar = _progress(loader, f"epoch {epoch + 1} train", progress)
    for step, batch in enumerate(bar):
        if step == 0:
            _check_batch(caller, batch)
        inputs, targets = batch
        inputs = inputs.to(device)
        targets = targets.to(device)
        outputs = model(inputs)
        if step == 0:
            _check_outputs(caller, outputs, targets)
        loss = loss_fn(outputs, targets)
        if step == 0:
            _check_loss(caller, loss, training=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        total_loss += _loss_sum(loss, len(targets), reduction)
        correct += (outputs.argmax(dim=1) == targets).sum()
        samples += len(targets)
        finite &= loss.detach().isfinite().all()
        finite_steps += finite
        if step % LOG_EVERY == 0:
            batch_loss = loss.item()  # waits for the GPU: every LOG_EVERY steps only
            if not finite.item():
                raise _not_finite(epoch, int(finite_steps.item()), steps)
            bar.set_postfix(loss=f"{batch_loss:.3f}")
            if writer is not None:
                writer.add_scalar("train/batch_loss", batch_loss, epoch * (steps or 0) + step)
    mean_loss, accuracy = _means(caller, total_loss, correct, samples)
    if not finite.item():
        raise _not_finite(epoch, int(finite_steps.item()), steps)
    _log_epoch(writer, "train", mean_loss, accuracy, epoch)
    return mean_loss, accuracy


@torch.no_grad()
def evaluate(
    model, loader, loss_fn, device, *, writer=None, epoch=0, progress=True
) -> tuple[float, float]:
    """Evaluate ``model`` on ``loader`` without gradients; return (mean loss, accuracy). With a
    TensorBoard ``writer``, log ``test/loss`` and ``test/accuracy`` for ``epoch``."""
    caller = "evaluate"
    options = {"writer": writer, "epoch": epoch, "progress": progress}
    device = _check_arguments(caller, model, loader, loss_fn, device, **options)
    reduction = _check_loss_fn(caller, loss_fn)
    model.eval()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    samples = 0
    for step, batch in enumerate(_progress(loader, f"epoch {epoch + 1} test", progress)):
        if step == 0:
            _check_batch(caller, batch)
        inputs, targets = batch
        inputs = inputs.to(device)
        targets = targets.to(device)
        outputs = model(inputs)
        if step == 0:
            _check_outputs(caller, outputs, targets)
        loss = loss_fn(outputs, targets)
        if step == 0:
            _check_loss(caller, loss, training=False)

        total_loss += _loss_sum(loss, len(targets), reduction)
        correct += (outputs.argmax(dim=1) == targets).sum()
        samples += len(targets)
    mean_loss, accuracy = _means(caller, total_loss, correct, samples)
    _log_epoch(writer, "test", mean_loss, accuracy, epoch)
    return mean_loss, accuracy
