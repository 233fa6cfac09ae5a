"""Checkpoints that survive a lost session and load on any device.

Introduced in ``03_results_errors_and_checkpoints``. A checkpoint holds the model's weights, the
optimizer's state, the epoch, the random-number state and any extras; it is written atomically
(a temporary file in the same folder, then a rename), so a crash during a save leaves the
previous checkpoint intact, and read with ``weights_only=True``, so loading runs no code from the
file.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

__all__ = ["CheckpointError", "load_checkpoint", "save_checkpoint"]

FORMAT = "gpu-course-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint of this model; the message says why and what to do."""


def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside ``nn.DataParallel`` or ``DistributedDataParallel``, else the model itself."""
    wrappers = (nn.DataParallel, nn.parallel.DistributedDataParallel)
    return model.module if isinstance(model, wrappers) else model


def _check_safe(value: Any, where: str) -> None:
    """Refuse extras that ``torch.load(weights_only=True)`` could not read back."""
    if value is None or isinstance(
        value, bool | int | float | str | torch.Tensor | torch.dtype | torch.device
    ):
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_safe(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_safe(key, f"{where} key")
            _check_safe(item, f"{where}[{key!r}]")
        return
    raise TypeError(
        f"save_checkpoint cannot store {where} of type {type(value).__name__}: a checkpoint holds tensors, "
        "numbers, strings, None, and lists, tuples and dicts of them, so that it loads with "
        "weights_only=True. "
        "Convert it first (e.g. a NumPy array with torch.from_numpy, an object with its state_dict())."
    )


def _rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"].cpu())
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = [s.cpu() for s in state["cuda"]]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    epoch: int,
    **extra: Any,
) -> Path:
    """Write a checkpoint to ``path`` atomically and return the path.

    The weights are stored without the ``module.`` prefix that ``nn.DataParallel`` and DDP add, so
    the file loads into a plain model and into a wrapped one. ``extra`` takes anything
    ``weights_only`` loading can read back (tensors, numbers, strings, lists, dicts): a training
    history, a best accuracy, the settings.
    """
    path = Path(path)
    _check_safe(extra, "extra")
    state = _unwrap(model).state_dict()
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "epoch": int(epoch),
        "model": state,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "rng": _rng_state(),
        "extra": extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)  # atomic on POSIX and Windows: readers see old or new, never half
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _model_device(model: nn.Module) -> torch.device:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device
    return torch.device("cpu")


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    if not path.exists():
        folder = path.parent if path.parent.exists() else None
        found = sorted(p.name for p in folder.glob("*.pt*")) if folder is not None else []
        hint = f" Checkpoints in {folder}: {', '.join(found)}." if found else ""
        raise FileNotFoundError(f"No checkpoint at {path}.{hint} Check the path, or train from scratch.")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"{path} holds pickled Python objects, such as a whole model saved with torch.save(model); "
            "loading it would run code from the file, so it is refused. If you trust its source, load it "
            "with torch.load(path, weights_only=False), then save_checkpoint(...) its model."
        ) from error
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as error:
        raise CheckpointError(
            f"{path} is not a complete checkpoint: it is truncated or corrupt ({type(error).__name__}: "
            f"{str(error).splitlines()[0]}). A save that was interrupted never replaces the previous file, "
            "so this file was damaged some other way (a copy cut short, a full disk); "
            "use an earlier checkpoint."
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        if (
            isinstance(payload, dict)
            and payload
            and all(isinstance(v, torch.Tensor) for v in payload.values())
        ):
            what = "a bare state_dict"
            fix = f"load it with model.load_state_dict(torch.load({str(path)!r}, map_location=...))"
        else:
            what = f"a {type(payload).__name__} that save_checkpoint did not write"
            fix = "load it with torch.load and take out what you need"
        raise CheckpointError(f"{path} is not a checkpoint of this course: it holds {what}; {fix}.")
    return payload


def _load_weights(model: nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    state = dict(state)
    consume_prefix_in_state_dict_if_present(state, "module.")
    target = _unwrap(model)
    expected = target.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [
        f"{key}: checkpoint {tuple(state[key].shape)}, model {tuple(expected[key].shape)}"
        for key in sorted(set(state) & set(expected))
        if state[key].shape != expected[key].shape
    ]
    if missing or unexpected or shapes:
        lines = [f"{path} is a checkpoint of a different model than {type(target).__name__}:"]
        if missing:
            lines.append(f"  missing from the checkpoint: {', '.join(missing)}")
        if unexpected:
            lines.append(f"  in the checkpoint but not in the model: {', '.join(unexpected)}")
        if shapes:
            lines.append("  shapes that differ: " + "; ".join(shapes))
        lines.append("Build the model the checkpoint was saved from, or pick the checkpoint of this model.")
        raise CheckpointError("\n".join(lines))
    target.load_state_dict(state)


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: Any = None,
    *,
    restore_rng: bool = True,
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint written by ``save_checkpoint`` into ``model`` (and ``optimizer``).

    Loads with ``weights_only=True``. Tensors go to ``map_location``, by default the device the
    model is on, so a checkpoint written on a GPU loads on a CPU-only machine. Works for plain,
    ``nn.DataParallel`` and DDP models in either direction. Move the model to its device and build
    the optimizer *before* calling this: the optimizer state follows its parameters' device.
    Restores the random-number state (``restore_rng=False`` to skip). Returns ``(epoch, extra)``.
    """
    path = Path(path)
    if map_location is None:
        map_location = _model_device(model)
    payload = _read(path, map_location)
    _load_weights(model, payload["model"], path)
    if optimizer is not None:
        if payload["optimizer"] is None:
            raise CheckpointError(
                f"{path} was saved without optimizer state; call load_checkpoint without an optimizer "
                "and start the optimizer afresh."
            )
        optimizer.load_state_dict(payload["optimizer"])
    if restore_rng:
        _set_rng_state(payload["rng"])
    return payload["epoch"], payload["extra"]
