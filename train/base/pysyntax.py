"""Python call syntax found inside datasets, read with ``ast`` and never executed.

Benchmarks write gold calls as Python source: BFCL's exec categories (``"f(a=1, b='x')"``),
NexusRaven references (``r = nvdlib.searchCVE(keywordSearch='x')``), Action lists of the
international tool-calling data (``[translate(text='hi'), currencies()]``). ``parse_call`` and
``parse_call_list`` turn such a string into ``PyCall`` values whose arguments are plain JSON values, or raise
``PySyntaxError`` with a reason fit for a ``Rejected``.

Only literals become argument values: strings, numbers, booleans, None, lists, tuples (as lists)
and dicts with string keys. A variable, a nested call or any other expression is rejected, with
one opt-in exception: ``fold_arithmetic`` computes ``+ - * /`` between number literals, because
BFCL's executable golds write ``p=1/6`` and ``area=500 * 500`` (no ``**``: a literal power can be
astronomically large).

``lenient=True`` first repairs the near-Python that LLM-written datasets contain, at the token
level so string contents are never touched: JSON ``true``/``false``/``null``; quoted keyword names
(``'target_lang'='fr'``); Python keywords used as argument names (``from="EUR"``); and call names
with spaces (``Google Translate(...)``, ``Global Email V4(...)``). Everything else must be Python.
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import operator
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Any

MAX_SOURCE_CHARS = 1_000_000  # a call string larger than this is corrupt, not a gold answer
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}
_OPERATIONS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_NAME_BREAKS = ("(", ",", "[", "]", ")", "=")  # tokens that end a call name written with spaces
_PLACEHOLDER = "__tooltrain_name_{}__"


class PySyntaxError(ValueError):
    """A string is not the call syntax the dataset promises; the message says what and where."""


@dataclass(frozen=True)
class PyCall:
    name: str  # as written, dotted when it was an attribute: "nvdlib.searchCVE", "Google Translate"
    args: list[Any] = field(default_factory=list)  # positional literal values
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def short_name(self) -> str:
        """The name without a module prefix: ``nvdlib.searchCVE`` -> ``searchCVE``."""
        return self.name.rsplit(".", 1)[-1]


def parse_call(text: str, *, fold_arithmetic: bool = False, lenient: bool = False) -> PyCall:
    """Exactly one call expression: ``f(a=1)``, ``math.hypot(x=4, y=5)``."""
    node, names = _parse_expression(text, lenient)
    if not isinstance(node, ast.Call):
        raise PySyntaxError(f"expected a function call, got {_kind(node)}")
    return _call(node, names, fold_arithmetic)


def parse_call_list(text: str, *, fold_arithmetic: bool = False, lenient: bool = False) -> list[PyCall]:
    """A list (or tuple) of calls, ``[f(a=1), g()]``; ``[]`` is no call. A bare call is a list of one."""
    node, names = _parse_expression(text, lenient)
    if isinstance(node, ast.Call):
        return [_call(node, names, fold_arithmetic)]
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise PySyntaxError(f"expected a list of function calls, got {_kind(node)}")
    calls = []
    for index, item in enumerate(node.elts):
        if not isinstance(item, ast.Call):
            raise PySyntaxError(f"item {index}: expected a function call, got {_kind(item)}")
        try:
            calls.append(_call(item, names, fold_arithmetic))
        except PySyntaxError as err:
            raise PySyntaxError(f"item {index}: {err}") from None
    return calls


def parse_assigned_call(text: str) -> tuple[str | None, PyCall]:
    """``r = f(...)`` -> ("r", call); a bare ``f(...)`` -> (None, call). One statement only."""
    _check_size(text)
    try:
        module = _parse(text, "exec")
    except SyntaxError as err:
        raise PySyntaxError(f"not valid Python: {err.msg} at column {err.offset}") from None
    except (RecursionError, MemoryError, ValueError):
        raise PySyntaxError("not valid Python: nested too deeply or contains NUL") from None
    if len(module.body) != 1:
        raise PySyntaxError(f"expected one statement, got {len(module.body)}")
    statement = module.body[0]
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return None, _call(statement.value, {}, False)
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Call)
    ):
        return statement.targets[0].id, _call(statement.value, {}, False)
    raise PySyntaxError(f"expected a call or 'name = call', got {_kind(statement)}")


def literal(node: ast.AST, *, fold_arithmetic: bool = False) -> Any:
    """The JSON value a literal expression denotes; PySyntaxError for anything else."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise PySyntaxError(f"non-finite number {ast.unparse(node)} has no JSON form")
            return value
        raise PySyntaxError(f"{type(value).__name__} literal {ast.unparse(node)[:60]} has no JSON form")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(item, fold_arithmetic=fold_arithmetic) for item in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:
                raise PySyntaxError("dict unpacking (**) is not a literal")
            key = literal(key_node)
            if not isinstance(key, str):
                raise PySyntaxError(f"dict key {ast.unparse(key_node)[:60]} is not a string")
            if key in out:  # Python keeps the last value; a gold answer must not lose one silently
                raise PySyntaxError(f"dict key {key[:60]!r} given twice")
            out[key] = literal(value_node, fold_arithmetic=fold_arithmetic)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = literal(node.operand, fold_arithmetic=fold_arithmetic)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if fold_arithmetic and isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return _fold(node)
    if isinstance(node, ast.Call):
        raise PySyntaxError(f"nested call {ast.unparse(node)[:60]} is not a literal")
    raise PySyntaxError(f"{_kind(node)} {ast.unparse(node)[:60]} is not a literal")


