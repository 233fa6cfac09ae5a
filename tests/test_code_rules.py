"""The rules of CONTRIBUTING.md that ruff does not check: no walrus, no string multiplied by a
comparison, no tuple assignment of separate values (``a, b = 1, 2``), and ``# fmt: skip`` only on
a table of data."""

import ast
import io
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tables of data, which the formatter would spread over a line per number.
DATA_TABLES = {"benchmarks/calibrate_data.py": ["NOTEBOOKS"]}


def _python_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [name for name in listed.stdout.split() if (ROOT / name).is_file()]


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_truth(node: ast.AST) -> bool:
    negation = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    return negation or isinstance(node, ast.Compare | ast.BoolOp)


def _broken(node: ast.AST) -> str | None:
    """The rule ``node`` breaks, or None."""
    if isinstance(node, ast.NamedExpr):
        return "a walrus (:=): assign on a line of its own"
    product = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
    if product and _is_text(node.left) and _is_truth(node.right):
        return "a string multiplied by a truth value: write an if"
    if product and _is_text(node.right) and _is_truth(node.left):
        return "a string multiplied by a truth value: write an if"
    single = isinstance(node, ast.Assign) and len(node.targets) == 1
    pair = single and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
    if pair and not _each_updates_itself(node.targets[0], node.value):
        return "a tuple assignment (a, b = x, y): one assignment a line"
    return None


def _each_updates_itself(targets: ast.Tuple, values: ast.Tuple) -> bool:
    """``x, y = x.to(device), y.to(device)``: the tutorials' one line that moves a batch, each name
    given a new value made from itself; not separate values packed into one line."""
    if len(targets.elts) != len(values.elts):
        return False
    for target, value in zip(targets.elts, values.elts, strict=True):
        if not isinstance(target, ast.Name):
            return False
        names = {node.id for node in ast.walk(value) if isinstance(node, ast.Name)}
        if target.id not in names:
            return False
    return True


def _data_table_lines(name: str, tree: ast.Module) -> set[int]:
    """The last lines of the tables of data in ``name``, where ``# fmt: skip`` may stand."""
    lines = set()
    tables = DATA_TABLES.get(name, [])
    for node in tree.body:
        named = isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        if named and node.targets[0].id in tables:
            lines.add(node.end_lineno)
    return lines


def _breaches(name: str) -> list[str]:
    text = (ROOT / name).read_text(encoding="utf-8")
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        rule = _broken(node)
        if rule:
            found.append(f"{name}:{node.lineno}: {rule}")
    tables = _data_table_lines(name, tree)
    for number, comment in _comments(text):
        if ("fmt: skip" in comment or "fmt: off" in comment) and number not in tables:
            found.append(f"{name}:{number}: # fmt: skip outside a table of data")
    return found


def _comments(text: str) -> list[tuple[int, str]]:
    """The comments of ``text`` and their line numbers (not strings that mention a comment)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def test_the_code_follows_the_rules_the_linter_cannot_check():
    breaches = [b for name in _python_files() for b in _breaches(name)]
    assert not breaches, "\n".join(breaches)


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("if (n := len(x)) > 2:\n    pass\n", "walrus"),
        ("hint = ' (GPU)' * ('gpu' in name)\n", "multiplied"),
        ("a, b = 1, []\n", "tuple assignment"),
        ("x = 1  # fmt: skip\n", "fmt: skip"),
    ],
)
def test_each_rule_finds_what_it_is_about(tmp_path, monkeypatch, code, rule):
    monkeypatch.setattr("test_code_rules.ROOT", tmp_path)
    (tmp_path / "example.py").write_text(code)
    assert any(rule in breach for breach in _breaches("example.py"))


def test_what_the_rules_allow():
    allowed = (
        "loss, right = step(x, y)\nfor a, b in pairs:\n    c = 'x' * 3\n"
        "inputs, targets = inputs.to(device), targets.to(device)\n"
    )
    assert all(_broken(node) is None for node in ast.walk(ast.parse(allowed)))
