"""`make setup` stops on a platform the course can't install on, and repairs a broken environment.

Real processes (make, scripts/check_platform.py, python -m venv) in a temporary copy of the files they
read, so the repository's own .venv is never touched and nothing is downloaded. The platform facts that
the check reads are overridden through COURSE_PLATFORM_FACTS, its test-only variable.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = [
    "Makefile",
    "pyproject.toml",
    "requirements.txt",
    "scripts/check_platform.py",
    "scripts/strip_outputs.py",
]
MINOR = "{}.{}".format(*sys.version_info[:2])


@pytest.fixture
def course(tmp_path):
    """A copy of the files `make setup` reads, without .venv."""
    root = tmp_path / "course"
    for name in COPIED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    return root


def environ(facts=""):
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONPATH"}}
    env["COURSE_PLATFORM_FACTS"] = facts
    return env


def check(course, *args, facts="", env=None):
    return subprocess.run(
        [sys.executable, "scripts/check_platform.py", *args],
        cwd=course,
        env=env or environ(facts),
        capture_output=True,
        text=True,
        timeout=120,
    )


def make(course, *args, facts=""):
    return subprocess.run(
        ["make", "--no-print-directory", *args, f"PYTHON={sys.executable}"],
        cwd=course,
        env=environ(facts),
        capture_output=True,
        text=True,
        timeout=120,
    )


def sentences(stderr):
    """What the check said, without make's own `make: *** ... Error 1` line."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("make")]


def pip_works(venv):
    command = [str(venv / "bin" / "python"), "-m", "pip", "--version"]
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("target", ["setup", "lab", "test"])
def test_old_python_stops_with_one_sentence_before_anything(course, target):
    result = make(course, target, facts="python=3.10.12")
    assert result.returncode != 0
    said = sentences(result.stderr)
    assert len(said) == 1, result.stderr
    assert "3.11" in said[0]
    assert "pip" not in result.stdout
    assert not (course / ".venv").exists()


@pytest.mark.parametrize(
    "facts, names",
    [
        ("system=Windows machine=AMD64", ["WSL2", "https://learn.microsoft.com/windows/wsl/install"]),
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
    assert result.returncode == 1
    said = sentences(result.stderr)
    assert len(said) == 1, result.stderr
    for name in names:
        assert name in said[0]


@pytest.mark.parametrize(
    "facts",
    ["system=Darwin machine=arm64 macos=14.0 python=3.11.9", "system=Linux machine=x86_64 python=3.13.1"],
)
def test_platforms_that_can_install_pass(course, facts):
    result = check(course, facts=facts)
    assert (result.returncode, result.stderr) == (0, "")


def _python_that_fails(course):
    venv = course / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "etc" / "jupyter").mkdir(parents=True)  # as the course's packages leave it
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)


def _venv_without_pip(course):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(course / ".venv")], check=True)


@pytest.mark.parametrize("breaking", [_python_that_fails, _venv_without_pip])
def test_broken_venv_is_rebuilt_then_kept(course, breaking):
    breaking(course)
    venv = course / ".venv"
    assert not pip_works(venv)
    result = check(course, "--venv", ".venv")
    assert result.returncode == 0, result.stderr
    assert pip_works(venv)
    # A working environment is used as it is.
    marker = venv / "lib" / "kept"
    marker.write_text("")
    again = check(course, "--venv", ".venv")
    assert again.returncode == 0, again.stderr
    assert marker.exists()


def test_missing_venv_module_names_the_package(course, tmp_path):
    # A stand-in for Debian's python3.X without python3.X-venv: `python -m venv` makes half a
    # folder, then fails.
    stand_in = tmp_path / "no_venv_module" / "venv"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "__main__.py").write_text(
        "import os, sys\n"
        "os.makedirs(os.path.join(sys.argv[1], 'bin'))\n"
        "open(os.path.join(sys.argv[1], 'pyvenv.cfg'), 'w').close()\n"
        "sys.exit('The virtual environment was not created: ensurepip is not available.')\n"
    )
    env = environ()
    env["PYTHONPATH"] = str(stand_in.parent)
    result = check(course, "--venv", ".venv", env=env)
    assert result.returncode == 1
    if Path("/etc/debian_version").exists():
        assert f"python{MINOR}-venv" in sentences(result.stderr)[-1]
    assert not (course / ".venv").exists()


def test_conda_environment_is_used_in_place_never_removed(course, tmp_path):
    # A stand-in for `make lab VENV="$CONDA_PREFIX"`: an environment the Makefile did not make.
    env_dir = tmp_path / "conda-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    (env_dir / "conda-meta").mkdir()

    dry = make(course, "-n", "setup", f"VENV={env_dir}")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    checked = next(i for i, line in enumerate(lines) if "check_platform.py" in line)
    installs = [i for i, line in enumerate(lines) if f"{env_dir}/bin/python -m pip install" in line]
    assert installs and checked < min(installs)
    assert not [line for line in lines if "pip install" in line and str(env_dir) not in line]

    assert check(course, "--venv", str(env_dir)).returncode == 0
    assert not (course / ".venv").exists()

    python = env_dir / "bin" / "python"
    python.unlink()
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    broken = check(course, "--venv", str(env_dir))
    assert broken.returncode == 1
    assert "environment.yml" in sentences(broken.stderr)[-1]
    assert (env_dir / "conda-meta").is_dir()


@pytest.mark.parametrize(
    "gpu, warned",
    [
        ("Tesla V100-SXM2-16GB, 535.104.05, 7.0", True),  # Volta: CUDA 13 dropped it
        ("NVIDIA GeForce RTX 3060, 550.120, 8.6", True),  # a driver older than R580
        ("NVIDIA H100 80GB HBM3, 580.65.06, 9.0", False),
    ],
)
def test_a_gpu_the_pinned_torch_cannot_use_is_named_and_a_folder_with_other_files_is_kept(
    course, tmp_path, gpu, warned
):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{gpu}'\n")
    smi.chmod(0o755)
    env = environ("system=Linux")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    mine = course / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not an environment")
    result = check(course, "--venv", "mine", env=env)
    assert result.returncode == 1
    said = sentences(result.stderr)
    assert ("R580" in said[0] and gpu.split(",")[0] in said[0]) == warned
    assert (mine / "notes.txt").read_text() == "not an environment"
