"""Checkpoints that survive a lost session and load on any device.

Introduced in ``03_results_errors_and_checkpoints``. A checkpoint holds the model's weights, the
optimizer's state, the epoch, the random-number state and any extras; it is written atomically
(a temporary file in the same folder, then a rename), so a crash during a save leaves the
previous checkpoint intact, and read with ``weights_only=True``, so loading runs no code from the
file. What ``save_checkpoint`` accepts, ``load_checkpoint`` reads back: values that
``weights_only`` loading would refuse are refused at the save, with what to store instead.
"""

from __future__ import annotations

import enum
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
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from helpers import _args
from helpers.devices import _mps_available, as_device

__all__ = ["CheckpointError", "current_rng_state", "gather_rng_states", "load_checkpoint", "save_checkpoint"]

FORMAT = "gpu-course-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint of this model; the message says why and what to do."""


def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside ``nn.DataParallel`` or ``DistributedDataParallel``, else the model itself."""
    wrappers = (nn.DataParallel, nn.parallel.DistributedDataParallel)
    return model.module if isinstance(model, wrappers) else model


# ---- what a checkpoint may hold: exactly what torch.load(weights_only=True) reads back ----

_ATOMS = (type(None), bool, int, float, str, torch.dtype, torch.device, torch.Size)
_TENSORS = (torch.Tensor, nn.Parameter)


def _store_instead(value: Any) -> str:
    """What to store in place of ``value``, which ``weights_only`` loading would refuse."""
    if isinstance(value, np.ndarray):
        return "store torch.from_numpy(value) (or value.tolist())"
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return "store tuple(value), or value._asdict() to keep the field names"
    if isinstance(value, dict):
        return "store dict(value)"
    if isinstance(value, set | frozenset):
        return "store sorted(value) or list(value)"
    if isinstance(value, enum.Enum):
        return "store value.name or value.value"
    if isinstance(value, os.PathLike):
        return "store str(value)"
    if isinstance(value, torch.Tensor):
        return "store value.as_subclass(torch.Tensor)"
    if callable(getattr(value, "state_dict", None)):
        return "store value.state_dict()"
    if isinstance(value, list | tuple):
        return "store list(value)"
    return "store its numbers, strings or tensors instead"


def _loadable(value: Any, where: str, convert: bool, active: set[int]) -> Any:
    """``value``, checked to load with ``weights_only=True`` (``convert``: NumPy scalars to numbers)."""
    kind = type(value)
    if kind in _ATOMS or kind in _TENSORS:
        return value
    if convert and isinstance(value, np.generic) and type(value.item()) in (bool, int, float, str):
        return value.item()  # np.float64(0.5) -> 0.5: the same value, a type weights_only reads
    if kind in (list, tuple, dict, OrderedDict):
        if id(value) in active:
            raise TypeError(f"save_checkpoint cannot store {where}: it contains itself.")
        active.add(id(value))
        try:
            if kind in (list, tuple):
                items = [_loadable(item, f"{where}[{i}]", convert, active) for i, item in enumerate(value)]
                return kind(items) if convert else value
            pairs = [
                (
                    _loadable(key, f"a key of {where}", convert, active),
                    _loadable(item, f"{where}[{key!r}]", convert, active),
                )
                for key, item in value.items()
            ]
            return kind(pairs) if convert else value
        finally:
            active.discard(id(value))
    raise TypeError(
        f"save_checkpoint cannot store {where}, a {kind.__module__}.{kind.__qualname__}: "
        f"{_store_instead(value)}. A checkpoint holds tensors, numbers, strings, None, and lists, tuples "
        "and dicts of them, so that it loads with weights_only=True, which runs no code from the file."
    )


# ---- the random-number state ----


def current_rng_state() -> dict[str, Any]:
    """This process's random-number state: torch (the CPU, every CUDA GPU, Apple's MPS), NumPy and
    Python's ``random``.

    ``save_checkpoint`` stores it unless it is given ``rng_state=``; under DDP give it
    ``gather_rng_states()``, so that each rank resumes with its own. The CUDA states
    (``"cuda"``, one per GPU) are read only where ``torch.cuda.is_available()``, the MPS one
    (``"mps"``, the Apple GPU's single generator) only where ``torch.backends.mps.is_available()``:
    elsewhere the calls would raise, and there is no such generator to save.
    """
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": (
            str(name),
            torch.from_numpy(keys.astype(np.int64)),
            int(pos),
            int(has_gauss),
            float(cached),
        ),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if _mps_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def gather_rng_states() -> list[dict[str, Any]]:
    """Every rank's ``current_rng_state()``, in rank order, for ``save_checkpoint(..., rng_state=...)``.

    A collective: every rank must call it, before rank 0 saves (``all_gather_object`` of a few KB).
    Outside ``torch.distributed`` it is ``[current_rng_state()]``. ``load_checkpoint`` then restores on each
    rank the state that rank saved. Introduced in ``05_distributed_data_parallel``.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return [current_rng_state()]
    states: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(states, current_rng_state())
    return states


def _check_rng(state: Any, where: str) -> None:
    if not (isinstance(state, dict) and {"torch", "numpy", "python"} <= set(state)):
        raise TypeError(
            f"save_checkpoint: {where} must be what current_rng_state() returns (a dict with 'torch', "
            f"'numpy' and 'python'), or under DDP the list gather_rng_states() returns; "
            f"got {_args.shown(state)}."
        )


def _set_rng_state(state: dict[str, Any], path: Path) -> None:
    torch.set_rng_state(state["torch"].cpu())
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    _set_mps_rng_state(state.get("mps"), path)
    saved = state.get("cuda")
    if saved is None:
        return  # written without a GPU: there is no CUDA stream to restore
    here = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for index in range(min(len(saved), here)):
        torch.cuda.set_rng_state(saved[index].cpu(), index)
    if len(saved) != here:
        restored = f"GPUs 0 to {min(len(saved), here) - 1} are restored" if min(len(saved), here) else "none"
        warnings.warn(
            f"{path} holds the CUDA random state of {len(saved)} GPU(s), and this machine has {here}: "
            f"{restored}. Random numbers drawn on other GPUs (dropout, augmentation there) differ from the "
            "original run, so the resumed run does not repeat it exactly.",
            stacklevel=3,
        )


def _set_mps_rng_state(saved: torch.Tensor | None, path: Path) -> None:
    """Restore the Apple GPU's random state where this machine has MPS; else say it is not restored.

    As for CUDA states: a checkpoint written without MPS (before the state was saved, or on
    another machine) restores quietly, and an MPS state loaded where there is no MPS is skipped
    with a warning, since random numbers drawn on the GPU will differ from the original run.
    """
    if saved is None:
        return  # written without MPS, or before checkpoints held its state: nothing to restore
    if _mps_available():
        torch.mps.set_rng_state(saved.cpu())  # the state maps to the model's device on loading
        return
    warnings.warn(
        f"{path} holds the random state of an Apple GPU (MPS), and this machine has no MPS: it is not "
        "restored. Random numbers drawn on the GPU (dropout, augmentation there) differ from the "
        "original run, so the resumed run does not repeat it exactly.",
        stacklevel=4,
    )


# ---- writing ----

_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def _temporary_name(target: Path) -> str:
    """``.NAME.HOST-PID.RANDOM.tmp``: hidden, and telling which process on which machine writes it."""
    return f".{target.name}.{_HOST}-{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def _remove_stale_temporaries(target: Path) -> None:
    """Delete what saves of ``target`` killed on this machine (``kill -9``, a lost kernel) left behind.

    Only files of processes that no longer exist: a save running now, in this process or another,
    keeps its file. POSIX only (on Windows ``os.kill`` would end the process it asks about).
    """
    if os.name != "posix":
        return
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{re.escape(_HOST)}-(\d+)\.[0-9a-f]+\.tmp")
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and int(match.group(1)) != os.getpid() and not _process_alive(int(match.group(1))):
            Path(entry.path).unlink(missing_ok=True)


def _open_temporary(target: Path) -> tuple[Path, int]:
    """A new file beside ``target``, with the permissions ``open()`` would give ``target``.

    ``tempfile.mkstemp`` makes files only its owner can read (0600); here the user's umask (and
    a shared folder's default ACL) decide, as for ``torch.save``, and a file that is replaced
    keeps its mode.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        temporary = target.parent / _temporary_name(target)
        try:
            handle = os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
        break
    if hasattr(os, "fchmod"):
        try:
            os.fchmod(handle, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass  # a new checkpoint: the mode the umask gave
        except OSError:
            pass  # a file system without modes: nothing to keep
    return temporary, handle


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable: after a power cut the folder lists the new file (POSIX)."""
    if os.name != "posix":
        return
    try:
        handle = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems cannot sync a folder; the data itself is synced
    finally:
        os.close(handle)


def _size(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.nelement() * value.element_size()
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_size(v) for v in value)
    return 0


def _human(size: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


_WRITE_FAILURES = ("inline_container", "PytorchStreamWriter", "unexpected pos", "file write failed")


def _write_failure(target: Path, error: BaseException, existed: bool, needed: int) -> OSError:
    number = getattr(error, "errno", None)
    reasons = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up",
        errno.EFBIG: "the file is larger than this system allows (ulimit -f?)",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    try:
        free = f"{_human(shutil.disk_usage(target.parent).free)} free there"
    except OSError:
        free = "free space unknown"
    reason = reasons.get(number) or f"disk full? the checkpoint needs about {_human(needed)}, {free}"
    kept = "the previous checkpoint is intact" if existed else "nothing was written there"
    detail = str(error).splitlines()[0] if str(error).strip() else type(error).__name__
    return OSError(f"save_checkpoint could not write {target} ({reason}); {kept}. (The error: {detail})")


def _target(path: Any, caller: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"{caller}: path must be a file path (a str or a Path), e.g. 'checkpoints/epoch_3.pt'; "
            f"got {type(path).__name__} {_args.shown(path)}."
        )
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise ValueError(f"{caller}: path is empty; give a file path, e.g. 'checkpoints/epoch_3.pt'.")
    return Path(text).expanduser()


def _check_model(model: Any, caller: str) -> None:
    if isinstance(model, type):
        raise TypeError(f"{caller}: model is the class {model.__name__}; pass the model: {model.__name__}().")
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"{caller}: model must be an nn.Module, got {type(model).__name__} {_args.shown(model)}."
        )


def _check_optimizer(optimizer: Any, caller: str) -> None:
    if optimizer is None or isinstance(optimizer, torch.optim.Optimizer):
        return
    if isinstance(optimizer, type):
        raise TypeError(
            f"{caller}: optimizer is the class {optimizer.__name__}; pass the optimizer itself "
            "(the one made with model.parameters()), or None."
        )
    hint = (
        " That is a learning-rate scheduler: save it as an extra, scheduler=scheduler.state_dict()."
        if (hasattr(optimizer, "get_last_lr"))
        else ""
    )
    raise TypeError(
        f"{caller}: optimizer must be a torch.optim optimizer or None, got {type(optimizer).__name__}.{hint}"
    )


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    epoch: int,
    *,
    rng_state: dict[str, Any] | list[dict[str, Any]] | None = None,
    **extra: Any,
) -> Path:
    """Write a checkpoint to ``path`` atomically and return the path.

    The weights are stored without the ``module.`` prefix that ``nn.DataParallel`` and DDP add, so
    the file loads into a plain model and into a wrapped one. ``extra`` takes anything
    ``weights_only`` loading can read back (tensors, numbers, strings, lists, tuples, dicts): a
    training history, a best accuracy, the settings; NumPy scalars are stored as Python numbers,
    and anything else is refused here, with what to store instead, not at loading.

    The random state of this process is stored, or ``rng_state``: under DDP,
    ``gather_rng_states()`` (called on every rank) so that each rank resumes with its own. ``~``
    is expanded; a symbolic link is followed, as ``open()`` follows it. The file gets the
    permissions the umask gives (or keeps those of the file it replaces), and what a killed save
    left behind is removed at the next save of the same file.
    """
    separators = tuple(sep for sep in (os.sep, os.altsep, "/") if sep)
    names_folder = isinstance(path, str) and path.endswith(separators)  # Path() drops the last "/"
    path = _target(path, "save_checkpoint")
    if names_folder or path.is_dir():
        raise IsADirectoryError(
            f"save_checkpoint: {path} is a folder; give a file name in it, e.g. {path / 'checkpoint.pt'}."
        )
    _check_model(model, "save_checkpoint")
    _check_optimizer(optimizer, "save_checkpoint")
    epoch = _args.integer(epoch, "epoch", "save_checkpoint", minimum=0, meaning="the number of epochs done")
    per_rank = None
    if isinstance(rng_state, list | tuple):
        if not rng_state:
            raise ValueError("save_checkpoint: rng_state is an empty list; give gather_rng_states() or None.")
        for rank, state in enumerate(rng_state):
            _check_rng(state, f"rng_state[{rank}]")
        per_rank, own = list(rng_state), rng_state[0]
    elif rng_state is not None:
        _check_rng(rng_state, "rng_state")
        own = rng_state
    else:
        own = current_rng_state()

    state = _unwrap(model).state_dict()
    _loadable(state, "the model's state_dict()", False, set())  # its OrderedDict keeps its _metadata
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "epoch": epoch,
        "model": state,
        "optimizer": None,
        "optimizer_class": None,
        "rng": own,
        "extra": _loadable(extra, "extra", True, set()),
    }
    if optimizer is not None:
        payload["optimizer"] = _loadable(optimizer.state_dict(), "optimizer.state_dict()", True, set())
        payload["optimizer_class"] = f"{type(optimizer).__module__}.{type(optimizer).__qualname__}"
    if per_rank is not None:
        payload["rng_per_rank"] = per_rank

    target = Path(os.path.realpath(path)) if path.is_symlink() else path  # write where the link points
    if target.is_dir():
        raise IsADirectoryError(f"save_checkpoint: {path} leads to the folder {target}; give a file name.")
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(target)
        temporary, handle = _open_temporary(target)
    except OSError as error:
        message = (
            f"save_checkpoint cannot create a file in {folder} ({error.strerror or error}); choose a folder "
            "you can write to"
        )
        raise (type(error)(error.errno, message) if error.errno else type(error)(message)) from error
    existed = target.exists()
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)  # atomic on POSIX and Windows: readers see old or new, never half
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) or (
            isinstance(error, RuntimeError) and any(s in str(error) for s in _WRITE_FAILURES)
        ):
            raise _write_failure(target, error, existed, _size(payload)) from error
        raise
    _fsync_folder(folder)
    return path


