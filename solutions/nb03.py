"""Reference solutions for ``03_results_errors_and_checkpoints`` (see ``helpers.checks.nb03``)."""

import torch


def as_numpy(t):
    """A NumPy array of ``t`` from any device: out of the graph, onto the CPU, into NumPy."""
    return t.detach().cpu().numpy()


def load_on_cpu(path):
    """A state_dict saved anywhere, with every tensor on the CPU."""
    return torch.load(path, map_location="cpu", weights_only=True)


def resume(path, model, optimizer):
    """Continue from the checkpoint at ``path``: the model, the optimizer, the random state.

    The file is read onto the CPU, which works on any machine. ``load_state_dict`` then copies the
    weights into the model, wherever it is, and the optimizer moves its state to the model's
    device. The random state stays on the CPU, where ``torch.set_rng_state`` wants it.
    """
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng_state"])
    return checkpoint["epoch"]
