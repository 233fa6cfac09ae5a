"""Reference solutions for ``01_cuda_method`` (checked by ``helpers.checks.nb01``)."""

import torch
from torch import nn


def cuda_batch(imgs, targets):
    """The batch on the GPU when there is one; tensors are copied, so reassign."""
    if torch.cuda.is_available():
        imgs = imgs.cuda()
        targets = targets.cuda()
    return imgs, targets


def cuda_model_and_loss(model, loss_fn):
    """Model and loss on the GPU when there is one; modules move in place and return themselves."""
    if torch.cuda.is_available():
        model = model.cuda()
        loss_fn = loss_fn.cuda()
    return model, loss_fn


def tudui_with_relu():
    """Tudui's layers with a ReLU after each convolution and after the first linear layer."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, 1, 2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 5, 1, 2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, 1, 2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )
