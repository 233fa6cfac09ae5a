"""Can this machine run the course? Says what to do, in one sentence, before anything downloads.

`make setup` (and so `make lab` and `make test`) runs it with the Python it chose, before it
installs:

    python3 scripts/check_platform.py --venv .venv --python-from file

It stops (exit 1, one sentence on stderr) on Python older than 3.11, on macOS older than 14 or on an
Intel Mac (PyPI has no torch 2.15.0 for them), on Linux with musl or a glibc older than 2.28
(torch's wheels are manylinux_2_28), and on native Windows (use WSL2). --python-from says where the
Makefile's PYTHON came from (make's $(origin PYTHON)), so that the sentence names what to change.

Before the first install into --venv DIR, it looks at the NVIDIA GPU: one the pinned torch (CUDA 13:
Turing, compute capability 7.5, or newer; driver R580 or newer) cannot use stops the install, with
the route that works: `make lab TORCH=2.8.0 TORCHVISION=0.23.0 TORCH_INDEX=<CUDA 12.6 index>`, whose
wheels still cover Maxwell, Pascal and Volta; or `make lab CPU=1`; or, to go on anyway,
`make lab IGNORE_GPU=1`. --torch, --torch-index and --ignore-gpu pass those choices, which skip the
stop. On Linux x86_64 without an NVIDIA GPU it names the CPU-only route, then goes on.

With --venv DIR it then makes sure DIR holds a working environment: a missing one is created with
this Python; one that an earlier failed attempt left broken (no bin/python, a python that does not
run, no working pip) is removed and created again. One made by `uv venv`, which has no pip, gets pip
from `python -m ensurepip`. An environment it did not make (a conda env, a folder with other files)
is never removed: it says what is wrong with it instead.

Standard library only, and it must parse on any Python 3 (no f-strings), so that an old Python gets
the sentence and not a SyntaxError.

Test only: COURSE_PLATFORM_FACTS overrides the facts read from this machine, as space-separated
key=value pairs: python=3.10.12 system=Darwin machine=x86_64 macos=13.6 libc=glibc-2.17 (any
subset; libc is glibc-X.Y, musl, or empty where unknown).
"""

# ruff: noqa: UP031

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys

MIN_PYTHON = (3, 11)
MIN_MACOS = 14
MIN_GLIBC = (2, 28)  # torch 2.15.0's Linux wheels are manylinux_2_28
MIN_CAPABILITY = (7, 5)  # CUDA 13, the pinned build: Turing or newer
MIN_DRIVER = 580
# The route for an older GPU or driver: torch 2.8.0 (the floor, see README) built for CUDA 12.6,
# whose wheels cover Maxwell (5.0) to Hopper and need driver R525 or newer.
LEGACY_INDEX = "https://download.pytorch.org/whl/cu126"
LEGACY_ROUTE = "make lab TORCH=2.8.0 TORCHVISION=0.23.0 TORCH_INDEX=" + LEGACY_INDEX
LEGACY_CAPABILITY = (5, 0)
LEGACY_DRIVER = 525
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # what `make lab CPU=1` installs torch from
WSL = "https://learn.microsoft.com/windows/wsl/install"
SELECTOR = "https://pytorch.org/get-started/locally/"
STAMP = ".installed"  # the Makefile's stamp inside the environment
NO_PIP = "it has no working pip"
# What `python -m venv` makes (.gitignore since 3.13), what packages add (etc/jupyter, share), and
# the Makefile's stamp: a folder holding nothing else is safe to remove.
# `uv venv` adds CACHEDIR.TAG; `make lab TORCH=...` and `make test-torch` write requirements.txt.
VENV_ENTRIES = {"bin", "lib", "lib64", "include", "etc", "share", "pyvenv.cfg", ".gitignore", STAMP}
VENV_ENTRIES |= {"CACHEDIR.TAG", "requirements.txt"}


