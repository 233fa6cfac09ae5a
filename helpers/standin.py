"""The synthetic stand-in for CIFAR-10, which the notebooks train on when CIFAR-10 cannot be had.

Each image is one object, drawn from parts (ellipses, rounded boxes, diamonds) on a background of
two colours, among clutter, sometimes behind an occluder, with pixel noise. Classes that look
alike in CIFAR-10 (a cat and a dog) share most of their parts. ``docs/data.md`` says how hard it
is, measured against CIFAR-10.
"""

import math

import numpy as np
import torch
from PIL import Image
from torch.nn import functional as F
from torch.utils.data import Dataset

from helpers import _args

__all__ = ["CIFAR10_CLASSES", "STAND_IN_VERSION", "SyntheticCIFAR10", "make_synthetic_cifar10"]

CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
STAND_IN_VERSION = 2  # recorded runs name it; raise it when the stand-in's images change

# The parts of each class's object. A part is (x, y, half-length, half-height, angle in degrees,
# boxiness, pointiness, colour role), in units of the object's half-length, x forward, y down.
# Colour roles: 0 the object's colour, 1 darker, 2 a second colour, 3 near black, 4 lighter.
# A part of size 0 is there only to match its look-alike's part of the same place.
PARTS = {
    "plane": [
        (0, 0, 1, 0.15, 0, 0, 0.3, 0),
        (0.05, 0.08, 0.12, 0.5, 35, 0, 0.5, 4),
        (-0.82, -0.28, 0.09, 0.24, 25, 0.3, 0.3, 0),
        (-0.8, 0.02, 0.07, 0.22, 20, 0, 0.5, 1),
        (0.72, -0.05, 0.12, 0.06, 0, 0, 0, 3),
        (0.15, 0.3, 0.14, 0.06, 0, 0, 0, 1),
    ],
    "car": [
        (0, 0.1, 0.95, 0.24, 0, 0.8, 0, 0),
        (-0.05, -0.22, 0.45, 0.17, 0, 0.5, 0, 0),
        (-0.05, -0.23, 0.36, 0.1, 0, 0.6, 0, 4),
        (0.55, 0.36, 0.17, 0.17, 0, 0, 0, 3),
        (-0.55, 0.36, 0.17, 0.17, 0, 0, 0, 3),
        (0, 0, 0, 0, 0, 0, 0, 3),
        (0.9, 0.05, 0.06, 0.05, 0, 0, 0, 2),
    ],
    "bird": [
        (0, 0, 0.45, 0.26, -10, 0, 0, 0),
        (0.45, -0.3, 0.18, 0.17, 0, 0, 0, 0),
        (0.66, -0.28, 0.1, 0.045, 0, 0, 1, 2),
        (-0.08, -0.05, 0.38, 0.14, -15, 0, 0.3, 1),
        (-0.6, 0.1, 0.25, 0.07, 15, 0, 0.8, 1),
        (0, 0.4, 0.03, 0.16, 0, 1, 0, 3),
        (0.12, 0.4, 0.03, 0.16, 0, 1, 0, 3),
        (0.5, -0.33, 0.04, 0.04, 0, 0, 0, 3),
        (0.2, 0.05, 0.22, 0.15, 0, 0, 0, 4),
    ],
    "cat": [
        (-0.2, 0.15, 0.58, 0.3, 0, 0, 0, 0),
        (0.5, -0.25, 0.28, 0.26, 0, 0, 0, 0),
        (0.38, -0.55, 0.09, 0.16, -15, 0, 1, 0),
        (0.62, -0.55, 0.09, 0.16, 15, 0, 1, 0),
        (0.72, -0.18, 0.05, 0.05, 0, 0, 0, 2),
        (0.55, -0.3, 0.05, 0.04, 0, 0, 0, 3),
        (-0.85, -0.25, 0.06, 0.35, -25, 0, 0, 0),
        (0.2, 0.5, 0.08, 0.2, 0, 0.5, 0, 0),
        (-0.55, 0.5, 0.09, 0.2, 0, 0.5, 0, 0),
    ],
    "deer": [
        (0, 0, 0.52, 0.2, 0, 0, 0, 0),
        (0.48, -0.3, 0.06, 0.25, 25, 0, 0, 0),
        (0.66, -0.55, 0.14, 0.08, 10, 0, 0, 0),
        (0.38, 0.52, 0.045, 0.34, 0, 0.5, 0, 0),
        (0.26, 0.52, 0.045, 0.34, 0, 0.5, 0, 1),
        (-0.38, 0.52, 0.045, 0.34, 0, 0.5, 0, 0),
        (-0.48, 0.52, 0.045, 0.34, 0, 0.5, 0, 1),
        (0.55, -0.85, 0.06, 0.3, -35, 0, 0, 1),
        (0.78, -0.85, 0.06, 0.3, 35, 0, 0, 1),
        (-0.55, -0.1, 0.08, 0.09, 0, 0, 0, 4),
        (0.43, -0.45, 0, 0, 30, 0, 0, 1),
    ],
    "dog": [
        (-0.2, 0.15, 0.62, 0.3, 0, 0, 0, 0),
        (0.52, -0.22, 0.27, 0.25, 0, 0, 0, 0),
        (0.33, -0.2, 0.09, 0.2, 15, 0, 0, 1),
        (0.6, -0.42, 0.07, 0.1, 0, 0, 0, 1),
        (0.8, -0.15, 0.17, 0.1, 0, 0.3, 0, 4),
        (0.58, -0.3, 0.04, 0.04, 0, 0, 0, 3),
        (-0.85, 0, 0.06, 0.25, -55, 0, 0, 0),
        (0.2, 0.52, 0.08, 0.22, 0, 0.5, 0, 0),
        (-0.55, 0.52, 0.09, 0.22, 0, 0.5, 0, 0),
    ],
    "frog": [
        (0, 0.1, 0.5, 0.3, -10, 0, 0, 0),
        (0.45, 0, 0.26, 0.2, 0, 0, 0, 0),
        (0.45, -0.2, 0.1, 0.1, 0, 0, 0, 0),
        (0.47, -0.22, 0.05, 0.05, 0, 0, 0, 3),
        (-0.35, 0.35, 0.32, 0.12, -20, 0, 0, 1),
        (-0.05, 0.5, 0.3, 0.06, 0, 0, 0.5, 1),
        (0.4, 0.4, 0.05, 0.15, 10, 0, 0, 1),
        (-0.1, 0, 0.1, 0.08, 0, 0, 0, 1),
        (0.15, 0.12, 0.08, 0.07, 0, 0, 0, 1),
        (0.1, 0.3, 0.35, 0.08, 0, 0, 0, 4),
    ],
    "horse": [
        (0, 0, 0.65, 0.28, 0, 0, 0, 0),
        (0.55, -0.38, 0.14, 0.36, 30, 0, 0, 0),
        (0.85, -0.68, 0.26, 0.11, 50, 0, 0, 0),
        (0.42, 0.56, 0.075, 0.38, 0, 0.5, 0, 0),
        (0.3, 0.56, 0.075, 0.38, 0, 0.5, 0, 1),
        (-0.42, 0.56, 0.075, 0.38, 0, 0.5, 0, 0),
        (-0.52, 0.56, 0.075, 0.38, 0, 0.5, 0, 1),
        (0.55, -0.85, 0, 0, -35, 0, 0, 1),
        (0.78, -0.85, 0, 0, 35, 0, 0, 1),
        (-0.75, 0.15, 0.08, 0.35, 20, 0, 0, 1),
        (0.43, -0.45, 0.07, 0.34, 30, 0, 0, 1),
    ],
    "ship": [
        (0, 0.08, 1, 0.18, 0, 0.6, 0.3, 0),
        (-0.1, -0.17, 0.32, 0.13, 0, 0.9, 0, 4),
        (-0.5, -0.32, 0.08, 0.16, 0, 0.8, 0, 2),
        (0.25, -0.45, 0.05, 0.32, 0, 1, 0, 1),
        (-0.1, -0.17, 0.26, 0.04, 0, 1, 0, 3),
        (0, 0.22, 0.95, 0.05, 0, 1, 0, 1),
    ],
    "truck": [
        (-0.3, -0.1, 0.7, 0.42, 0, 1, 0, 0),
        (0.72, 0.02, 0.25, 0.32, 0, 0.9, 0, 2),
        (0.8, -0.1, 0.13, 0.12, 0, 0.8, 0, 4),
        (0.7, 0.4, 0.16, 0.16, 0, 0, 0, 3),
        (-0.45, 0.4, 0.16, 0.16, 0, 0, 0, 3),
        (-0.8, 0.4, 0.16, 0.16, 0, 0, 0, 3),
        (0.2, 0.3, 0.9, 0.05, 0, 1, 0, 1),
    ],
}

