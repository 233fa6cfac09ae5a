"""Checkpoints that survive a lost session and load on any device (from ``03`` on).

A checkpoint holds the model's weights, the optimizer's state, the epoch, the random state (of
torch on the CPU, CUDA and MPS, of NumPy and of Python's ``random``) and any extras. It is written
to a temporary file that then replaces the old one, so a crash during a save leaves the previous
checkpoint whole. It is read with ``weights_only=True``, which runs no code from the file.
"""

import errno
import os
import pickle
import random
import re
import secrets
import shutil
import socket
import stat
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers import _args

__all__ = ["CheckpointError", "load_checkpoint", "save_checkpoint"]

FORMAT = "gpu-course-checkpoint"


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint of this model; the message says why and what
    to do."""


def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside ``nn.DataParallel``, DDP or ``torch.compile``, else the model itself."""
    if isinstance(model, nn.DataParallel | nn.parallel.DistributedDataParallel):
        return _unwrap(model.module)
    inner = getattr(model, "_orig_mod", None)  # what torch.compile wraps
    if isinstance(inner, nn.Module):
        return _unwrap(inner)
    return model


# --- what a checkpoint may hold: exactly what torch.load(weights_only=True) reads back ---------

_ATOMS = (type(None), bool, int, float, str, torch.dtype, torch.device, torch.Size)


def _store_instead(value: Any) -> str:
    """What to store in place of ``value``, which ``weights_only`` loading would refuse."""
    if isinstance(value, np.ndarray):
        return "store torch.from_numpy(value) (or value.tolist())"
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return "store tuple(value), or value._asdict() to keep the field names"
    if isinstance(value, dict):
        return "store dict(value)"
    if isinstance(value, set | frozenset):
        return "store sorted(value)"
    if isinstance(value, os.PathLike):
        return "store str(value)"
    if callable(getattr(value, "state_dict", None)):
        return "store value.state_dict()"
    if isinstance(value, list | tuple):
        return "store list(value)"
    return "store its numbers, strings or tensors instead"


def _loadable(value: Any, where: str) -> Any:
    """``value`` as ``weights_only`` loading reads it back (a NumPy number as a Python number), or
    a TypeError naming ``where`` it is and what to store instead."""
    kind = type(value)
    if kind in _ATOMS or kind in (torch.Tensor, nn.Parameter):
        return value
    if isinstance(value, np.generic) and isinstance(value.item(), bool | int | float):
        return value.item()
    if kind in (list, tuple):
        return kind(_loadable(item, f"{where}[{i}]") for i, item in enumerate(value))
    if kind in (dict, OrderedDict):
        pairs = []
        for key, item in value.items():
            pairs.append(
                (_loadable(key, f"a key of {where}"), _loadable(item, f"{where}[{key!r}]"))
            )
        return kind(pairs)
    raise TypeError(
        f"save_checkpoint cannot store {where}, a {kind.__qualname__}: "
        f"{_store_instead(value)}. A checkpoint holds tensors, numbers, strings, None, and lists, "
        "tuples and dicts of them, so that it loads with weights_only=True."
    )


# --- the random state -------------------------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    """This process's random state: torch's on the CPU, CUDA and MPS, NumPy's and Python's."""
    name, keys, position, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": (
            str(name),
            torch.from_numpy(keys.astype(np.int64)),
            int(position),
            int(has_gauss),
            float(cached),
        ),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def _set_rng_state(state: dict[str, Any], path: Path) -> None:
    """Restore the random state ``state``; say so where a GPU's state cannot be restored here."""
    torch.set_rng_state(state["torch"].cpu())
    random.setstate(state["python"])
    if "numpy" in state:  # checkpoints written before it was saved lack it
        name, keys, position, has_gauss, cached = state["numpy"]
        keys = keys.cpu().numpy().astype(np.uint32)
        np.random.set_state((name, keys, position, has_gauss, cached))
    saved = state.get("cuda", [])
    here = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for index in range(min(len(saved), here)):
        torch.cuda.set_rng_state(saved[index].cpu(), index)
    if len(saved) > here:
        warnings.warn(
            f"{path} holds the CUDA random state of {len(saved)} GPU(s), and this machine has "
            f"{here}: random numbers drawn on the others differ from the original run.",
            stacklevel=3,
        )
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"].cpu())
    elif "mps" in state:
        warnings.warn(
            f"{path} holds the random state of an Apple GPU (MPS), and this machine has none: "
            "random numbers drawn on the GPU differ from the original run.",
            stacklevel=3,
        )


# --- the arguments both functions take --------------------------------------------------------


