"""The networks the course trains, each from one of its source tutorials: ``SimpleModel`` (used in
``00``), ``Tudui`` (from ``01`` on) and ``CifarNet`` (from ``02`` on)."""

import torch
import torch.nn.functional as F
from torch import nn

from helpers import _args

__all__ = ["CifarNet", "SimpleModel", "Tudui", "count_parameters"]

_SHAPE_HINTS = {
    (3, 32, 32): "one image? use x.unsqueeze(0)",
    (32, 32, 3): "channels last? use x.permute(0, 3, 1, 2)",
}


def _check_images(model: str, x: object) -> None:
    """Refuse what is not a batch of CIFAR-10 images, (N, 3, 32, 32) floats, saying what to do."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{model} expects a tensor of images (N, 3, 32, 32), got {type(x).__name__}."
        )
    shape = tuple(x.shape)
    if len(shape) != 4 or shape[1:] != (3, 32, 32):
        hint = _SHAPE_HINTS.get(shape) or _SHAPE_HINTS.get(shape[1:])
        if hint is None:
            hint = "CIFAR-10's images are (3, 32, 32)"
        raise ValueError(f"{model} expects a batch of images (N, 3, 32, 32), got {shape}: {hint}.")
    if not x.is_floating_point():
        raise TypeError(
            f"{model} expects float images, got {x.dtype}: use x.float() / 255 or ToTensor()."
        )


class Tudui(nn.Module):
    """The CIFAR-10 network of ``01`` (145,578 parameters): three 5x5 convolutions (32, 32, 64
    channels), each followed by 2x2 max-pooling, then 1024 -> 64 -> 10. As the tutorial wrote
    it, without ReLUs."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(3, 32, 5, 1, 2),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 5, 1, 2),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, 1, 2),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 64),
            nn.Linear(64, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_images("Tudui", x)  # the course's line: a clear error for a wrong input
        return self.model(x)


class CifarNet(nn.Module):
    """The classifier of PyTorch's CIFAR-10 tutorial, line for line (62,006 parameters), trained
    from ``02`` on. The course adds one line, the check of the input."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        _check_images("CifarNet", x)  # the course's line: a clear error for a wrong input
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


class SimpleModel(nn.Module):
    """The one-layer model of ``00``: ``Linear(3, 3)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters (numbers, not tensors) of ``model``."""
    if isinstance(model, type):
        raise TypeError(
            f"count_parameters: model is the class {model.__name__}; pass a model, "
            f"{model.__name__}()."
        )
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"count_parameters: model must be an nn.Module, got {_args.shown(model)}; pass a "
            "model, e.g. CifarNet()."
        )
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
