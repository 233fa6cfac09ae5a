"""CIFAR-10, or a synthetic stand-in for it offline, and how much each notebook trains on this run.
``COURSE_DATA`` is ``auto`` (the default: CIFAR-10 if on disk or downloadable, else the stand-in), ``cifar10``
or ``synthetic``; ``COURSE_DATA_DIR`` the data folder (default ``data/``); ``COURSE_QUICK=1`` a quick run."""

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.nn import functional as F
from torch.utils.data import Dataset

from helpers import _args, devices

CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
STAND_IN_VERSION = 2  # recorded runs name it; raise it when the stand-in's images change


def quick_mode() -> bool:
    """Whether ``COURSE_QUICK=1`` asks for the small, fast run that CI uses."""
    if (value := os.environ.get("COURSE_QUICK", "").strip()) not in ("", "0", "1"):
        raise ValueError(
            f"COURSE_QUICK={value!r} is not understood: set it to 1 or 0, or unset it."
        )
    return value == "1"


# The stand-in: each image is one object drawn from parts (ellipses, rounded boxes, diamonds) on a
# background of two colours, among clutter, sometimes behind an occluder, with pixel noise. A part is
# x y half-length half-height angle(degrees) boxiness pointiness colour-role, in units of the object's
# half-length, x forward, y down. Colour roles: 0 the object's colour, 1 darker, 2 a second colour,
# 3 near black, 4 lighter. Look-alike classes share most parts; zero-sized parts pad to the other's.
_PARTS = """
plane 0 0 1 .15 0 0 .3 0, .05 .08 .12 .5 35 0 .5 4, -.82 -.28 .09 .24 25 .3 .3 0,
      -.8 .02 .07 .22 20 0 .5 1, .72 -.05 .12 .06 0 0 0 3, .15 .3 .14 .06 0 0 0 1
car   0 .1 .95 .24 0 .8 0 0, -.05 -.22 .45 .17 0 .5 0 0, -.05 -.23 .36 .1 0 .6 0 4,
      .55 .36 .17 .17 0 0 0 3, -.55 .36 .17 .17 0 0 0 3, 0 0 0 0 0 0 0 3, .9 .05 .06 .05 0 0 0 2
bird  0 0 .45 .26 -10 0 0 0, .45 -.3 .18 .17 0 0 0 0, .66 -.28 .1 .045 0 0 1 2,
      -.08 -.05 .38 .14 -15 0 .3 1, -.6 .1 .25 .07 15 0 .8 1, 0 .4 .03 .16 0 1 0 3, .12 .4 .03 .16 0 1 0 3,
      .5 -.33 .04 .04 0 0 0 3, .2 .05 .22 .15 0 0 0 4
cat   -.2 .15 .58 .3 0 0 0 0, .5 -.25 .28 .26 0 0 0 0, .38 -.55 .09 .16 -15 0 1 0,
      .62 -.55 .09 .16 15 0 1 0, .72 -.18 .05 .05 0 0 0 2, .55 -.3 .05 .04 0 0 0 3,
      -.85 -.25 .06 .35 -25 0 0 0, .2 .5 .08 .2 0 .5 0 0, -.55 .5 .09 .2 0 .5 0 0
deer  0 0 .52 .2 0 0 0 0, .48 -.3 .06 .25 25 0 0 0, .66 -.55 .14 .08 10 0 0 0, .38 .52 .045 .34 0 .5 0 0,
      .26 .52 .045 .34 0 .5 0 1, -.38 .52 .045 .34 0 .5 0 0, -.48 .52 .045 .34 0 .5 0 1,
      .55 -.85 .06 .3 -35 0 0 1, .78 -.85 .06 .3 35 0 0 1, -.55 -.1 .08 .09 0 0 0 4, .43 -.45 0 0 30 0 0 1
dog   -.2 .15 .62 .3 0 0 0 0, .52 -.22 .27 .25 0 0 0 0, .33 -.2 .09 .2 15 0 0 1, .6 -.42 .07 .1 0 0 0 1,
      .8 -.15 .17 .1 0 .3 0 4, .58 -.3 .04 .04 0 0 0 3, -.85 0 .06 .25 -55 0 0 0, .2 .52 .08 .22 0 .5 0 0,
      -.55 .52 .09 .22 0 .5 0 0
frog  0 .1 .5 .3 -10 0 0 0, .45 0 .26 .2 0 0 0 0, .45 -.2 .1 .1 0 0 0 0, .47 -.22 .05 .05 0 0 0 3,
      -.35 .35 .32 .12 -20 0 0 1, -.05 .5 .3 .06 0 0 .5 1, .4 .4 .05 .15 10 0 0 1, -.1 0 .1 .08 0 0 0 1,
      .15 .12 .08 .07 0 0 0 1, .1 .3 .35 .08 0 0 0 4
horse 0 0 .65 .28 0 0 0 0, .55 -.38 .14 .36 30 0 0 0, .85 -.68 .26 .11 50 0 0 0, .42 .56 .075 .38 0 .5 0 0,
      .3 .56 .075 .38 0 .5 0 1, -.42 .56 .075 .38 0 .5 0 0, -.52 .56 .075 .38 0 .5 0 1,
      .55 -.85 0 0 -35 0 0 1, .78 -.85 0 0 35 0 0 1, -.75 .15 .08 .35 20 0 0 1, .43 -.45 .07 .34 30 0 0 1
ship  0 .08 1 .18 0 .6 .3 0, -.1 -.17 .32 .13 0 .9 0 4, -.5 -.32 .08 .16 0 .8 0 2,
      .25 -.45 .05 .32 0 1 0 1, -.1 -.17 .26 .04 0 1 0 3, 0 .22 .95 .05 0 1 0 1
truck -.3 -.1 .7 .42 0 1 0 0, .72 .02 .25 .32 0 .9 0 2, .8 -.1 .13 .12 0 .8 0 4, .7 .4 .16 .16 0 0 0 3,
      -.45 .4 .16 .16 0 0 0 3, -.8 .4 .16 .16 0 0 0 3, .2 .3 .9 .05 0 1 0 1
"""
_PAIRS = (("plane", "ship"), ("car", "truck"), ("cat", "dog"), ("deer", "horse"))  # the look-alikes
_K = 11  # parts per object: fewer are padded with zero rows


