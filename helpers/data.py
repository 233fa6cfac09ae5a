"""CIFAR-10 with an offline fallback, and the run sizes that keep every notebook fast on a CPU.

Introduced in ``01_cuda_method``. Environment variables:

- ``COURSE_DATA=auto|cifar10|synthetic`` (default ``auto``): ``auto`` uses CIFAR-10 when it is on
  disk or can be downloaded, and otherwise the synthetic stand-in, saying so in one printed line;
  ``cifar10`` insists on the real data (a clear error when it cannot be had); ``synthetic`` always
  uses the stand-in.
- ``COURSE_DATA_DIR``: where datasets live (default: ``data/`` at the repository root).
- ``COURSE_DATA_CACHE=0``: generate the synthetic stand-in afresh every time, instead of keeping the
  images generated once in the data folder (``make_synthetic_cifar10``).
- ``COURSE_QUICK=1``: shrink dataset sizes and epochs so that every notebook runs in seconds, on the
  same code paths (CI sets it).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.nn import functional as F
from torch.utils.data import Dataset

from helpers import _args
from helpers.devices import as_device

__all__ = [
    "CIFAR10_CLASSES",
    "Budget",
    "STAND_IN_VERSION",
    "SyntheticCIFAR10",
    "data_dir",
    "expect_accuracy",
    "load_cifar10",
    "loader_workers",
    "make_synthetic_cifar10",
    "quick_mode",
    "training_budget",
]

CIFAR10_CLASSES = (
    "plane",
    "car",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)

# The version of the synthetic stand-in, which recorded runs name; raise it when the images change.
# Version 2 is calibrated to be about as hard as CIFAR-10 (benchmarks/calibrate_data.py).
STAND_IN_VERSION = 2
_CHUNK = 1000  # images generated per random stream: a smaller dataset is a prefix of a larger one
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode() -> bool:
    """Whether ``COURSE_QUICK`` asks for the small, fast run that CI uses."""
    value = os.environ.get("COURSE_QUICK", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"COURSE_QUICK={os.environ['COURSE_QUICK']!r} is not understood: "
        "set it to 1 for the quick run or 0 (or leave it unset) for the full one."
    )


def data_dir() -> Path:
    """The folder datasets are stored in: ``COURSE_DATA_DIR``, else ``data/`` at the repository root.

    When the helpers are installed from a wheel (as on Colab) there is no repository, and the
    default is ``data/`` in the current folder.
    """
    configured = os.environ.get("COURSE_DATA_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "notebooks").is_dir():
        return repo / "data"
    return Path.cwd() / "data"


# The synthetic stand-in (``make_synthetic_cifar10``). Every image is a scene: a background (two
# colours as a gradient or split by a horizon, with a blotchy texture), a few clutter shapes, one
# object drawn from parts, sometimes an occluder in front of it, and pixel noise. An object is up
# to eleven parts, each an ellipse, a rounded box or a diamond (or a blend of them) placed in the
# object's own coordinates, so that the whole object can be moved, scaled, turned and mirrored.
# Each row: (x, y, half-length, half-height, angle in degrees, boxiness, pointiness, colour role),
# in units of the object's half-length, x forward, y down. Colour roles: 0 the object's colour,
# 1 a darker shade of it, 2 a second colour, 3 near black, 4 a lighter shade.
_PARTS = {
    "plane": (  # seen from the side: a long fuselage, a swept wing, a tail fin at the back
        (0.00, 0.00, 1.00, 0.15, 0, 0.0, 0.3, 0),  # fuselage
        (0.05, 0.08, 0.12, 0.50, 35, 0.0, 0.5, 4),  # wing
        (-0.82, -0.28, 0.09, 0.24, 25, 0.3, 0.3, 0),  # tail fin
        (-0.80, 0.02, 0.07, 0.22, 20, 0.0, 0.5, 1),  # tailplane
        (0.72, -0.05, 0.12, 0.06, 0, 0.0, 0.0, 3),  # cockpit window
        (0.15, 0.30, 0.14, 0.06, 0, 0.0, 0.0, 1),  # engine
    ),
    "ship": (  # a long hull like the fuselage; a cabin, a funnel and a mast instead of wing and tail
        (0.00, 0.08, 1.00, 0.18, 0, 0.6, 0.3, 0),  # hull
        (-0.10, -0.17, 0.32, 0.13, 0, 0.9, 0.0, 4),  # cabin
        (-0.50, -0.32, 0.08, 0.16, 0, 0.8, 0.0, 2),  # funnel
        (0.25, -0.45, 0.05, 0.32, 0, 1.0, 0.0, 1),  # mast
        (-0.10, -0.17, 0.26, 0.04, 0, 1.0, 0.0, 3),  # cabin windows
        (0.00, 0.22, 0.95, 0.05, 0, 1.0, 0.0, 1),  # waterline
    ),
    "car": (  # a low body with a cabin on top and two wheels
        (0.00, 0.10, 0.95, 0.24, 0, 0.8, 0.0, 0),  # body
        (-0.05, -0.22, 0.45, 0.17, 0, 0.5, 0.0, 0),  # cabin
        (-0.05, -0.23, 0.36, 0.10, 0, 0.6, 0.0, 4),  # windows
        (0.55, 0.36, 0.17, 0.17, 0, 0.0, 0.0, 3),  # front wheel
        (-0.55, 0.36, 0.17, 0.17, 0, 0.0, 0.0, 3),  # back wheel
        (0.00, 0.00, 0.00, 0.00, 0, 0.0, 0.0, 3),  # (no third wheel)
        (0.90, 0.05, 0.06, 0.05, 0, 0.0, 0.0, 2),  # headlight
    ),
    "truck": (  # a tall cargo box, a cab in front in a second colour, three wheels
        (-0.30, -0.10, 0.70, 0.42, 0, 1.0, 0.0, 0),  # cargo box
        (0.72, 0.02, 0.25, 0.32, 0, 0.9, 0.0, 2),  # cab
        (0.80, -0.10, 0.13, 0.12, 0, 0.8, 0.0, 4),  # window
        (0.70, 0.40, 0.16, 0.16, 0, 0.0, 0.0, 3),  # front wheel
        (-0.45, 0.40, 0.16, 0.16, 0, 0.0, 0.0, 3),  # back wheel
        (-0.80, 0.40, 0.16, 0.16, 0, 0.0, 0.0, 3),  # third wheel
        (0.20, 0.30, 0.90, 0.05, 0, 1.0, 0.0, 1),  # chassis
    ),
    "cat": (  # body, round head, pointed ears up, tail up
        (-0.20, 0.15, 0.58, 0.30, 0, 0.0, 0.0, 0),  # body
        (0.50, -0.25, 0.28, 0.26, 0, 0.0, 0.0, 0),  # head
        (0.38, -0.55, 0.09, 0.16, -15, 0.0, 1.0, 0),  # ear
        (0.62, -0.55, 0.09, 0.16, 15, 0.0, 1.0, 0),  # ear
        (0.72, -0.18, 0.05, 0.05, 0, 0.0, 0.0, 2),  # nose
        (0.55, -0.30, 0.05, 0.04, 0, 0.0, 0.0, 3),  # eye
        (-0.85, -0.25, 0.06, 0.35, -25, 0.0, 0.0, 0),  # tail
        (0.20, 0.50, 0.08, 0.20, 0, 0.5, 0.0, 0),  # front leg
        (-0.55, 0.50, 0.09, 0.20, 0, 0.5, 0.0, 0),  # back leg
    ),
    "dog": (  # the cat's body and head; floppy darker ears, a snout, tail out
        (-0.20, 0.15, 0.62, 0.30, 0, 0.0, 0.0, 0),  # body
        (0.52, -0.22, 0.27, 0.25, 0, 0.0, 0.0, 0),  # head
        (0.33, -0.20, 0.09, 0.20, 15, 0.0, 0.0, 1),  # hanging ear
        (0.60, -0.42, 0.07, 0.10, 0, 0.0, 0.0, 1),  # ear
        (0.80, -0.15, 0.17, 0.10, 0, 0.3, 0.0, 4),  # snout
        (0.58, -0.30, 0.04, 0.04, 0, 0.0, 0.0, 3),  # eye
        (-0.85, 0.00, 0.06, 0.25, -55, 0.0, 0.0, 0),  # tail
        (0.20, 0.52, 0.08, 0.22, 0, 0.5, 0.0, 0),  # front leg
        (-0.55, 0.52, 0.09, 0.22, 0, 0.5, 0.0, 0),  # back leg
    ),
    "deer": (  # slender: thin legs and neck, a small head with big antlers, a short light tail
        (0.00, 0.00, 0.52, 0.20, 0, 0.0, 0.0, 0),  # body
        (0.48, -0.30, 0.06, 0.25, 25, 0.0, 0.0, 0),  # neck
        (0.66, -0.55, 0.14, 0.08, 10, 0.0, 0.0, 0),  # head
        (0.38, 0.52, 0.045, 0.34, 0, 0.5, 0.0, 0),  # legs
        (0.26, 0.52, 0.045, 0.34, 0, 0.5, 0.0, 1),
        (-0.38, 0.52, 0.045, 0.34, 0, 0.5, 0.0, 0),
        (-0.48, 0.52, 0.045, 0.34, 0, 0.5, 0.0, 1),
        (0.55, -0.85, 0.06, 0.30, -35, 0.0, 0.0, 1),  # antlers
        (0.78, -0.85, 0.06, 0.30, 35, 0.0, 0.0, 1),
        (-0.55, -0.10, 0.08, 0.09, 0, 0.0, 0.0, 4),  # tail
        (0.43, -0.45, 0.00, 0.00, 30, 0.0, 0.0, 1),  # (no mane)
    ),
    "horse": (  # bulky: a thick neck, a long head, a dark mane and long tail, no antlers
        (0.00, 0.00, 0.65, 0.28, 0, 0.0, 0.0, 0),  # body
        (0.55, -0.38, 0.14, 0.36, 30, 0.0, 0.0, 0),  # neck
        (0.85, -0.68, 0.26, 0.11, 50, 0.0, 0.0, 0),  # head
        (0.42, 0.56, 0.075, 0.38, 0, 0.5, 0.0, 0),  # legs
        (0.30, 0.56, 0.075, 0.38, 0, 0.5, 0.0, 1),
        (-0.42, 0.56, 0.075, 0.38, 0, 0.5, 0.0, 0),
        (-0.52, 0.56, 0.075, 0.38, 0, 0.5, 0.0, 1),
        (0.55, -0.85, 0.00, 0.00, -35, 0.0, 0.0, 1),  # (no antlers)
        (0.78, -0.85, 0.00, 0.00, 35, 0.0, 0.0, 1),
        (-0.75, 0.15, 0.08, 0.35, 20, 0.0, 0.0, 1),  # tail
        (0.43, -0.45, 0.07, 0.34, 30, 0.0, 0.0, 1),  # mane
    ),
    "bird": (
        (0.00, 0.00, 0.45, 0.26, -10, 0.0, 0.0, 0),  # body
        (0.45, -0.30, 0.18, 0.17, 0, 0.0, 0.0, 0),  # head
        (0.66, -0.28, 0.10, 0.045, 0, 0.0, 1.0, 2),  # beak
        (-0.08, -0.05, 0.38, 0.14, -15, 0.0, 0.3, 1),  # wing
        (-0.60, 0.10, 0.25, 0.07, 15, 0.0, 0.8, 1),  # tail
        (0.00, 0.40, 0.03, 0.16, 0, 1.0, 0.0, 3),  # legs
        (0.12, 0.40, 0.03, 0.16, 0, 1.0, 0.0, 3),
        (0.50, -0.33, 0.04, 0.04, 0, 0.0, 0.0, 3),  # eye
        (0.20, 0.05, 0.22, 0.15, 0, 0.0, 0.0, 4),  # breast
    ),
    "frog": (
        (0.00, 0.10, 0.50, 0.30, -10, 0.0, 0.0, 0),  # body
        (0.45, 0.00, 0.26, 0.20, 0, 0.0, 0.0, 0),  # head
        (0.45, -0.20, 0.10, 0.10, 0, 0.0, 0.0, 0),  # eye bump
        (0.47, -0.22, 0.05, 0.05, 0, 0.0, 0.0, 3),  # pupil
        (-0.35, 0.35, 0.32, 0.12, -20, 0.0, 0.0, 1),  # thigh
        (-0.05, 0.50, 0.30, 0.06, 0, 0.0, 0.5, 1),  # foot
        (0.40, 0.40, 0.05, 0.15, 10, 0.0, 0.0, 1),  # front leg
        (-0.10, 0.00, 0.10, 0.08, 0, 0.0, 0.0, 1),  # spots
        (0.15, 0.12, 0.08, 0.07, 0, 0.0, 0.0, 1),
        (0.10, 0.30, 0.35, 0.08, 0, 0.0, 0.0, 4),  # belly
    ),
}
_PAIRS = (("plane", "ship"), ("car", "truck"), ("cat", "dog"), ("deer", "horse"))
_K = max(len(parts) for parts in _PARTS.values())  # parts per object; shorter lists are padded
_GEOMETRY = torch.zeros(10, _K, 7)  # (class, part, x y a b angle boxiness pointiness)
_ROLES = torch.zeros(10, _K, dtype=torch.long)
for _c, _name in enumerate(CIFAR10_CLASSES):
    for _k, _part in enumerate(_PARTS[_name]):
        _GEOMETRY[_c, _k] = torch.tensor(_part[:7])
        _ROLES[_c, _k] = int(_part[7])
_PARTNER = torch.arange(10)  # each class's look-alike (itself for bird and frog)
for _a, _b in _PAIRS:
    _PARTNER[CIFAR10_CLASSES.index(_a)] = CIFAR10_CLASSES.index(_b)
    _PARTNER[CIFAR10_CLASSES.index(_b)] = CIFAR10_CLASSES.index(_a)
# Scenes: top colour, bottom colour, how often a horizon splits them, and where it is relative to
# the object (offset and spread, in units of the object's size); then how often each class is seen
# in each scene (rows in CIFAR10_CLASSES order). Only a hint, as in CIFAR-10: the two colours are
# mixed with random ones, and every class appears in every scene.
_SCENES = torch.tensor(
    [
        [0.55, 0.70, 0.90, 0.75, 0.80, 0.90, 0.2, 0.0, 2.0],  # sky
        [0.60, 0.70, 0.85, 0.20, 0.35, 0.50, 0.9, 0.3, 0.2],  # water
        [0.55, 0.65, 0.75, 0.30, 0.45, 0.20, 0.6, -0.2, 0.6],  # grass
        [0.50, 0.50, 0.55, 0.35, 0.35, 0.35, 0.6, 0.1, 0.5],  # road
        [0.60, 0.50, 0.40, 0.45, 0.35, 0.30, 0.4, -0.5, 1.0],  # indoors
    ]
)
_SCENE_ODDS = torch.tensor(
    [  # sky, water, grass, road, indoors
        [0.77, 0.12, 0.03, 0.07, 0.01],  # plane
        [0.03, 0.01, 0.07, 0.77, 0.12],  # car
        [0.44, 0.04, 0.44, 0.01, 0.08],  # bird
        [0.01, 0.01, 0.28, 0.07, 0.63],  # cat
        [0.03, 0.01, 0.89, 0.03, 0.06],  # deer
        [0.01, 0.01, 0.40, 0.07, 0.52],  # dog
        [0.01, 0.25, 0.70, 0.01, 0.03],  # frog
        [0.03, 0.01, 0.89, 0.03, 0.06],  # horse
        [0.16, 0.80, 0.01, 0.03, 0.01],  # ship
        [0.03, 0.01, 0.07, 0.77, 0.12],  # truck
    ]
)
# Object colours: ranges of hue, saturation and value of four kinds (any, earthy, green, pale), and
# how often each class gets each kind; look-alike classes share their odds, so colour never tells
# them apart.
_COLOUR_KINDS = torch.tensor(
    [
        [0.00, 1.00, 0.10, 0.80, 0.25, 0.95],
        [0.03, 0.12, 0.15, 0.65, 0.15, 0.80],
        [0.18, 0.42, 0.25, 0.75, 0.25, 0.80],
        [0.00, 1.00, 0.00, 0.20, 0.60, 0.95],
    ]
)
_COLOUR_ODDS = torch.tensor(
    [  # any, earthy, green, pale
        [0.16, 0.00, 0.00, 0.84],  # plane
        [0.91, 0.02, 0.00, 0.07],  # car
        [0.78, 0.20, 0.00, 0.02],  # bird
        [0.06, 0.94, 0.00, 0.00],  # cat
        [0.03, 0.97, 0.00, 0.00],  # deer
        [0.06, 0.94, 0.00, 0.00],  # dog
        [0.24, 0.10, 0.66, 0.00],  # frog
        [0.03, 0.97, 0.00, 0.00],  # horse
        [0.16, 0.00, 0.00, 0.84],  # ship
        [0.91, 0.02, 0.00, 0.07],  # truck
    ]
)
_RENDER_BATCH = 100  # images rendered at once: small enough for the CPU's caches


@dataclass(frozen=True)
class _Variation:
    """How much the stand-in's images vary: the settings its difficulty was calibrated with
    (``benchmarks/calibrate_data.py``). Lengths in pixels unless said otherwise."""

    scale: tuple[float, float] = (9.0, 13.0)  # half the object's length
    shift: float = 4.0  # the object's centre, at most this far either way from the image's
    turn: float = 20.0  # the object's rotation: standard deviation, degrees (and mirrored half the time)
    # how far each object of a pair in _PAIRS may be drawn toward its look-alike (0: its own parts,
    # 0.5: half-way, as likely to be either); less for the pairs a small model tells apart least
    morph: tuple[float, ...] = (0.5, 0.4, 0.5, 0.3)
    part_shift: float = 0.05  # each part moves by this much (standard deviation, object units),
    part_size: float = 0.15  # grows or shrinks by exp(this * N(0, 1)),
    part_turn: float = 8.0  # and turns by this much (standard deviation, degrees)
    clutter: int = 5  # clutter shapes behind the object, each there with odds 0.8
    clutter_size: tuple[float, float] = (1.5, 5.0)
    occluder_odds: float = 0.4  # a shape in front of the object, hiding part of it
    occluder_size: tuple[float, float] = (2.5, 6.0)
    scene_mix: tuple[float, float] = (0.3, 0.8)  # background colours: this much random, the rest the scene's
    texture: float = 0.12  # blotches on the background (standard deviation)
    noise: tuple[float, float] = (0.03, 0.10)  # pixel noise (standard deviation)


_VARIATION = _Variation()


def _uniform(g: torch.Generator, *shape: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    return low + (high - low) * torch.rand(*shape, generator=g)


def _colours(g: torch.Generator, kinds: torch.Tensor) -> torch.Tensor:
    """RGB colours (*kinds.shape, 3), each drawn from its kind's ranges in ``_COLOUR_KINDS``."""
    ranges = _COLOUR_KINDS[kinds]
    low, high = ranges[..., 0::2], ranges[..., 1::2]
    hue, saturation, value = (low + (high - low) * torch.rand(*kinds.shape, 3, generator=g)).unbind(-1)
    k = (torch.tensor([5.0, 3.0, 1.0]) + hue.unsqueeze(-1) * 6) % 6  # HSV to RGB
    return value.unsqueeze(-1) * (1 - saturation.unsqueeze(-1) * torch.minimum(k, 4 - k).clamp(0, 1))


