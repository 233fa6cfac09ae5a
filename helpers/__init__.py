"""Shared code for the course "Training PyTorch models on a GPU".

Modules: ``devices`` (choose and describe devices, move data), ``models`` (the seeds' networks),
``data`` (CIFAR-10 with an offline stand-in, run sizes), ``train`` (train and evaluate loops).
Importing the package probes no hardware and prints nothing.
"""

__all__ = ["data", "devices", "models", "train"]
__version__ = "0.1.0"