# ---- reading ----

_LFS = b"version https://git-lfs"
_LEGACY_TORCH = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


def _checkpoints_in(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in folder.glob("*.pt*") if p.is_file() and not _is_temporary(p.name))
    except OSError:
        return []


def _missing(path: Path) -> FileNotFoundError:
    folder = path.parent if path.parent.is_dir() else None
    found = _checkpoints_in(folder) if folder is not None else []
    hint = f" Checkpoints in {folder}: {', '.join(found)}." if found else ""
    if folder is not None and any(
        _is_temporary(p.name) and p.name.startswith(f".{path.name}.") for p in folder.iterdir()
    ):
        hint += " (A save of it was killed before it finished: its temporary file is incomplete.)"
    return FileNotFoundError(f"No checkpoint at {path}.{hint} Check the path, or train from scratch.")


def _kind(head: bytes) -> str:
    """What a file is, from its first bytes, before ``torch.load`` is asked to make sense of it."""
    if not head:
        return "empty"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(_LEGACY_TORCH):
        return "legacy"
    if head.startswith(_LFS):
        return "lfs"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<!--", b"<?xml")) or b"<html" in text[:512]:
        return "html"
    if head.startswith(b"\x80") and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle"
    if head.startswith(b"\x93NUMPY"):
        return "numpy"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "hdf5"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if len(head) > 10 and head[8:10] == b'{"':
        return "safetensors"
    try:
        head.decode("utf-8")
        return "text"
    except UnicodeDecodeError:
        return "binary"


