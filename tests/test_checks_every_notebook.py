"""What every notebook's exercises share, tested once for all of them.

For each ``helpers/checks/nbNN.py``: every ``check_<name>`` accepts the reference solution
``solutions/nbNN.py::<name>`` and says "correct", treats a stub (a function whose body does
nothing) as "not answered yet", gives every odd answer below a verdict (``True`` or a
``CheckFailed`` with a good message, never a crash), and notebook ``NN_*.ipynb`` has the
exercise's layout: its stub in one cell, ``check_<name>(<name>);`` alone in the next. The right
answers in other spellings and the typical mistakes, which differ for every exercise, are tested
in ``test_checks_nbNN.py``.
"""

import importlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from exercise_answers import assert_good_message
from torch import nn

from helpers.checks import CheckBug, CheckFailed

ROOT = Path(__file__).resolve().parent.parent
CHECK_MODULES = sorted(path.stem for path in (ROOT / "helpers" / "checks").glob("nb[0-9][0-9].py"))


def _exercises():
    for module_name in CHECK_MODULES:
        module = importlib.import_module(f"helpers.checks.{module_name}")
        for name in module.__all__:
            if name.startswith("check_"):
                yield pytest.param(
                    module_name, name.removeprefix("check_"), id=f"{module_name}.{name}"
                )


EXERCISES = list(_exercises())


def _check(module_name, exercise):
    return getattr(importlib.import_module(f"helpers.checks.{module_name}"), f"check_{exercise}")


