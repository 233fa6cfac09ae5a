"""helpers.fresh_process: code run in a new Python process, and what it reports."""

import pytest

from helpers import fresh_process
from helpers.fresh_process import gpus_in_fresh_processes, run_script


def test_run_script_reports_the_error_its_line_and_what_was_printed_before():
    run = run_script(
        "print('before')\ndef pick(i):\n    return [1, 2][i]\n\npick(5)\nprint('after')\n"
    )
    assert (run.returncode, run.stdout) == (1, "before\n")
    assert run.error == "IndexError: list index out of range"
    assert run.error_line == run.line_of("[1, 2][i]") == 3  # the deepest line of the script
    assert run.line(run.error_line) == "return [1, 2][i]"
    with pytest.raises(ValueError):  # not exactly one line has it
        run.line_of("print(")


def test_run_script_passes_the_environment_and_reports_success():
    run = run_script("import os\nprint(os.environ['COURSE_TEST'])", env={"COURSE_TEST": "42"})
    assert (run.returncode, run.stdout, run.error, run.error_line, run.line(None)) == (
        0,
        "42\n",
        None,
        None,
        "",
    )


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: run_script(["print(1)"]), TypeError, "run_script: code is the script's text"),
        (lambda: run_script("1", env={"A": 1}), TypeError, "env is .*dict of strings"),
        (lambda: run_script("1", env="A=1"), TypeError, "env is .*dict of strings"),
        (lambda: gpus_in_fresh_processes({}), TypeError, "cases is a dict"),
        (lambda: gpus_in_fresh_processes([("a", {})]), TypeError, "cases is a dict"),
        (lambda: gpus_in_fresh_processes({"a": "nothing"}), TypeError, "names to dicts"),
        (lambda: gpus_in_fresh_processes({"a": {"envs": {}}}), TypeError, r"\['envs'\]"),
        (lambda: gpus_in_fresh_processes({"a": {"env": "X="}}), TypeError, "'a''s env"),
        (
            lambda: gpus_in_fresh_processes({"a": {}, "b": {"set_in_code": {"X": 0}}}),
            TypeError,
            "'b''s set_in_code",
        ),
        (
            lambda: gpus_in_fresh_processes({"a": {"after_is_available": "yes"}}),
            TypeError,
            "after_is_available must be True or False",
        ),
    ],
)
def test_wrong_arguments_are_refused_before_any_process_starts(monkeypatch, call, error, words):
    monkeypatch.setattr(fresh_process, "Popen", lambda *a, **k: pytest.fail("a process started"))
    with pytest.raises(error, match=words):
        call()