# Each class's look-alike, and how far toward its parts an object's parts go (0.5: half-way).
LOOK_ALIKES = (("plane", "ship"), ("car", "truck"), ("cat", "dog"), ("deer", "horse"))
REACH = {
    "plane": 0.5,
    "car": 0.4,
    "bird": 0.0,
    "cat": 0.5,
    "deer": 0.3,
    "dog": 0.5,
    "frog": 0.0,
    "horse": 0.3,
    "ship": 0.5,
    "truck": 0.4,
}

# The scenes behind the objects: the top and the bottom colour (RGB), then the odds of a horizon
# between them and its place relative to the object (offset, spread).
SCENES = {
    "sky": (0.55, 0.7, 0.9, 0.75, 0.8, 0.9, 0.2, 0, 2),
    "water": (0.6, 0.7, 0.85, 0.2, 0.35, 0.5, 0.9, 0.3, 0.2),
    "grass": (0.55, 0.65, 0.75, 0.3, 0.45, 0.2, 0.6, -0.2, 0.6),
    "road": (0.5, 0.5, 0.55, 0.35, 0.35, 0.35, 0.6, 0.1, 0.5),
    "indoors": (0.6, 0.5, 0.4, 0.45, 0.35, 0.3, 0.4, -0.5, 1),
}
# Each class's odds of each scene, in the order of SCENES.
SCENE_ODDS = {
    "plane": (0.77, 0.12, 0.03, 0.07, 0.01),
    "car": (0.03, 0.01, 0.07, 0.77, 0.12),
    "bird": (0.44, 0.04, 0.44, 0.01, 0.08),
    "cat": (0.01, 0.01, 0.28, 0.07, 0.63),
    "deer": (0.03, 0.01, 0.89, 0.03, 0.06),
    "dog": (0.01, 0.01, 0.4, 0.07, 0.52),
    "frog": (0.01, 0.25, 0.7, 0.01, 0.03),
    "horse": (0.03, 0.01, 0.89, 0.03, 0.06),
    "ship": (0.16, 0.8, 0.01, 0.03, 0.01),
    "truck": (0.03, 0.01, 0.07, 0.77, 0.12),
}
# Kinds of colour, as ranges (low, high) of hue, saturation and value.
COLOUR_KINDS = {
    "any": (0, 1, 0.1, 0.8, 0.25, 0.95),
    "earthy": (0.03, 0.12, 0.15, 0.65, 0.15, 0.8),
    "green": (0.18, 0.42, 0.25, 0.75, 0.25, 0.8),
    "pale": (0, 1, 0, 0.2, 0.6, 0.95),
}
# Each class's odds of each kind of colour, in the order of COLOUR_KINDS.
COLOUR_ODDS = {
    "plane": (0.16, 0, 0, 0.84),
    "car": (0.91, 0.02, 0, 0.07),
    "bird": (0.78, 0.2, 0, 0.02),
    "cat": (0.06, 0.94, 0, 0),
    "deer": (0.03, 0.97, 0, 0),
    "dog": (0.06, 0.94, 0, 0),
    "frog": (0.24, 0.1, 0.66, 0),
    "horse": (0.03, 0.97, 0, 0),
    "ship": (0.16, 0, 0, 0.84),
    "truck": (0.91, 0.02, 0, 0.07),
}


