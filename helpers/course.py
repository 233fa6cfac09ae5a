"""Where the course is published: the one place that names its repository and its release.

Introduced with the "Open in Colab" link and the setup cell at the top of every notebook (from
``00_devices_and_tensors`` on). ``scripts/colab_cells.py`` writes both from the values here, and
``tests/test_colab.py`` checks that every notebook and the README are up to date with them. Every
link and every setup cell names the release tag ``v<VERSION>``, so a copy of a notebook installs
the helpers it was written with, never newer ones. ``make release VERSION=X.Y.Z`` sets
``VERSION`` here and in ``pyproject.toml`` and rewrites every cell; ``docs/publishing.md`` says
how to publish the course under another address.
"""

from __future__ import annotations

import re

__all__ = [
    "CHECKOUT_VARIABLE",
    "DISTRIBUTION",
    "KAGGLE_NOTEBOOKS",
    "REPOSITORY",
    "TAG",
    "VERSION",
    "colab_url",
    "github_url",
    "kaggle_url",
    "setup_hint",
]

REPOSITORY = "https://github.com/pytorch-gpu-course/pytorch-gpu-course"
VERSION = "0.1.0"  # [project] version in pyproject.toml; set both with `make release VERSION=X.Y.Z`
TAG = f"v{VERSION}"  # the git tag every link and setup cell names
DISTRIBUTION = "gpu-course-helpers"  # [project] name in pyproject.toml: what pip installs
NOTEBOOKS_FOLDER = "notebooks"
# Notebooks with an "Open in Kaggle" link too: Kaggle's two T4 GPUs show a batch split over two GPUs
# and NCCL between two ranks, which a one-GPU Colab runtime cannot.
KAGGLE_NOTEBOOKS = ("04_data_parallel.ipynb", "05_distributed_data_parallel.ipynb")
# The setup cell on Colab and Kaggle fetches the course at TAG into a folder and names it in this
# variable; helpers.recorded reads the recorded GPU runs (results/gpu/) from there.
CHECKOUT_VARIABLE = "GPU_COURSE_CHECKOUT"

_GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?")


def _text(value: object, name: str, caller: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{caller}: {name} must be a string, got {type(value).__name__} {value!r}.")
    return value


def _flag(value: object, name: str, caller: str) -> bool:
    if not isinstance(value, bool):  # a string such as "False" would count as true
        raise TypeError(f"{caller}: {name} must be True or False, got {type(value).__name__} {value!r}.")
    return value


def _owner_and_name(repository: str) -> tuple[str, str]:
    match = _GITHUB.fullmatch(_text(repository, "repository", "helpers.course"))
    if match is None:
        raise ValueError(
            f"REPOSITORY {repository!r} is not a GitHub repository address: Colab and Kaggle open "
            "notebooks from GitHub only. Write it as https://github.com/OWNER/NAME in helpers/course.py."
        )
    return match.group(1), match.group(2)


def _notebook_path(notebook: str, caller: str) -> str:
    if "/" in _text(notebook, "notebook", caller) or not notebook.endswith(".ipynb"):
        raise ValueError(f"{caller} expects a notebook file name such as '00_x.ipynb', got {notebook!r}")
    return f"{NOTEBOOKS_FOLDER}/{notebook}"


def github_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address of ``notebooks/<notebook>`` on GitHub, at the tag (or branch) ``ref``."""
    path = _notebook_path(notebook, "github_url")
    owner, name = _owner_and_name(repository)
    return f"https://github.com/{owner}/{name}/blob/{_text(ref, 'ref', 'github_url')}/{path}"


def colab_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at the tag (or branch) ``ref`` in Colab."""
    path = _notebook_path(notebook, "colab_url")
    owner, name = _owner_and_name(repository)
    ref = _text(ref, "ref", "colab_url")
    return f"https://colab.research.google.com/github/{owner}/{name}/blob/{ref}/{path}"


def kaggle_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at ``ref`` in Kaggle (its GitHub address after
    ``kernels/welcome?src=``, the form Kaggle's own "Open in Kaggle" links use)."""
    return "https://kaggle.com/kernels/welcome?src=" + github_url(notebook, repository=repository, ref=ref)


def setup_hint(platform: str | None, has_gpu: bool) -> str | None:
    """What the setup cell prints on a Colab or Kaggle runtime without a GPU: how to get one.

    ``platform`` is ``"colab"``, ``"kaggle"`` or ``None`` (elsewhere: no hint).
    """
    if platform not in {"colab", "kaggle", None}:
        raise ValueError(f"setup_hint: platform must be 'colab', 'kaggle' or None, got {platform!r}")
    if platform is None or _flag(has_gpu, "has_gpu", "setup_hint"):
        return None
    where = {
        "colab": "This Colab runtime has no GPU. To train on one: Runtime > Change runtime type > "
        "Hardware accelerator: a GPU (e.g. T4) > Save, then Runtime > Run all.",
        "kaggle": "This Kaggle session has no GPU. To train on two: Settings > Accelerator > GPU T4 x2 "
        "(a phone-verified account), then Run all.",
    }[platform]
    return f"{where} On the CPU the notebook still runs, on a subset of the data."
