"""A JavaScript answer -> BFCL's decoded calls, read the way BFCL's prompting handlers read it (never evaluated).

BFCL (bfcl-eval 2026.3.23, ``model_handler/parser/js_parser.py``) parses a prompting model's JavaScript answer with
tree-sitter-javascript and keeps every argument as its *source text* (the checker's ``literals.js_value`` then
reads it by the declared type). This module restates that parser over its own JavaScript expression grammar:

* The call is the first statement of the answer that is a call expression itself (``f(a=1)``; not ``x = f()``,
  ``await f()``, ``new F()`` or ``f(), g()``); its name is the callee as written. No such statement: ``None``
  (BFCL's "wrong output format").
* A named argument ``a=1`` becomes ``{"a": "1"}``: the value's source text as written, spaces kept, with one pair
  of matching quotes removed when it starts and ends with them (``"a" + "b"`` reads ``a" + "b``, as in BFCL). A
  bare identifier or ``true`` becomes the key ``None``; every other positional value is dropped; a name given
  twice is a decode failure.
* Syntax errors fail the decode, as tree-sitter's ERROR nodes do in BFCL. Statements end at ``;`` or a line break.

Departures (where tree-sitter recovers and this decoder fails): an unclosed ``]`` or ``}`` that tree-sitter
closes itself (``f(a=[1, 2)`` reads ``[1, 2`` in BFCL), an operand it inserts (``f(1 +)``). Function bodies
and blocks are checked for balanced brackets only; class expressions are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class JsSyntaxError(ValueError):
    """The answer is not JavaScript this decoder reads (BFCL's decode fails on it too, or rarely recovers)."""


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | number | string | template | regex | op | eof
    text: str
    start: int
    end: int
    newline_before: bool = False


@dataclass
class Node:
    kind: str  # call | assignment | identifier | true | other
    start: int
    end: int
    parts: tuple = ()  # call: (callee, [arguments]); assignment: (left, right)


_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+n?|0[bB][01_]+n?|0[oO][0-7_]+n?"
    r"|(?:\d[\d_]*)?\.\d[\d_]*(?:[eE][+-]?\d+)?|\d[\d_]*\.?(?:[eE][+-]?\d+)?n?"
)
_OPERATOR_TEXTS = [
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==", "!=", "<=", ">=",
    "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "**", "<<", ">>", "(", ")",
    "[", "]", "{", "}", ";", ",", ".", "=", ">", "<", "!", "~", "?", ":", "+", "-", "*", "/", "&", "|", "^", "%",
    "@", "#",
]  # fmt: skip
_OPERATORS = sorted(_OPERATOR_TEXTS, key=len, reverse=True)  # longest first
_ASSIGNMENT_OPERATORS = {
    "=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=", "|=", "^=", "&&=", "||=", "??=",
}  # fmt: skip
_BINARY_OPERATORS = {
    "||", "&&", "??", "|", "^", "&", "==", "!=", "===", "!==", "<", ">", "<=", ">=", "<<", ">>", ">>>",
    "+", "-", "*", "/", "%", "**", "in", "instanceof",
}  # fmt: skip
_PREFIX = {"-", "+", "!", "~", "++", "--", "typeof", "void", "delete", "await"}
# After these a "/" divides; anywhere else it opens a regular expression.
_ENDS_OPERAND = {")", "]", "}", "++", "--"}
# Words tree-sitter gives node types of their own (only "true" and identifiers count as positional values in BFCL).
_WORD_KINDS = {
    "true": "true", "false": "other", "null": "other", "undefined": "other", "this": "other", "super": "other",
}  # fmt: skip
_WORD_OPERATORS = {"in", "instanceof", "typeof", "void", "delete", "await", "new", "function", "async", "return"}


