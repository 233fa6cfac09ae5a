"""Check the GitHub workflows offline, as `make test` does: every file in ``.github/workflows``.

1. Each workflow against the GitHub-workflow schema that ``check-jsonschema`` ships with it
   (``--builtin-schema vendor.github-workflows``): a misspelt key, a trigger GitHub does not know,
   a value of the wrong type. The check runs with the network shut off in this process, so a
   schema that wanted to download anything would fail here instead of reaching out.
2. Each ``run:`` step's script with ``shellcheck``, where it is installed (Debian and Ubuntu:
   ``apt-get install shellcheck``), in the shell the step runs in. Each ``${{ ... }}`` expression
   is replaced by a placeholder of the same length, as actionlint does, since GitHub substitutes
   it before the shell starts. Without shellcheck this part is skipped with a note, unless
   ``COURSE_REQUIRE_SHELLCHECK`` is set (the GitHub workflow sets it).

actionlint checks more (expressions, action inputs), but it cannot be installed without reaching
GitHub; the GitHub workflow runs it.

    .venv/bin/python scripts/check_workflows.py                 # every workflow
    .venv/bin/python scripts/check_workflows.py path/to/ci.yml  # these files

Exit status 1 when a check fails; what failed is printed, with the file, the job and the step.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import check_jsonschema
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
SCHEMA = "vendor.github-workflows"
REQUIRE_SHELLCHECK = "COURSE_REQUIRE_SHELLCHECK"
NO_NETWORK = "check_workflows.py allows no network access"
# The shells shellcheck reads, as a step names them (`shell: bash`) or as the runner runs them.
SHELLCHECK_SHELLS = {"bash": "bash", "sh": "sh"}
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)


def workflow_files() -> list[Path]:
    """Every workflow GitHub reads: the .yml and .yaml files in .github/workflows."""
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Within it, opening a connection or looking up a host name raises OSError."""

    def refuse(*args, **kwargs):
        raise OSError(NO_NETWORK)

    saved = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.getaddrinfo = refuse
    try:
        yield
    finally:
        socket.socket.connect = saved[0]
        socket.socket.connect_ex = saved[1]
        socket.getaddrinfo = saved[2]


def run_check_jsonschema(arguments: list[str]) -> int:
    """check-jsonschema with ``arguments``, in this process, with no network; its exit status."""
    with no_network():
        try:
            check_jsonschema.main(arguments)
        except SystemExit as stop:  # click ends a command so, with its exit status
            if isinstance(stop.code, int):
                return stop.code
            return int(stop.code is not None)  # a message instead of a status: a failure
    return 0


def check_schema(files: list[Path]) -> bool:
    """Whether every file in ``files`` is a workflow as GitHub's schema describes one."""
    print(f"check-jsonschema --builtin-schema {SCHEMA} ({len(files)} files)", flush=True)
    status = run_check_jsonschema(["--builtin-schema", SCHEMA, *[str(f) for f in files]])
    return status == 0


def run_steps(workflow: dict) -> Iterator[tuple[str, str, str, str]]:
    """(job, step, shell, script) for each ``run:`` step of ``workflow``, as parsed YAML."""
    default_shell = _run_default(workflow)
    for job_id, job in (workflow.get("jobs") or {}).items():
        job_shell = _run_default(job) or default_shell
        windows = "windows" in str(job.get("runs-on", "")).lower()
        for number, step in enumerate(job.get("steps") or [], start=1):
            if "run" not in step:
                continue
            shell = step.get("shell") or job_shell or ("pwsh" if windows else "bash")
            name = step.get("name") or f"step {number}"
            yield job_id, name, str(shell), str(step["run"])


def _run_default(mapping: dict) -> str | None:
    return ((mapping.get("defaults") or {}).get("run") or {}).get("shell")


def shell_problems(path: Path, shellcheck: str) -> list[str]:
    """shellcheck's findings on each bash or sh ``run:`` step of the workflow at ``path``."""
    workflow = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    problems = []
    for job, step, shell, script in run_steps(workflow or {}):
        dialect = SHELLCHECK_SHELLS.get(shell.split()[0])
        if dialect is None:
            continue  # pwsh, python, cmd: not shell scripts
        placeholders = EXPRESSION.sub(lambda found: "_" * len(found.group()), script)
        result = subprocess.run(
            [shellcheck, f"--shell={dialect}", "--format=gcc", "-"],
            input=placeholders,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
            findings = result.stdout.replace("-:", "line ") + result.stderr
            problems.append(f"{where}: job {job}, step {step!r}:\n{findings}")
    return problems


def check_shells(files: list[Path]) -> bool:
    """Whether shellcheck finds nothing in the ``run:`` steps (True, with a note, without it)."""
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get(REQUIRE_SHELLCHECK):
            print(
                f"{REQUIRE_SHELLCHECK} is set, and shellcheck is not on PATH: "
                "install it (apt-get install shellcheck).",
                file=sys.stderr,
            )
            return False
        print("shellcheck not found: the run: steps are not checked (apt-get install shellcheck).")
        return True
    print(f"shellcheck on the run: steps ({len(files)} files)", flush=True)
    problems = [problem for path in files for problem in shell_problems(path, shellcheck)]
    for problem in problems:
        print(problem, file=sys.stderr)
    return not problems


def main(arguments: list[str]) -> int:
    files = [Path(argument).resolve() for argument in arguments] or workflow_files()
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        print(f"check_workflows.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not files:
        print(f"check_workflows.py: no workflow in {WORKFLOWS}", file=sys.stderr)
        return 2
    schema_ok = check_schema(files)
    shells_ok = check_shells(files)
    return 0 if schema_ok and shells_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