def _notebook(module_name):
    number = module_name.removeprefix("nb")
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    return path.name, json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_every_notebook_has_two_to_four_exercises():
    notebooks = sorted(path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [name.removeprefix("nb") for name in CHECK_MODULES] == notebooks, (
        "a notebook lacks its checks"
    )
    for module_name in CHECK_MODULES:
        count = sum(1 for param in EXERCISES if param.values[0] == module_name)
        assert 2 <= count <= 4, f"helpers.checks.{module_name} has {count} exercises"


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_the_reference_solution_passes(module_name, exercise, capsys):
    solution = importlib.import_module(f"solutions.{module_name}")
    assert _check(module_name, exercise)(getattr(solution, exercise)) is True
    assert capsys.readouterr().out.startswith("correct: ")


def _stub(*args, **kwargs):
    """A stub as the notebooks have them."""
    # your code here


def _ellipsis_stub(*args, **kwargs): ...


@pytest.mark.parametrize(
    "stub", [_stub, _ellipsis_stub, lambda *args, **kwargs: None], ids=["doc", "...", "lambda"]
)
@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_a_stub_is_not_answered_yet(module_name, exercise, stub, capsys):
    check = _check(module_name, exercise)
    assert check(stub) is False
    out = capsys.readouterr().out
    assert out == f"not answered yet: {check.task}\n"


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_the_task_restates_the_exercise_without_its_solution(module_name, exercise):
    task = _check(module_name, exercise).task
    assert task.startswith(f"write {exercise}(")
    said = task.replace(exercise, "")  # the exercise's own name may hold a word (accumulated_step)
    for spelled_out in ("torch.", "np.", "=", "step", "then"):
        assert spelled_out not in said, f"{exercise}: the task spells out {spelled_out!r}: {task}"
    assert len(task) <= 200


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_the_check_refuses_what_is_not_a_function(module_name, exercise):
    check = _check(module_name, exercise)
    for given in (None, 3, "noise", torch.zeros(2)):
        with pytest.raises(CheckFailed) as caught:
            check(given)
        assert_good_message(caught.value)
        assert f"check_{exercise}({exercise})" in caught.value.sentence


def _raises(error):
    def answer(*args, **kwargs):
        raise error

    return answer


def _forgot_return(*args, **kwargs):
    _ = args


def _endless(*args, **kwargs):
    return itertools.count()


# Answers no exercise expects: each check must give them a verdict, never crash on them.
ODD_ANSWERS = {
    "forgot return": _forgot_return,
    "zero": lambda *a, **k: 0,
    "bool": lambda *a, **k: True,
    "nan": lambda *a, **k: float("nan"),
    "string": lambda *a, **k: "answer",
    "empty list": lambda *a, **k: [],
    "list of None": lambda *a, **k: [None],
    "pair of None": lambda *a, **k: (None, None),
    "nested lists": lambda *a, **k: [[1, 2], [3]],
    "empty dict": lambda *a, **k: {},
    "dict": lambda *a, **k: {"a": 1, 2: "b"},
    "object": lambda *a, **k: object(),
    "scalar tensor": lambda *a, **k: torch.tensor(1.0),
    "empty tensor": lambda *a, **k: torch.zeros(0),
    "meta tensor": lambda *a, **k: torch.zeros(3, device="meta"),
    "pair of meta tensors": lambda *a, **k: (
        torch.zeros(2, device="meta"),
        torch.zeros(2, device="meta"),
    ),
    "array": lambda *a, **k: np.zeros(3),
    "its arguments": lambda *a, **k: a,
    "its first argument": lambda *a, **k: a[0] if a else None,
    "a generator": lambda *a, **k: (x for x in range(3)),
    "endless": _endless,
    "a method": lambda *a, **k: torch.zeros(2).cuda,
    "a module": lambda *a, **k: nn.Linear(2, 2),
    "a class": lambda *a, **k: nn.Linear,
    "tensors": lambda *a, **k: [torch.zeros(2)] * 3,
    "ValueError": _raises(ValueError("bad")),
    "KeyError": _raises(KeyError("key")),
    "CUDA error": _raises(RuntimeError("CUDA error: out of memory")),
    "exit": _raises(SystemExit(1)),
    "NotImplementedError": _raises(NotImplementedError("meta")),
}


@pytest.mark.parametrize("answer", list(ODD_ANSWERS.values()), ids=list(ODD_ANSWERS))
@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_no_answer_crashes_a_check(module_name, exercise, answer):
    try:
        verdict = _check(module_name, exercise)(answer)
    except CheckBug as bug:
        pytest.fail(f"the check crashed: {bug} (caused by {bug.__cause__!r})")
    except CheckFailed as error:
        assert_good_message(error)
    else:
        assert verdict is True  # an odd answer that is right after all


def test_every_exercise_has_its_layout_in_the_notebook():
    """After "## Try it yourself" and the cell that imports the checks: per exercise a text cell,
    the stub alone in its cell, and ``check_<name>(<name>);`` alone in the next (';': no stray
    Out[..])."""
    for module_name in CHECK_MODULES:
        name, cells = _notebook(module_name)
        sources = ["".join(c["source"]).strip() for c in cells]
        start = next(i for i, source in enumerate(sources) if "## Try it yourself" in source)
        imports = sources[start + 1]
        assert f"from helpers.checks.{module_name} import" in imports, name
        exercises = [e for m, e in (p.values for p in EXERCISES) if m == module_name]
        for exercise in exercises:
            stubs = [i for i, source in enumerate(sources) if source.startswith(f"def {exercise}(")]
            assert len(stubs) == 1, (
                f"{name} should have one cell that starts with `def {exercise}(`"
            )
            (i,) = stubs
            assert "\ndef " not in sources[i] and "check_" not in sources[i], (
                f"{name}: {exercise} shares a cell"
            )
            assert sources[i + 1] == f"check_{exercise}({exercise});", (
                f"{name}: the cell after {exercise}"
            )
            assert f"check_{exercise}" in imports, f"{name} does not import check_{exercise}"
            assert cells[i - 1]["cell_type"] == "markdown", (
                f"{name}: {exercise} has no text before it"
            )
        stubs = sorted(
            next(i for i, s in enumerate(sources) if s.startswith(f"def {e}(")) for e in exercises
        )
        assert stubs == [start + 3 * n for n in range(1, len(stubs) + 1)], (
            f"{name}: exercises out of layout"
        )


def test_a_wrong_answer_in_a_notebook_shows_one_sentence_and_fails_the_cell(tmp_path):
    """In a Jupyter kernel, a CheckFailed is an error output of the sentence alone, not a
    traceback; a stub in a cell is read from the cell's source and is not answered yet."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("from helpers.checks.nb00 import check_move_all"),
        nbformat.v4.new_code_cell("def move_all(tensors, device):\n    return tensors"),
        nbformat.v4.new_code_cell("check_move_all(move_all);"),
        nbformat.v4.new_code_cell("print('the notebook goes on')"),
        nbformat.v4.new_code_cell('def move_all(tensors, device):\n    """Doc."""\n    # here'),
        nbformat.v4.new_code_cell("check_move_all(move_all);"),
    ]
    client = nbclient.NotebookClient(
        notebook, allow_errors=True, timeout=120, kernel_name="python3"
    )
    client.execute(cwd=str(tmp_path))
    (error,) = notebook.cells[2].outputs
    assert error["output_type"] == "error" and error["ename"] == "CheckFailed"
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error["traceback"]))
    assert text.startswith("CheckFailed: tensor 0 was not moved")
    assert "Traceback" not in text and "nb00.py" not in text and "def " not in text
    assert notebook.cells[3].outputs[0]["text"] == "the notebook goes on\n"
    assert notebook.cells[5].outputs[0]["text"].startswith("not answered yet: write move_all(")


def test_the_ipython_handler_leaves_other_handlers_alone():
    from helpers.checks import _brief_traceback, show_failures_briefly

    class Shell:
        custom_exceptions = (KeyError,)
        shown = None

        def set_custom_exc(self, exc_tuple, handler):
            raise AssertionError("replaced someone else's handler")

        def _showtraceback(self, etype, value, stb):
            self.shown = stb

    shell = Shell()
    import IPython

    original = IPython.get_ipython
    IPython.get_ipython = lambda: shell
    try:
        show_failures_briefly()
    finally:
        IPython.get_ipython = original
    stb = _brief_traceback(
        shell, CheckFailed, CheckFailed("a mistake", "a fix", ["line 1 of f: x"]), None
    )
    assert shell.shown == stb and "a mistake: a fix." in stb[0] and "line 1 of f: x" in stb[1]