def facts():
    """The platform facts the checks read, with COURSE_PLATFORM_FACTS (tests only) laid over
    them."""
    found = {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "system": platform.system(),
        "machine": platform.machine(),
        "macos": platform.mac_ver()[0],
        "libc": libc(),
    }
    for pair in os.environ.get("COURSE_PLATFORM_FACTS", "").split():
        key, _, value = pair.partition("=")
        if key in found:
            found[key] = value
    return found


def libc():
    """glibc-X.Y, musl, or "" (not Linux, or not known)."""
    if platform.system() != "Linux":
        return ""
    name, version = platform.libc_ver()
    if name == "glibc":
        return "glibc-" + version
    if glob.glob("/lib/ld-musl-*.so.1"):
        return "musl"
    return ""


def version_tuple(text):
    parts = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def platform_problem(f, python_from="file"):
    """One sentence saying what to do, or None when the course can install here. ``python_from``:
    where the Makefile's PYTHON came from, as make's $(origin PYTHON) says."""
    system = f["system"]
    if system == "Windows" or system.upper().startswith(("MSYS", "MINGW", "CYGWIN")):
        return (
            "Native Windows (%s) cannot run the course: the Makefile expects Linux or macOS, and "
            "PyPI's Windows torch has no CUDA; install WSL2 (%s) and run `make lab` inside it."
            % (system, WSL)
        )
    if system == "Darwin":
        if f["machine"] not in ("arm64", "aarch64"):
            return (
                "This Mac runs %s code (an Intel Mac, or a Python under Rosetta), and torch 2.15.0 "
                "exists only for Apple silicon: use an arm64 Python on an Apple-silicon Mac with "
                "macOS 14 or newer, Colab, or Linux." % (f["machine"] or "non-arm64")
            )
        if version_tuple(f["macos"] or "0")[0] < MIN_MACOS:
            return (
                "This is macOS %s, and torch 2.15.0 needs macOS 14 (Sonoma) or newer: update "
                "macOS, or use Colab or Linux." % (f["macos"] or "of unknown version")
            )
    if system == "Linux" and f["libc"] == "musl":
        return (
            "This Linux uses musl (Alpine, for example), and PyPI's torch is built for glibc only: "
            "use a glibc distribution such as Debian or Ubuntu (a container will do), or Colab."
        )
    glibc = f["libc"][len("glibc-") :] if f["libc"].startswith("glibc-") else ""
    if system == "Linux" and glibc and version_tuple(glibc)[:2] < MIN_GLIBC:
        return (
            "This Linux has glibc %s, and torch 2.15.0's wheels need glibc 2.28 or newer: use a "
            "newer distribution (Debian 10, Ubuntu 20.04, RHEL 8 or later; a container will do), "
            "or Colab." % glibc
        )
    if version_tuple(f["python"])[:2] < MIN_PYTHON:
        return old_python(f, system, python_from)
    return None


def old_python(f, system, python_from):
    """What to do about a Python older than 3.11, given where it came from."""
    if system == "Darwin":
        how = "e.g. `brew install python@3.12` or the installer from python.org"
    else:
        how = "e.g. `sudo apt install python3.11 python3.11-venv`"
    if python_from.startswith("environment"):
        return (
            "%s is Python %s, named by the PYTHON variable exported in your shell, and the course "
            "needs Python 3.11 or newer: run `unset PYTHON` so that `make lab` picks python3.13, "
            "3.12 or 3.11 (install one first, %s), or export a newer one."
            % (sys.executable, f["python"], how)
        )
    if python_from == "command line":
        return (
            "%s is Python %s, the one you named with PYTHON=, and the course needs Python 3.11 or "
            "newer: name a newer one, or leave PYTHON= out so that `make lab` picks python3.13, "
            "3.12 or 3.11 (install one first, %s)." % (sys.executable, f["python"], how)
        )
    return (
        "%s is Python %s, and the course needs Python 3.11 or newer: install one (%s), then run "
        "`make lab` again, which picks python3.13, 3.12 or 3.11."
        % (sys.executable, f["python"], how)
    )


