"""The GitHub workflows: scripts/check_workflows.py passes them, and fails a broken copy of each
kind (so that the check can fail), with no network; the CI workflow runs what CONTRIBUTING and
the README say it runs (triggers, the Python matrix, the macOS job on the CPU)."""

import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from scripts import check_platform, check_workflows

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows" / "test.yml"
needs_shellcheck = pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="needs shellcheck (apt-get install shellcheck)"
)


def _load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))  # YAML 1.2: `on` is a string


def _broken_copy(tmp_path: Path, old: str, new: str) -> Path:
    text = CI.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not once in {CI.name}: update this test"
    copy = tmp_path / "test.yml"
    copy.write_text(text.replace(old, new), encoding="utf-8")
    return copy


def _schema_check(path: Path) -> int:
    return check_workflows.run_check_jsonschema(
        ["--builtin-schema", check_workflows.SCHEMA, str(path)]
    )


def _shellcheck(path: Path) -> str:
    problems = check_workflows.shell_problems(path, shutil.which("shellcheck"))
    return "\n".join(problems)


def test_every_workflow_passes_the_offline_checks():
    """As `make test` runs it: every workflow file, each check."""
    assert CI in check_workflows.workflow_files()
    result = subprocess.run(
        [sys.executable, "scripts/check_workflows.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_fails_on_a_misspelt_key(tmp_path, capsys):
    broken = _broken_copy(
        tmp_path, "    timeout-minutes: 120\n    strategy:", "    timeout: 120\n    strategy:"
    )
    assert _schema_check(broken) == 1
    assert "timeout" in capsys.readouterr().out


def test_the_schema_check_fails_on_a_trigger_github_does_not_know(tmp_path, capsys):
    broken = _broken_copy(tmp_path, "  workflow_dispatch:\n", "  on_every_push:\n")
    assert _schema_check(broken) == 1
    assert "on_every_push" in capsys.readouterr().out


@needs_shellcheck
def test_shellcheck_fails_on_a_bad_run_step(tmp_path):
    assert _shellcheck(CI) == ""
    bad_line = 'if [ -n "$CI" ]; then echo CI'  # no `fi`
    broken = _broken_copy(
        tmp_path, "          df -h /\n          sudo", f"          {bad_line}\n          sudo"
    )
    problems = _shellcheck(broken)
    assert "job linux, step 'Free disk space'" in problems
    assert re.search(r"SC\d{4}", problems), problems


@needs_shellcheck
def test_shellcheck_reads_expressions_as_github_leaves_them(tmp_path):
    """`${{ ... }}` is replaced before the shell runs: shellcheck sees a placeholder, not `${`."""
    steps = check_workflows.run_steps(_load(CI))
    assert any("${{" in script for _, _, _, script in steps), "no run: step uses an expression"
    unquoted = _broken_copy(
        tmp_path,
        'make test PYTHON="${{ steps.python.outputs.python-path }}"\n        env:',
        "make test PYTHON=${{ steps.python.outputs.python-path }} $EXTRA\n        env:",
    )
    problems = _shellcheck(unquoted)
    assert "job linux, step 'make test'" in problems
    assert re.findall(r"SC\d{4}", problems) == ["SC2086"]  # $EXTRA unquoted; the placeholder passes


def test_without_shellcheck_it_says_so_and_fails_only_when_required(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no shellcheck on PATH
    monkeypatch.delenv(check_workflows.REQUIRE_SHELLCHECK, raising=False)
    assert check_workflows.check_shells([CI]) is True
    assert "shellcheck" in capsys.readouterr().out
    monkeypatch.setenv(check_workflows.REQUIRE_SHELLCHECK, "1")
    assert check_workflows.check_shells([CI]) is False
    assert "apt-get install shellcheck" in capsys.readouterr().err


def test_the_schema_check_makes_no_network_call():
    """The guard refuses connections, so a schema that must be downloaded fails under it."""
    with check_workflows.no_network(), pytest.raises(OSError, match=check_workflows.NO_NETWORK):
        urllib.request.urlopen("https://json.schemastore.org/github-workflow.json", timeout=5)
    remote = ["--schemafile", "https://schemas.invalid/github-workflow.json", "--no-cache", str(CI)]
    assert check_workflows.run_check_jsonschema(remote) != 0
    assert _schema_check(CI) == 0


def test_ci_runs_on_branches_pull_requests_a_schedule_and_by_hand_never_on_tags():
    on = _load(CI)["on"]
    assert set(on) == {"push", "pull_request", "schedule", "workflow_dispatch"}
    assert set(on["push"]) == {"branches"} and on["push"]["branches"] == ["**"]  # no tag filter
    assert on["pull_request"] is None  # every pull request
    assert [len(entry["cron"].split()) for entry in on["schedule"]] == [5]


def test_ci_cancels_the_superseded_run_of_the_same_ref():
    concurrency = _load(CI)["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    assert "github.ref" in concurrency["group"] and "github.workflow" in concurrency["group"]


def test_linux_runs_make_test_on_the_oldest_and_newest_python():
    job = _load(CI)["jobs"]["linux"]
    picked = re.search(r"for p in ([^;]+);", (ROOT / "Makefile").read_text()).group(1).split()
    newest = picked[0].removeprefix("python")
    oldest = ".".join(str(part) for part in check_platform.MIN_PYTHON)
    assert job["strategy"]["matrix"]["python-version"] == [oldest, newest]
    assert job["strategy"]["fail-fast"] is False
    setup = [
        step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python")
    ]
    assert [step["with"]["python-version"] for step in setup] == ["${{ matrix.python-version }}"]
    runs = [step for step in job["steps"] if step.get("run", "").startswith("make test")]
    assert len(runs) == 1
    required = {"COURSE_REQUIRE_ACTIONLINT", "COURSE_REQUIRE_BROWSER", "COURSE_REQUIRE_SHELLCHECK"}
    assert required <= set(runs[0]["env"])


def test_macos_runs_every_notebook_on_the_cpu_with_the_course_conftest():
    job = _load(CI)["jobs"]["macos"]
    assert re.fullmatch(r"macos-(1[4-9]|latest)", job["runs-on"])  # arm64; macos-13 is Intel
    pytest_steps = [step for step in job["steps"] if "-m pytest" in step.get("run", "")]
    assert len(pytest_steps) == 1
    (step,) = pytest_steps
    assert step["env"]["COURSE_DEVICE"] == "cpu" and step["env"]["COURSE_QUICK"] == "1"
    arguments = shlex.split(step["run"])
    assert arguments[arguments.index("-p") + 1] == "tests.conftest"
    assert "notebooks" in arguments and "--nbval-lax" in arguments
