"""`make setup` stops on a platform the course can't install on, and repairs a broken environment.

Real processes (make, scripts/check_platform.py, python -m venv) in a temporary copy of the files they read;
nothing is downloaded. The platform facts are set through COURSE_PLATFORM_FACTS, a test-only variable.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = ["Makefile", "pyproject.toml", "requirements.txt", "scripts/check_platform.py"]
COPIED += ["scripts/strip_outputs.py"]


@pytest.fixture
def course(tmp_path):
    """A copy of the files `make setup` reads, without .venv."""
    for name in COPIED:
        (tmp_path / "course" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / "course" / name)
    return tmp_path / "course"


def environ(facts="", **more):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONPATH"}
    }
    return env | {"COURSE_PLATFORM_FACTS": facts} | more


def check(course, *args, facts="", env=None):
    command = [sys.executable, "scripts/check_platform.py", *args]
    return subprocess.run(
        command, cwd=course, env=env or environ(facts), capture_output=True, text=True
    )


def make(course, *args, facts=""):
    cmd = ["make", "--no-print-directory", *args, f"PYTHON={sys.executable}"]
    return subprocess.run(
        cmd, cwd=course, env=environ(facts), capture_output=True, text=True, timeout=120
    )


def sentences(stderr):
    """What the check said, without make's own `make: *** ... Error 1` line."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("make")]


def pip_works(venv):
    command = [str(venv / "bin" / "python"), "-m", "pip", "--version"]
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("target", ["lab", "test"])
def test_old_python_stops_with_one_sentence_before_anything(course, target):
    result = make(course, target, facts="python=3.10.12")
    assert result.returncode != 0
    said = sentences(result.stderr)
    assert len(said) == 1 and "3.11" in said[0], result.stderr
    assert "pip" not in result.stdout and not (course / ".venv").exists()


@pytest.mark.parametrize(
    "facts, names",
    [
        (
            "system=Windows machine=AMD64",
            ["WSL2", "https://learn.microsoft.com/windows/wsl/install"],
        ),
        ("system=MINGW64_NT-10.0-19045 machine=x86_64", ["WSL2"]),
        ("system=MSYS_NT-10.0-19045 machine=x86_64", ["WSL2"]),
        ("system=CYGWIN_NT-10.0-19045 machine=x86_64", ["WSL2"]),
        ("system=Darwin machine=x86_64 macos=14.5", ["Apple silicon"]),
        ("system=Darwin machine=arm64 macos=13.6.1", ["macOS 14"]),
        ("system=Darwin machine=arm64 macos=14.5 python=3.9.6", ["3.11"]),
    ],
)
def test_platforms_that_cannot_install_say_what_to_do(course, facts, names):
    result = check(course, facts=facts)
    said = sentences(result.stderr)
    assert result.returncode == 1 and len(said) == 1, result.stderr
    assert all(name in said[0] for name in names), said


@pytest.mark.parametrize(
    "facts", ["system=Darwin machine=arm64 macos=14.0 python=3.11.9", "system=Linux python=3.13.1"]
)
def test_platforms_that_can_install_pass(course, facts):
    result = check(course, facts=facts)
    assert (result.returncode, result.stderr) == (0, "")


def test_broken_venv_is_rebuilt_a_working_one_kept_and_a_conda_one_never_removed(course):
    venv = course / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )  # a failed attempt
    assert not pip_works(venv)
    result = check(course, "--venv", ".venv")
    assert result.returncode == 0 and pip_works(venv), result.stderr
    (venv / "lib" / "kept").write_text("")
    assert (
        check(course, "--venv", ".venv").returncode == 0 and (venv / "lib" / "kept").exists()
    )  # used as is

    # A stand-in for `make lab VENV="$CONDA_PREFIX"`: an environment the Makefile did not make.
    (venv / "conda-meta").mkdir()
    python = venv / "bin" / "python"
    python.unlink()
    python.write_text("#!/bin/sh\nexit 1\n")  # a python that does not run
    python.chmod(0o755)
    broken = check(course, "--venv", ".venv")
    assert broken.returncode == 1 and "environment.yml" in sentences(broken.stderr)[-1], (
        broken.stderr
    )
    assert (venv / "conda-meta").is_dir() and (venv / "lib" / "kept").exists()


def test_make_setup_checks_before_it_installs_into_the_chosen_environment(course, tmp_path):
    env_dir = tmp_path / "conda-env"
    dry = make(course, "-n", "setup", f"VENV={env_dir}")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    checked = next(i for i, line in enumerate(lines) if "check_platform.py" in line)
    installs = [i for i, line in enumerate(lines) if "pip install" in line]
    assert installs and checked < min(installs)
    assert all(f"{env_dir}/bin/python -m pip install" in lines[i] for i in installs), lines


def test_missing_venv_module_names_the_package(course, tmp_path):
    # Debian's python3.X without python3.X-venv: `python -m venv` makes half a folder, then fails.
    stand_in = tmp_path / "no_venv_module" / "venv"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "__main__.py").write_text(
        "import os, sys\nos.makedirs(os.path.join(sys.argv[1], 'bin'))\n"
        "open(os.path.join(sys.argv[1], 'pyvenv.cfg'), 'w').close()\n"
        "sys.exit('The virtual environment was not created: ensurepip is not available.')\n"
    )
    result = check(course, "--venv", ".venv", env=environ(PYTHONPATH=str(stand_in.parent)))
    assert result.returncode == 1 and not (course / ".venv").exists()
    if Path("/etc/debian_version").exists():
        assert "python{}.{}-venv".format(*sys.version_info[:2]) in sentences(result.stderr)[-1]


@pytest.mark.parametrize(
    "gpu, warned",
    [
        ("Tesla V100-SXM2-16GB, 535.104.05, 7.0", True),  # Volta: CUDA 13 dropped it
        ("NVIDIA GeForce RTX 3060, 550.120, 8.6", True),  # a driver older than R580
        ("NVIDIA H100 80GB HBM3, 580.65.06, 9.0", False),
    ],
)
def test_a_gpu_the_pinned_torch_cannot_use_is_named_and_other_files_are_kept(
    course, tmp_path, gpu, warned
):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvidia-smi").write_text(f"#!/bin/sh\necho '{gpu}'\n")
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    (course / "mine").mkdir()
    (course / "mine" / "notes.txt").write_text("not an environment")
    env = environ("system=Linux", PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = check(course, "--venv", "mine", env=env)
    said = sentences(result.stderr)
    assert result.returncode == 1 and ("R580" in said[0] and gpu.split(",")[0] in said[0]) == warned
    assert (course / "mine" / "notes.txt").read_text() == "not an environment"