def _not_a_checkpoint(path: Path, kind: str, head: bytes) -> CheckpointError | None:
    """The error for a file that is plainly not a PyTorch file, or ``None`` when it may be one."""
    first_line = head.decode("utf-8", "replace").strip().splitlines()[0][:60] if head.strip() else ""
    messages = {
        "empty": "is empty (0 bytes): nothing was written into it (a copy or download that failed, or a "
        "save cut short by something other than save_checkpoint, which never leaves a partial file). "
        "Use an earlier checkpoint, or train from scratch.",
        "lfs": "is a Git LFS pointer (a small text file), not the checkpoint: the repository keeps the "
        "file in Git LFS. Run `git lfs install` and `git lfs pull` in the repository, or download the "
        "file itself.",
        "html": "is a web page (HTML), not a checkpoint: the download saved the page that links to the "
        "file. Download the file itself (on GitHub the 'Raw' or download button; for Google Drive a "
        "direct-download link).",
        "pickle": "is a Python pickle (written with pickle.dump), not a file torch.save or save_checkpoint "
        "wrote, so it is refused: unpickling runs code from the file. Open it with pickle.load only if "
        "you made it yourself or trust its source.",
        "numpy": "is a NumPy array file (np.save), not a checkpoint: read it with np.load(path).",
        "hdf5": "is an HDF5 file (Keras, h5py), not a PyTorch checkpoint; PyTorch cannot read it.",
        "gzip": "is gzip-compressed: decompress it first (gunzip, or tar -xzf for a .tar.gz), then load "
        "the checkpoint inside.",
        "safetensors": "is a safetensors file, not a checkpoint of save_checkpoint: load its weights with "
        "safetensors.torch.load_file(path), then model.load_state_dict(...).",
        "text": f"is a text file, not a checkpoint (it begins {first_line!r}). Check the path.",
        "binary": f"is not a PyTorch file: it starts with the bytes {head[:8]!r}, and a checkpoint starts "
        "with b'PK' (a zip archive). Check the path; if the file was copied or downloaded, do it again.",
    }
    if kind not in messages:
        return None
    return CheckpointError(f"{path} {messages[kind]}")