def _one_draw_each(odds: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """One index per row of ``odds`` (n, k), drawn with those odds: the draws of the pinned PyTorch's
    ``torch.multinomial(odds, 1)``, spelt out because PyTorch 2.6 draws others from the same generator."""
    uniform = torch.rand(odds.shape, generator=g, dtype=torch.float64)
    return (odds / (-torch.log1p(-uniform)).float()).argmax(-1)


def _any_colours(g: torch.Generator, *shape: int) -> torch.Tensor:
    return _colours(g, torch.zeros(shape, dtype=torch.long))


def _draw_scenes(n: int, g: torch.Generator, v: _Variation) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Labels and everything random about ``n`` images except the pixel noise.

    Every shape (clutter, object part, occluder) is a row (x, y, a, b, angle, boxiness, pointiness)
    in pixels and radians, in the order they are painted.
    """
    labels = torch.randint(0, 10, (n,), generator=g)
    # the object: its size, place, rotation and mirroring
    scale = _uniform(g, n, 1, low=v.scale[0], high=v.scale[1])
    ox, oy = (15.5 + _uniform(g, 2, n, 1, low=-v.shift, high=v.shift)).unbind()
    turn = torch.randn(n, 1, generator=g) * math.radians(v.turn)
    mirror = torch.where(torch.rand(n, 1, generator=g) < 0.5, -1.0, 1.0)
    # its parts: some way toward the look-alike class's, each jittered, then placed in the image
    reach = torch.zeros(10)
    for (first, second), limit in zip(_PAIRS, v.morph, strict=True):
        reach[[CIFAR10_CLASSES.index(first), CIFAR10_CLASSES.index(second)]] = limit
    morph = torch.rand(n, 1, 1, generator=g) * reach[labels].view(n, 1, 1)
    parts = torch.lerp(_GEOMETRY[labels], _GEOMETRY[_PARTNER[labels]], morph)
    px = mirror * (parts[..., 0] + v.part_shift * torch.randn(n, _K, generator=g))
    py = parts[..., 1] + v.part_shift * torch.randn(n, _K, generator=g)
    size = parts[..., 2:4] * torch.exp(v.part_size * torch.randn(n, _K, 2, generator=g))
    angle = torch.deg2rad(parts[..., 4] + v.part_turn * torch.randn(n, _K, generator=g))
    cos, sin = torch.cos(turn), torch.sin(turn)
    object_shapes = torch.stack(
        [
            ox + scale * (cos * px - sin * py),
            oy + scale * (sin * px + cos * py),
            scale * size[..., 0],
            scale * size[..., 1],
            turn + mirror * angle,
            parts[..., 5],
            parts[..., 6],
        ],
        -1,
    )
    kinds = torch.multinomial(_COLOUR_ODDS[labels], 2, replacement=True, generator=g)
    main, second = _colours(g, kinds[:, 0]), _colours(g, kinds[:, 1])
    dark = _uniform(g, n, 1, low=0.05, high=0.3).expand(n, 3)
    roles = torch.stack([main, 0.6 * main, second, dark, main + 0.4 * (1 - main)], 1)
    object_colours = roles[torch.arange(n).unsqueeze(1), _ROLES[labels]]
    # clutter behind it, anywhere, in any colour
    a = _uniform(g, n, v.clutter, low=v.clutter_size[0], high=v.clutter_size[1])
    a = a * (torch.rand(n, v.clutter, generator=g) < 0.8)
    clutter = torch.stack(
        [
            _uniform(g, n, v.clutter, low=-2, high=33),
            _uniform(g, n, v.clutter, low=-2, high=33),
            a,
            a * _uniform(g, n, v.clutter, low=0.15, high=1.0),
            _uniform(g, n, v.clutter, high=math.pi),
            torch.rand(n, v.clutter, generator=g),
            _uniform(g, n, v.clutter, high=0.7),
        ],
        -1,
    )
    # an occluder in front of it, somewhere over the object
    a = _uniform(g, n, 1, low=v.occluder_size[0], high=v.occluder_size[1])
    a = a * (torch.rand(n, 1, generator=g) < v.occluder_odds)
    occluder = torch.stack(
        [
            ox + _uniform(g, n, 1, low=-0.8, high=0.8) * scale,
            oy + _uniform(g, n, 1, low=-0.6, high=0.6) * scale,
            a,
            a * _uniform(g, n, 1, low=0.3, high=1.0),
            _uniform(g, n, 1, high=math.pi),
            torch.rand(n, 1, generator=g),
            torch.zeros(n, 1),
        ],
        -1,
    )
    shapes = torch.cat([clutter, object_shapes, occluder], 1)
    colours = torch.cat([_any_colours(g, n, v.clutter), object_colours, _any_colours(g, n, 1)], 1)
    # the background: a scene that suits the class more often than not
    scene = _SCENES[_one_draw_each(_SCENE_ODDS[labels], g)]
    mix = _uniform(g, n, 2, 1, low=v.scene_mix[0], high=v.scene_mix[1])
    background = torch.lerp(scene[:, :6].view(n, 2, 3), _any_colours(g, n, 2), mix)
    horizon = torch.rand(n, 1, generator=g) < scene[:, 6:7]
    horizon_y = oy + scale * (scene[:, 7:8] + scene[:, 8:9] * _uniform(g, n, 1, low=-1, high=1))
    gradient = _uniform(g, n, 1, high=2 * math.pi)
    texture = v.texture * torch.randn(n, 3, 4, 4, generator=g)
    noise = _uniform(g, n, 1, low=v.noise[0], high=v.noise[1])
    return labels, {
        "shapes": shapes,
        "colours": colours,
        "background": background,
        "horizon": horizon,
        "horizon_y": horizon_y,
        "gradient": gradient,
        "texture": texture,
        "noise": noise,
    }


def _render(scenes: dict[str, torch.Tensor], g: torch.Generator) -> torch.Tensor:
    """Paint the images (n, 3, 32, 32), values about 0-1, of a batch of ``_draw_scenes``."""
    shapes, n = scenes["shapes"], len(scenes["shapes"])
    x, y = torch.arange(32.0).view(1, 1, 1, 32), torch.arange(32.0).view(1, 1, 32, 1)
    # each shape's own coordinates (u, v) at every pixel: u^2 + v^2 <= 1 inside an ellipse
    cx, cy, a, b, angle, boxiness, pointiness = (t[..., None, None] for t in shapes.unbind(-1))
    a, b, cos, sin = a.clamp(min=1e-3), b.clamp(min=1e-3), torch.cos(angle), torch.sin(angle)
    u = torch.add((x - cx) * (cos / a), (y - cy) * (sin / a))
    v = torch.add((y - cy) * (cos / b), (x - cx) * (-sin / b))
    # d2: u^2 + v^2 (ellipse) blended with u^4 + v^4 (rounded box) and (|u| + |v|)^2 (diamond)
    u2, v2 = u.square_(), v.square_()
    d2 = u2 + v2
    uv2 = u2.mul_(v2)
    box = d2 * d2
    box.sub_(d2).sub_(uv2, alpha=2)
    d2.addcmul_(box, boxiness).addcmul_(uv2.sqrt_(), pointiness, value=2)
    # coverage: 1 inside, 0 outside, a ramp about a pixel wide across the edge
    half_edge = torch.minimum(a, b) * 0.5
    alpha = d2.mul_(-half_edge).add_(0.5 + half_edge).clamp_(0, 1)
    # the background: a linear gradient or a horizon between two colours, plus blotches
    gradient = scenes["gradient"].view(n, 1, 1, 1)
    t = ((torch.cos(gradient) * (x - 15.5) + torch.sin(gradient) * (y - 15.5)) / 32 + 0.5).clamp(0, 1)
    step = (y - scenes["horizon_y"].view(n, 1, 1, 1) + 0.5).clamp(0, 1)
    t = torch.where(scenes["horizon"].view(n, 1, 1, 1), step, t)
    top, bottom = scenes["background"].unbind(1)
    images = torch.addcmul(top.view(n, 3, 1, 1), (bottom - top).view(n, 3, 1, 1), t)
    images += F.interpolate(scenes["texture"], size=32, mode="bilinear", align_corners=False)
    colours = scenes["colours"]
    for k in range(shapes.shape[1]):  # painted in order: clutter, the object's parts, the occluder
        images.lerp_(colours[:, k].view(n, 3, 1, 1).expand(n, 3, 32, 32), alpha[:, k : k + 1])
    images += scenes["noise"].view(n, 1, 1, 1) * torch.randn(n, 3, 32, 32, generator=g)
    return images


def _synthetic_chunk(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images (n, 32, 32, 3) uint8 and their labels, all from one random stream."""
    g = torch.Generator().manual_seed(seed)
    labels, scenes = _draw_scenes(n, g, _VARIATION)
    images = torch.empty(n, 32, 32, 3, dtype=torch.uint8)
    for start in range(0, n, _RENDER_BATCH):
        batch = {key: value[start : start + _RENDER_BATCH] for key, value in scenes.items()}
        rendered = _render(batch, g).clamp_(0, 1).mul_(255).round_()
        images[start : start + _RENDER_BATCH] = rendered.permute(0, 2, 3, 1)
    return images, labels


_CACHE_FOLDER = "synthetic-cifar10"  # in data_dir(): one subfolder per version of the generator
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def _cache_wanted() -> bool:
    """Whether ``COURSE_DATA_CACHE`` lets the generated stand-in be kept on disk (default: yes)."""
    value = os.environ.get("COURSE_DATA_CACHE", "").strip().lower()
    if value in _TRUE or value == "":
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"COURSE_DATA_CACHE={os.environ['COURSE_DATA_CACHE']!r} is not understood: set it to 0 to generate "
        "the stand-in afresh every time, or 1 (or leave it unset) to keep it in the data folder."
    )