def _check_path(path: Any, caller: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"{caller}: path must be a file path such as 'checkpoints/epoch_3.pt', got "
            f"{_args.shown(path)}."
        )
    text = os.fsdecode(os.fspath(path))
    if not text.strip():
        raise ValueError(
            f"{caller}: path must be a file path such as 'checkpoints/epoch_3.pt', got {path!r}."
        )
    return Path(text).expanduser()


def _check_model(model: Any, caller: str) -> None:
    if isinstance(model, type):
        raise TypeError(f"{caller}: model must be an nn.Module, not its class: {model.__name__}().")
    if not isinstance(model, nn.Module):
        raise TypeError(f"{caller}: model must be an nn.Module, got {_args.shown(model)}.")


def _check_optimizer(optimizer: Any, caller: str) -> None:
    if optimizer is None or isinstance(optimizer, torch.optim.Optimizer):
        return
    hint = ""
    if hasattr(optimizer, "get_last_lr"):
        hint = " That is a learning-rate scheduler: save it as an extra, scheduler=s.state_dict()."
    raise TypeError(
        f"{caller}: optimizer must be a torch.optim optimizer or None, got "
        f"{_args.shown(optimizer)}.{hint}"
    )


# --- writing ----------------------------------------------------------------------------------

_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def _remove_stale_temporaries(target: Path) -> None:
    """Delete what saves of ``target`` that were killed (``kill -9``, a lost kernel) left behind
    on this machine: the files of processes that no longer run. POSIX only."""
    if os.name != "posix":
        return
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{re.escape(_HOST)}-(\d+)\.[0-9a-f]+\.tmp")
    for entry in target.parent.iterdir():
        found = pattern.fullmatch(entry.name)
        if found is None or int(found[1]) == os.getpid():
            continue
        try:
            os.kill(int(found[1]), 0)  # signal 0 only asks whether the process exists
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
        except PermissionError:
            pass  # it exists, under another user


def _open_temporary(target: Path) -> tuple[Path, int]:
    """A new hidden file beside ``target``, named after this machine and process, with the mode
    ``open()`` would give ``target`` (or the mode of the file it replaces)."""
    name = f".{target.name}.{_HOST}-{os.getpid()}.{secrets.token_hex(4)}.tmp"
    temporary = target.parent / name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    handle = os.open(temporary, flags, 0o666)  # the umask decides, as for torch.save
    if target.exists() and hasattr(os, "fchmod"):
        os.fchmod(handle, stat.S_IMODE(target.stat().st_mode))
    return temporary, handle


_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file is larger than this system allows",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def _write_failure(target: Path, error: BaseException, existed: bool) -> OSError:
    """The error for a save that could not be written, saying why and what was kept."""
    reason = _REASONS.get(getattr(error, "errno", None))
    if reason is None:
        try:
            free = shutil.disk_usage(target.parent).free / 1e6
            reason = f"disk full? {free:,.0f} MB free there"
        except OSError:
            reason = "the disk may be full"
    kept = "the previous checkpoint is whole" if existed else "nothing was written there"
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return OSError(
        f"save_checkpoint could not write {target} ({reason}); {kept}. (The error: {first_line})"
    )


def _target(path: Path, folder_named: bool) -> Path:
    """Where to write ``path``: through a symbolic link, as ``open()`` goes; checked to be a file
    in a folder."""
    if folder_named or path.is_dir():
        raise IsADirectoryError(
            f"save_checkpoint: {path} is a folder; add a file name such as {path / 'last.pt'}."
        )
    target = Path(os.path.realpath(path))
    blocked = [p for p in target.parents if p.exists() and not p.is_dir()]
    if blocked:
        raise NotADirectoryError(
            f"save_checkpoint: {blocked[-1]} is a file, not a folder; choose another path."
        )
    if target.is_dir():
        raise IsADirectoryError(f"save_checkpoint: {path} leads to the folder {target}.")
    if target.is_file() and target.stat().st_size and _kind(target) != "torch":
        raise FileExistsError(
            f"save_checkpoint: {path} exists and is no checkpoint; choose another name."
        )
    return target


def _write(payload: dict, target: Path) -> None:
    """``torch.save(payload)`` to a temporary file, which then replaces ``target`` (atomic: a
    reader sees the old file or the new one, never half)."""
    existed = target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(target)
        temporary, handle = _open_temporary(target)
    except OSError as error:
        raise _write_failure(target, error, existed) from error
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())  # on the disk before the rename
        os.replace(temporary, target)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        failed_write = isinstance(error, RuntimeError) and "write" in str(error).lower()
        if isinstance(error, OSError) or failed_write:
            raise _write_failure(target, error, existed) from error
        raise