def _fold(node: ast.BinOp) -> int | float:
    left, right = literal(node.left, fold_arithmetic=True), literal(node.right, fold_arithmetic=True)
    for operand in (left, right):
        if not isinstance(operand, (int, float)) or isinstance(operand, bool):
            raise PySyntaxError(f"arithmetic {ast.unparse(node)[:60]} on a non-number")
    if isinstance(node.op, ast.Div) and right == 0:
        raise PySyntaxError(f"division by zero in {ast.unparse(node)[:60]}")
    result = _OPERATIONS[type(node.op)](left, right)
    if isinstance(result, int) and abs(result) > 2**63 or isinstance(result, float) and not math.isfinite(result):
        raise PySyntaxError(f"arithmetic {ast.unparse(node)[:60]} overflows")
    return result


def _check_size(text: Any) -> None:
    if not isinstance(text, str):
        raise PySyntaxError(f"expected a string of Python, got {type(text).__name__}")
    if len(text) > MAX_SOURCE_CHARS:
        raise PySyntaxError(f"call string of {len(text)} characters exceeds {MAX_SOURCE_CHARS}")


def _parse_expression(text: Any, lenient: bool) -> tuple[ast.expr, dict[str, str]]:
    _check_size(text)
    source, names = _repair(text) if lenient else (text, {})
    try:
        return _parse(source, "eval").body, names
    except SyntaxError as err:
        raise PySyntaxError(f"not valid Python: {err.msg} at column {err.offset}") from None
    except (RecursionError, MemoryError, ValueError):
        raise PySyntaxError("not valid Python: nested too deeply or contains NUL") from None


def _parse(source: str, mode: str) -> Any:
    with warnings.catch_warnings():
        # an unknown escape such as "C:\\dir" keeps its backslash, as Python reads it; not worth a warning per string
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        return ast.parse(source.strip(), mode=mode)


def _call(node: ast.Call, names: dict[str, str], fold_arithmetic: bool) -> PyCall:
    name = names.get(dotted_name(node.func), dotted_name(node.func))
    args = []
    for index, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            raise PySyntaxError(f"{name}: *args is not a literal argument")
        try:
            args.append(literal(arg, fold_arithmetic=fold_arithmetic))
        except PySyntaxError as err:
            raise PySyntaxError(f"{name}: positional argument {index}: {err}") from None
    kwargs: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise PySyntaxError(f"{name}: **kwargs is not a literal argument")
        arg_name = names.get(kw.arg, kw.arg)
        if arg_name in kwargs:  # ast accepts f(a=1, a=2) only after our renaming; Python would not
            raise PySyntaxError(f"{name}: argument {arg_name!r} given twice")
        try:
            kwargs[arg_name] = literal(kw.value, fold_arithmetic=fold_arithmetic)
        except PySyntaxError as err:
            raise PySyntaxError(f"{name}: argument {arg_name!r}: {err}") from None
    return PyCall(name=name, args=args, kwargs=kwargs)


