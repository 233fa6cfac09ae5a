"""Argument checks shared by the helpers: each error names the function, the argument, what was given
and what to give instead. Private: the public functions call these first thing."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a tensor or a dataset can print for pages)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def integer(
    value: Any,
    name: str,
    caller: str,
    *,
    minimum: int | None = None,
    allow_none: bool = False,
    meaning: str = "",
) -> int | None:
    """``value`` as an ``int`` (NumPy integers too, never ``bool``), at least ``minimum``.

    A float with a whole value (``1e4``) is refused all the same: it is usually a typo for an int,
    and slicing and ``range`` refuse it later with an error that names neither argument.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        what = f"{name} is {meaning}, " if meaning else f"{name} must be "
        example = f"{int(value):_}" if isinstance(value, float) and value.is_integer() else "10"
        raise TypeError(
            f"{caller}: {what}a whole number{' or None' if allow_none else ''}; "
            f"got {type(value).__name__} {shown(value)}. Write it as an int, e.g. {name}={example}."
        )
    value = int(value)
    if minimum is not None and value < minimum:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(f"{caller}: {name}{what} must be {minimum} or more, got {value}.")
    return value


def boolean(value: Any, name: str, caller: str, *, meaning: str = "") -> bool:
    """``value`` if it is ``True`` or ``False`` (a NumPy bool too); else a ``TypeError`` naming ``name``."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    what = f" ({meaning})" if meaning else ""
    raise TypeError(
        f"{caller}: {name}{what} must be True or False, got {type(value).__name__} {shown(value)}."
    )
