"""A Java answer -> BFCL's decoded calls, read the way BFCL's prompting handlers read it (never evaluated).

BFCL (bfcl-eval 2026.3.23, ``model_handler/parser/java_parser.py``) parses a prompting model's Java answer with
tree-sitter-java and keeps every argument as a *string* (the checker's ``literals.java_value`` then reads it by the
declared type). This module restates that parser over its own small Java expression grammar:

* The first method invocation in the answer (outermost first) is the call; its name is ``object.name`` as written.
  Named arguments (``a=1``) become ``{"a": text}``; a bare identifier or class literal becomes the key ``None`` (as
  in BFCL); any other positional value is dropped; a name given twice is a decode failure. No invocation at all
  gives ``{}`` (BFCL's "wrong output format").
* An argument's text is BFCL's: a string or char literal loses its quotes (escapes stay as written); identifiers,
  method invocations and class literals are their source text; ``new T[]{...}`` and ``new T(args)`` are rebuilt
  as ``new T[]{...}`` (dimensions dropped) and ``new T(a, b)`` (an anonymous class body dropped, so
  ``new HashMap<..>() {{ put(..); }}`` reads ``new HashMap<..>()``); anything else is its tokens joined with no
  space (``x -> x + 1`` reads ``x->x+1``).
* Syntax errors fail the decode, as tree-sitter's ERROR nodes do in BFCL. A last statement without its ``;`` is
  accepted the way tree-sitter's error recovery accepts it: a missing ``;`` costs 610, wrapping the text in an
  ERROR costs 600 + bytes + 30 per line break, so an answer of 10 bytes or less on one line (``f(a=1)``) fails.

Departures (answers outside this grammar fail here where tree-sitter might recover): comments, text blocks,
labels before the call (``Sure: f(a=1)``), reference casts other than ``(Type) operand``, and tree-sitter's other
error recoveries (a ``}`` or an operand it inserts: ``new int[]{1, 2)``, ``f(a=1 +)``). Lambda and
anonymous-class bodies are checked for balanced braces only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class JavaSyntaxError(ValueError):
    """The answer is not Java this decoder reads: BFCL's decode fails on it too (or, rarely, recovers)."""


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | keyword | number | string | char | op | eof
    text: str
    start: int
    end: int


@dataclass
class Node:
    kind: str  # method_invocation | class_literal | array_creation | object_creation | assignment | composite
    children: list[Any]  # Tok | Node, in source order
    start: int
    end: int
    fields: dict[str, Any] = field(default_factory=dict)


KEYWORDS = {
    "new", "true", "false", "null", "this", "super", "class", "instanceof", "return",
    "int", "long", "short", "byte", "char", "boolean", "float", "double", "void",
}  # fmt: skip
PRIMITIVES = {"int", "long", "short", "byte", "char", "boolean", "float", "double", "void"}
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+[lL]?|0[bB][01_]+[lL]?"
    r"|(?:\d[\d_]*)?\.\d[\d_]*(?:[eE][+-]?\d+)?[fFdD]?|\d[\d_]*\.(?:[eE][+-]?\d+)?[fFdD]?"
    r"|\d[\d_]*[eE][+-]?\d[\d_]*[fFdD]?|\d[\d_]*[fFdDlL]?"
)
_OPERATOR_TEXTS = [
    ">>>=", "<<=", ">>=", ">>>", "...", "->", "::", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "<<", "(", ")", "[", "]", "{", "}", ";", ",", ".", "@", "=", ">", "<", "!",
    "~", "?", ":", "+", "-", "*", "/", "&", "|", "^", "%",
]  # fmt: skip
_OPERATORS = sorted(_OPERATOR_TEXTS, key=len, reverse=True)  # longest first
_ASSIGNMENT_OPERATORS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", ">>>="}
_BINARY_OPERATORS = {
    "||", "&&", "|", "^", "&", "==", "!=", "<", ">", "<=", ">=", "<<", ">>", ">>>", "+", "-", "*", "/", "%",
}  # fmt: skip
_PREFIX_OPERATORS = {"-", "+", "!", "~", "++", "--"}