def _generator_fingerprint(source: Path) -> str:
    """Names a version of the generator: the text of its file, and torch's version (its random streams)."""
    digest = hashlib.sha256(source.read_bytes())
    digest.update(f"|torch {torch.__version__}|numpy {np.__version__}".encode())
    return digest.hexdigest()[:16]


# Taken when the module is imported, so that it names the code that runs: the file may be edited
# while a kernel that imported it is still alive, and that kernel must not store its images as the
# edited version's.
_GENERATOR_VERSION = _generator_fingerprint(Path(__file__))
_STALE_PARTIAL_SECONDS = 3600  # a half-written chunk this old was left by a process that was killed


def _cache_folder() -> Path | None:
    """Where generated chunks are kept for this generator, or None (caching off, or no folder can be made).

    Folders left by other versions of the generator are removed when this version's is made: this
    version never reads them (a data folder shared by checkouts of different versions keeps only the
    newest's). Half-written chunks left by a killed process are removed after an hour.
    """
    if not _cache_wanted():
        return None
    root = data_dir() / _CACHE_FOLDER
    folder = root / _GENERATOR_VERSION
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            for old in root.iterdir():
                if old != folder and old.is_dir() and _FINGERPRINT.fullmatch(old.name):
                    shutil.rmtree(old, ignore_errors=True)
        for partial in folder.glob(".*.partial"):
            with contextlib.suppress(OSError):
                if time.time() - partial.stat().st_mtime > _STALE_PARTIAL_SECONDS:
                    partial.unlink()
    except OSError:  # a read-only or full disk: generate without keeping anything
        return None
    return folder