def tokenize(source: str) -> list[Tok]:
    tokens: list[Tok] = []
    position, newline = 0, False
    while position < len(source):
        char = source[position]
        if char.isspace():
            newline = newline or char in "\n\r\u2028\u2029"
            position += 1
            continue
        if source.startswith("//", position):
            end = source.find("\n", position)
            position = len(source) if end < 0 else end
            continue
        if source.startswith("/*", position):
            end = source.find("*/", position + 2)
            if end < 0:
                raise JsSyntaxError("unterminated comment")
            newline = newline or "\n" in source[position:end]
            position = end + 2
            continue
        previous = tokens[-1] if tokens else None
        if char in "\"'":
            kind, end = "string", _quoted_end(source, position, char)
        elif char == "`":
            kind, end = "template", _template_end(source, position)
        elif char.isdigit() or (char == "." and source[position + 1 : position + 2].isdigit()):
            kind, end = "number", _NUMBER.match(source, position).end()
            if end < len(source) and (source[end].isalnum() or source[end] in "_$"):
                raise JsSyntaxError(f"malformed number at {position}")
        elif char.isalpha() or char in "_$":
            end = position + 1
            while end < len(source) and (source[end].isalnum() or source[end] in "_$"):
                end += 1
            kind = "ident"
        elif char == "/" and not _divides(previous):
            kind, end = "regex", _regex_end(source, position)
        else:
            operator = next((op for op in _OPERATORS if source.startswith(op, position)), None)
            if operator is None:
                raise JsSyntaxError(f"unexpected {char!r} at {position}")
            if operator == "?." and source[position + 2 : position + 3].isdigit():
                operator = "?"  # a ? .5 : 1
            kind, end = "op", position + len(operator)
        tokens.append(Tok(kind, source[position:end], position, end, newline))
        position, newline = end, False
    tokens.append(Tok("eof", "", len(source), len(source), True))
    return tokens


def _divides(previous: Tok | None) -> bool:
    if previous is None:
        return False
    if previous.kind in ("number", "string", "template", "regex"):
        return True
    if previous.kind == "ident":
        return previous.text not in _WORD_OPERATORS
    return previous.text in _ENDS_OPERAND


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
    raise JsSyntaxError(f"unterminated string at {start}")


def _template_end(source: str, start: int) -> int:
    position, depth = start + 1, 0
    while position < len(source):
        char = source[position]
        if char == "\\":
            position += 2
            continue
        if depth == 0 and char == "`":
            return position + 1
        if source.startswith("${", position):
            depth += 1
            position += 2
            continue
        if depth and char == "}":
            depth -= 1
        elif depth and char in "\"'":
            position = _quoted_end(source, position, char)
            continue
        position += 1
    raise JsSyntaxError(f"unterminated template at {start}")