def _table(rows) -> torch.Tensor:
    """Rows of numbers as a float32 tensor."""
    return torch.tensor(rows, dtype=torch.float32)


def _partner(name: str) -> str:
    """The class that ``name`` looks like, or ``name`` itself when it has no look-alike."""
    for first, second in LOOK_ALIKES:
        if name == first:
            return second
        if name == second:
            return first
    return name


_PARTS_PER_OBJECT = max(len(parts) for parts in PARTS.values())  # fewer are padded with zero rows
_ALL_PARTS = torch.stack(
    [
        F.pad(_table(PARTS[name]), (0, 0, 0, _PARTS_PER_OBJECT - len(PARTS[name])))
        for name in CIFAR10_CLASSES
    ]
)
_GEOMETRY = _ALL_PARTS[..., :7]
_ROLES = _ALL_PARTS[..., 7].long()
_PARTNER = torch.tensor([CIFAR10_CLASSES.index(_partner(name)) for name in CIFAR10_CLASSES])
_REACH = _table([REACH[name] for name in CIFAR10_CLASSES])
_SCENES = _table(list(SCENES.values()))
_SCENE_ODDS = _table([SCENE_ODDS[name] for name in CIFAR10_CLASSES])
_COLOUR_KINDS = _table(list(COLOUR_KINDS.values()))
_COLOUR_ODDS = _table([COLOUR_ODDS[name] for name in CIFAR10_CLASSES])


