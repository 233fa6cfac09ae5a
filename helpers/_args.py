"""Argument checks the helpers share: each error names the function, the argument, what was given and
what to give instead."""

import numbers

import numpy as np


def shown(value) -> str:
    """``repr(value)``, cut to 60 characters (a tensor or a dataset can print for pages)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(
    value, name: str, caller: str, *, minimum=None, allow_none=False, meaning=""
) -> int | None:
    """``value`` as an ``int``, at least ``minimum``: a NumPy integer too, but never a ``bool``, nor a
    float even with a whole value (``1e4``), which is usually a typo for an int."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        what = f"{name} is {meaning}, " if meaning else f"{name} must be "
        example = f"{int(value):_}" if isinstance(value, float) and value.is_integer() else "10"
        raise TypeError(
            f"{caller}: {what}a whole number{' or None' if allow_none else ''}; "
            f"got {type(value).__name__} {shown(value)}. Write it as an int, e.g. {name}={example}."
        )
    if minimum is not None and value < minimum:
        what = f"{name} ({meaning})" if meaning else name
        raise ValueError(f"{caller}: {what} must be {minimum} or more, got {value}.")
    return int(value)


def boolean(value, name: str, caller: str) -> bool:
    """``value`` if it is ``True`` or ``False`` (a NumPy bool too); else a ``TypeError`` naming ``name``."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(
            f"{caller}: {name} must be True or False, got {type(value).__name__} {shown(value)}."
        )
    return bool(value)
