"""Shared code for the course "Training PyTorch models on a GPU".

Modules: ``devices`` (choose and describe devices, move data), ``models`` (the tutorials'
networks), ``data`` (CIFAR-10 with an offline stand-in, run sizes), ``train`` (train and evaluate
loops), ``checkpoint`` (atomic saving, loading on any device), ``ddp`` (find, show and launch
``notebooks/ddp_train.py`` under ``torchrun``), ``timing`` and ``fastpath`` (measuring and speeding
up training), ``checks`` (``expect`` and the exercise checks), ``course`` (where the course is
published, for the Colab badges). Importing the package probes no hardware and prints nothing.
"""

__all__ = [
    "checkpoint",
    "checks",
    "course",
    "data",
    "ddp",
    "devices",
    "fastpath",
    "models",
    "timing",
    "train",
]
__version__ = "0.1.0"