def _keep(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """Write one chunk atomically: to a file of its own, then renamed (several processes may write the
    same chunk at once, and a reader never sees half of one). Never raises."""
    partial = None
    try:
        with tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
        ) as file:
            partial = Path(file.name)
            np.savez(file, images=images, labels=labels)
        os.replace(partial, path)
    except OSError:  # a full or read-only disk: the chunk is generated again next time
        if partial is not None:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


def _chunk(chunk_seed: int, folder: Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``_synthetic_chunk(_CHUNK, chunk_seed)``, read from ``folder`` when an earlier run kept it there."""
    if folder is not None:
        path = folder / f"chunk-{chunk_seed}.npz"
        try:
            with np.load(path) as stored:
                images, labels = stored["images"], stored["labels"]
            if (
                images.shape == (_CHUNK, 32, 32, 3)
                and images.dtype == np.uint8
                and labels.shape == (_CHUNK,)
                and labels.dtype == np.int64
            ):
                return torch.from_numpy(images), torch.from_numpy(labels)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            pass  # not kept yet, damaged, or not a chunk (a .npy gives a TypeError): generate it below
    images, labels = _synthetic_chunk(_CHUNK, chunk_seed)
    if folder is not None:
        _keep(path, images.numpy(), labels.numpy())
    return images, labels


def make_synthetic_cifar10(
    n: int, *, train: bool = True, seed: int = 0, cache: bool = True
) -> tuple[np.ndarray, list[int]]:
    """Generate ``n`` CIFAR-10-shaped images: ``(uint8 array (n, 32, 32, 3), labels)``.

    A stand-in built to be about as hard as CIFAR-10 for the course's models (the figures are in
    ``results/data-calibration.json``, measured by ``benchmarks/calibrate_data.py``). Each image is
    one object of its class, drawn from parts (a plane's fuselage, wing and tail fin; a cat's body,
    head and pointed ears; ...) at a random size, place and angle, mirrored half the time, in
    colours that say little about the class, on a background that only hints at it (sky, water,
    grass, road, indoors), among clutter shapes, sometimes partly hidden behind another shape,
    with pixel noise. Four pairs of classes share most of their parts, as CIFAR-10's look-alikes
    do (``SyntheticCIFAR10.pairs``: plane/ship, car/truck, cat/dog, deer/horse), and each object
    is drawn some way toward its look-alike's, so most of the mistakes fall on those pairs.

    Deterministic for ``(seed, train)``; the first ``k`` images are the same whatever ``n`` is;
    train and test images are different draws from the same distribution. Vectorised: the
    60,000 images of the full stand-in take seconds on a CPU. Every process that
    loads the data would spend those seconds again (each notebook, each ``torchrun`` worker), so
    the images are kept, as generated, in ``data_dir()/synthetic-cifar10/<version>/`` (3 MB per
    1,000 images, 184 MB for all 60,000) and read from there afterwards; ``<version>`` changes
    with this file's text and with torch's version, so images from another version of the
    generator are never read. (Different CPUs may round a few pixels of the same image apart, by
    one level in 255: a data folder shared between machines gives each the first one's.)
    ``cache=False`` or ``COURSE_DATA_CACHE=0`` generates them afresh without keeping them.
    """
    if n < 0:
        raise ValueError(f"n must be 0 or more, got {n}")
    cache = _args.boolean(
        cache, "cache", "make_synthetic_cifar10", meaning="whether to keep the images on disk"
    )
    folder = _cache_folder() if cache and n > 0 else None
    images, labels = [], []
    for chunk, start in enumerate(range(0, n, _CHUNK)):
        chunk_seed = (seed * 2 + (0 if train else 1)) * 1_000_003 + chunk
        x, y = _chunk(chunk_seed, folder)
        size = min(_CHUNK, n - start)
        images.append(x[:size])
        labels.append(y[:size])
    if not images:
        return np.zeros((0, 32, 32, 3), dtype=np.uint8), []
    return torch.cat(images).numpy(), torch.cat(labels).tolist()


class SyntheticCIFAR10(Dataset):
    """The offline stand-in for CIFAR-10, with the same interface as ``torchvision.datasets.CIFAR10``.

    ``data`` is a uint8 array (N, 32, 32, 3), ``targets`` a list of ints, ``classes`` the CIFAR-10
    class names; items are ``(transform(PIL image), target)``, so the same transforms apply.
    ``pairs`` names the look-alike classes, the pairs a trained model confuses most (see
    ``make_synthetic_cifar10``).
    """

    pairs: tuple[tuple[str, str], ...] = _PAIRS

    def __init__(
        self,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        *,
        size: int | None = None,
        seed: int = 0,
    ) -> None:
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self.classes = list(CIFAR10_CLASSES)
        n = (50_000 if train else 10_000) if size is None else size
        self.data, self.targets = make_synthetic_cifar10(n, train=train, seed=seed)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image, target = Image.fromarray(self.data[index]), self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return f"SyntheticCIFAR10({split}, {len(self)} images of drawn objects standing in for CIFAR-10's)"


def _real_cifar10(train: bool, transform: Callable | None, root: Path) -> tuple[Dataset | None, str]:
    """CIFAR-10 from ``root``, downloading it if needed: (dataset, "") or (None, why not)."""
    from torchvision.datasets import CIFAR10

    try:
        return CIFAR10(root=str(root), train=train, transform=transform, download=False), ""
    except RuntimeError:
        pass  # not on disk (or damaged): try to download it
    try:
        root.mkdir(parents=True, exist_ok=True)
        return CIFAR10(root=str(root), train=train, transform=transform, download=True), ""
    except (OSError, RuntimeError) as error:  # URLError is an OSError
        return None, f"is not in {root} and could not be downloaded ({type(error).__name__}: {error})"


def _split(train: Any) -> bool:
    """``train`` as a bool: a split name or a number in its place would pick a split by truthiness."""
    if isinstance(train, bool | np.bool_):
        return bool(train)
    if isinstance(train, str):
        wanted = (
            "False" if train.strip().lower() in {"test", "val", "valid", "validation", "eval"} else "True"
        )
        fix = (
            f"For the {'test' if wanted == 'False' else 'training'} split write load_cifar10(train={wanted})."
        )
    else:
        fix = "Write load_cifar10(train=True) for the training split, train=False for the test split."
    raise TypeError(
        f"load_cifar10: train must be True (the training split) or False (the test split), "
        f"got {type(train).__name__} {_args.shown(train)}. {fix}"
    )


def load_cifar10(
    train: bool,
    transform: Callable | None = None,
    *,
    size: int | None = None,
    source: str | None = None,
    root: str | os.PathLike | None = None,
    seed: int = 0,
) -> Dataset:
    """The CIFAR-10 train or test split, or its synthetic stand-in when the real one cannot be had.

    ``size`` keeps only the first ``size`` images (the notebooks train on a subset on a CPU).
    ``source`` overrides ``COURSE_DATA`` (``auto``, ``cifar10`` or ``synthetic``); ``root``
    overrides the data folder. The returned dataset has ``data``, ``targets`` and ``classes``
    like ``torchvision.datasets.CIFAR10``. Introduced in ``01_cuda_method``.
    """
    train = _split(train)
    if isinstance(transform, type):
        raise TypeError(
            f"load_cifar10: transform is the class {transform.__name__}, not a transform; "
            f"pass an instance: {transform.__name__}() (with its arguments, if it takes any)."
        )
    if transform is not None and not callable(transform):
        raise TypeError(
            f"load_cifar10: transform must be a function of an image, e.g. transforms.ToTensor(), or None; "
            f"got {type(transform).__name__} {_args.shown(transform)}."
        )
    size = _args.integer(
        size, "size", "load_cifar10", minimum=1, allow_none=True, meaning="a number of images"
    )
    if source is not None and not isinstance(source, str):
        raise TypeError(
            f"load_cifar10: source must be 'auto', 'cifar10', 'synthetic' or None, got {_args.shown(source)}."
        )
    if root is not None and not isinstance(root, str | os.PathLike):
        raise TypeError(
            f"load_cifar10: root must be a folder path (a str or a Path), got {_args.shown(root)}."
        )
    seed = _args.integer(seed, "seed", "load_cifar10")
    choice = (source if source is not None else os.environ.get("COURSE_DATA", "auto")).strip().lower()
    if choice not in {"auto", "cifar10", "synthetic"}:
        raise ValueError(
            f"Unknown dataset source {choice!r} (from {'source=' if source is not None else 'COURSE_DATA'}): "
            "use 'auto' (CIFAR-10 when it can be had, else the synthetic stand-in), "
            "'cifar10' (the real data only) or 'synthetic'."
        )
    folder = Path(root).expanduser() if root is not None else data_dir()
    split = "train" if train else "test"

    if choice != "synthetic":
        dataset, why_not = _real_cifar10(train, transform, folder)
        if dataset is not None:
            if size is not None:
                dataset.data, dataset.targets = dataset.data[:size], dataset.targets[:size]
            return dataset
        if choice == "cifar10":
            raise FileNotFoundError(
                f"COURSE_DATA=cifar10 asks for the real CIFAR-10, but it {why_not}. Connect to the "
                f"internet and run again, copy the folder cifar-10-batches-py into {folder}, "
                "or set COURSE_DATA=auto to fall back to the synthetic stand-in."
            )
        reason = f"CIFAR-10 {why_not.split(' (')[0]} (offline?)"
    else:
        reason = "COURSE_DATA=synthetic asks for it"

    dataset = SyntheticCIFAR10(train, transform, size=size, seed=seed)
    print(f"Dataset: synthetic CIFAR-10 stand-in ({split}, {len(dataset):,} images), because {reason}.")
    return dataset


@dataclass(frozen=True)
class Budget:
    """How much a notebook trains on this run: see ``training_budget``."""

    train_size: int | None  # None: the whole training set
    test_size: int | None
    num_epochs: int
    why: str
    mode: str = "full"  # "full" (an accelerator: all of it), "cpu" (a subset) or "quick" (COURSE_QUICK=1)

    def __str__(self) -> str:
        train = "all" if self.train_size is None else f"{self.train_size:,}"
        test = "all" if self.test_size is None else f"{self.test_size:,}"
        epochs = f"{self.num_epochs} epoch{'s' if self.num_epochs != 1 else ''}"
        return f"Training on {train} training images for {epochs}, testing on {test}: {self.why}."


def training_budget(
    device: torch.device | str,
    *,
    gpu_epochs: int,
    cpu_epochs: int,
    cpu_train_size: int | None = 10_000,
    cpu_test_size: int | None = 2_000,
    quick_train_size: int | None = 2_000,
    quick_test_size: int | None = 500,
    quick_epochs: int = 1,
    small_on_gpu: str | None = None,
) -> Budget:
    """How much to train: everything on an accelerator, a subset on a CPU, a sliver in quick mode.

    The numbers are chosen per notebook so that its default run takes under 5 minutes on a 2-core
    CPU; ``str(budget)`` says what was chosen and why, for the notebook to print. Epochs are whole
    numbers from 1, sizes whole numbers from 1 or ``None`` (all the images). ``small_on_gpu``, the
    reason in a few words, makes an accelerator train on the CPU's subset for the CPU's epochs too,
    for a recipe that an accelerator does not speed up (such as a batch of 4); the budget's mode is
    then ``"cpu"``, whose accuracy band applies.
    """
    device = as_device(device, name="device", caller="training_budget")

    def epochs(value: Any, name: str) -> int:
        return _args.integer(value, name, "training_budget", minimum=1, meaning="a number of epochs")

    def images(value: Any, name: str) -> int | None:
        return _args.integer(
            value, name, "training_budget", minimum=1, allow_none=True, meaning="a number of images or None"
        )

    gpu_epochs, cpu_epochs = epochs(gpu_epochs, "gpu_epochs"), epochs(cpu_epochs, "cpu_epochs")
    quick_epochs = epochs(quick_epochs, "quick_epochs")
    cpu_train_size, cpu_test_size = (
        images(cpu_train_size, "cpu_train_size"),
        images(cpu_test_size, "cpu_test_size"),
    )
    quick_train_size = images(quick_train_size, "quick_train_size")
    quick_test_size = images(quick_test_size, "quick_test_size")
    if small_on_gpu is not None and (not isinstance(small_on_gpu, str) or not small_on_gpu.strip()):
        raise TypeError(
            f"training_budget: small_on_gpu is the reason, in words, to train on the CPU's subset on a "
            f"GPU too, or None; got {small_on_gpu!r}."
        )
    if quick_mode():
        return Budget(quick_train_size, quick_test_size, quick_epochs, "quick mode (COURSE_QUICK=1)", "quick")
    if device.type == "cpu":
        gpu_run = (
            f"a GPU run uses the same subset: {small_on_gpu}"
            if small_on_gpu is not None
            else f"a GPU run uses all of it for {gpu_epochs} epochs"
        )
        return Budget(
            cpu_train_size,
            cpu_test_size,
            cpu_epochs,
            f"a subset, because this run is on the CPU ({gpu_run})",
            "cpu",
        )
    if small_on_gpu is not None:
        return Budget(
            cpu_train_size,
            cpu_test_size,
            cpu_epochs,
            f"the CPU's subset on {device} too: {small_on_gpu}",
            "cpu",
        )
    return Budget(None, None, gpu_epochs, f"the full dataset on {device}")


def loader_workers(device: torch.device | str, *, processes: int = 1) -> int:
    """How many worker processes a ``DataLoader`` feeding ``device`` should have (``num_workers``).

    On a CUDA GPU the training process mostly launches kernels and waits, while a loader without
    workers builds every batch in that same process, one sample at a time (a PIL image, then
    ``ToTensor``), and the GPU waits for it. Workers build the next batches meanwhile: one per
    core, leaving one core to the training process, at most 4 (each one more costs memory and
    start-up time, and gains little). ``processes`` training
    processes on this machine (``DistributedDataParallel``'s one per GPU, ``05``) share its cores:
    each gets its share, less one for itself, and at least one worker. On a CPU the answer is 0,
    since there a worker takes cores from the training itself (``06_performance`` measures it); on
    other devices 0 as well, until measured there. Introduced in ``01_cuda_method``.
    """
    device = as_device(device, name="device", caller="loader_workers")
    processes = _args.integer(processes, "processes", "loader_workers", minimum=1)
    if device.type != "cuda":
        return 0
    try:
        cores = len(os.sched_getaffinity(0))  # the cores this process may use (a container's share)
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    return max(1, min(4, cores // processes - 1))


def _is_stand_in(dataset: Any) -> bool:
    while isinstance(getattr(dataset, "dataset", None), Dataset):  # a Subset, or another wrapper
        dataset = dataset.dataset
    return isinstance(dataset, SyntheticCIFAR10)


def expect_accuracy(
    accuracy: float, budget: Budget, dataset: Any, **bands: tuple[float, float]
) -> tuple[float, float]:
    """Check a test accuracy against what the recipe reaches on this run's budget; return the band.

    ``bands`` maps each budget mode (``full``, ``cpu``, ``quick``; see ``Budget.mode``) to the
    ``(low, high)`` test accuracy the notebook's recipe reaches there on the synthetic stand-in,
    measured by ``benchmarks/calibrate_data.py`` (``results/data-calibration.json``). On the stand-in
    the accuracy must fall in the band: above it, the data would be too easy to mean anything;
    below, something broke. On real CIFAR-10, whose subsets were not calibrated here, only the
    lower end is checked, and only where it is above chance. Prints one line. Introduced in
    ``01_cuda_method``.
    """
    if budget.mode not in bands:
        raise ValueError(
            f"expect_accuracy: no band for the {budget.mode!r} budget; give {budget.mode}=(low, high)"
        )
    low, high = bands[budget.mode]
    if not 0 <= low <= high <= 1:
        raise ValueError(
            f"expect_accuracy: a band is (low, high) with 0 <= low <= high <= 1, got {(low, high)}"
        )
    chance = 1 / len(CIFAR10_CLASSES)
    where = f"{budget.mode} budget" if budget.mode != "full" else "full budget"
    if _is_stand_in(dataset):
        print(
            f"test accuracy {accuracy:.1%}; on the stand-in this {where} gives {low:.0%} to {high:.0%} "
            f"(chance: {chance:.0%})"
        )
        if not low <= accuracy <= high:
            raise AssertionError(
                f"test accuracy {accuracy:.1%} is outside the {low:.0%} to {high:.0%} that this recipe "
                f"reaches on the stand-in with this budget (results/data-calibration.json): "
                + (
                    "it learned less than it should"
                    if accuracy < low
                    else "the data looks easier than it should"
                )
            )
    else:
        print(
            f"test accuracy {accuracy:.1%} (chance: {chance:.0%}; on the stand-in this {where} gives "
            f"{low:.0%} to {high:.0%})"
        )
        if low > 1.5 * chance and accuracy <= 1.5 * chance:
            raise AssertionError(
                f"test accuracy {accuracy:.1%} is near chance ({chance:.0%}): the model learned nothing"
            )
    return low, high
