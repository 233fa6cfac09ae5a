"""Sphinx's settings for the course's site. `make site` builds it (book/make_site.py writes the
pages it reads, from the README, docs/ and the executed notebooks)."""

from pathlib import Path

from helpers.course import REPOSITORY, TAG, VERSION

project = "Training PyTorch models on a GPU"
author = "the contributors to this course"
copyright = f"2026, {author}. Code: MIT; text and figures: CC BY 4.0"
release = VERSION
version = TAG

extensions = ["myst_nb", "sphinx_copybutton"]
exclude_patterns = ["_extra"]
html_theme = "sphinx_book_theme"
html_title = project
html_static_path = [str(Path(__file__).parent / "_static")]
html_css_files = ["course.css"]
html_favicon = str(Path(__file__).parent / "_static" / "favicon.svg")
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": TAG,
    "use_repository_button": True,
    "use_download_button": False,  # each notebook page links its .ipynb as the repository holds it
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "home_page_in_toc": True,
}
# Pygments retries a shell block with `<placeholder's>` in it in its relaxed mode: nothing is lost.
suppress_warnings = ["misc.highlighting_failure"]
html_context = {"default_mode": "light"}  # the figures are drawn on white; a reader can switch
html_show_sourcelink = False
html_copy_source = False

# MyST: GitHub's anchors for the headings that links point into (README.md#what-a-machine-needs).
myst_heading_anchors = 3
# MyST-NB: the notebooks come executed (make_site.py); nothing runs here.
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"
nb_ipywidgets_js = {}  # the widget JavaScript comes from a CDN: widgets are frozen to HTML instead
nb_render_markdown_format = "myst"
# sphinx-copybutton: copy the code, not the prompts
copybutton_exclude = ".linenos, .gp, .go"


def _extra_files(app, config):
    """The notebooks as the repository holds them, served beside their pages for download."""
    config.html_extra_path = [str(Path(app.srcdir) / "_extra")]


def setup(app):
    app.connect("config-inited", _extra_files)