def _corrupt(path: Path, detail: str) -> CheckpointError:
    return CheckpointError(
        f"{path} is not a complete checkpoint: it is truncated or corrupt ({detail}). A save_checkpoint "
        "that was interrupted never replaces the previous file, so this file was damaged some other way "
        "(a copy or download cut short, a disk that filled while copying); use an earlier checkpoint, "
        "or copy the file again."
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}" if text else type(error).__name__


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    if not path.exists():
        raise _missing(path)
    if path.is_dir():
        found = _checkpoints_in(path)
        inside = f" Checkpoints in it: {', '.join(found)}." if found else " It holds no *.pt file."
        raise CheckpointError(f"{path} is a folder, not a checkpoint file.{inside} Give the file's path.")
    try:
        with open(path, "rb") as file:
            head = file.read(1024)
    except PermissionError as error:
        raise PermissionError(
            error.errno, f"Cannot read {path}: permission denied. Ask its owner, or copy a readable one"
        ) from error
    kind = _kind(head)
    refusal = _not_a_checkpoint(path, kind, head)
    if refusal is not None:
        raise refusal
    if kind == "zip":
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise _corrupt(path, _first_line(error)) from error
        if not any(name.endswith("data.pkl") for name in names):
            shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "") if names else "nothing"
            raise CheckpointError(
                f"{path} is a zip archive, but not one torch.save wrote (it holds {shown}). If the "
                "checkpoint is inside, unzip it and load that file."
            )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL ([\w.]+)|safe_globals\(\[([\w.]+)\]\)", str(error))
        what = f" ({found.group(1) or found.group(2)})" if found else ""
        raise CheckpointError(
            f"{path} was written by torch.save but holds pickled Python objects{what}, such as a whole model "
            "saved with torch.save(model); loading it would run code from the file, so it is refused. Only "
            "if you made this file yourself or trust its source: torch.load(path, weights_only=False), then "
            "save_checkpoint(...) the model it holds."
        ) from error
    except RuntimeError as error:
        if "deserialize object on" in str(error) or "map_location" in str(error):
            raise CheckpointError(
                f"{path} holds tensors saved on a device this machine lacks ({_first_line(error)}). Pass "
                "map_location='cpu' (or the model's device), or leave it out to load onto the model's device."
            ) from error
        raise _corrupt(path, _first_line(error)) from error
    except (EOFError, OSError, zipfile.BadZipFile, ValueError) as error:
        raise _corrupt(path, _first_line(error)) from error
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
    if not isinstance(payload.get("model"), dict):
        raise _corrupt(path, "it has no model weights")
    return payload


