"""The size of every text in every figure a notebook draws, recorded by its kernel as it draws.

``kernel_env(folder)`` gives the variables that make a kernel record them: an IPython startup
file wraps matplotlib's ``Figure.draw`` and ``Text.draw``, and after each figure is drawn (shown
inline or saved) appends a JSON line: the notebook (``JPY_SESSION_NAME``, else
``COURSE_NOTEBOOK``), the size in points of each text drawn, the dpi and, for a figure shown, the
PNG's size in pixels (to find it on the page).
``read(folder)`` gives them back. The notebooks are not changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# The smallest text a figure may have, in points: readable at 1280x720 on a projector.
MIN_POINTS = 10.0
MIN_SHOWN_PX = 10.0  # the smallest a figure's text may be as shown: 10 pt at 100 dpi, scaled to fit
# The width the browser test's JupyterLab gives an output image on a 1280x720 screen (a wider
# figure is scaled down to it). test_browser.py measures it in the notebooks it runs; nbval uses it
# for every figure.
OUTPUT_WIDTH_PX = 779.0

_STARTUP = """
def _course_record_figure_fonts():
    import base64, functools, json, os, struct
    import IPython.core.pylabtools as pylabtools
    import matplotlib.figure, matplotlib.text

    record = os.environ["COURSE_FIGURE_FONTS"]
    notebook = os.environ.get("JPY_SESSION_NAME") or os.environ.get("COURSE_NOTEBOOK", "")
    drawing = []  # the texts of the figure being drawn
    displaying = []  # the figure being shown, once drawn

    def write(entry):
        with open(record, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\\n")

    def text_draw(original):
        @functools.wraps(original)
        def draw(self, renderer):
            if drawing and self.get_visible() and self.get_text().strip():
                drawing[-1].append([float(self.get_fontsize()), self.get_text().strip()[:60]])
            return original(self, renderer)

        return draw

    def figure_draw(original):
        @functools.wraps(original)
        def draw(self, renderer):
            drawing.append([])
            try:
                return original(self, renderer)
            finally:
                texts = drawing.pop()
                if not drawing:
                    entry = {"notebook": notebook, "texts": texts, "dpi": float(self.dpi)}
                    if displaying:
                        displaying[-1] = entry  # the last drawing is the one shown
                    else:
                        write(entry)  # a savefig

        return draw

    def print_figure(original):  # what the inline backend calls to show a figure in the notebook
        @functools.wraps(original)
        def show(fig, *args, **kwargs):
            displaying.append(None)
            try:
                data = original(fig, *args, **kwargs)
            finally:
                entry = displaying.pop()
            if entry is not None:
                png = base64.b64decode(data) if isinstance(data, str) else data
                if isinstance(png, bytes) and png.startswith(b"\\x89PNG"):
                    entry["png"] = list(struct.unpack(">II", png[16:24]))  # width, height in pixels
                write(entry)
            return data

        return show

    matplotlib.text.Text.draw = text_draw(matplotlib.text.Text.draw)
    matplotlib.figure.Figure.draw = figure_draw(matplotlib.figure.Figure.draw)
    pylabtools.print_figure = print_figure(pylabtools.print_figure)


_course_record_figure_fonts()
del _course_record_figure_fonts
"""


def kernel_env(folder: Path) -> dict[str, str]:
    """Variables that make a kernel started with them record its figures' text sizes in
    ``folder``."""
    startup = folder / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-course-figure-fonts.py").write_text(_STARTUP, encoding="utf-8")
    return {
        "IPYTHONDIR": str(folder / "ipython"),
        "COURSE_FIGURE_FONTS": str(folder / "figure-fonts.jsonl"),
    }


def read(folder: Path, notebook: str | None = None) -> list[dict]:
    """The figures recorded in ``folder`` (of ``notebook``, a file name, if given), in the order
    they were drawn."""
    path = folder / "figure-fonts.jsonl"
    figures = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        figure = json.loads(line)
        # A figure drawn twice (bbox_inches="tight") counts once.
        if not figures or figure != figures[-1]:
            figures.append(figure)
    return [f for f in figures if notebook is None or os.path.basename(f["notebook"]) == notebook]


def too_small(figures: list[dict], minimum: float = MIN_POINTS) -> list[str]:
    """Per figure and size below ``minimum`` points, a line such as
    ``"figure 2: 16 texts at 8 pt, e.g. 'cat\\nas dog'"``."""
    found = []
    for number, figure in enumerate(figures, start=1):
        for size in sorted({size for size, _ in figure["texts"] if size < minimum}):
            texts = [text for points, text in figure["texts"] if points == size]
            examples = ", ".join(repr(text) for text in texts[:3])
            found.append(f"figure {number}: {len(texts)} text(s) at {size:g} pt, e.g. {examples}")
    return found


def shown_px(figure: dict, room: float = OUTPUT_WIDTH_PX) -> tuple[float, str] | None:
    """A shown figure's smallest text in px, shown in ``room`` px, and what it says.

    None for a figure saved, not shown, or one without text."""
    if "png" not in figure or not figure["texts"]:
        return None
    points, text = min(figure["texts"])
    scale = min(1.0, room / figure["png"][0])
    return points * figure["dpi"] / 72 * scale, f"{text!r}, {points:g} pt shown at {scale:.0%}"
