"""NexusRaven call programs: Python call text with nested calls, read the way NexusRaven's stubs record it.

NexusRaven-V2 scores a call by running it against stub functions that record their arguments and return
``None`` (its evaluation notebooks, ``nexusflowai/NexusRaven-V2`` ``evaluation_notebook/``). A nested gold such as
``summarize_cvecpes(searchCPE(keywordSearch='Django'))`` therefore records ``searchCPE`` first, then
``summarize_cvecpes`` with an argument whose value is ``None``. ``flatten_calls`` reads a text into that list of
calls without running anything: every call in the order Python evaluates it (arguments left to right, an inner
call before the call it is an argument of), each nested call's value ``None`` in its place (so ``[g(), h()]``
as an argument is ``[None, None]``). Statements are calls, ``name = call`` or a list / tuple of calls (the
``[f(...), g(...)]`` answers ToolGT's models write); other values must be literals (``train.base.pysyntax``).
Strict Python: the near-Python repairs of ``pysyntax``'s ``lenient`` mode are not applied (the stubs' ``exec``
would not apply them either).
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from train.base.pysyntax import MAX_SOURCE_CHARS, PyCall, PySyntaxError, dotted_name, literal


def flatten_calls(text: Any) -> list[PyCall]:
    """Every call ``text`` makes, in evaluation order, nested calls' values ``None``; PySyntaxError says why not."""
    if not isinstance(text, str):
        raise PySyntaxError(f"expected a string of Python, got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise PySyntaxError(f"call string of {len(text)} characters exceeds {MAX_SOURCE_CHARS}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            module = ast.parse(text.strip(), mode="exec")
    except SyntaxError as err:
        raise PySyntaxError(f"not valid Python: {err.msg} at line {err.lineno} column {err.offset}") from None
    except (RecursionError, MemoryError, ValueError):
        raise PySyntaxError("not valid Python: nested too deeply or contains NUL") from None
    calls: list[PyCall] = []
    for statement in module.body:
        node = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
        if isinstance(statement, ast.Assign) and [type(t) for t in statement.targets] != [ast.Name]:
            node = None  # only "name = call"
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        if not items or not all(isinstance(item, ast.Call) for item in items):
            raise PySyntaxError(f"line {statement.lineno}: expected a call, got {ast.unparse(statement)[:60]!r}")
        try:
            for item in items:
                _record(item, calls)
        except RecursionError:
            raise PySyntaxError(f"line {statement.lineno}: calls nested too deeply") from None
    return calls


def _record(node: ast.Call, calls: list[PyCall]) -> None:
    """Append ``node``'s inner calls, then ``node`` itself, to ``calls``."""
    name = dotted_name(node.func)
    args = []
    for index, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            raise PySyntaxError(f"{name}: *args is not a literal argument")
        args.append(_value(arg, calls, f"{name}: positional argument {index}"))
    kwargs: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise PySyntaxError(f"{name}: **kwargs is not a literal argument")
        if kw.arg in kwargs:
            raise PySyntaxError(f"{name}: argument {kw.arg!r} given twice")
        kwargs[kw.arg] = _value(kw.value, calls, f"{name}: argument {kw.arg!r}")
    calls.append(PyCall(name=name, args=args, kwargs=kwargs))


def _value(node: ast.expr, calls: list[PyCall], where: str) -> Any:
    """A literal argument, with any call inside it recorded first and standing for ``None``."""
    if isinstance(node, ast.Call):
        _record(node, calls)
        return None  # what the stub returns
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, calls, where) for item in node.elts]
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        out = {}
        for key_node, value_node in zip(node.keys, node.values):
            key = _literal(key_node, where)
            if not isinstance(key, str):
                raise PySyntaxError(f"{where}: dict key {ast.unparse(key_node)[:60]} is not a string")
            out[key] = _value(value_node, calls, where)
        return out
    return _literal(node, where)


def _literal(node: ast.expr, where: str) -> Any:
    try:
        return literal(node)
    except PySyntaxError as err:
        raise PySyntaxError(f"{where}: {err}") from None


__all__ = ["flatten_calls"]
