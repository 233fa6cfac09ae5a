"""Where the course is published: the addresses of its notebooks and the release they install."""

import re

REPOSITORY = "https://github.com/pytorch-gpu-course/pytorch-gpu-course"
VERSION = "0.1.0"  # [project] version in pyproject.toml; set both with `make release VERSION=X.Y.Z`
TAG = f"v{VERSION}"  # the git tag every link and setup cell names (scripts/colab_cells.py writes them)
KAGGLE_NOTEBOOKS = (
    "04_data_parallel.ipynb",
    "05_distributed_data_parallel.ipynb",
)  # two T4 GPUs there
CHECKOUT_VARIABLE = "GPU_COURSE_CHECKOUT"  # names the folder the setup cell fetched the course into
_HINTS = {
    "colab": "This Colab runtime has no GPU: Runtime > Change runtime type > T4 GPU > Save, then Run all.",
    "kaggle": "This Kaggle session has no GPU: Settings > Accelerator > GPU T4 x2, then Run all.",
}


def _blob(notebook: str, repository: str, ref: str) -> str:
    for name, value in {"notebook": notebook, "repository": repository, "ref": ref}.items():
        if not isinstance(value, str):
            raise TypeError(
                f"helpers.course: {name} must be a string, got {type(value).__name__} {value!r}."
            )
    if "/" in notebook or not notebook.endswith(".ipynb"):
        raise ValueError(
            f"helpers.course expects a notebook file name such as '00_x.ipynb': {notebook!r}"
        )
    if not (
        match := re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    ):
        raise ValueError(
            f"{repository!r} is not a GitHub repository: write https://github.com/OWNER/NAME."
        )
    return f"{match[1]}/{match[2]}/blob/{ref}/notebooks/{notebook}"


def colab_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at the tag (or branch) ``ref`` in Colab."""
    return f"https://colab.research.google.com/github/{_blob(notebook, repository, ref)}"


def kaggle_url(notebook: str, *, repository: str = REPOSITORY, ref: str = TAG) -> str:
    """The address that opens ``notebooks/<notebook>`` at ``ref`` in Kaggle."""
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{_blob(notebook, repository, ref)}"


def setup_hint(platform: str | None, has_gpu: bool) -> str | None:
    """How to get a GPU, on a ``"colab"`` or ``"kaggle"`` runtime without one; else ``None``."""
    if platform not in (*_HINTS, None):
        raise ValueError(
            f"setup_hint: platform must be 'colab', 'kaggle' or None, got {platform!r}."
        )
    if not isinstance(has_gpu, bool):
        raise TypeError(f"setup_hint: has_gpu must be True or False, got {has_gpu!r}.")
    if platform is not None and not has_gpu:  # elsewhere, or with a GPU: no hint (None)
        return f"{_HINTS[platform]} On the CPU the notebook still runs, on a subset of the data."
