"""Can this machine run the course? Says what to do, in one sentence, before anything downloads.

`make setup` (and so `make lab` and `make test`) runs it with the Python it chose, before it installs:

    python3 scripts/check_platform.py --venv .venv

It stops (exit 1, one sentence on stderr) on Python older than 3.11, on macOS older than 14 or on an
Intel Mac (PyPI has no torch 2.15.0 for them), and on native Windows (use WSL2). With --venv DIR it
then makes sure DIR holds a working environment: a missing one is created with this Python; one that
an earlier failed attempt left broken (no bin/python, a python that does not run, no working pip) is
removed and created again. An environment it did not make (a conda env, a folder with other files)
is never removed: it says what is wrong with it instead.

Standard library only, and it must parse on any Python 3 (no f-strings), so that an old Python gets
the sentence and not a SyntaxError.

Test only: COURSE_PLATFORM_FACTS overrides the facts read from this machine, as space-separated
key=value pairs: python=3.10.12 system=Darwin machine=x86_64 macos=13.6 (any subset).
"""

# ruff: noqa: UP031

import os
import platform
import shutil
import subprocess
import sys

MIN_PYTHON = (3, 11)
MIN_MACOS = 14
WSL = "https://learn.microsoft.com/windows/wsl/install"
SELECTOR = "https://pytorch.org/get-started/locally/"
STAMP = ".installed"  # the Makefile's stamp inside the environment
# What `python -m venv` makes (.gitignore since 3.13), what packages add (etc/jupyter, share), and the
# Makefile's stamp: a folder holding nothing else is safe to remove.
VENV_ENTRIES = {"bin", "lib", "lib64", "include", "etc", "share", "pyvenv.cfg", ".gitignore", STAMP}


def facts():
    """The platform facts the checks read, with COURSE_PLATFORM_FACTS (tests only) laid over them."""
    found = {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "system": platform.system(),
        "machine": platform.machine(),
        "macos": platform.mac_ver()[0],
    }
    for pair in os.environ.get("COURSE_PLATFORM_FACTS", "").split():
        key, _, value = pair.partition("=")
        if key in found:
            found[key] = value
    return found


def version_tuple(text):
    parts = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def platform_problem(f):
    """One sentence saying what to do, or None when the course can install here."""
    system = f["system"]
    if system == "Windows" or system.upper().startswith(("MSYS", "MINGW", "CYGWIN")):
        return (
            "Native Windows (%s) cannot run the course: the Makefile expects Linux or macOS, and PyPI's "
            "Windows torch has no CUDA; install WSL2 (%s) and run `make lab` inside it."
            % (system, WSL)
        )
    if system == "Darwin":
        if f["machine"] not in ("arm64", "aarch64"):
            return (
                "This Mac runs %s code (an Intel Mac, or a Python under Rosetta), and torch 2.15.0 exists "
                "only for Apple silicon: use an arm64 Python on an Apple-silicon Mac with macOS 14 or "
                "newer, Colab, or Linux." % (f["machine"] or "non-arm64")
            )
        if version_tuple(f["macos"] or "0")[0] < MIN_MACOS:
            return (
                "This is macOS %s, and torch 2.15.0 needs macOS 14 (Sonoma) or newer: update macOS, "
                "or use Colab or Linux." % (f["macos"] or "of unknown version")
            )
    if version_tuple(f["python"])[:2] < MIN_PYTHON:
        if system == "Darwin":
            how = "e.g. `brew install python@3.12` or the installer from python.org"
        else:
            how = "e.g. `sudo apt install python3.11 python3.11-venv`"
        return (
            "%s is Python %s, and the course needs Python 3.11 or newer: install one (%s), then run "
            "`make lab` again, which picks python3.13, 3.12 or 3.11."
            % (sys.executable, f["python"], how)
        )
    return None


def gpu_warning():
    """A warning when an NVIDIA GPU is here that the pinned CUDA 13 torch cannot use, else None."""
    if facts()["system"] != "Linux" or shutil.which("nvidia-smi") is None:
        return None
    # compute_cap is unknown to drivers older than about R510, which are too old anyway.
    for fields in ("name,driver_version,compute_cap", "name,driver_version"):
        query = ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader"]
        try:
            out = subprocess.check_output(query, stderr=subprocess.DEVNULL, timeout=20).decode()
            break
        except Exception:
            out = ""
    for line in out.strip().splitlines():
        values = [value.strip() for value in line.split(",")] + ["unknown"]
        name, driver, capability = values[:3]
        old_card = capability != "unknown" and version_tuple(capability) < (7, 5)
        if version_tuple(driver)[0] < 580 or old_card:
            return (
                "Warning: the pinned torch is built for CUDA 13, which needs an NVIDIA driver R580 or newer "
                "and a Turing or newer GPU; this %s (driver %s, compute capability %s) will not be used, "
                "and the course will run on the CPU. To use it, first install a torch for your CUDA from "
                "%s (README.md, 'What a machine needs')." % (name, driver, capability, SELECTOR)
            )
    return None


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
        return "it has no working pip"
    return None


def ours(venv):
    """Whether `venv` holds nothing but what `python -m venv` and the Makefile make (safe to remove)."""
    return all(entry in VENV_ENTRIES for entry in os.listdir(venv))


def create(venv):
    """Create `venv` with this Python; on failure remove the half-made folder and say what to install."""
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
        "%s is not a working Python environment (%s) and holds other files, so it is left as it is: "
        "fix it, or choose another folder with `make lab VENV=...`." % (venv, problem)
    )


def main(argv):
    venv = None
    if len(argv) == 2 and argv[0] == "--venv":
        venv = argv[1]
    elif argv:
        sys.stderr.write("usage: check_platform.py [--venv DIR]\n")
        return 2
    problem = platform_problem(facts())
    if problem is None and venv is not None:
        if not os.path.exists(os.path.join(venv, STAMP)):
            warning = gpu_warning()
            if warning:
                sys.stderr.write(warning + "\n")
        problem = ensure_env(venv)
    if problem is not None:
        sys.stderr.write(problem + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
