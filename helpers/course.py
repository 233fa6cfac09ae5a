"""Where the course is published and which release this is.

``scripts/colab_cells.py`` writes both into every notebook's links and setup cell, and
``make release VERSION=X.Y.Z`` sets the version here and in ``pyproject.toml``."""

REPOSITORY = "https://github.com/pytorch-gpu-course/pytorch-gpu-course"
VERSION = "0.1.0"  # [project] version in pyproject.toml; set both with `make release VERSION=X.Y.Z`
TAG = f"v{VERSION}"  # the git tag every link and setup cell names
