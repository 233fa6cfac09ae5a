"""Reference solutions for ``00_devices_and_tensors`` (checked by ``helpers.checks.nb00``)."""

import torch


def noise(shape, device):
    """Standard-normal noise made directly on ``device``: no CPU tensor, no copy."""
    return torch.randn(shape, device=device)


def move_all(tensors, device):
    """Each tensor moved to ``device``; ``t.to(device)`` returns the moved copy, so keep that."""
    return [t.to(device) for t in tensors]


def as_floats(t):
    """The numbers of ``t`` as Python floats: ``.tolist()`` works on any device, with no detach."""
    return t.tolist()
