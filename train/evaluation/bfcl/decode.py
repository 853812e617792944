"""A model's answer -> BFCL's decoded calls, per language, the way BFCL's handlers decode it.

BFCL decodes a *prompting* model's answer by the category's language (bfcl-eval 2026.3.23,
``model_handler/utils.py``: ``default_decode_ast_prompting`` -> ``ast_parse``): the text is stripped of backticks,
line breaks and spaces at both ends, wrapped in ``[ ]`` when it lacks them, and what lies inside the brackets is
parsed as Python, Java (``java_calls``) or JavaScript (``js_calls``). Java and JavaScript arguments arrive as
strings of source text (``useShortName=true`` -> ``"true"``), which the checker reads by the declared type.

A *function-calling* model's arguments are its JSON as it is (BFCL's FC handlers ``json.loads`` them and convert
nothing): in the Java and JavaScript categories the tools declare every parameter a string
(``train.sources.bfcl_languages``), so a native call passes strings, and a non-string value is the checker's type
error, as in BFCL.

Python answers keep tooltrain's own reading (``train.formats.text_answers``, BFCL-equivalent for call lists). For
Java and JavaScript, ``decode_text_answer`` first takes off what a text answer puts around its calls (the
``<thinking>`` block, a ``<function>`` wrapping), then decodes as BFCL does. A decode failure is returned as
BFCL's own failure form, an error string (never raised), so the item is a counted failure.
"""

from __future__ import annotations

from typing import Any

from train.evaluation.bfcl.java_calls import JavaSyntaxError, parse_java_calls
from train.evaluation.bfcl.js_calls import JsSyntaxError, parse_js_calls
from train.formats.text_answers import FUNCTION_CLOSE, FUNCTION_OPEN, split_reasoning

# Languages whose answers are decoded here (Python's go through the chat format's own text-answer reading).
DECODERS = {"java": parse_java_calls, "javascript": parse_js_calls}


def decode_prompting(text: str, language: str) -> Any:
    """BFCL's ``default_decode_ast_prompting`` for a Java or JavaScript answer: the decoded calls (a list, or the
    parser's own non-list when it found no call), or an error string when the answer does not parse."""
    if language not in DECODERS:
        raise ValueError(f"no BFCL prompting decoder for {language!r}; decoders: {', '.join(DECODERS)}")
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    try:
        return DECODERS[language](body[1:-1])  # BFCL drops the first and last character, whatever they are
    except (JavaSyntaxError, JsSyntaxError, RecursionError) as err:
        return f"Invalid syntax. Failed to decode AST. {err}"


def answer_calls_text(text: str) -> str:
    """The calls of a text answer: after its ``<thinking>`` block, inside its ``<function>`` wrapping if any."""
    _, rest = split_reasoning(text)
    if rest.startswith(FUNCTION_OPEN):
        inner, _, after = rest[len(FUNCTION_OPEN) :].partition(FUNCTION_CLOSE)
        if not after.strip():
            rest = inner.strip()
    return rest


def decode_text_answer(text: str, language: str) -> Any:
    """A text answer (``answer_style=toolgt_text``) in a Java or JavaScript category, decoded as BFCL decodes a
    prompting model's answer."""
    return decode_prompting(answer_calls_text(text), language)


__all__ = ["DECODERS", "answer_calls_text", "decode_prompting", "decode_text_answer"]