def save_checkpoint(
    path: str | os.PathLike, model: nn.Module, optimizer: Any, epoch: int, **extra: Any
) -> Path:
    """Save ``model``'s weights (unwrapped from ``nn.DataParallel``, DDP or ``torch.compile``), the
    ``optimizer``'s state (or None), ``epoch``, the random state and ``extra`` (numbers, strings,
    tensors, and lists, tuples and dicts of them) to ``path``; return the path. A crash during the
    save leaves the previous file whole; a file there that is no checkpoint is refused."""
    caller = "save_checkpoint"
    folder_named = isinstance(path, str) and path.endswith(("/", os.sep))  # Path() drops the "/"
    path = _check_path(path, caller)
    _check_model(model, caller)
    _check_optimizer(optimizer, caller)
    epoch = _args.integer(epoch, "epoch", caller, minimum=0, meaning="the number of epochs done")
    target = _target(path, folder_named)
    weights = _unwrap(model).state_dict()
    _loadable(weights, "the model's state_dict()")  # checked; stored as it is, with its metadata
    payload = {
        "format": FORMAT,
        "version": 1,
        "epoch": epoch,
        "model": weights,
        "optimizer": None,
        "optimizer_class": None,
        "rng": _rng_state(),
        "extra": _loadable(extra, "extra"),
    }
    if optimizer is not None:
        payload["optimizer"] = _loadable(optimizer.state_dict(), "optimizer.state_dict()")
        payload["optimizer_class"] = type(optimizer).__name__
    _write(payload, target)
    return path


# --- reading ----------------------------------------------------------------------------------

_NOT_A_CHECKPOINT = {
    "empty": "is empty (0 bytes): a copy or a download that failed. Use another checkpoint.",
    "lfs": "is a Git LFS pointer, not the file: run `git lfs pull`, or download the file itself.",
    "html": "is a web page, not a checkpoint: download the file itself (GitHub's 'Raw' link).",
    "numpy": "is a NumPy file (np.save), not a checkpoint: read it with np.load(path).",
    "pickle": "is a Python pickle, not a file of torch.save; it is refused, since unpickling runs "
    "code from the file.",
    "text": "is a text file, not a checkpoint. Check the path.",
    "other": "is not a file of torch.save (a checkpoint begins with b'PK', a zip archive). Check "
    "the path; if the file was copied or downloaded, do it again.",
}


_LEGACY_TORCH = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


def _kind(path: Path) -> str:
    """What a file is, from its first bytes: ``torch`` for a file of ``torch.save`` (a zip
    archive, or the format before PyTorch 1.6)."""
    with open(path, "rb") as file:
        head = file.read(512)
    if not head:
        return "empty"
    if head.startswith((b"PK", _LEGACY_TORCH)):
        return "torch"
    if head.startswith(b"version https://git-lfs"):
        return "lfs"
    if b"<html" in head.lower() or head.lstrip().lower().startswith(b"<!doctype"):
        return "html"
    if head.startswith(b"\x93NUMPY"):
        return "numpy"
    if head.startswith(b"\x80"):
        return "pickle"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "other"
    return "text"


def _missing(path: Path) -> CheckpointError:
    blocked = [p for p in path.parents if p.exists() and not p.is_dir()]
    if blocked:
        return CheckpointError(f"{path}: {blocked[-1]} is a file, not a folder. Check the path.")
    folder = path if path.is_dir() else path.parent
    found = []
    if folder.is_dir():
        found = sorted(p.name for p in folder.glob("*.pt*") if not p.name.startswith("."))
    what = "is a folder, not a checkpoint file" if path.is_dir() else "does not exist"
    return CheckpointError(
        f"{path} {what}. Checkpoints in {folder}: {', '.join(found) or 'none'}. Check the path."
    )


def _unpickling_refused(path: Path, error: Exception) -> CheckpointError:
    return CheckpointError(
        f"{path} was written by torch.save but holds pickled Python objects (a whole model saved "
        "with torch.save(model)?); loading it would run code from the file, so it is refused. "
        "Only if you trust its source: torch.load(path, weights_only=False), then save_checkpoint "
        f"the model it holds. ({str(error).strip().splitlines()[0][:120]})"
    )


