"""Checkpoints that survive a lost session and load on any device (from ``03`` on): saved atomically,
loaded with ``weights_only=True`` (which runs no code from the file), with clear errors."""

import os
import pickle
import random
import tempfile
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers import _args

FORMAT = "gpu-course-checkpoint"
_SAFE = (
    type(None),
    bool,
    int,
    float,
    str,
    torch.dtype,
    torch.device,
    torch.Size,
    torch.Tensor,
    nn.Parameter,
)


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint of this model; the message says why and what to do."""


def _unwrap(
    model: nn.Module,
) -> nn.Module:  # the model inside nn.DataParallel, DDP or torch.compile
    inner = (
        model.module
        if isinstance(model, nn.DataParallel | nn.parallel.DistributedDataParallel)
        else None
    )
    inner = getattr(model, "_orig_mod", inner)
    return model if inner is None else _unwrap(inner)


def _loadable(value: Any, where: str) -> Any:
    """``value`` as ``weights_only`` loading reads it back (NumPy scalars become numbers), or a TypeError."""
    if type(value) in _SAFE:
        return value
    if isinstance(value, np.generic) and isinstance(value.item(), bool | int | float):
        return value.item()
    if type(value) in (dict, OrderedDict):
        keys = [_loadable(key, f"a key of {where}") for key in value]
        return type(value)((key, _loadable(value[key], f"{where}[{key!r}]")) for key in keys)
    if type(value) in (list, tuple):
        return type(value)(_loadable(item, f"{where}[{i}]") for i, item in enumerate(value))
    raise TypeError(
        f"save_checkpoint cannot store {where}, a {type(value).__name__}: store numbers, strings, tensors "
        "(torch.from_numpy(array), module.state_dict()), or lists, tuples and dicts of them instead."
    )


def _check(caller: str, path: Any, model: Any, optimizer: Any) -> Path:
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        error = ValueError if isinstance(path, str) else TypeError
        raise error(
            f"{caller}: path must be a file path such as 'checkpoints/epoch_3.pt', got {path!r}."
        )
    if not isinstance(model, nn.Module):
        raise TypeError(f"{caller}: model must be an nn.Module (not its class), got {model!r:.40}.")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"{caller}: optimizer must be a torch.optim optimizer or None, got {optimizer!r:.20}"
        )
    return Path(path).expanduser()


def save_checkpoint(
    path: str | Path, model: nn.Module, optimizer: Any, epoch: int, **extra: Any
) -> Path:
    """Save ``model``'s weights (unwrapped from ``nn.DataParallel``, DDP or ``torch.compile``), the
    ``optimizer``'s state (or None), ``epoch``, the random state and ``extra`` (numbers, strings, tensors,
    and lists, tuples and dicts of them) to ``path``; return it. A crash during the save leaves the previous
    file whole; a file there that is no checkpoint is refused, not overwritten."""
    folder = isinstance(path, str) and path.endswith(("/", os.sep))
    path = _check("save_checkpoint", path, model, optimizer)
    if folder or path.is_dir():
        raise IsADirectoryError(
            f"save_checkpoint: {path} is a folder; add a file name such as 'last.pt'."
        )
    epoch = _args.integer(
        epoch, "epoch", "save_checkpoint", minimum=0, meaning="the number of epochs done"
    )
    weights = _unwrap(model).state_dict()
    _loadable(
        weights, "the model's state_dict()"
    )  # checked, then stored as it is, with its metadata
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    rng = {"torch": torch.get_rng_state(), "cuda": cuda, "python": random.getstate()}
    state = (
        None if optimizer is None else _loadable(optimizer.state_dict(), "optimizer.state_dict()")
    )
    payload = {"format": FORMAT, "version": 1, "epoch": epoch, "model": weights, "rng": rng}
    payload |= {"extra": _loadable(extra, "extra"), "optimizer": state}
    payload["optimizer_class"] = type(optimizer).__name__
    target = Path(os.path.realpath(path))  # through a symbolic link, as open() goes
    if blocked := next((p for p in target.parents if p.exists() and not p.is_dir()), None):
        raise NotADirectoryError(
            f"save_checkpoint: {blocked} is a file, not a folder; choose another path."
        )
    if (
        target.is_file() and target.stat().st_size and not zipfile.is_zipfile(target)
    ):  # torch.save: a zip
        raise FileExistsError(
            f"save_checkpoint: {path} exists and is no checkpoint; choose another name."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())  # on the disk before the rename
        os.replace(
            temporary, target
        )  # atomic: a reader sees the old file or the new one, never half
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    if not path.is_file():
        folder = path if path.is_dir() else path.parent
        found = ", ".join(sorted(p.name for p in folder.glob("*.pt*"))) if folder.is_dir() else ""
        what = "is a folder, not a checkpoint file" if path.is_dir() else "does not exist"
        raise CheckpointError(
            f"{path} {what}. Checkpoints in {folder}: {found or 'none'}. Check the path."
        )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:
        zipped = path.read_bytes()[:2] == b"PK"  # how every file of torch.save begins
        why = "is truncated or corrupt: copy it again" if zipped else "is not a file of torch.save"
        if zipped and isinstance(error, pickle.UnpicklingError):
            why = "holds pickled Python objects (a whole model?), which could run code, so it is refused"
        raise CheckpointError(f"{path} {why} ({str(error).strip()[:150]!r}).") from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} was not written by save_checkpoint: load it with torch.load(path)."
        )
    return payload


def _weights(model: nn.Module, saved: dict[str, Any], path: Path) -> dict[str, Any]:
    """The saved weights without a ``module.`` or ``_orig_mod.`` prefix, checked to fit ``model``."""
    expected = _unwrap(
        model
    ).state_dict()  # below: saved from inside DataParallel or DDP, or compiled
    saved = {
        key.removeprefix("module.").removeprefix("_orig_mod."): value
        for key, value in saved.items()
    }
    theirs, ours = (
        {key: tuple(getattr(v, "shape", ())) for key, v in d.items()} for d in (saved, expected)
    )
    if differ := sorted(
        key for key in theirs.keys() | ours.keys() if theirs.get(key) != ours.get(key)
    ):
        shown = [
            f"{k}: checkpoint {theirs.get(k, '-')}, model {ours.get(k, '-')}" for k in differ[:6]
        ]
        fix = f"build the model it was saved from, or load a checkpoint of {type(_unwrap(model)).__name__}"
        raise CheckpointError(
            f"{path} is a checkpoint of a different model ({'; '.join(shown)}): {fix}."
        )
    return saved


def _check_optimizer(
    optimizer: torch.optim.Optimizer, model: nn.Module, payload: dict, path: Path
) -> None:
    saved, given = payload["optimizer"], type(optimizer).__name__
    if saved is None:
        raise CheckpointError(f"{path} holds no optimizer state: load it without an optimizer.")
    if not {id(p) for p in model.parameters()} & {
        id(p) for g in optimizer.param_groups for p in g["params"]
    }:
        raise CheckpointError(
            "load_checkpoint: the optimizer holds none of the model's parameters."
        )
    kind = (payload.get("optimizer_class") or given).rsplit(".", 1)[
        -1
    ]  # not recorded in early checkpoints
    theirs = [len(group["params"]) for group in saved["param_groups"]]
    if kind != given or theirs != [len(group["params"]) for group in optimizer.param_groups]:
        raise CheckpointError(
            f"{path} holds the state of a {kind} of other parameters than this {given}: make it as the run "
            f"that saved it did, torch.optim.{kind}(model.parameters(), ...), or load without an optimizer."
        )


def load_checkpoint(
    path: str | Path, model: nn.Module, optimizer: Any = None, *, restore_rng: bool = True
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint of ``save_checkpoint`` onto ``model``'s device, into ``model`` (and ``optimizer``,
    made after moving the model) and, unless ``restore_rng=False``, the random state, checking it all first;
    return ``(epoch, extra)``."""
    path = _check("load_checkpoint", path, model, optimizer)
    restore_rng = _args.boolean(restore_rng, "restore_rng", "load_checkpoint")
    device = next((t.device for t in [*model.parameters(), *model.buffers()]), torch.device("cpu"))
    payload = _read(path, device)
    weights = _weights(model, payload["model"], path)
    if optimizer is not None:
        _check_optimizer(optimizer, model, payload, path)
        optimizer.load_state_dict(payload["optimizer"])
    _unwrap(model).load_state_dict(weights)
    if restore_rng and (rng := payload.get("rng")) is not None:
        torch.set_rng_state(rng["torch"].cpu())
        for index, state in enumerate(rng.get("cuda", [])[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state.cpu(), index)
        random.setstate(rng["python"])
    return payload["epoch"], payload.get("extra", {})