def tokenize(source: str) -> list[Tok]:
    tokens, position = [], 0
    while position < len(source):
        char = source[position]
        if char.isspace():
            position += 1
            continue
        if source.startswith(("//", "/*"), position):
            raise JavaSyntaxError("comments are not read")
        if char == '"':
            if source.startswith('"""', position):
                raise JavaSyntaxError("text blocks are not read")
            end = _quoted_end(source, position, '"')
            tokens.append(Tok("string", source[position:end], position, end))
        elif char == "'":
            end = _quoted_end(source, position, "'")
            tokens.append(Tok("char", source[position:end], position, end))
        elif char.isdigit() or (char == "." and source[position + 1 : position + 2].isdigit()):
            match = _NUMBER.match(source, position)
            end = match.end()
            if end < len(source) and (source[end].isalnum() or source[end] in "_$."):
                raise JavaSyntaxError(f"malformed number at {position}")
            tokens.append(Tok("number", source[position:end], position, end))
        elif char.isalpha() or char in "_$":
            end = position + 1
            while end < len(source) and (source[end].isalnum() or source[end] in "_$"):
                end += 1
            word = source[position:end]
            tokens.append(Tok("keyword" if word in KEYWORDS else "ident", word, position, end))
        else:
            operator = next((op for op in _OPERATORS if source.startswith(op, position)), None)
            if operator is None:
                raise JavaSyntaxError(f"unexpected {char!r} at {position}")
            end = position + len(operator)
            tokens.append(Tok("op", operator, position, end))
        position = end
    tokens.append(Tok("eof", "", len(source), len(source)))
    return tokens


