"""Argument checks the helpers share. Each error names the function, the argument, what was given
and what to give instead."""

import numbers
import os

import numpy as np


def shown(value) -> str:
    """``repr(value)``, cut to 60 characters (a tensor or a dataset can print for pages)."""
    text = repr(value)
    if len(text) <= 60:
        return text
    return text[:57] + "..."


def _example(value, name: str) -> str:
    """How to write ``value`` as an int: ``n=1_000`` for ``1e3`` or ``"1000"``, else ``n=10``."""
    if isinstance(value, float) and value.is_integer():
        return f"{name}={int(value):_}"
    if isinstance(value, str) and value.strip().isdigit():
        return f"{name}={int(value):_}"
    return f"{name}=10"


def integer(
    value, name: str, caller: str, *, minimum=None, allow_none=False, meaning=""
) -> int | None:
    """``value`` as an ``int``, at least ``minimum``: a NumPy integer too, but never a ``bool``, nor
    a float even with a whole value (``1e4``), which is usually a typo for an int."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if meaning:
            what = f"{name} is {meaning}, a whole number"
        else:
            what = f"{name} must be a whole number"
        if allow_none:
            what += " or None"
        raise TypeError(
            f"{caller}: {what}; got {type(value).__name__} {shown(value)}. "
            f"Write it as an int, e.g. {_example(value, name)}."
        )
    if minimum is not None and value < minimum:
        described = f"{name} ({meaning})" if meaning else name
        raise ValueError(f"{caller}: {described} must be {minimum} or more, got {value}.")
    return int(value)


def boolean(value, name: str, caller: str) -> bool:
    """``value`` if it is ``True`` or ``False`` (a NumPy bool too); else a ``TypeError``."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(
            f"{caller}: {name} must be True or False, got {type(value).__name__} {shown(value)}."
        )
    return bool(value)


def transform(value, caller: str):
    """``value`` if it is None or a transform that can be called on an image; else a TypeError
    (a class given where its instance goes, ``transforms.ToTensor`` for ``ToTensor()``)."""
    if value is None:
        return None
    if isinstance(value, type):
        raise TypeError(
            f"{caller}: transform is the class {value.__name__}; pass one: {value.__name__}()."
        )
    if not callable(value):
        raise TypeError(
            f"{caller}: transform is {shown(value)}; pass e.g. transforms.ToTensor(), or None."
        )
    return value


def environment(name: str, choices: tuple[str, ...], default: str) -> str:
    """The environment variable ``name``: one of ``choices``, or ``default`` where it is unset or
    empty. Any other value raises a ValueError that names the variable and the values it takes."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if value in choices:
        return value
    hint = ""
    if value.lower() in choices:
        hint = f" (in lower case: {name}={value.lower()})"
    raise ValueError(
        f"{name}={value!r} is not understood{hint}: set it to one of {', '.join(choices)}, "
        "or unset it."
    )