def _regex_end(source: str, start: int) -> int:
    position, in_class = start + 1, False
    while position < len(source) and source[position] != "\n":
        char = source[position]
        if char == "\\":
            position += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "/" and not in_class:
            position += 1
            while position < len(source) and "a" <= source[position] <= "z":  # tree-sitter's flags: [a-z]*
                position += 1
            return position
        position += 1
    raise JsSyntaxError(f"unterminated regular expression at {start}")


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0

    @property
    def tok(self) -> Tok:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Tok:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "ident") and self.tok.text in texts

    def take(self, text: str | None = None) -> Tok:
        tok = self.tok
        if tok.kind == "eof" or (text is not None and not (tok.kind in ("op", "ident") and tok.text == text)):
            raise JsSyntaxError(f"expected {text or 'more'!r} at {tok.start}, got {tok.text or 'the end'!r}")
        self.index += 1
        return tok

    def span(self, kind: str, start: int, parts: tuple = ()) -> Node:
        return Node(kind, start, self.tokens[self.index - 1].end, parts)

    # ---- statements: (is a label or other statement, the expression of an expression statement)
    def statements(self) -> list[Node | None]:
        found: list[Node | None] = []
        while self.tok.kind != "eof":
            if self.at(";"):
                self.take()
                continue
            labeled = self.tok.kind == "ident" and self.peek().text == ":"
            if labeled:
                self.index += 2  # a label: what follows is a labeled_statement, never the call BFCL looks for
            expression = self.expression()
            if self.at(";"):
                self.take()
            elif not (self.tok.kind == "eof" or self.tok.newline_before or self.at("}")):
                raise JsSyntaxError(f"unexpected {self.tok.text!r} at {self.tok.start}")
            found.append(None if labeled else expression)
        return found

    # ---- expressions
    def expression(self) -> Node:
        start = self.tok.start
        first = self.assignment()
        if not self.at(","):
            return first
        while self.at(","):
            self.take()
            self.assignment()
        return self.span("other", start)

    def assignment(self) -> Node:
        start = self.tok.start
        if self._arrow_ahead():
            return self.arrow(start)
        left = self.conditional()
        if self.tok.kind == "op" and self.tok.text in _ASSIGNMENT_OPERATORS:
            operator = self.take().text
            right = self.assignment()
            return self.span("assignment" if operator == "=" else "other", start, (left, right))
        return left

    def _arrow_ahead(self) -> bool:
        offset = 1 if self.at("async") and not self.peek().newline_before and self.peek().text != "=>" else 0
        tok = self.peek(offset)
        if tok.kind == "ident" and self.peek(offset + 1).text == "=>":
            return True
        if tok.text != "(":
            return False
        close = self._matching(self.index + offset)
        return close is not None and self.tokens[close + 1].text == "=>"

    def _matching(self, index: int) -> int | None:
        depth = 0
        for position in range(index, len(self.tokens)):
            text = self.tokens[position].text if self.tokens[position].kind == "op" else ""
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    return position
        return None

    def arrow(self, start: int) -> Node:
        if self.at("async") and self.peek().text != "=>":
            self.take()
        if self.at("("):
            self.skip_balanced()
        else:
            self.take()
        self.take("=>")
        if self.at("{"):
            self.skip_balanced()
        else:
            self.assignment()
        return self.span("other", start)

    def skip_balanced(self) -> None:
        close = self._matching(self.index)
        if close is None:
            raise JsSyntaxError(f"unbalanced brackets at {self.tok.start}")
        self.index = close + 1

    def conditional(self) -> Node:
        start = self.tok.start
        condition = self.binary()
        if not self.at("?"):
            return condition
        self.take()
        self.assignment()
        self.take(":")
        self.assignment()
        return self.span("other", start)

    def binary(self) -> Node:
        start = self.tok.start
        left = self.unary()
        if not (self.tok.kind in ("op", "ident") and self.tok.text in _BINARY_OPERATORS):
            return left
        while self.tok.kind in ("op", "ident") and self.tok.text in _BINARY_OPERATORS:
            self.take()
            self.unary()
        return self.span("other", start)

    def unary(self) -> Node:
        start = self.tok.start
        if self.tok.kind in ("op", "ident") and self.tok.text in _PREFIX:
            self.take()
            self.unary()
            return self.span("other", start)
        operand = self.postfix()
        if self.at("++", "--") and not self.tok.newline_before:
            self.take()
            return self.span("other", start)
        return operand

    def postfix(self) -> Node:
        start = self.tok.start
        if self.at("new"):
            self.take()
            if self.at("."):  # new.target
                self.take()
                self.take()
            else:
                self.member_only()
                if self.at("("):
                    self.arguments()
            expression = self.span("other", start)
        else:
            expression = self.primary()
        while True:
            if self.at(".", "?."):
                self.take()
                if self.at("("):
                    expression = self.span("call", start, (expression, self.arguments()))
                elif self.at("["):
                    self.take()
                    self.expression()
                    self.take("]")
                    expression = self.span("other", start)
                else:
                    self._name()
                    expression = self.span("other", start)
            elif self.at("["):
                self.take()
                self.expression()
                self.take("]")
                expression = self.span("other", start)
            elif self.at("("):
                expression = self.span("call", start, (expression, self.arguments()))
            elif self.tok.kind == "template":
                self.take()
                expression = self.span("other", start)
            else:
                return expression

    def member_only(self) -> None:
        if self.at("new"):
            self.take()
            self.member_only()
            if self.at("("):
                self.arguments()
        else:
            self.primary()
        while self.at(".", "["):
            if self.take().text == "[":
                self.expression()
                self.take("]")
            else:
                self._name()

    def _name(self) -> None:
        if self.tok.kind != "ident" and not (self.tok.kind == "op" and self.tok.text == "#"):
            raise JsSyntaxError(f"expected a property name at {self.tok.start}")
        if self.take().text == "#":
            self._name()

    def primary(self) -> Node:
        tok, start = self.tok, self.tok.start
        if tok.kind in ("number", "string", "template", "regex"):
            self.take()
            return self.span("other", start)
        if tok.kind == "ident":
            if tok.text == "function" or (tok.text == "async" and self.peek().text == "function"):
                return self.function(start)
            if tok.text in ("class", "yield", "import", "return", "if", "for", "while", "var", "let", "const"):
                raise JsSyntaxError(f"{tok.text!r} is not read here")
            self.take()
            return self.span(_WORD_KINDS.get(tok.text, "identifier"), start)
        if self.at("("):
            self.take()
            self.expression()
            self.take(")")
            return self.span("other", start)
        if self.at("["):
            self.take()
            while not self.at("]"):
                if self.at(","):
                    self.take()
                    continue
                if self.at("..."):
                    self.take()
                self.assignment()
                if not self.at("]"):
                    self.take(",")
            self.take("]")
            return self.span("other", start)
        if self.at("{"):
            self.object_literal()
            return self.span("other", start)
        raise JsSyntaxError(f"unexpected {tok.text or 'end of the answer'!r} at {tok.start}")

    def function(self, start: int) -> Node:
        if self.at("async"):
            self.take()
        self.take("function")
        if self.at("*"):
            self.take()
        if self.tok.kind == "ident":
            self.take()
        if not self.at("("):
            raise JsSyntaxError(f"expected '(' at {self.tok.start}")
        self.skip_balanced()
        if not self.at("{"):
            raise JsSyntaxError(f"expected a function body at {self.tok.start}")
        self.skip_balanced()
        return self.span("other", start)

    def object_literal(self) -> None:
        self.take("{")
        while not self.at("}"):
            if self.at("..."):
                self.take()
                self.assignment()
            else:
                if self.at("["):
                    self.take()
                    self.assignment()
                    self.take("]")
                elif self.tok.kind in ("ident", "string", "number"):
                    self.take()
                else:
                    raise JsSyntaxError(f"expected a property at {self.tok.start}")
                if self.at(":"):
                    self.take()
                    self.assignment()
                elif self.at("("):
                    self.skip_balanced()
                    if not self.at("{"):
                        raise JsSyntaxError(f"expected a method body at {self.tok.start}")
                    self.skip_balanced()
            if not self.at("}"):
                self.take(",")
        self.take("}")

    def arguments(self) -> list[Node]:
        self.take("(")
        found = []
        while not self.at(")"):
            start = self.tok.start
            if self.at("..."):
                self.take()
                self.assignment()
                found.append(self.span("other", start))
            else:
                found.append(self.assignment())
            if not self.at(")"):
                self.take(",")
        self.take(")")
        return found


def _unquoted(text: str) -> str:
    if len(text) >= 1 and (
        (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
    ):
        return text[1:-1]
    return text


def parse_js_calls(source: str) -> list[dict[str, dict[Any, str]]] | None:
    """BFCL's ``parse_javascript_function_call``: ``[{name: {arg: text}}]``, or None when no statement is a call.
    ``JsSyntaxError`` when the answer does not parse."""
    for statement in _Parser(source).statements():
        if statement is None or statement.kind != "call":
            continue
        callee, arguments = statement.parts
        found: dict[Any, str] = {}
        for argument in arguments:
            if argument.kind == "assignment":
                left, right = argument.parts
                key, value = source[left.start : left.end], _unquoted(source[right.start : right.end])
            elif argument.kind in ("identifier", "true"):
                key, value = None, source[argument.start : argument.end]
            else:
                continue  # BFCL keeps no other positional value
            if key in found:
                raise JsSyntaxError(f"argument {key!r} given twice")
            found[key] = value
        return [{source[callee.start : callee.end]: found}]
    return None


__all__ = ["JsSyntaxError", "parse_js_calls", "tokenize"]