def _numbers(text: str) -> torch.Tensor:
    """A table written as rows of numbers, the rows separated by commas, as a float32 tensor."""
    return torch.tensor([[float(v) for v in row.split()] for row in text.split(",")])


_ROWS = [
    _numbers(rows) for _, rows in re.findall(r"([a-z]+)([^a-z]+)", _PARTS)
]  # in CIFAR10_CLASSES order
_TABLE = torch.stack([F.pad(rows, (0, 0, 0, _K - len(rows))) for rows in _ROWS])
_GEOMETRY, _ROLES = _TABLE[..., :7], _TABLE[..., 7].long()
# each class's look-alike (of _PAIRS; itself if none), and how far toward it its parts go (.5: half-way)
_PARTNER = torch.tensor([8, 9, 2, 5, 7, 3, 6, 4, 0, 1])
_REACH = torch.tensor([0.5, 0.4, 0.0, 0.5, 0.3, 0.5, 0.0, 0.3, 0.5, 0.4])
# Scenes (sky, water, grass, road, indoors): top and bottom colour, odds of a horizon between them and
# its place relative to the object (offset, spread); each class's odds of each scene; kinds of object
# colour (any, earthy, green, pale) as ranges of hue, saturation and value; each class's odds of each.
_SCENE_TABLES = """
.55 .7 .9 .75 .8 .9 .2 0 2, .6 .7 .85 .2 .35 .5 .9 .3 .2, .55 .65 .75 .3 .45 .2 .6 -.2 .6,
.5 .5 .55 .35 .35 .35 .6 .1 .5, .6 .5 .4 .45 .35 .3 .4 -.5 1;
.77 .12 .03 .07 .01, .03 .01 .07 .77 .12, .44 .04 .44 .01 .08, .01 .01 .28 .07 .63, .03 .01 .89 .03 .06,
.01 .01 .4 .07 .52, .01 .25 .7 .01 .03, .03 .01 .89 .03 .06, .16 .8 .01 .03 .01, .03 .01 .07 .77 .12;
0 1 .1 .8 .25 .95, .03 .12 .15 .65 .15 .8, .18 .42 .25 .75 .25 .8, 0 1 0 .2 .6 .95;
.16 0 0 .84, .91 .02 0 .07, .78 .2 0 .02, .06 .94 0 0, .03 .97 0 0, .06 .94 0 0, .24 .1 .66 0, .03 .97 0 0,
.16 0 0 .84, .91 .02 0 .07"""
_SCENES, _SCENE_ODDS, _COLOUR_KINDS, _COLOUR_ODDS = map(_numbers, _SCENE_TABLES.split(";"))