def nvidia_gpus():
    """(name, driver, compute capability) of each NVIDIA GPU that nvidia-smi lists; [] without
    one."""
    if shutil.which("nvidia-smi") is None:
        return []
    # compute_cap is unknown to drivers older than about R510, which are too old anyway.
    for fields in ("name,driver_version,compute_cap", "name,driver_version"):
        query = ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader"]
        try:
            out = subprocess.check_output(query, stderr=subprocess.DEVNULL, timeout=20).decode()
            break
        except Exception:
            out = ""
    gpus = []
    for line in out.strip().splitlines():
        values = [value.strip() for value in line.split(",")] + ["unknown"]
        gpus.append(tuple(values[:3]))
    return gpus


def gpu_problem(ignore):
    """One sentence when an NVIDIA GPU is here that the pinned CUDA 13 torch cannot use, with the
    route that works, else None. ``ignore``: the student said to go on (IGNORE_GPU=1), so the
    sentence is a warning, printed, and None is returned."""
    for name, driver, capability in nvidia_gpus():
        known = capability != "unknown"
        if (not known or version_tuple(capability) >= MIN_CAPABILITY) and (
            version_tuple(driver)[0] >= MIN_DRIVER
        ):
            continue
        if known and version_tuple(capability) < LEGACY_CAPABILITY:
            route = "no torch the course runs on supports it, so use the CPU with `make lab CPU=1`"
        elif version_tuple(driver)[0] < LEGACY_DRIVER:
            route = (
                "update the NVIDIA driver to R580 or newer, or use the CPU with `make lab CPU=1`"
            )
        else:
            route = (
                "use it with torch 2.8.0 built for CUDA 12.6, `%s`, or use the CPU with "
                "`make lab CPU=1`" % LEGACY_ROUTE
            )
        said = (
            "This %s (driver %s, compute capability %s) cannot run the pinned torch 2.15.0, "
            "which is built for CUDA 13 and needs a Turing or newer GPU and driver R580 or newer: "
            "%s; or install the pinned torch anyway, on the CPU, with `make lab IGNORE_GPU=1`."
            % (name, driver, capability, route)
        )
        if not ignore:
            return said
        sys.stderr.write("IGNORE_GPU is set, so going on. " + said + "\n")
        return None
    return None


def cpu_note():
    """The CPU-only route, named on Linux x86_64 without an NVIDIA GPU before the pinned CUDA
    build downloads; None elsewhere."""
    f = facts()
    if f["system"] != "Linux" or f["machine"] != "x86_64" or nvidia_gpus():
        return None
    return (
        "No NVIDIA GPU found: the pinned torch brings about 4 GB of CUDA libraries this machine "
        "cannot use; stop now (Ctrl-C) and run `make lab CPU=1` to install PyTorch's CPU wheels "
        "(%s) instead." % CPU_INDEX
    )


def env_problem(python):
    """Why the environment whose interpreter is `python` is unusable, or None."""
    if not os.path.exists(python):
        return "it has no %s" % os.path.relpath(python)
    probe = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
    try:
        version = subprocess.check_output(
            [python, "-c", probe], stderr=subprocess.DEVNULL, timeout=60
        )
    except Exception:
        return "its python does not run"
    version = version.decode().strip()
    if version_tuple(version)[:2] < MIN_PYTHON:
        return "its python is %s, older than 3.11" % version
    pip = [python, "-m", "pip", "--version"]
    if subprocess.call(pip, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120) != 0:
        return NO_PIP
    return None


