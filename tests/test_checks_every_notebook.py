"""What every notebook's exercises share, tested once for all of them.

For each ``helpers/checks/nbNN.py``: every ``check_<name>`` accepts the reference solution
``solutions/nbNN.py::<name>`` and says "correct", treats a stub (a function that returns ``None``)
as "not answered yet", and notebook ``NN_*.ipynb`` defines the stub ``<name>`` and calls
``check_<name>(<name>)``. The wrong answers, which differ for every exercise, are tested in
``test_checks_nbNN.py``.
"""

import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK_MODULES = sorted(path.stem for path in (ROOT / "helpers" / "checks").glob("nb[0-9][0-9].py"))


def _exercises():
    for module_name in CHECK_MODULES:
        module = importlib.import_module(f"helpers.checks.{module_name}")
        for name in module.__all__:
            if name.startswith("check_"):
                yield pytest.param(module_name, name.removeprefix("check_"), id=f"{module_name}.{name}")


EXERCISES = list(_exercises())


def _check(module_name, exercise):
    return getattr(importlib.import_module(f"helpers.checks.{module_name}"), f"check_{exercise}")


def _notebook_code(module_name):
    number = module_name.removeprefix("nb")
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return path.name, "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_every_notebook_has_two_to_four_exercises():
    notebooks = sorted(path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [name.removeprefix("nb") for name in CHECK_MODULES] == notebooks, "a notebook lacks its checks"
    for module_name in CHECK_MODULES:
        count = sum(1 for param in EXERCISES if param.values[0] == module_name)
        assert 2 <= count <= 4, f"helpers.checks.{module_name} has {count} exercises"


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_the_reference_solution_passes(module_name, exercise, capsys):
    solution = importlib.import_module(f"solutions.{module_name}")
    assert _check(module_name, exercise)(getattr(solution, exercise)) is True
    assert capsys.readouterr().out.startswith("correct: ")


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_a_stub_is_not_answered_yet(module_name, exercise, capsys):
    def stub(*args, **kwargs):
        return None

    assert _check(module_name, exercise)(stub) is False
    assert capsys.readouterr().out.startswith("not answered yet: ")


@pytest.mark.parametrize(("module_name", "exercise"), EXERCISES)
def test_the_notebook_has_the_stub_and_runs_the_check(module_name, exercise):
    name, code = _notebook_code(module_name)
    assert re.search(rf"^def {exercise}\(", code, re.MULTILINE), f"{name} has no stub `def {exercise}(`"
    assert f"check_{exercise}({exercise})" in code, f"{name} does not run check_{exercise}({exercise})"