def dotted_name(node: ast.expr) -> str:
    """A called object's name as written (``nvdlib.searchCVE``); PySyntaxError for anything else (a call's result,
    a subscript): only names are called."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    raise PySyntaxError(f"called object {ast.unparse(node)[:60]} is not a name")


def _kind(node: ast.AST) -> str:
    return {
        ast.Name: "a variable",
        ast.Constant: "a constant",
        ast.BinOp: "an expression",
        ast.Call: "a call",
        ast.Assign: "an assignment",
    }.get(type(node), type(node).__name__)


# ---------------------------------------------------------------- lenient repair


def _repair(text: str) -> tuple[str, dict[str, str]]:
    """Rewrite near-Python into Python at token level; returns the source and placeholder -> name."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _NOISE]
    except (tokenize.TokenError, SyntaxError) as err:
        raise PySyntaxError(f"not valid Python: {err.args[0] if err.args else err}") from None
    line_starts = _line_starts(text)

    def offset(position: tuple[int, int]) -> int:
        row, col = position
        return line_starts[row - 1] + col

    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in text offsets
    names: dict[str, str] = {}

    def placeholder(original: str) -> str:
        alias = _PLACEHOLDER.format(len(names))
        names[alias] = original
        return alias

    index = 0
    while index < len(tokens):
        tok = tokens[index]
        before = tokens[index - 1] if index else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        opens_argument = before is None or before.string in ("(", ",", "[")
        is_assignment = after is not None and after.type == tokenize.OP and after.string == "="
        if tok.type == tokenize.STRING and opens_argument and is_assignment:
            # 'target_lang'='fr' -> target_lang='fr'
            key = _string_literal(tok.string)
            replacement = key if key.isidentifier() and not keyword.iskeyword(key) else placeholder(key)
            edits.append((offset(tok.start), offset(tok.end), replacement))
        elif tok.type == tokenize.NAME and keyword.iskeyword(tok.string) and opens_argument and is_assignment:
            # from="EUR" -> placeholder="EUR", mapped back to "from"
            edits.append((offset(tok.start), offset(tok.end), placeholder(tok.string)))
        elif tok.type == tokenize.NAME and tok.string in _JSON_WORDS and not is_assignment:
            edits.append((offset(tok.start), offset(tok.end), _JSON_WORDS[tok.string]))
        elif tok.type in (tokenize.NAME, tokenize.NUMBER) and opens_argument:
            # A call name made of several words: "Global Email V4(" -> one placeholder name.
            end = index
            while end + 1 < len(tokens) and _continues_name(tokens[end + 1]):
                end += 1
            if end > index and end + 1 < len(tokens) and tokens[end + 1].string == "(":
                original = text[offset(tok.start) : offset(tokens[end].end)]
                if not _is_dotted_name(original):
                    edits.append((offset(tok.start), offset(tokens[end].end), placeholder(original)))
                index = end
        index += 1
    source = text
    for start, end, replacement in sorted(edits, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source, names


_NOISE = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def _continues_name(token: tokenize.TokenInfo) -> bool:
    return token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP) and token.string not in _NAME_BREAKS


def _line_starts(text: str) -> list[int]:
    starts, total = [], 0
    for line in io.StringIO(text).readlines() or [""]:
        starts.append(total)
        total += len(line)
    starts.append(total)
    return starts


def _string_literal(source: str) -> str:
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError):
        raise PySyntaxError(f"bad quoted argument name {source[:60]}") from None
    if not isinstance(value, str):
        raise PySyntaxError(f"argument name {source[:60]} is not a string")
    return value


def _is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))