def _check_weights(model: nn.Module, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's weights without a ``module.`` prefix, after checking that they fit ``model``."""
    state = OrderedDict(state)
    consume_prefix_in_state_dict_if_present(state, "module.")
    target = _unwrap(model)
    expected = target.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [
        f"{key}: checkpoint {tuple(state[key].shape)}, model {tuple(expected[key].shape)}"
        for key in sorted(set(state) & set(expected))
        if isinstance(state[key], torch.Tensor) and state[key].shape != expected[key].shape
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
    return state


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _check_optimizer_fits(
    optimizer: torch.optim.Optimizer, model: nn.Module, payload: dict[str, Any], path: Path
) -> None:
    """Refuse optimizer state that ``load_state_dict`` would take and the first ``step()`` would not."""
    saved = payload.get("optimizer")
    if saved is None:
        raise CheckpointError(
            f"{path} was saved without optimizer state; call load_checkpoint without an optimizer "
            "and start the optimizer afresh."
        )
    given = type(optimizer)
    restart = "or pass optimizer=None and make a new optimizer (its momentum and step counts start again)"
    saved_class = payload.get("optimizer_class")
    saved_groups = saved.get("param_groups", []) if isinstance(saved, dict) else []
    if saved_class is not None and saved_class != f"{given.__module__}.{given.__qualname__}":
        name = _short(saved_class)
        make = f"torch.optim.{name}" if hasattr(torch.optim, name) else name
        raise CheckpointError(
            f"{path} holds the state of a {name} optimizer, and the optimizer given is {given.__name__}. "
            f"Make {make}(model.parameters(), ...) as the run that saved it did, {restart}."
        )
    if saved_class is None and saved_groups:  # written before the class was recorded: compare the settings
        known = set(optimizer.defaults) | {"params", "initial_lr"}
        foreign = sorted(set(saved_groups[0]) - known)
        lacking = sorted(set(optimizer.defaults) - set(saved_groups[0]))
        if foreign and lacking:
            raise CheckpointError(
                f"{path} holds the state of another kind of optimizer than {given.__name__} (its settings "
                f"have {', '.join(foreign)} and lack {', '.join(lacking)}). Make the optimizer the run that "
                f"saved it used, {restart}."
            )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not any(id(p) in held for p in model.parameters()):
        raise CheckpointError(
            "load_checkpoint: the optimizer holds none of the model's parameters: it was made for another "
            "instance of the model. Make it again from this model, e.g. "
            "torch.optim.SGD(model.parameters(), lr=0.01), then load."
        )
    mine = [len(group["params"]) for group in optimizer.param_groups]
    theirs = [len(group.get("params", [])) for group in saved_groups]
    if mine != theirs:
        raise CheckpointError(
            f"{path} holds an optimizer with parameter groups of sizes {theirs}; the optimizer given has "
            f"{mine}. Make it from the same parameters, in the same groups, as the run that saved it."
        )
    params = [p for group in optimizer.param_groups for p in group["params"]]
    order = [i for group in saved_groups for i in group.get("params", [])]
    for index, param in zip(order, params, strict=False):
        for name, value in saved.get("state", {}).get(index, {}).items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise CheckpointError(
                    f"{path}: the optimizer's {name!r} for parameter {index} has shape {tuple(value.shape)}, "
                    f"the parameter {tuple(param.shape)}: the optimizer was made from other parameters. "
                    f"Make it from model.parameters() as the run that saved it did, {restart}."
                )


def _choose_rng(payload: dict[str, Any], rank: int | None, path: Path) -> dict[str, Any] | None:
    per_rank = payload.get("rng_per_rank")
    distributed = dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if distributed else 0
    if per_rank is None:
        return payload.get("rng")
    world = dist.get_world_size() if distributed else None
    if world is not None and world != len(per_rank):
        warnings.warn(
            f"{path} holds the random state of {len(per_rank)} ranks, and this run has {world}: ranks "
            f"from {len(per_rank)} on start from their own state, so the resumed run does not repeat the "
            "original exactly.",
            stacklevel=3,
        )
    if rank >= len(per_rank):
        warnings.warn(
            f"{path} holds the random state of ranks 0 to {len(per_rank) - 1}, none of rank {rank}: its "
            "random state is not restored.",
            stacklevel=3,
        )
        return None
    return per_rank[rank]


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: Any = None,
    *,
    restore_rng: bool = True,
    rank: int | None = None,
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint written by ``save_checkpoint`` into ``model`` (and ``optimizer``).

    Loads with ``weights_only=True``. Tensors go to ``map_location``, by default the device the
    model is on, so a checkpoint written on a GPU loads on a CPU-only machine. Works for plain,
    ``nn.DataParallel`` and DDP models in either direction. Move the model to its device and build
    the optimizer *before* calling this: the optimizer state follows its parameters' device.
    Everything is checked before anything is changed: a file that is not a checkpoint, the
    weights of another model, or the state of another kind of optimizer leave ``model`` and
    ``optimizer`` as they were. Restores the random-number state (``restore_rng=False`` to skip):
    a file saved with ``gather_rng_states()`` gives each rank its own (``rank``: by default this
    process's rank under ``torch.distributed``, else 0). Returns ``(epoch, extra)``.
    """
    path = _target(path, "load_checkpoint")
    _check_model(model, "load_checkpoint")
    _check_optimizer(optimizer, "load_checkpoint")
    restore_rng = _args.boolean(restore_rng, "restore_rng", "load_checkpoint")
    rank = _args.integer(rank, "rank", "load_checkpoint", minimum=0, allow_none=True)
    if map_location is None:
        map_location = next((t.device for t in [*model.parameters(), *model.buffers()]), torch.device("cpu"))
    elif isinstance(map_location, str | torch.device):
        map_location = as_device(
            map_location, name="map_location", caller="load_checkpoint", check_available=True
        )
    elif not (isinstance(map_location, dict) or callable(map_location)):
        raise TypeError(
            "load_checkpoint: map_location must be a device ('cpu', 'cuda:0'), a dict such as "
            f"{{'cuda:1': 'cuda:0'}}, a function, or None; got {type(map_location).__name__}."
        )
    payload = _read(path, map_location)
    weights = _check_weights(model, payload["model"], path)
    if optimizer is not None:
        _check_optimizer_fits(optimizer, model, payload, path)
    _unwrap(model).load_state_dict(weights)
    if optimizer is not None:
        optimizer.load_state_dict(payload["optimizer"])
    if restore_rng:
        state = _choose_rng(payload, rank, path)
        if state is not None:
            _set_rng_state(state, path)
    return payload["epoch"], payload.get("extra", {})
