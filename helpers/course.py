"""Where the course is published: the one place that names its repository and branch.

Introduced with the "Open in Colab" badge and the Colab setup cell at the top of every notebook
(from ``00_devices_and_tensors`` on). ``scripts/colab_cells.py`` writes both from the values here,
and ``tests/test_colab.py`` checks that every notebook is up to date with them: change
``REPOSITORY`` or ``BRANCH`` here, run ``python scripts/colab_cells.py notebooks/*.ipynb``, and
every badge and every install command follows.
"""

from __future__ import annotations

import re

__all__ = [
    "BRANCH",
    "DISTRIBUTION",
    "REPOSITORY",
    "colab_gpu_hint",
    "colab_install_command",
    "colab_url",
    "helpers_requirement",
]

REPOSITORY = "https://github.com/pytorch-gpu-course/pytorch-gpu-course"
BRANCH = "main"
DISTRIBUTION = "gpu-course-helpers"  # [project] name in pyproject.toml: what pip installs
NOTEBOOKS_FOLDER = "notebooks"

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
            f"REPOSITORY {repository!r} is not a GitHub repository address: Colab opens notebooks from "
            "GitHub only. Write it as https://github.com/OWNER/NAME in helpers/course.py."
        )
    return match.group(1), match.group(2)


def colab_url(notebook: str, *, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """The address that opens ``notebooks/<notebook>`` of the repository's ``branch`` in Colab."""
    _text(branch, "branch", "colab_url")
    if "/" in _text(notebook, "notebook", "colab_url") or not notebook.endswith(".ipynb"):
        raise ValueError(f"colab_url expects a notebook file name such as '00_x.ipynb', got {notebook!r}")
    owner, name = _owner_and_name(repository)
    return (
        f"https://colab.research.google.com/github/{owner}/{name}/blob/{branch}/{NOTEBOOKS_FOLDER}/{notebook}"
    )


def helpers_requirement(*, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """The pip requirement that installs the helpers from the repository: ``NAME @ git+URL@BRANCH``."""
    _owner_and_name(repository)
    _text(branch, "branch", "helpers_requirement")
    return f"{DISTRIBUTION} @ git+{repository.rstrip('/')}@{branch}"


def colab_install_command(on_colab: bool, python: str = "python") -> list[str]:
    """The command the Colab setup cell runs: ``[]`` off Colab, else a pip install of the helpers.

    ``--no-deps`` keeps pip from touching what Colab already has (torch, torchvision, numpy,
    matplotlib, tqdm): the helpers install beside Colab's torch, never upgrading or reinstalling
    it. The requirement is one list element, so no shell sees it; typed in a shell or a ``%pip``
    line it must be quoted (``"gpu-course-helpers @ git+..."``).
    """
    _text(python, "python", "colab_install_command")
    if not _flag(on_colab, "on_colab", "colab_install_command"):
        return []
    return [python, "-m", "pip", "install", "--quiet", "--no-deps", helpers_requirement()]


def colab_gpu_hint(on_colab: bool, has_gpu: bool) -> str | None:
    """What the Colab setup cell prints: how to switch to a GPU on a Colab CPU runtime, else ``None``."""
    if not _flag(on_colab, "on_colab", "colab_gpu_hint") or _flag(has_gpu, "has_gpu", "colab_gpu_hint"):
        return None
    return (
        "This Colab runtime has no GPU. To train on one: Runtime > Change runtime type > "
        "Hardware accelerator: a GPU (e.g. T4) > Save, then Runtime > Run all. "
        "On the CPU the notebook still runs, on a subset of the data."
    )
