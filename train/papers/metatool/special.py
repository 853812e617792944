"""The Meta-Tool paper's special functions (seed 000, A.4, Figures 4–6) and their executor.

Definitions, as canonical ``Tool``s (JSON Schema parameters, the paper's descriptions with its
line breaks joined by single spaces):

* ``meta_tool(tool_description: str, param_description: list[str])`` — Figure 4. The paper puts
  ``"required"`` beside ``"parameters"``; JSON Schema wants it inside, so it is moved there.
* ``ToolSearcher(keywords: str)`` — Figure 5, API-Bank's keyword searcher (the baseline). The paper
  writes it in API-Bank's ``input_parameters`` / ``output_parameters`` form; the input becomes a JSON
  Schema property (``required``: a search without keywords has nothing to look for) and the output
  declaration is kept as ``TOOL_SEARCHER_OUTPUT``.
* ``get_user_input()`` — Figure 6: "Not invoke any additional functions"; the "non-function" a model
  calls on chat turns.

Executing a call (``SpecialExecutor.execute``) gives the entry the paper's tool turn holds for it
(Figures 12 and 15)::

    {"name": "meta_tool", "function_id": 0, "results": {"name", "description", "parameters"}}

``function_id`` is the call's position in its assistant turn; ``results`` is the retrieved tool's
JSON when k = 1 (exactly the figures' layout) and the list of the top-k tool JSONs, best first, when
k > 1. ToolSearcher answers ``{"name": "ToolSearcher", "function_id", "results": {"best_matches": ...}}``
after its declared output parameter (a dict for k = 1, a list otherwise: its ``Union[List[dict], dict]``).
``get_user_input`` returns ``None``: no tool message follows it (in Figure 19 the turn simply ends).
A call whose arguments break the definition gets ``{"name", "function_id", "error": reason}``.
A tool message carries one entry in a list, ``[{...}]``, as the figures print the tool turn.

The meta_tool call contract, shared by the data builder, retrieval evaluation and the dataset's
validation: ``meta_tool_call`` writes a hypothesis as the paper's call JSON, ``parse_rewrite`` reads
a teacher's answer, ``verify_meta_call`` is A.3's structure check. ``with_retrieved_tools`` (adding the
tools a meta_tool result returned to a conversation: they are defined by retrieval) lives in
``train.validate``, whose ``check_conversation`` applies that rule itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from train.papers.metatool.baselines import KeywordIndex
from train.papers.metatool.retrieve import DEFAULT_ALPHA, DEFAULT_K, ToolHypothesis, search
from train.retrieval.index import ToolIndex, tool_json
from train.schema import Message, Tool, ToolCall

# The open-world rule (tools a meta_tool result returned count as defined) is validation's, in one place;
# it is re-exported here with the rest of the meta_tool call contract.
from train.validate import RETRIEVAL_TOOL_NAME as META_TOOL_NAME
from train.validate import with_retrieved_tools  # noqa: F401

TOOL_SEARCHER_NAME = "ToolSearcher"
NON_FUNCTION_NAME = "get_user_input"

META_TOOL = Tool(
    name=META_TOOL_NAME,
    description=(
        "Use this tool when no suitable tool is available in the current list, and an external tool is "
        "required to provide an accurate response to the user."
    ),
    parameters={
        "type": "object",
        "properties": {
            "tool_description": {
                "description": "A clear and concise description of the external tool you need to use.",
                "type": "string",
            },
            "param_description": {
                "type": "array",
                "description": "A list of descriptions for each parameter required by the external tool.",
                "items": {"type": "string"},
            },
        },
        "required": ["tool_description", "param_description"],
    },
)

TOOL_SEARCHER = Tool(
    name=TOOL_SEARCHER_NAME,
    description="Searches for relevant tools in library based on the keywords.",
    parameters={
        "type": "object",
        "properties": {"keywords": {"type": "string", "description": "The keyword to search for."}},
        "required": ["keywords"],
    },
)
TOOL_SEARCHER_OUTPUT = {"best_matches": {"type": "Union[List[dict], dict]", "description": "The best match tool(s)."}}

GET_USER_INPUT = Tool(
    name=NON_FUNCTION_NAME,
    description="Not invoke any additional functions.",
    parameters={"type": "object", "properties": {}},
)

SPECIAL_TOOLS: dict[str, Tool] = {t.name: t for t in (META_TOOL, TOOL_SEARCHER, GET_USER_INPUT)}


def is_special(name: str) -> bool:
    return name in SPECIAL_TOOLS


class SpecialExecutor:
    """Runs special-function calls against one tool library."""

    def __init__(
        self, index: ToolIndex, *, alpha: float = DEFAULT_ALPHA, k: int = DEFAULT_K, keyword_scoring: str = "bm25"
    ):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.index = index
        self.alpha = alpha
        self.k = k
        self.keywords = KeywordIndex(index, keyword_scoring)
        self._by_name = {t.name: t for t in index.tools}

    def execute(self, call: ToolCall, function_id: int = 0) -> dict[str, Any] | None:
        """The result entry for one special call; None for get_user_input. ValueError for other tools."""
        if call.name == NON_FUNCTION_NAME:
            return None
        if call.name == META_TOOL_NAME:
            try:
                hypothesis = ToolHypothesis.from_arguments(call.arguments)
            except ValueError as err:
                return {"name": call.name, "function_id": function_id, "error": str(err)}
            names = [name for name, _ in search(self.index, [hypothesis], alpha=self.alpha, k=self.k)[0]]
            return {"name": call.name, "function_id": function_id, "results": self._layout(names)}
        if call.name == TOOL_SEARCHER_NAME:
            keywords = call.arguments.get("keywords") if isinstance(call.arguments, dict) else None
            if not isinstance(keywords, str) or not keywords.strip():
                return {
                    "name": call.name,
                    "function_id": function_id,
                    "error": "ToolSearcher needs a non-empty string keywords",
                }
            names = self.keywords.search([keywords], self.k)[0]
            return {"name": call.name, "function_id": function_id, "results": {"best_matches": self._layout(names)}}
        raise ValueError(f"{call.name!r} is not a special function ({', '.join(SPECIAL_TOOLS)})")

    def _layout(self, names: list[str]) -> dict[str, Any] | list[dict[str, Any]]:
        found = [tool_json(self._by_name[name]) for name in names]
        return found[0] if self.k == 1 and found else found

    def tool_messages(self, calls: list[ToolCall]) -> list[Message]:
        """Tool messages answering an assistant turn's special calls, in call order (get_user_input: none).
        Calls to ordinary tools are skipped: their results come from elsewhere."""
        messages: list[Message] = []
        for position, call in enumerate(calls):
            if not is_special(call.name):
                continue
            entry = self.execute(call, function_id=position)
            if entry is not None:
                messages.append(result_message(call, entry))
        return messages


def result_message(call: ToolCall, entry: dict[str, Any]) -> Message:
    return Message(role="tool", content=json.dumps([entry], ensure_ascii=False), tool_call_id=call.id, name=call.name)


# ---------------------------------------------------------------- the meta_tool call contract


def meta_tool_call(hypothesis: ToolHypothesis) -> dict:
    """The hypothesis as the paper writes a meta_tool call: ``{"name", "parameters": {...}}``."""
    arguments = {
        "tool_description": hypothesis.tool_description,
        "param_description": list(hypothesis.param_description),
    }
    return {"name": META_TOOL_NAME, "parameters": arguments}


def verify_meta_call(call: Any) -> str | None:
    """A.3's JSON-structure check of one meta_tool invocation: the reason it fails, or None.

    It must be a JSON object ``{"name": "meta_tool", "parameters": {...}}`` whose parameters are
    exactly ``tool_description`` (non-empty text) and ``param_description`` (a list of texts); the
    parameter rules are the retriever's (``ToolHypothesis.from_arguments``).
    """
    if not isinstance(call, dict):
        return f"not a JSON object but {type(call).__name__}"
    if set(call) != {"name", "parameters"}:
        return f"keys must be exactly name and parameters, got {sorted(call)}"
    if call["name"] != META_TOOL_NAME:
        return f"name is {call['name']!r}, not {META_TOOL_NAME!r}"
    try:
        ToolHypothesis.from_arguments(call["parameters"])
    except ValueError as err:
        return str(err)
    return None


def parse_rewrite(text: str) -> Any:
    """A teacher's answer -> JSON value; one surrounding Markdown code fence is tolerated. ValueError when not JSON."""
    body = text.strip()
    fenced = re.fullmatch(r"```[A-Za-z]*\s*\n?(.*?)\n?```", body, flags=re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    return json.loads(body)