def _uniform(g: torch.Generator, *shape: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    return low + (high - low) * torch.rand(*shape, generator=g)


def _colours(g: torch.Generator, kinds: torch.Tensor) -> torch.Tensor:
    """RGB colours (*kinds.shape, 3), each from its kind's ranges of hue, saturation and value."""
    low = _COLOUR_KINDS[kinds][..., 0::2]
    high = _COLOUR_KINDS[kinds][..., 1::2]
    drawn = low + (high - low) * torch.rand(*kinds.shape, 3, generator=g)
    hue, saturation, value = drawn.unbind(-1)
    k = (torch.tensor([5.0, 3.0, 1.0]) + hue.unsqueeze(-1) * 6) % 6  # HSV to RGB
    fading = saturation.unsqueeze(-1) * torch.minimum(k, 4 - k).clamp(0, 1)
    return value.unsqueeze(-1) * (1 - fading)


def _draw_object(g: torch.Generator, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each image's object: its place (``ox``, ``oy``), size (``scale``), shapes and colours.

    A shape is a row (x, y, half-length, half-height, angle, boxiness, pointiness), in pixels and
    radians. The object is turned and mirrored at random; its parts go some way toward its
    look-alike's parts."""
    n = len(labels)
    scale = _uniform(g, n, 1, low=9.0, high=13.0)
    ox, oy = (15.5 + _uniform(g, 2, n, 1, low=-4.0, high=4.0)).unbind()
    turn = torch.randn(n, 1, generator=g) * math.radians(20.0)
    mirror = torch.where(torch.rand(n, 1, generator=g) < 0.5, -1.0, 1.0)
    morph = torch.rand(n, 1, 1, generator=g) * _REACH[labels].view(n, 1, 1)
    parts = torch.lerp(_GEOMETRY[labels], _GEOMETRY[_PARTNER[labels]], morph)
    k = _PARTS_PER_OBJECT
    px = mirror * (parts[..., 0] + 0.05 * torch.randn(n, k, generator=g))
    py = parts[..., 1] + 0.05 * torch.randn(n, k, generator=g)
    size = parts[..., 2:4] * torch.exp(0.15 * torch.randn(n, k, 2, generator=g))
    angle = turn + mirror * torch.deg2rad(parts[..., 4] + 8.0 * torch.randn(n, k, generator=g))
    cos = torch.cos(turn)
    sin = torch.sin(turn)
    x = ox + scale * (cos * px - sin * py)
    y = oy + scale * (sin * px + cos * py)
    boxiness, pointiness = parts[..., 5:7].unbind(-1)
    shapes = torch.stack(
        [x, y, scale * size[..., 0], scale * size[..., 1], angle, boxiness, pointiness], -1
    )
    kinds = torch.multinomial(_COLOUR_ODDS[labels], 2, replacement=True, generator=g)
    main = _colours(g, kinds[:, 0])
    second = _colours(g, kinds[:, 1])
    dark = _uniform(g, n, 1, low=0.05, high=0.3).expand(n, 3)
    lighter = main + 0.4 * (1 - main)
    roles = torch.stack([main, 0.6 * main, second, dark, lighter], 1)
    colours = roles[torch.arange(n).unsqueeze(1), _ROLES[labels]]
    return {"ox": ox, "oy": oy, "scale": scale, "shapes": shapes, "colours": colours}


def _draw_clutter(g: torch.Generator, n: int) -> torch.Tensor:
    """Five shapes behind the object, each there with odds 0.8, anywhere."""
    a = _uniform(g, n, 5, low=1.5, high=5.0) * (torch.rand(n, 5, generator=g) < 0.8)
    x = _uniform(g, n, 5, low=-2, high=33)
    y = _uniform(g, n, 5, low=-2, high=33)
    b = a * _uniform(g, n, 5, low=0.15, high=1.0)
    angle = _uniform(g, n, 5, high=math.pi)
    boxiness = torch.rand(n, 5, generator=g)
    pointiness = _uniform(g, n, 5, high=0.7)
    return torch.stack([x, y, a, b, angle, boxiness, pointiness], -1)


def _draw_occluder(g: torch.Generator, thing: dict[str, torch.Tensor]) -> torch.Tensor:
    """A shape in front of the object (odds 0.4), somewhere over it."""
    n = len(thing["scale"])
    a = _uniform(g, n, 1, low=2.5, high=6.0) * (torch.rand(n, 1, generator=g) < 0.4)
    x = thing["ox"] + _uniform(g, n, 1, low=-0.8, high=0.8) * thing["scale"]
    y = thing["oy"] + _uniform(g, n, 1, low=-0.6, high=0.6) * thing["scale"]
    b = a * _uniform(g, n, 1, low=0.3, high=1.0)
    angle = _uniform(g, n, 1, high=math.pi)
    boxiness = torch.rand(n, 1, generator=g)
    return torch.stack([x, y, a, b, angle, boxiness, torch.zeros(n, 1)], -1)


def _draw_background(
    g: torch.Generator, labels: torch.Tensor, thing: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """A scene that suits the class more often than not, its colours mixed with random ones."""
    n = len(labels)
    # one scene each, drawn as torch.multinomial(odds, 1) of torch 2.5 draws it
    uniform = torch.rand(n, 5, generator=g, dtype=torch.float64)
    scene = _SCENES[(_SCENE_ODDS[labels] / (-torch.log1p(-uniform)).float()).argmax(-1)]
    mix = _uniform(g, n, 2, 1, low=0.3, high=0.8)
    random_colours = _colours(g, torch.zeros(n, 2, dtype=torch.long))
    colours = torch.lerp(scene[:, :6].view(n, 2, 3), random_colours, mix)
    horizon = torch.rand(n, 1, generator=g) < scene[:, 6:7]
    spread = scene[:, 8:9] * _uniform(g, n, 1, low=-1, high=1)
    horizon_y = thing["oy"] + thing["scale"] * (scene[:, 7:8] + spread)
    return {
        "colours": colours,
        "horizon": horizon,
        "horizon_y": horizon_y,
        "gradient": _uniform(g, n, 1, high=2 * math.pi),
        "texture": 0.12 * torch.randn(n, 3, 4, 4, generator=g),
        "noise": _uniform(g, n, 1, low=0.03, high=0.10),
    }


def _draw_scenes(n: int, g: torch.Generator) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Labels, and all that is random about ``n`` images but the pixel noise."""
    labels = torch.randint(0, 10, (n,), generator=g)
    thing = _draw_object(g, labels)
    clutter = _draw_clutter(g, n)
    occluder = _draw_occluder(g, thing)
    any_colour = torch.zeros(n, 5, dtype=torch.long)
    clutter_colours = _colours(g, any_colour)
    occluder_colour = _colours(g, any_colour[:, :1])
    scene = _draw_background(g, labels, thing)
    # painted in this order: the clutter, the object's parts, the occluder
    scene["shapes"] = torch.cat([clutter, thing["shapes"], occluder], 1)
    scene["shape_colours"] = torch.cat([clutter_colours, thing["colours"], occluder_colour], 1)
    return labels, scene


def _coverage(shapes: torch.Tensor) -> torch.Tensor:
    """How much of each pixel each shape covers (n, shapes, 32, 32): 1 inside, 0 outside, with a
    ramp a pixel wide between."""
    x = torch.arange(32.0).view(1, 1, 1, 32)
    y = torch.arange(32.0).view(1, 1, 32, 1)
    cx, cy, a, b, angle, boxiness, pointiness = (t[..., None, None] for t in shapes.unbind(-1))
    a = a.clamp(min=1e-3)
    b = b.clamp(min=1e-3)
    cos = torch.cos(angle)
    sin = torch.sin(angle)
    # each shape's own coordinates (u, v) at every pixel: u^2 + v^2 <= 1 inside an ellipse
    u = torch.add((x - cx) * (cos / a), (y - cy) * (sin / a))
    v = torch.add((y - cy) * (cos / b), (x - cx) * (-sin / b))
    # d2: u^2 + v^2 (ellipse) blended with u^4 + v^4 (rounded box) and (|u| + |v|)^2 (diamond)
    u2 = u.square_()
    v2 = v.square_()
    d2 = u2 + v2
    uv2 = u2.mul_(v2)
    box = d2 * d2
    box.sub_(d2).sub_(uv2, alpha=2)
    d2.addcmul_(box, boxiness).addcmul_(uv2.sqrt_(), pointiness, value=2)
    half_edge = torch.minimum(a, b) * 0.5
    return d2.mul_(-half_edge).add_(0.5 + half_edge).clamp_(0, 1)


def _render(scene: dict[str, torch.Tensor], g: torch.Generator) -> torch.Tensor:
    """Paint a batch of ``_draw_scenes`` as images (n, 3, 32, 32), values about 0 to 1."""
    shapes = scene["shapes"]
    n = len(shapes)
    x = torch.arange(32.0).view(1, 1, 1, 32)
    y = torch.arange(32.0).view(1, 1, 32, 1)
    alpha = _coverage(shapes)
    # the background: a linear gradient or a horizon between two colours, plus blotches
    gradient = scene["gradient"].view(n, 1, 1, 1)
    along = torch.cos(gradient) * (x - 15.5) + torch.sin(gradient) * (y - 15.5)
    t = (along / 32 + 0.5).clamp(0, 1)
    below = (y - scene["horizon_y"].view(n, 1, 1, 1) + 0.5).clamp(0, 1)
    t = torch.where(scene["horizon"].view(n, 1, 1, 1), below, t)
    top, bottom = scene["colours"].unbind(1)
    images = torch.addcmul(top.view(n, 3, 1, 1), (bottom - top).view(n, 3, 1, 1), t)
    images += F.interpolate(scene["texture"], size=32, mode="bilinear", align_corners=False)
    for k in range(shapes.shape[1]):
        colour = scene["shape_colours"][:, k].view(n, 3, 1, 1).expand(n, 3, 32, 32)
        images.lerp_(colour, alpha[:, k : k + 1])
    noise = scene["noise"].view(n, 1, 1, 1) * torch.randn(n, 3, 32, 32, generator=g)
    return images + noise


def make_synthetic_cifar10(
    n: int, *, train: bool = True, seed: int = 0
) -> tuple[np.ndarray, list[int]]:
    """``n`` images of the stand-in and their labels: a uint8 array (n, 32, 32, 3) and a list of
    ints. The same ``(seed, train)`` gives the same images; the first ``k`` whatever ``n`` is."""
    caller = "make_synthetic_cifar10"
    n = _args.integer(n, "n", caller, minimum=0, meaning="a number of images")
    train = _args.boolean(train, "train", caller)
    seed = _args.integer(seed, "seed", caller, meaning="a random seed")
    stream = seed * 2 + (0 if train else 1)
    images = [torch.empty(0, 32, 32, 3, dtype=torch.uint8)]
    labels = []
    for chunk in range(math.ceil(n / 1000)):  # each 1,000 images from a random stream of their own
        g = torch.Generator().manual_seed(stream * 1_000_003 + chunk)
        chunk_labels, scene = _draw_scenes(1000, g)
        labels += chunk_labels.tolist()
        wanted = min(1000, n - 1000 * chunk)
        for start in range(0, wanted, 100):  # 100 at a time: small enough for the CPU's caches
            part = {name: value[start : start + 100] for name, value in scene.items()}
            rendered = _render(part, g)
            pixels = rendered.clamp_(0, 1).mul_(255).round_()
            images.append(pixels.permute(0, 2, 3, 1).to(torch.uint8))
    return torch.cat(images)[:n].numpy(), labels[:n]


class SyntheticCIFAR10(Dataset):
    """The stand-in, with the interface of ``torchvision.datasets.CIFAR10``: ``data`` is a uint8
    array (N, 32, 32, 3), ``targets`` a list of ints, ``classes`` the class names; an item is
    ``(transform(PIL image), target)``. ``pairs`` names the look-alike classes."""

    pairs = LOOK_ALIKES

    def __init__(self, train: bool = True, transform=None, *, size: int | None = None) -> None:
        caller = "SyntheticCIFAR10"
        self.train = _args.boolean(train, "train", caller)
        self.transform = _args.transform(transform, caller)
        size = _args.integer(size, "size", caller, minimum=0, allow_none=True)
        if size is None:
            size = 50_000 if train else 10_000
        self.classes = list(CIFAR10_CLASSES)
        self.data, self.targets = make_synthetic_cifar10(size, train=train)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple:
        image = Image.fromarray(self.data[index])
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]
