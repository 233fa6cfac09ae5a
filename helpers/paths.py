"""Where the course's own files are: ``course_root()`` is the one place that finds the course."""

import os
from pathlib import Path

__all__ = ["CHECKOUT_VARIABLE", "course_root"]

CHECKOUT_VARIABLE = "GPU_COURSE_CHECKOUT"  # the setup cell sets it on Colab and Kaggle


def _is_course(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "notebooks").is_dir()


def course_root() -> Path | None:
    """The course's folder: the one ``GPU_COURSE_CHECKOUT`` names (the setup cell of Colab and
    Kaggle sets it), else the checkout the helpers were installed from (``pip install -e .``);
    ``None`` for helpers installed without the course."""
    checkout = os.environ.get(CHECKOUT_VARIABLE, "").strip()
    if checkout:
        folder = Path(checkout).expanduser()
        if not _is_course(folder):
            raise FileNotFoundError(
                f"{CHECKOUT_VARIABLE}={checkout!r} is not the course's folder (it lacks "
                "pyproject.toml or notebooks/): point it at the course's checkout, or unset it."
            )
        return folder
    installed_from = Path(__file__).resolve().parent.parent
    if _is_course(installed_from):
        return installed_from
    return None
