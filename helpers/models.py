"""The models the course trains, each taken from one of the source tutorials.

Introduced in ``00_devices_and_tensors`` (``SimpleModel``), ``01_cuda_method`` (``Tudui``) and
``02_to_device_method`` (``CifarNet``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["CifarNet", "SimpleModel", "Tudui", "count_parameters"]


def _check_images(model: str, x: object) -> None:
    """Refuse what the first layers would reject with an error that names neither the model nor the fix.

    Shapes and dtypes only: no work on the device, and nothing ``torch.compile`` cannot guard on.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{model} expects a tensor of images (N, 3, 32, 32), got {type(x).__name__}.")
    if x.dim() == 3 and tuple(x.shape) == (3, 32, 32):
        raise ValueError(
            f"{model} expects a batch of images (N, 3, 32, 32), got one image {tuple(x.shape)}: "
            "add the batch dimension, model(x.unsqueeze(0))."
        )
    if x.dim() != 4 or tuple(x.shape[1:]) != (3, 32, 32):
        hint = (
            " (channels last? use x.permute(0, 3, 1, 2))"
            if x.dim() == 4 and tuple(x.shape[1:]) == (32, 32, 3)
            else ""
        )
        raise ValueError(
            f"{model} expects images of shape (N, 3, 32, 32), CIFAR-10's, got {tuple(x.shape)}{hint}."
        )
    if not x.is_floating_point():
        raise TypeError(
            f"{model} expects float images, got {x.dtype}: convert them, e.g. x.float() / 255, "
            "or with transforms.ToTensor()."
        )


class Tudui(nn.Module):
    """Seed 000's CIFAR-10 convnet (145,578 parameters); trained in ``01_cuda_method``.

    Three 5x5 convolutions (32, 32, 64 channels), each followed by 2x2 max-pooling, then two
    linear layers (1024 -> 64 -> 10). Kept exactly as the seed wrote it, which means without
    ReLU activations: max-pooling is its only non-linearity. It still learns, only more slowly
    than ``CifarNet``; adding ``nn.ReLU()`` after each layer is an exercise.
    """

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
        _check_images("Tudui", x)
        return self.model(x)


class CifarNet(nn.Module):
    """The classic PyTorch CIFAR-10 classifier of seeds 002 and 003 (62,006 parameters).

    conv(3->6, 5x5), pool, conv(6->16, 5x5), pool, then 400 -> 120 -> 84 -> 10 with ReLU.
    Trained in ``02_to_device_method``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_images("CifarNet", x)
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SimpleModel(nn.Module):
    """Seed 004's one-layer model, ``Linear(3, 3)``; used in ``00_devices_and_tensors``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters (elements, not tensors) of ``model``."""
    if isinstance(model, type):
        raise TypeError(
            f"count_parameters: model is the class {model.__name__}; pass a model: {model.__name__}()."
        )
    if not isinstance(model, nn.Module):
        raise TypeError(f"count_parameters: model must be an nn.Module, got {type(model).__name__}.")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
