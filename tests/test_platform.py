"""`make setup` stops on a platform the course can't install on, and repairs a broken environment.

Real processes (make, scripts/check_platform.py, python -m venv) in a temporary copy of the files
they read; nothing is downloaded. The platform facts are set through COURSE_PLATFORM_FACTS, a
test-only variable.
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


def make(course, *args, facts="", env=None):
    """make, with PYTHON on its command line unless ``env`` names one."""
    env = env or environ(facts)
    cmd = ["make", "--no-print-directory", *args]
    cmd += [] if "PYTHON" in env else [f"PYTHON={sys.executable}"]
    return subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True, timeout=120)


def sentences(stderr):
    """What the check said, without make's own `make: *** ... Error 1` line."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("make")]


def pip_works(venv):
    command = [str(venv / "bin" / "python"), "-m", "pip", "--version"]
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("target", ["lab", "test"])
@pytest.mark.parametrize(
    "facts, names",
    [
        ("python=3.10.12", ["3.11"]),
        ("system=Linux machine=x86_64 libc=musl", ["musl"]),
        ("system=Linux machine=x86_64 libc=glibc-2.17", ["2.17", "2.28"]),
    ],
)
def test_a_platform_that_cannot_install_stops_with_one_sentence_before_anything(
    course, target, facts, names
):
    result = make(course, target, facts=facts)
    assert result.returncode != 0
    said = sentences(result.stderr)
    assert len(said) == 1 and all(name in said[0] for name in names), result.stderr
    assert "pip" not in result.stdout and not (course / ".venv").exists()


@pytest.mark.parametrize("origin", ["environment", "command line", "picker"])
def test_an_old_python_is_blamed_on_where_it_came_from(course, origin):
    env = environ("python=3.10.12")
    if origin == "environment":  # `export PYTHON=...` in the shell
        env["PYTHON"] = sys.executable
    result = make(course, "setup", env=env) if origin != "picker" else None
    if origin == "picker":  # the Makefile's own choice, run as make runs it
        command = [sys.executable, "scripts/check_platform.py", "--python-from", "file"]
        result = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True)
    (said,) = sentences(result.stderr)
    assert result.returncode != 0 and sys.executable in said, said
    assert ("unset PYTHON" in said) == (origin == "environment"), said
    assert ("PYTHON=" in said) == (origin == "command line"), said


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
        ("system=Linux machine=aarch64 libc=musl", ["musl"]),
        ("system=Linux machine=x86_64 libc=glibc-2.27", ["2.27", "2.28"]),
    ],
)
def test_platforms_that_cannot_install_say_what_to_do(course, facts, names):
    result = check(course, facts=facts)
    said = sentences(result.stderr)
    assert result.returncode == 1 and len(said) == 1, result.stderr
    assert all(name in said[0] for name in names), said