def _quoted_end(source: str, start: int, quote: str) -> int:
    position = start + 1
    while position < len(source):
        char = source[position]
        if char == "\\":
            position += 2
            continue
        if char == "\n":
            break
        if char == quote:
            return position + 1
        position += 1
    raise JavaSyntaxError(f"unterminated literal at {start}")


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0

    # ---- token helpers
    @property
    def tok(self) -> Tok:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Tok:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "keyword") and self.tok.text in texts

    def take(self, text: str | None = None) -> Tok:
        tok = self.tok
        if text is not None and not (tok.kind in ("op", "keyword") and tok.text == text):
            raise JavaSyntaxError(f"expected {text!r} at {tok.start}, got {tok.text!r}")
        if tok.kind == "eof":
            raise JavaSyntaxError("unexpected end of the answer")
        self.index += 1
        return tok

    def node(self, kind: str, children: list, **fields: Any) -> Node:
        return Node(kind, children, _start(children[0]), _end(children[-1]), fields)

    # ---- statements
    def program(self) -> list[Any]:
        statements = []
        while self.tok.kind != "eof":
            if self.at(";"):
                self.take()
                continue
            expression = self.expression()
            if self.at(";"):
                self.take()
            elif self.tok.kind != "eof":
                raise JavaSyntaxError(f"unexpected {self.tok.text!r} at {self.tok.start}")
            elif not _missing_semicolon_accepted(self.source):
                raise JavaSyntaxError("a statement this short without its ';' is an ERROR to tree-sitter")
            statements.append(expression)
        return statements

    # ---- expressions
    def expression(self) -> Any:
        if self._lambda_ahead():
            return self.lambda_expression()
        left = self.ternary()
        if self.tok.kind == "op" and self.tok.text in _ASSIGNMENT_OPERATORS:
            operator = self.take()
            return self.node("assignment", [left, operator, self.expression()])
        return left

    def _lambda_ahead(self) -> bool:
        if self.tok.kind == "ident" and self.peek().text == "->":
            return True
        if not self.at("("):
            return False
        close = self._matching(self.index)
        return close is not None and self.tokens[close + 1].text == "->"

    def _matching(self, index: int) -> int | None:
        depth = 0
        pairs = {"(": ")", "[": "]", "{": "}"}
        for position in range(index, len(self.tokens)):
            tok = self.tokens[position]
            if tok.kind == "op" and tok.text in pairs:
                depth += 1
            elif tok.kind == "op" and tok.text in pairs.values():
                depth -= 1
                if depth == 0:
                    return position
        return None

    def lambda_expression(self) -> Node:
        if self.tok.kind == "ident":
            parameters: list[Any] = [self.take()]
        else:
            close = self._matching(self.index)
            parameters = self.tokens[self.index : close + 1]
            self.index = close + 1
        arrow = self.take("->")
        body = self.block() if self.at("{") else self.expression()
        return self.node("composite", [*parameters, arrow, body])

    def block(self) -> Node:
        children: list[Any] = [self.take("{")]
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise JavaSyntaxError("unterminated block")
            if self.at("return"):
                children.append(self.take())
            if not self.at(";"):
                children.append(self.expression())
            children.append(self.take(";"))
        children.append(self.take("}"))
        return self.node("composite", children)

    def ternary(self) -> Any:
        condition = self.binary()
        if not self.at("?"):
            return condition
        question = self.take()
        then = self.expression()
        colon = self.take(":")
        return self.node("composite", [condition, question, then, colon, self.expression()])

    def binary(self) -> Any:
        parts = [self.unary()]
        while True:
            if self.at("instanceof"):
                parts += [self.take(), self.type_node()]
            elif self.tok.kind == "op" and self.tok.text in _BINARY_OPERATORS:
                parts += [self.take(), self.unary()]
            else:
                break
        return parts[0] if len(parts) == 1 else self.node("composite", parts)

    def unary(self) -> Any:
        if self.tok.kind == "op" and self.tok.text in _PREFIX_OPERATORS:
            operator = self.take()
            return self.node("composite", [operator, self.unary()])
        if self.at("(") and self._cast_ahead():
            opening = self.take("(")
            cast_type = self.type_node()
            closing = self.take(")")
            return self.node("composite", [opening, cast_type, closing, self.unary()])
        return self.postfix()

    def _cast_ahead(self) -> bool:
        close = self._matching(self.index)
        if close is None:
            return False
        inner = self.tokens[self.index + 1 : close]
        if len(inner) == 1 and inner[0].text in PRIMITIVES:
            return True
        after = self.tokens[close + 1]
        typelike = all(t.kind == "ident" or t.text in (".", "<", ">", ",", "[", "]", "?") for t in inner) and inner
        starts_operand = after.kind in ("ident", "number", "string", "char") or after.text in ("(", "!", "~", "new")
        return bool(typelike) and starts_operand

    def postfix(self) -> Any:
        expression = self.primary()
        while True:
            if self.at(".") and self.peek().text == "<":
                dot = self.take()
                arguments = self.type_arguments()
                name = self._identifier()
                call = self.arguments()
                expression = self.node("method_invocation", [expression, dot, arguments, name, call],
                                       object=expression, name=name, arguments=call)  # fmt: skip
            elif self.at("."):
                dot = self.take()
                if self.at("class"):
                    expression = self.node("class_literal", [expression, dot, self.take()])
                    continue
                name = self.take() if self.at("new", "this", "super") else self._identifier()
                if self.at("("):
                    call = self.arguments()
                    expression = self.node("method_invocation", [expression, dot, name, call],
                                           object=expression, name=name, arguments=call)  # fmt: skip
                else:
                    expression = self.node("composite", [expression, dot, name])
            elif self.at("["):
                opening = self.take()
                index = self.expression()
                expression = self.node("composite", [expression, opening, index, self.take("]")])
            elif self.at("::"):
                colons = self.take()
                name = self.take() if self.at("new") else self._identifier()
                expression = self.node("composite", [expression, colons, name])
            elif self.at("++", "--"):
                expression = self.node("composite", [expression, self.take()])
            else:
                return expression

    def _identifier(self) -> Tok:
        if self.tok.kind != "ident":
            raise JavaSyntaxError(f"expected a name at {self.tok.start}, got {self.tok.text!r}")
        return self.take()

    def primary(self) -> Any:
        tok = self.tok
        if tok.kind in ("number", "string", "char") or tok.text in ("true", "false", "null", "this", "super"):
            return self.take()
        if tok.kind == "ident":
            name = self.take()
            if self.at("("):
                call = self.arguments()
                return self.node("method_invocation", [name, call], object=None, name=name, arguments=call)
            return name
        if tok.kind == "keyword" and tok.text in PRIMITIVES:
            type_node = self.type_node()
            if self.at("::"):
                return type_node
            dot = self.take(".")
            return self.node("class_literal", [type_node, dot, self.take("class")])
        if self.at("("):
            opening = self.take()
            inner = self.expression()
            return self.node("composite", [opening, inner, self.take(")")])
        if self.at("new"):
            return self.creation()
        raise JavaSyntaxError(f"unexpected {tok.text or 'end of the answer'!r} at {tok.start}")

    def creation(self) -> Node:
        new = self.take("new")
        created = self.base_type()
        if self.at("("):
            call = self.arguments()
            children = [new, created, call]
            if self.at("{"):
                children.append(self.skip_braces())  # an anonymous class body: BFCL drops it
            return self.node("object_creation", children, type=created, arguments=call)
        if not self.at("["):
            raise JavaSyntaxError(f"expected '(' or '[' after new at {self.tok.start}")
        dims: list[Any] = []
        while self.at("["):
            dims.append(self.take())
            if not self.at("]"):
                raise JavaSyntaxError("sized arrays (new T[n]) are not decoded by BFCL")
            dims.append(self.take("]"))
        value = self.array_initializer()
        return self.node("array_creation", [new, created, *dims, value], type=created, value=value)

    def array_initializer(self) -> Node:
        children: list[Any] = [self.take("{")]
        while not self.at("}"):
            children.append(self.array_initializer() if self.at("{") else self.expression())
            if not self.at("}"):
                children.append(self.take(","))
        children.append(self.take("}"))
        return self.node("composite", children)

    def skip_braces(self) -> Node:
        close = self._matching(self.index)
        if close is None:
            raise JavaSyntaxError("unbalanced braces")
        children = self.tokens[self.index : close + 1]
        self.index = close + 1
        return self.node("composite", children)

    def arguments(self) -> Node:
        children: list[Any] = [self.take("(")]
        while not self.at(")"):
            children.append(self.expression())
            if not self.at(")"):
                children.append(self.take(","))
                if self.at(")"):
                    raise JavaSyntaxError("a trailing comma in an argument list")
        children.append(self.take(")"))
        return self.node("arguments", children)

    # ---- types
    def base_type(self) -> Any:
        if self.tok.kind == "keyword" and self.tok.text in PRIMITIVES:
            return self.node("composite", [self.take()])  # integral_type etc.: a node around the keyword
        parts: list[Any] = [self._identifier()]
        while self.at(".") and self.peek().kind == "ident":
            parts += [self.take(), self.take()]
        if self.at("<"):
            parts.append(self.type_arguments())
        return parts[0] if len(parts) == 1 else self.node("composite", parts)

    def type_node(self) -> Any:
        base = self.base_type()
        parts = [base]
        while self.at("[") and self.peek().text == "]":
            parts += [self.take(), self.take()]
        return base if len(parts) == 1 else self.node("composite", parts)

    def type_arguments(self) -> Node:
        children: list[Any] = [self.take("<")]
        while not self.at(">"):
            children.append(self.take("?") if self.at("?") else self.type_node())
            if self.at("extends", "super") or (self.tok.kind == "ident" and self.tok.text == "extends"):
                children += [self.take(), self.type_node()]
            if not self.at(">"):
                children.append(self.take(","))
        children.append(self.take(">"))
        return self.node("composite", children)


