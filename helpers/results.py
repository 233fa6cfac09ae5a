"""Reading what ``make bench`` recorded in ``results/`` (``06_performance`` compares with it)."""

import json
from pathlib import Path

from helpers.paths import course_root

__all__ = ["load_results", "results_dir"]

_RESULT_KEYS = ("device", "versions", "date", "settings", "summary")
_DEVICE_TYPES = ("cuda", "cpu", "mps")


def results_dir() -> Path:
    """``results/`` of the course, where ``make bench`` writes; without the course, ``results/``
    in the current folder."""
    root = course_root()
    if root is None:
        return Path.cwd() / "results"
    return root / "results"


def _read_result(path: Path) -> dict:
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:  # not JSON, or not UTF-8
        result = None
    if not isinstance(result, dict) or not all(key in result for key in _RESULT_KEYS):
        raise ValueError(
            f"{path} is not a result of make bench (JSON with {', '.join(_RESULT_KEYS)}): "
            "delete it, or run make bench again."
        )
    return result


def _check_folder(folder) -> Path:
    if not isinstance(folder, str | Path):
        raise TypeError(
            f"load_results: folder is the path of a folder, e.g. results_dir(); got {folder!r}."
        )
    folder = Path(folder).expanduser()
    if folder.is_dir():
        return folder
    if folder.exists():
        raise NotADirectoryError(
            f"load_results: {folder} is a file, not a folder; give results_dir()."
        )
    if folder.resolve() != results_dir().resolve():
        raise FileNotFoundError(
            f"load_results: there is no folder {folder}; give results_dir(), where make bench "
            "writes."
        )
    return folder  # results/ before the first make bench: it holds no results yet


def load_results(folder, *, device_type: str | None = None, quick: bool | None = False) -> list:
    """The ``make bench`` results (``bench-*.json``) in ``folder``, oldest first, each with its
    ``"path"``: those measured on ``device_type`` (``"cuda"``, ``"cpu"``, ``"mps"``; None: all),
    quick runs or not (None: both). A missing ``results_dir()`` holds none yet."""
    folder = _check_folder(folder)
    if device_type not in (None, *_DEVICE_TYPES):
        raise ValueError(
            f"load_results: device_type is 'cuda', 'cpu', 'mps' or None, not {device_type!r}."
        )
    if quick is not None and not isinstance(quick, bool):
        raise TypeError(f"load_results: quick must be True, False or None (both), got {quick!r}.")
    results = []
    for path in sorted(folder.glob("bench-*.json")):
        result = _read_result(path)
        if device_type is not None and result["device"].get("type") != device_type:
            continue
        if quick is not None and bool(result["settings"].get("quick")) != quick:
            continue
        results.append({**result, "path": str(path)})
    return sorted(results, key=lambda result: result["date"])
