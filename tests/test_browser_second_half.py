"""The other notebooks in JupyterLab: `test_browser.py` runs every other notebook, this file the rest.

A file of its own, with its own JupyterLab, so that `make test` (`--dist loadfile`, two workers) runs
the two halves at once: together on one worker they would be the last tests to end.
"""

import pytest
from test_browser import (  # noqa: F401 (fixtures)
    NOTEBOOKS,
    browser,
    check_notebook_in_jupyterlab,
    chromium,
    deadline,
    fonts,
    lab,
    summary,
)


@pytest.mark.parametrize("notebook", NOTEBOOKS[1::2], ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(notebook, lab, browser, deadline, summary, fonts):  # noqa: F811
    check_notebook_in_jupyterlab(notebook, lab, browser, deadline, summary, fonts)