def _start(part: Any) -> int:
    return part.start


def _end(part: Any) -> int:
    return part.end


def _missing_semicolon_accepted(source: str) -> bool:
    # tree-sitter's error costs: an ERROR around the text costs 500 per recovery + 1 per byte + 30 per line + 100
    # for the one tree it holds; a MISSING ";" costs 110 + 500. The cheaper wins (a tie went to ERROR in the probes).
    return 600 + len(source.encode("utf-8")) + 30 * source.count("\n") > 610


# ---- BFCL's reading of the tree (java_parser.traverse_node / extract_arguments / traverse)


def value_text(source: str, part: Any, nested: bool = False) -> str:
    if isinstance(part, Tok):
        if part.kind in ("string", "char") and not nested:
            return part.text[1:-1]
        return part.text
    if part.kind in ("method_invocation", "class_literal"):
        return source[part.start : part.end]
    if part.kind == "array_creation":
        return f"new {value_text(source, part.fields['type'], True)}[]{value_text(source, part.fields['value'], True)}"
    if part.kind == "object_creation":
        inner = [child for child in part.fields["arguments"].children if not _is_op(child, "(", ")", ",")]
        arguments = ", ".join(value_text(source, child, True) for child in inner)
        return f"new {value_text(source, part.fields['type'], True)}({arguments})"
    return "".join(value_text(source, child, True) for child in part.children)


def _is_op(part: Any, *texts: str) -> bool:
    return isinstance(part, Tok) and part.kind == "op" and part.text in texts


def _first_invocation(part: Any) -> Node | None:
    if isinstance(part, Tok):
        return None
    if part.kind == "method_invocation":
        return part
    for child in part.children:
        found = _first_invocation(child)
        if found is not None:
            return found
    return None


def _call_arguments(source: str, call: Node) -> dict[Any, str]:
    arguments: dict[Any, str] = {}
    for child in call.fields["arguments"].children:
        if isinstance(child, Node) and child.kind == "assignment":
            key, value = source[child.children[0].start : child.children[0].end], value_text(source, child.children[2])
        elif (isinstance(child, Tok) and child.kind == "ident") or (
            isinstance(child, Node) and child.kind == "class_literal"
        ):
            key, value = None, value_text(source, child)
        else:
            continue  # BFCL keeps no other positional value
        if key in arguments:
            raise JavaSyntaxError(f"argument {key!r} given twice")
        arguments[key] = value
    return arguments


def parse_java_calls(source: str) -> list[dict[str, dict[Any, str]]] | dict:
    """BFCL's ``parse_java_function_call``: ``[{name: {arg: text}}]``, or ``{}`` when the answer holds no call.
    ``JavaSyntaxError`` when it does not parse."""
    for statement in _Parser(source).program():
        call = _first_invocation(statement)
        if call is not None:
            name = call.fields["name"].text
            holder = call.fields["object"]
            if holder is not None:
                name = f"{source[holder.start : holder.end]}.{name}"
            return [{name: _call_arguments(source, call)}]
    return {}


__all__ = ["JavaSyntaxError", "parse_java_calls", "tokenize"]
