"""The notebooks `test_browser.py` leaves, with a JupyterLab of their own.

`make test`'s second worker runs them."""

import pytest
from test_browser import (  # noqa: F401 (the fixtures)
    NOTEBOOKS,
    browser,
    check_notebook_in_jupyterlab,
    chromium,
    deadline,
    lab,
    summary,
)


@pytest.mark.parametrize("notebook", NOTEBOOKS[1::2], ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab(notebook, lab, browser, deadline, summary):  # noqa: F811
    check_notebook_in_jupyterlab(notebook, lab, browser, deadline, summary)