def made_by_uv(venv):
    """Whether `venv` was made by `uv venv`, which writes its version into pyvenv.cfg."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as config:
            return any(line.split("=")[0].strip() == "uv" for line in config)
    except OSError:
        return False


def seed_pip(venv, python):
    """Give a `uv venv` environment the pip that the Makefile installs with."""
    print("%s was made by `uv venv`, without pip: adding pip with ensurepip." % venv)
    if subprocess.call([python, "-m", "ensurepip", "--default-pip"]) == 0:
        return None
    return (
        "%s was made by `uv venv` and has no pip, and `%s -m ensurepip` failed (its message is "
        "above): run `uv venv --seed %s`, which adds pip, then `make lab` again."
        % (venv, python, venv)
    )


def ours(venv):
    """Whether `venv` holds nothing but what `python -m venv` and the Makefile make (safe to
    remove)."""
    return all(entry in VENV_ENTRIES for entry in os.listdir(venv))


def create(venv):
    """Create `venv` with this Python; on failure remove the half-made folder and say what to
    install."""
    print(
        "Creating %s with %s (Python %d.%d)."
        % ((venv, sys.executable) + tuple(sys.version_info[:2]))
    )
    if subprocess.call([sys.executable, "-m", "venv", venv]) == 0:
        return None
    if os.path.isdir(venv) and ours(venv):
        shutil.rmtree(venv)
    name = "python%d.%d-venv" % sys.version_info[:2]
    if os.path.exists("/etc/debian_version"):
        return (
            "`%s -m venv` failed, as it does on Debian and Ubuntu without the venv module: run "
            "`sudo apt install %s`, then `make lab` again." % (sys.executable, name)
        )
    return (
        "`%s -m venv %s` failed (its message is above): install Python's venv module for this "
        "Python, or choose another with `make lab PYTHON=...`." % (sys.executable, venv)
    )


def ensure_env(venv):
    """Make `venv` a working environment, or return one sentence saying what to do."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(venv) or (os.path.isdir(venv) and not os.listdir(venv)):
        return create(venv)
    problem = env_problem(python)
    if problem is None:
        return None
    if problem == NO_PIP and made_by_uv(venv):
        return seed_pip(venv, python)
    if os.path.isdir(venv) and ours(venv):
        print("%s is unusable (%s): rebuilding it." % (venv, problem))
        shutil.rmtree(venv)
        return create(venv)
    if os.path.isdir(os.path.join(venv, "conda-meta")):
        return (
            "The conda environment %s is unusable (%s): recreate it with `conda env create -f "
            "environment.yml --yes`, activate it, then run `make lab VENV=$CONDA_PREFIX`."
            % (venv, problem)
        )
    return (
        "%s is not a working Python environment (%s) and holds other files, so it is left as it "
        "is: fix it, or choose another folder with `make lab VENV=...`." % (venv, problem)
    )


def main(argv):
    parser = argparse.ArgumentParser(description="Can this machine run the course?")
    parser.add_argument("--venv", help="the environment to check, made if missing")
    parser.add_argument("--python-from", default="file", help="make's $(origin PYTHON)")
    parser.add_argument("--torch", default="", help="TORCH=, a torch other than the pinned one")
    parser.add_argument("--torch-index", default="", help="TORCH_INDEX=, or CPU=1's index")
    parser.add_argument("--ignore-gpu", default="", help="IGNORE_GPU=1: go on despite the GPU")
    args = parser.parse_args(argv)
    problem = platform_problem(facts(), args.python_from)
    first_install = args.venv is not None and not os.path.exists(os.path.join(args.venv, STAMP))
    pinned = not args.torch and not args.torch_index
    if problem is None and first_install and pinned and facts()["system"] == "Linux":
        problem = gpu_problem(ignore=bool(args.ignore_gpu))
        note = cpu_note()
        if problem is None and note is not None:
            sys.stderr.write(note + "\n")
    if problem is None and first_install and args.torch_index:
        wheels = "PyTorch's CPU wheels" if args.torch_index == CPU_INDEX else "the wheels"
        print(
            "Installing torch %s and its torchvision from %s at %s, then the rest from PyPI."
            % (args.torch or "as pinned", wheels, args.torch_index)
        )
    if problem is None and args.venv is not None:
        problem = ensure_env(args.venv)
    if problem is not None:
        sys.stderr.write(problem + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
