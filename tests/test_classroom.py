"""What a classroom meets: figure text a projector can show, what `make lab` starts with, and no
pink notes from the helpers. The figures' text is checked here in the code that sizes it, and in the
browser test (tests/figure_fonts.py) over every text matplotlib draws.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from figure_fonts import MIN_POINTS

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PLOTTING_SCRIPTS = [ROOT / "benchmarks" / "bench.py"]  # its plot is shown in 06_performance

# A text size given in code: fontsize=8, labelsize=7, size="small", {"size": 6}, font.size ...
_SIZE = re.compile(
    r"""(?:\b(?:fontsize|labelsize|titlesize|size)\s*=\s*|["'](?:fontsize|size|font\.size)["']\s*[:,]\s*)"""
    r"""(?P<value>\d+(?:\.\d+)?|["'](?:xx-small|x-small|small|smaller)["'])"""
)


def _code(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return path.read_text(encoding="utf-8")


def _too_small(code: str) -> list[str]:
    matches = _SIZE.finditer(code)
    return [m[0] for m in matches if m["value"][0] in "\"'" or float(m["value"]) < MIN_POINTS]


def test_the_size_check_finds_small_text():
    code = (
        'ax.set_title("x", fontsize=8)\n'
        'plt.legend(fontsize="small")\n'
        'rc = {"font.size": 7}\n'
        "fontsize=12"
    )
    assert _too_small(code) == ["fontsize=8", 'fontsize="small"', '"font.size": 7']
    assert (
        _too_small("normal(size=(4, 5)); load(size=budget.train_size); bar_label(fontsize=10)")
        == []
    )


@pytest.mark.parametrize("path", NOTEBOOKS + PLOTTING_SCRIPTS, ids=lambda p: p.name)
def test_figure_text_is_at_least_10_points(path):
    """10 pt at matplotlib's 100 dpi is 14 pixels: readable on a projector at 1280x720."""
    small = _too_small(_code(path))
    assert not small, (
        f"{path.name} sets text below {MIN_POINTS:g} pt, too small for a projector: {small}"
    )


def test_nbval_fails_a_cell_that_prints_on_stderr_or_draws_text_too_small_to_read(tmp_path):
    """conftest.py checks under nbval what the browser test checks in JupyterLab, for every
    notebook."""
    nbformat = pytest.importorskip("nbformat")
    plot = (
        "import matplotlib.pyplot as plt\n\nfig, ax = plt.subplots(figsize=({}, 2), dpi=100)\n"
        "ax.set_title('x', fontsize={})\nplt.show()"
    )
    cells = [
        "print('on stdout')",
        "import sys\n\nprint('a warning', file=sys.stderr)",
        plot.format(6, 10),  # under 779 px wide: 10 pt at 100 dpi is 13.9 px
        plot.format(4, 8),
        plot.format(14, 10),  # 1,150 px wide, shown in 779: 10 pt becomes 9.4 px
    ]
    nbformat.write(
        nbformat.v4.new_notebook(cells=list(map(nbformat.v4.new_code_cell, cells))),
        tmp_path / "c.ipynb",
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(tmp_path / "c.ipynb"),
        "-p",
        "tests.conftest",
        "-v",
    ]
    command += [
        "--nbval-lax",
        "--nbval-current-env",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(ROOT),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    outcomes = "".join(re.findall(r"::Cell \d (PASSED|FAILED)", done.stdout))
    assert outcomes == "PASSEDFAILEDPASSEDFAILEDFAILED", done.stdout[-3000:]
    assert "prints on stderr" in done.stdout and "a warning" in done.stdout
    assert "1 text(s) at 8 pt, e.g. 'x'" in done.stdout
    assert "10 pt shown at 68%, is 9.4 px" in done.stdout


# --- what `make lab` starts ---------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_reads_the_courses_settings_and_finds_tensorboard():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-s", "-n", "lab"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.replace(
        "\\\n", " "
    ).splitlines()  # `make -n` prints the recipes and runs none
    command = " ".join(next(line for line in lines if "jupyter lab" in line).split())
    assert f'JUPYTER_CONFIG_PATH="{ROOT}/jupyter' in command, command
    assert f'PATH="{ROOT}/.venv/bin:' in command, (
        command
    )  # %tensorboard runs `tensorboard` from PATH
    assert "--ServerApp.root_dir=notebooks" in command
    # JupyterLab refuses to run as root (a container) unless told it may
    assert ("--allow-root" in command) == (os.getuid() == 0), command


def test_the_lab_asks_nothing_about_news_and_lists_no_run_outputs():
    overrides = json.loads(
        (ROOT / "jupyter" / "labconfig" / "default_setting_overrides.json").read_text()
    )
    assert overrides["@jupyterlab/apputils-extension:notification"] == {
        "checkForUpdates": False,
        "fetchNews": "false",
    }
    server = json.loads((ROOT / "jupyter" / "jupyter_server_config.json").read_text())
    hidden = set(server["ContentsManager"]["hide_globs"])
    manager = pytest.importorskip(
        "jupyter_server.services.contents.manager", reason="needs JupyterLab"
    )
    assert (
        set(manager.ContentsManager.class_traits()["hide_globs"].default()) <= hidden
    )  # JupyterLab's own
    assert {"checkpoints", "runs"} <= hidden
    # what the lab does not list, git does not see
    assert {"checkpoints/", "runs/"} <= set((ROOT / ".gitignore").read_text().split())


# --- no noise -------------------------------------------------------------------------------------


def test_importing_the_timing_helpers_logs_nothing(tmp_path):
    """torch.utils.benchmark logs 'No CUDA runtime is found' where a CUDA toolkit is found but no
    GPU: pink text atop 06_performance."""
    env = {
        **os.environ,
        "CUDA_HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }  # a "toolkit" is found
    probe = (
        "import torch, helpers.timing\n"
        "helpers.timing.autorange(lambda: None, min_run_time=0.01)\n"
        "print(torch.cuda.is_available())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    if (
        done.stdout.strip() == "False"
    ):  # where the warning would come: check that torch still gives it
        probe = [sys.executable, "-c", "import torch.utils.benchmark"]
        shown = subprocess.run(probe, env=env, capture_output=True, text=True)
        assert "No CUDA runtime is found" in shown.stderr, (
            "torch no longer warns: helpers.timing's guard can go"
        )
