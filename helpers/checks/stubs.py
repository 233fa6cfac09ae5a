"""Whether a learner's function is still the stub of its exercise, read from its source code.

A stub does nothing: its body is a docstring, a comment, ``pass``, ``...``, ``return None`` or
``raise NotImplementedError``; a lambda's body is ``None`` or ``...``. The check reads the source
with ``ast``, whose node types stay the same from one Python version to the next, unlike the
bytecode. The source comes from ``linecache``, where Python (and IPython, for a notebook cell)
keeps the lines a function was compiled from.
"""

import ast
import inspect
import linecache
import types
from typing import Any

__all__ = ["is_stub"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def is_stub(function: Any) -> bool:
    """Whether ``function`` does nothing, as the stub of an exercise does (see the module)."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE):
        return False
    node = _definition(code)
    if node is None:
        return False
    if isinstance(node, ast.Lambda):
        return _does_nothing(node.body)
    return all(_is_empty_statement(statement) for statement in node.body)


def _definition(code: types.CodeType) -> ast.AST | None:
    """The ``def`` or ``lambda`` that ``code`` was compiled from, or None if it cannot be told."""
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    found = [node for node in ast.walk(tree) if _starts_at(node, code)]
    if len(found) == 1:
        return found[0]
    return _by_position(found, code)


def _starts_at(node: ast.AST, code: types.CodeType) -> bool:
    """Whether ``node`` is a function whose code starts at ``code``'s first line, with its name."""
    if not isinstance(node, _FUNCTIONS):
        return False
    first = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
    name = "<lambda>" if isinstance(node, ast.Lambda) else node.name
    same_place = first == code.co_firstlineno and name == code.co_name
    return same_place and _argument_names(node.args) == _argument_names_of(code)


def _argument_names(arguments: ast.arguments) -> list[str]:
    named = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    starred = [arguments.vararg, arguments.kwarg]
    return [a.arg for a in named] + [a.arg for a in starred if a is not None]


def _argument_names_of(code: types.CodeType) -> list[str]:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])


def _by_position(found: list[ast.AST], code: types.CodeType) -> ast.AST | None:
    """Of several functions on one line (lambdas), the innermost one that spans ``code``."""
    positions = [
        (line, column)
        for line, end_line, column, end_column in code.co_positions()
        if None not in (line, column) and (line, column) != (end_line, end_column)
    ]  # a span of no width belongs to no expression
    if not positions:
        return _constant_lambda(found, code)
    holding = [node for node in found if all(_spans(node, where) for where in positions)]
    if not holding:
        return None
    return min(holding, key=_size)


def _constant_lambda(found: list[ast.AST], code: types.CodeType) -> ast.AST | None:
    """A lambda that returns a constant has no position in early 3.12 releases (CPython issue
    120722; 3.11 and 3.13 give one): match the constant instead."""
    constants = [c for c in code.co_consts if c is not None] or [None]
    for node in found:
        body = getattr(node, "body", None)
        if isinstance(body, ast.Constant) and body.value is constants[0] and len(constants) == 1:
            return node
    return None


def _spans(node: ast.AST, where: tuple[int, int]) -> bool:
    return (node.lineno, node.col_offset) <= where <= (node.end_lineno, node.end_col_offset)


def _size(node: ast.AST) -> tuple[int, int]:
    return (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset)


def _does_nothing(expression: ast.expr) -> bool:
    """``None`` or ``...``."""
    return isinstance(expression, ast.Constant) and expression.value in (None, Ellipsis)


def _is_empty_statement(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return statement.value.value is Ellipsis or isinstance(statement.value.value, str)
    if isinstance(statement, ast.Return):
        return statement.value is None or _does_nothing(statement.value)
    if isinstance(statement, ast.Raise):
        return _names_not_implemented(statement.exc)
    return False


def _names_not_implemented(expression: ast.expr | None) -> bool:
    """``NotImplementedError`` or ``NotImplementedError(...)``."""
    if isinstance(expression, ast.Call):
        expression = expression.func
    return isinstance(expression, ast.Name) and expression.id == "NotImplementedError"