def _check_payload(payload: dict[str, Any], path: Path) -> None:
    """A file in save_checkpoint's format, edited by hand: its epoch or weights are wrong."""
    epoch = payload.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise CheckpointError(
            f"{path}: its epoch is {epoch!r}, not a whole number 0 or more; the file was edited "
            "after save_checkpoint wrote it. Save it again with save_checkpoint(..., epoch=3)."
        )
    if not isinstance(payload.get("model"), dict):
        raise CheckpointError(
            f"{path} holds no model weights; the file was edited after save_checkpoint wrote it. "
            "Save it again with save_checkpoint."
        )


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    if not path.is_file():
        raise _missing(path)
    kind = _kind(path)
    if kind != "torch":
        raise CheckpointError(f"{path} {_NOT_A_CHECKPOINT[kind]}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise _unpickling_refused(path, error) from error
    except Exception as error:
        detail = ""
        if str(error).strip():
            detail = str(error).strip().splitlines()[0].split(". ")[0]  # its first sentence
        raise CheckpointError(
            f"{path} is truncated or corrupt ({type(error).__name__}: {detail}): copy it again, "
            "or use an earlier checkpoint."
        ) from error
    if isinstance(payload, dict) and payload.get("format") == FORMAT:
        _check_payload(payload, path)
        return payload
    if isinstance(payload, dict) and all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise CheckpointError(
            f"{path} was not written by save_checkpoint: it holds a bare state_dict. Load it with "
            f"model.load_state_dict(torch.load({str(path)!r}))."
        )
    raise CheckpointError(
        f"{path} was not written by save_checkpoint: it holds a {type(payload).__name__}. Load it "
        "with torch.load(path) and take out what you need."
    )


def _weights(model: nn.Module, saved: dict[str, Any], path: Path) -> dict[str, Any]:
    """The saved weights without a ``module.`` or ``_orig_mod.`` prefix, checked to fit ``model``
    (saved from inside DataParallel or DDP, or compiled)."""
    saved = {
        key.removeprefix("module.").removeprefix("_orig_mod."): value
        for key, value in saved.items()
    }
    expected = _unwrap(model).state_dict()
    theirs = {key: tuple(getattr(value, "shape", ())) for key, value in saved.items()}
    ours = {key: tuple(getattr(value, "shape", ())) for key, value in expected.items()}
    differ = sorted(key for key in theirs.keys() | ours.keys() if theirs.get(key) != ours.get(key))
    if differ:
        shown = [f"{k}: checkpoint {theirs.get(k, '-')}, model {ours.get(k, '-')}" for k in differ]
        name = type(_unwrap(model)).__name__
        raise CheckpointError(
            f"{path} is a checkpoint of a different model ({'; '.join(shown[:6])}): build the "
            f"model it was saved from, or load a checkpoint of {name}."
        )
    return saved


def _check_optimizer_fits(optimizer, model: nn.Module, payload: dict, path: Path) -> None:
    saved = payload["optimizer"]
    given = type(optimizer).__name__
    if saved is None:
        raise CheckpointError(f"{path} holds no optimizer state: load it without an optimizer.")
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if held.isdisjoint(map(id, model.parameters())):
        raise CheckpointError(
            "load_checkpoint: the optimizer holds none of the model's parameters: make it again "
            "from this model, e.g. torch.optim.SGD(model.parameters(), lr=0.01), then load."
        )
    kind = (payload.get("optimizer_class") or given).rsplit(".", 1)[-1]  # early files lack it
    theirs = [len(group["params"]) for group in saved["param_groups"]]
    mine = [len(group["params"]) for group in optimizer.param_groups]
    if kind != given or theirs != mine:
        raise CheckpointError(
            f"{path} holds the state of a {kind} of other parameters than this {given}: make it "
            f"as the run that saved it did, torch.optim.{kind}(model.parameters(), ...), or load "
            "without an optimizer."
        )


def _model_device(model: nn.Module) -> torch.device:
    tensors = [*model.parameters(), *model.buffers()]
    if not tensors:
        return torch.device("cpu")
    return tensors[0].device


def load_checkpoint(
    path: str | os.PathLike, model: nn.Module, optimizer: Any = None, *, restore_rng: bool = True
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint of ``save_checkpoint`` onto ``model``'s device, into ``model`` and
    ``optimizer`` (made after moving the model), and, unless ``restore_rng=False``, the random
    state. Everything is checked before anything changes. Returns ``(epoch, extra)``."""
    caller = "load_checkpoint"
    path = _check_path(path, caller)
    _check_model(model, caller)
    _check_optimizer(optimizer, caller)
    restore_rng = _args.boolean(restore_rng, "restore_rng", caller)
    payload = _read(path, _model_device(model))
    weights = _weights(model, payload["model"], path)
    if optimizer is not None:
        _check_optimizer_fits(optimizer, model, payload, path)
    _unwrap(model).load_state_dict(weights)
    if optimizer is not None:
        optimizer.load_state_dict(payload["optimizer"])
    if restore_rng and payload.get("rng") is not None:
        _set_rng_state(payload["rng"], path)
    return payload["epoch"], payload.get("extra", {})