@pytest.mark.parametrize(
    "facts",
    [
        "system=Darwin machine=arm64 macos=14.0 python=3.11.9",
        "system=Linux python=3.13.1 libc=glibc-2.28",
        "system=Linux python=3.11.2 libc=",  # a libc it cannot name: pip decides
        "system=Linux python=3.11.2 libc=glibc-",  # glibc of unknown version
    ],
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


def test_a_uv_venv_gets_pip_and_is_kept(course):
    """`uv venv` makes an environment without pip, with its version in pyvenv.cfg."""
    venv = course / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with open(venv / "pyvenv.cfg", "a") as config:
        config.write("uv = 0.9.5\n")
    (venv / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (venv / "lib" / "kept").write_text("")
    result = check(course, "--venv", ".venv")
    assert result.returncode == 0 and pip_works(venv), result.stderr
    assert (venv / "lib" / "kept").exists() and (venv / "CACHEDIR.TAG").exists()  # not rebuilt


def fake_nvidia_smi(tmp_path, gpu):
    """PATH with an nvidia-smi that lists ``gpu`` ("name, driver, compute capability")."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvidia-smi").write_text(f"#!/bin/sh\necho '{gpu}'\n")
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    return f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"


LEGACY = "TORCH=2.8.0 TORCHVISION=0.23.0 TORCH_INDEX=https://download.pytorch.org/whl/cu126"


@pytest.mark.parametrize(
    "gpu, route",
    [
        ("Tesla V100-SXM2-16GB, 535.104.05, 7.0", LEGACY),  # Volta: CUDA 13 dropped it
        ("Tesla P100-PCIE-16GB, 535.104.05, 6.0", LEGACY),  # Pascal
        ("NVIDIA GeForce GTX 1080, 550.120, 6.1", LEGACY),
        ("NVIDIA GeForce RTX 3060, 550.120, 8.6", LEGACY),  # a driver older than R580
        ("NVIDIA GeForce RTX 3060, 470.256.02, 8.6", "driver"),  # too old even for CUDA 12.6
        ("Tesla K80, 470.256.02, 3.7", "CPU=1"),  # Kepler: no torch for it
    ],
)
def test_a_gpu_the_pinned_torch_cannot_use_stops_with_the_route_that_works(
    course, tmp_path, gpu, route
):
    env = environ("system=Linux machine=x86_64", PATH=fake_nvidia_smi(tmp_path, gpu))
    result = make(course, "lab", env=env | {"PYTHON": sys.executable})
    said = sentences(result.stderr)
    assert result.returncode != 0 and len(said) == 1, result.stderr
    assert gpu.split(",")[0] in said[0] and route in said[0] and "IGNORE_GPU=1" in said[0], said
    assert "pip" not in result.stdout and not (course / ".venv").exists()  # before any download

    # The student says which: the route's torch, the CPU, or the pinned torch anyway.
    (course / "mine").mkdir()
    (course / "mine" / "notes.txt").write_text("not an environment")  # stops the check after
    for choice in (["--torch", "2.8.0"], ["--torch-index", "cpu-index"], ["--ignore-gpu", "1"]):
        result = check(course, "--venv", "mine", *choice, env=env)
        said = sentences(result.stderr)
        assert "holds other files" in said[-1], (choice, said)  # went on to the environment
        assert ("IGNORE_GPU" in said[0]) == (choice[0] == "--ignore-gpu"), (choice, said)


def test_a_gpu_the_pinned_torch_can_use_goes_on(course, tmp_path):
    gpu = "NVIDIA H100 80GB HBM3, 580.65.06, 9.0"
    env = environ("system=Linux machine=x86_64", PATH=fake_nvidia_smi(tmp_path, gpu))
    (course / "mine").mkdir()
    (course / "mine" / "notes.txt").write_text("not an environment")
    result = check(course, "--venv", "mine", env=env)
    (said,) = sentences(result.stderr)
    assert result.returncode == 1 and "holds other files" in said, said  # the GPU passed
    assert (course / "mine" / "notes.txt").read_text() == "not an environment"


def test_without_an_nvidia_gpu_the_cpu_route_is_named_before_the_download(course, tmp_path):
    (tmp_path / "bin").mkdir()  # a PATH without nvidia-smi
    for tool in ("sh", "make", "grep", "sed", "git", "cat", "test"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), tmp_path / "bin" / tool)
    env = environ("system=Linux machine=x86_64", PATH=str(tmp_path / "bin"))
    (course / "mine").mkdir()
    result = check(course, "--venv", "mine", env=env)
    said = sentences(result.stderr)
    assert "make lab CPU=1" in said[0] and "https://download.pytorch.org/whl/cpu" in said[0], said

    dry = make(course, "-n", "setup", "CPU=1")  # what `make lab CPU=1` runs, in order
    lines = dry.stdout.replace("\\\n", " ").splitlines()
    checked = next(i for i, line in enumerate(lines) if "check_platform.py" in line)
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pins = [line for line in pins if line.startswith(("torch==", "torchvision=="))]
    cpu = " ".join(["--index-url https://download.pytorch.org/whl/cpu", *pins])
    first = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert checked < first and lines[first].endswith(cpu), lines
    assert "--torch-index" in lines[checked] and "whl/cpu" in lines[checked]
    assert "-r requirements.txt" in lines[first + 1], lines  # the rest, as pinned, from PyPI


def test_make_lab_with_another_torch_installs_it_in_its_own_environment(course):
    dry = make(course, "-n", "setup", "TORCH=2.8.0", "TORCHVISION=0.23.0", f"TORCH_INDEX={'x'}")
    lines = dry.stdout.splitlines()
    installs = [line for line in lines if "pip install" in line]
    assert installs[0].endswith("--index-url x torch==2.8.0 torchvision==0.23.0"), installs
    assert ".venv-torch-2.8.0/bin/python" in installs[1]
    assert "-r .venv-torch-2.8.0/requirements.txt" in installs[1]
    (course / ".venv-torch-2.8.0").mkdir()
    written = make(
        course, ".venv-torch-2.8.0/requirements.txt", "TORCH=2.8.0", "TORCHVISION=0.23.0"
    )
    assert written.returncode == 0, written.stderr
    pinned = (course / "requirements.txt").read_text().splitlines()
    chosen = (course / ".venv-torch-2.8.0" / "requirements.txt").read_text().splitlines()
    changed = {(a, b) for a, b in zip(pinned, chosen, strict=True) if a != b}
    assert {b for _, b in changed} == {"torch==2.8.0", "torchvision==0.23.0"}, changed
    missing = make(course, "setup", "TORCH=2.8.0")  # torchvision not named
    assert missing.returncode != 0 and "TORCHVISION=" in sentences(missing.stderr)[0]