def _uniform(g: torch.Generator, *shape: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    return low + (high - low) * torch.rand(*shape, generator=g)


def _colours(g: torch.Generator, kinds: torch.Tensor) -> torch.Tensor:
    """RGB colours (*kinds.shape, 3), each drawn from its kind's ranges of hue, saturation and value."""
    low, high = _COLOUR_KINDS[kinds][..., 0::2], _COLOUR_KINDS[kinds][..., 1::2]
    hue, saturation, value = (low + (high - low) * torch.rand(*kinds.shape, 3, generator=g)).unbind(
        -1
    )
    k = (torch.tensor([5.0, 3.0, 1.0]) + hue.unsqueeze(-1) * 6) % 6  # HSV to RGB
    return value.unsqueeze(-1) * (
        1 - saturation.unsqueeze(-1) * torch.minimum(k, 4 - k).clamp(0, 1)
    )


def _draw_scenes(n: int, g: torch.Generator) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Labels, and all that is random about ``n`` images but the pixel noise. Each shape is a row
    (x, y, half-length, half-height, angle, boxiness, pointiness), in pixels and radians."""
    labels = torch.randint(0, 10, (n,), generator=g)
    # the object's size (half-length), place, turn and mirroring; its parts, some way toward the look-alike's
    scale = _uniform(g, n, 1, low=9.0, high=13.0)
    ox, oy = (15.5 + _uniform(g, 2, n, 1, low=-4.0, high=4.0)).unbind()
    turn = torch.randn(n, 1, generator=g) * math.radians(20.0)
    mirror = torch.where(torch.rand(n, 1, generator=g) < 0.5, -1.0, 1.0)
    morph = torch.rand(n, 1, 1, generator=g) * _REACH[labels].view(n, 1, 1)
    parts = torch.lerp(_GEOMETRY[labels], _GEOMETRY[_PARTNER[labels]], morph)
    px = mirror * (parts[..., 0] + 0.05 * torch.randn(n, _K, generator=g))
    py = parts[..., 1] + 0.05 * torch.randn(n, _K, generator=g)
    size = parts[..., 2:4] * torch.exp(0.15 * torch.randn(n, _K, 2, generator=g))
    angle = turn + mirror * torch.deg2rad(parts[..., 4] + 8.0 * torch.randn(n, _K, generator=g))
    cos, sin = torch.cos(turn), torch.sin(turn)
    x, y = ox + scale * (cos * px - sin * py), oy + scale * (sin * px + cos * py)
    body = [x, y, scale * size[..., 0], scale * size[..., 1], angle, *parts[..., 5:7].unbind(-1)]
    kinds = torch.multinomial(_COLOUR_ODDS[labels], 2, replacement=True, generator=g)
    main, second = _colours(g, kinds[:, 0]), _colours(g, kinds[:, 1])
    dark = _uniform(g, n, 1, low=0.05, high=0.3).expand(n, 3)
    roles = torch.stack([main, 0.6 * main, second, dark, main + 0.4 * (1 - main)], 1)
    body_colours = roles[torch.arange(n).unsqueeze(1), _ROLES[labels]]
    # five clutter shapes behind it, each there with odds 0.8, anywhere, in any colour
    a = _uniform(g, n, 5, low=1.5, high=5.0) * (torch.rand(n, 5, generator=g) < 0.8)
    x, y = _uniform(g, n, 5, low=-2, high=33), _uniform(g, n, 5, low=-2, high=33)
    b, angle = a * _uniform(g, n, 5, low=0.15, high=1.0), _uniform(g, n, 5, high=math.pi)
    clutter = torch.stack(
        [x, y, a, b, angle, torch.rand(n, 5, generator=g), _uniform(g, n, 5, high=0.7)], -1
    )
    # an occluder in front of it (odds 0.4), somewhere over the object
    a = _uniform(g, n, 1, low=2.5, high=6.0) * (torch.rand(n, 1, generator=g) < 0.4)
    x = ox + _uniform(g, n, 1, low=-0.8, high=0.8) * scale
    y = oy + _uniform(g, n, 1, low=-0.6, high=0.6) * scale
    b, angle = a * _uniform(g, n, 1, low=0.3, high=1.0), _uniform(g, n, 1, high=math.pi)
    occluder = torch.stack(
        [x, y, a, b, angle, torch.rand(n, 1, generator=g), torch.zeros(n, 1)], -1
    )
    shapes = torch.cat([clutter, torch.stack(body, -1), occluder], 1)
    anything = torch.zeros(n, 5, dtype=torch.long)  # colour kind 0: any colour
    colours = torch.cat([_colours(g, anything), body_colours, _colours(g, anything[:, :1])], 1)
    # the background: a scene that suits the class more often than not, its colours mixed with random
    # ones; one scene each, drawn as torch.multinomial(odds, 1) of torch 2.5 draws it
    uniform = torch.rand(n, 5, generator=g, dtype=torch.float64)
    scene = _SCENES[(_SCENE_ODDS[labels] / (-torch.log1p(-uniform)).float()).argmax(-1)]
    mix = _uniform(g, n, 2, 1, low=0.3, high=0.8)
    background = torch.lerp(scene[:, :6].view(n, 2, 3), _colours(g, anything[:, :2]), mix)
    horizon = torch.rand(n, 1, generator=g) < scene[:, 6:7]
    horizon_y = oy + scale * (scene[:, 7:8] + scene[:, 8:9] * _uniform(g, n, 1, low=-1, high=1))
    gradient = _uniform(g, n, 1, high=2 * math.pi)
    texture = 0.12 * torch.randn(n, 3, 4, 4, generator=g)
    noise = _uniform(g, n, 1, low=0.03, high=0.10)
    return labels, (shapes, colours, background, horizon, horizon_y, gradient, texture, noise)


def _render(scenes: tuple[torch.Tensor, ...], g: torch.Generator) -> torch.Tensor:
    """Paint a batch of ``_draw_scenes`` as images (n, 3, 32, 32), values about 0 to 1."""
    shapes, colours, background, horizon, horizon_y, gradient, texture, noise = scenes
    n, x, y = (
        len(shapes),
        torch.arange(32.0).view(1, 1, 1, 32),
        torch.arange(32.0).view(1, 1, 32, 1),
    )
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
    half_edge = (
        torch.minimum(a, b) * 0.5
    )  # coverage: 1 inside, 0 outside, a ramp a pixel wide between
    alpha = d2.mul_(-half_edge).add_(0.5 + half_edge).clamp_(0, 1)
    # the background: a linear gradient or a horizon between two colours, plus blotches
    gradient = gradient.view(n, 1, 1, 1)
    t = ((torch.cos(gradient) * (x - 15.5) + torch.sin(gradient) * (y - 15.5)) / 32 + 0.5).clamp(
        0, 1
    )
    t = torch.where(horizon.view(n, 1, 1, 1), (y - horizon_y.view(n, 1, 1, 1) + 0.5).clamp(0, 1), t)
    top, bottom = background.unbind(1)
    images = torch.addcmul(top.view(n, 3, 1, 1), (bottom - top).view(n, 3, 1, 1), t)
    images += F.interpolate(texture, size=32, mode="bilinear", align_corners=False)
    for k in range(shapes.shape[1]):  # painted in order: clutter, the object's parts, the occluder
        images.lerp_(colours[:, k].view(n, 3, 1, 1).expand(n, 3, 32, 32), alpha[:, k : k + 1])
    return images + noise.view(n, 1, 1, 1) * torch.randn(n, 3, 32, 32, generator=g)


def make_synthetic_cifar10(
    n: int, *, train: bool = True, seed: int = 0
) -> tuple[np.ndarray, list[int]]:
    """``n`` images of the stand-in and their labels: ``(uint8 array (n, 32, 32, 3), list of ints)``.
    The same ``(seed, train)`` gives the same images, and the first ``k`` whatever ``n`` is."""
    n = _args.integer(n, "n", "make_synthetic_cifar10", minimum=0, meaning="a number of images")
    seed = _args.integer(seed, "seed", "make_synthetic_cifar10") * 2 + (0 if train else 1)
    images, labels = [torch.empty(0, 32, 32, 3, dtype=torch.uint8)], []
    for k in range(-(-n // 1000)):  # each 1,000 images from a random stream of their own
        g = torch.Generator().manual_seed(seed * 1_000_003 + k)
        chunk_labels, scenes = _draw_scenes(1000, g)
        labels += chunk_labels.tolist()
        for start in range(
            0, min(1000, n - 1000 * k), 100
        ):  # 100 at a time: small enough for CPU caches
            rendered = _render(tuple(part[start : start + 100] for part in scenes), g)
            images.append(
                rendered.clamp_(0, 1).mul_(255).round_().permute(0, 2, 3, 1).to(torch.uint8)
            )
    return torch.cat(images)[:n].numpy(), labels[:n]


class SyntheticCIFAR10(Dataset):
    """The offline stand-in for CIFAR-10, with the interface of ``torchvision.datasets.CIFAR10``:
    ``data`` is a uint8 array (N, 32, 32, 3), ``targets`` a list of ints, ``classes`` the class names;
    an item is ``(transform(PIL image), target)``. ``pairs`` names the look-alike classes."""

    pairs = _PAIRS

    def __init__(self, train=True, transform=None, *, size=None) -> None:
        self.train, self.transform, self.classes = train, transform, list(CIFAR10_CLASSES)
        n = (50_000 if train else 10_000) if size is None else size
        self.data, self.targets = make_synthetic_cifar10(n, train=train)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple:
        image = Image.fromarray(self.data[index])
        return (image if self.transform is None else self.transform(image)), self.targets[index]


def load_cifar10(train, transform=None, *, size=None, source=None) -> Dataset:
    """The CIFAR-10 training (``train=True``) or test split, or the stand-in when CIFAR-10 cannot be had.
    ``size`` keeps the first ``size`` images; ``source`` (``"auto"``, ``"cifar10"`` or ``"synthetic"``)
    overrides ``COURSE_DATA``. The dataset has ``data``, ``targets`` and ``classes``, like torchvision's."""
    train = _args.boolean(train, "train", "load_cifar10")
    if transform is not None and (isinstance(transform, type) or not callable(transform)):
        example = (
            f"{transform.__name__}()" if isinstance(transform, type) else "transforms.ToTensor()"
        )
        raise TypeError(f"load_cifar10: transform is {transform!r:.40}; pass e.g. {example}.")
    size = _args.integer(size, "size", "load_cifar10", minimum=1, allow_none=True)
    source = os.environ.get("COURSE_DATA", "auto").strip() if source is None else source
    if source not in ("auto", "cifar10", "synthetic"):
        raise ValueError(
            f"load_cifar10: source {source!r} is unknown; use 'auto', 'cifar10' or 'synthetic'."
        )
    repo = (
        Path(__file__).resolve().parent.parent
    )  # data/ there, or in the current folder when installed
    folder = (repo if (repo / "pyproject.toml").is_file() else Path.cwd()) / "data"
    folder = Path(os.environ.get("COURSE_DATA_DIR", "").strip() or folder).expanduser()
    reason = "COURSE_DATA=synthetic asks for it"
    if source != "synthetic":
        from torchvision.datasets import CIFAR10

        try:  # download=True downloads it only if it is not in folder yet
            dataset = CIFAR10(str(folder), train, transform, download=True)
            dataset.data, dataset.targets = dataset.data[:size], dataset.targets[:size]
            return dataset
        except (OSError, RuntimeError) as error:  # offline: a URLError is an OSError
            reason = (
                f"CIFAR-10 is not in {folder} and could not be downloaded ({type(error).__name__})"
            )
        if source == "cifar10":
            raise FileNotFoundError(
                f"COURSE_DATA=cifar10 asks for the real data, but {reason}: go online, copy the folder "
                f"cifar-10-batches-py into {folder}, or set COURSE_DATA=auto to use the stand-in."
            )
    dataset = SyntheticCIFAR10(train, transform, size=size)
    split = "train" if train else "test"
    print(
        f"Dataset: synthetic CIFAR-10 stand-in ({split}, {len(dataset):,} images), because {reason}."
    )
    return dataset


@dataclass(frozen=True)
class Budget:
    """How much a notebook trains on this run (see ``training_budget``); ``str()`` says it in a sentence."""

    train_size: int | None  # None: all the training images
    test_size: int | None
    num_epochs: int
    why: str
    mode: str = "full"  # "full" (an accelerator), "cpu" (a subset) or "quick" (COURSE_QUICK=1)

    def __str__(self) -> str:
        train, test = (f"{size:,}" if size else "all" for size in (self.train_size, self.test_size))
        epochs = f"{self.num_epochs} epoch{'s' if self.num_epochs != 1 else ''}"
        return f"Training on {train} training images for {epochs}, testing on {test}: {self.why}."


def training_budget(
    device, *, gpu_epochs, cpu_epochs, cpu_train_size=10_000, cpu_test_size=2_000,
    quick_train_size=2_000, quick_test_size=500, quick_epochs=1, small_on_gpu=None,
) -> Budget:  # fmt: skip
    """How much to train on ``device``: all on an accelerator, a subset on a CPU, a sliver in quick mode.
    Returns a ``Budget`` (``train_size`` and ``test_size``, ``None`` for all, and ``num_epochs``); print it
    to say why. ``small_on_gpu``, a reason in words, keeps an accelerator to the CPU's subset and epochs."""
    for name, value in dict(locals()).items():  # the numbers given: sizes may be None (all)
        if name.endswith(("_epochs", "_size")):
            _args.integer(
                value, name, "training_budget", minimum=1, allow_none=name.endswith("_size")
            )
    device = devices.as_device(device, caller="training_budget", check_available=True)
    if small_on_gpu is not None and not (isinstance(small_on_gpu, str) and small_on_gpu.strip()):
        raise TypeError(
            f"training_budget: small_on_gpu is {small_on_gpu!r:.40}; give a reason in words."
        )
    cpu = (cpu_train_size, cpu_test_size, cpu_epochs)
    if quick_mode():
        return Budget(quick_train_size, quick_test_size, quick_epochs, "quick mode", "quick")
    if device.type == "cpu":
        gpu = f"the same subset: {small_on_gpu}" if small_on_gpu else f"all for {gpu_epochs} epochs"
        return Budget(
            *cpu, f"a subset, because this run is on the CPU (a GPU run uses {gpu})", "cpu"
        )
    if small_on_gpu:
        return Budget(*cpu, f"the CPU's subset on {device} too: {small_on_gpu}", "cpu")
    return Budget(None, None, gpu_epochs, f"the full dataset on {device}")


def loader_workers(device: torch.device | str, *, processes: int = 1) -> int:
    """``num_workers`` for a ``DataLoader`` feeding ``device``: on a CUDA GPU one per core less one, at most
    4, the cores shared among ``processes`` (one per GPU with DDP); elsewhere 0, leaving them to training."""
    device = devices.as_device(device, caller="loader_workers", check_available=True)
    processes = _args.integer(processes, "processes", "loader_workers", minimum=1)
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    return max(1, min(4, cores // processes - 1)) if device.type == "cuda" else 0


def expect_accuracy(accuracy: float, budget: Budget, dataset, **bands) -> tuple[float, float]:
    """Check a test accuracy against the band the recipe reaches with this budget; print and return it.
    ``bands`` maps each ``Budget.mode`` (``full``, ``cpu``, ``quick``) to ``(low, high)``, measured on the
    stand-in. On the stand-in the accuracy must lie in the band; on CIFAR-10, only above chance (10%)."""
    if isinstance(accuracy, torch.Tensor | np.number) and accuracy.ndim == 0:
        accuracy = accuracy.item()  # a 0-d tensor or a NumPy number: its value
    if (
        isinstance(accuracy, bool)
        or not isinstance(accuracy, float | int)
        or not 0 <= accuracy <= 1
    ):
        raise ValueError(
            f"expect_accuracy: accuracy is {accuracy!r:.20}; give a fraction, 0.55 for 55%."
        )
    if not isinstance(budget, Budget) or not isinstance(dataset, Dataset):
        got = (
            f"a {type(dataset).__name__}"
            if isinstance(budget, Budget)
            else f"budget {budget!r:.30}"
        )
        raise TypeError(
            f"expect_accuracy: got {got}; pass training_budget()'s Budget, and the test set."
        )
    band = bands.get(budget.mode, (1, 0))
    pair = isinstance(band, tuple | list) and len(band) == 2 and 0 <= band[0] <= band[1] <= 1
    if not pair or set(bands) - {"full", "cpu", "quick"}:
        raise ValueError(
            f"expect_accuracy: give {budget.mode}=(low, high), 0 <= low <= high <= 1, only."
        )
    low, high = band
    print(
        f"test accuracy {accuracy:.1%} (chance: 10%; on the stand-in this gives {low:.0%} to {high:.0%})"
    )
    if isinstance(dataset, SyntheticCIFAR10) and not low <= accuracy <= high:
        why = (
            "it learned less than it should"
            if accuracy < low
            else "the data is easier than it should be"
        )
        raise AssertionError(
            f"test accuracy {accuracy:.1%} is outside {low:.0%} to {high:.0%}: {why}."
        )
    if not isinstance(dataset, SyntheticCIFAR10) and low > 0.15 >= accuracy:
        raise AssertionError(
            f"test accuracy {accuracy:.1%} is near chance (10%): the model learned nothing."
        )
    return low, high
