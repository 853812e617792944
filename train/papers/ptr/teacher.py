"""PTR's functional coverage mapping questions (seed 001, §2.2, Appendix D.1-D.2) and the offline teacher's answers.

Two stages, each one ``TeacherRequest`` sent as a single user message (the released code sends each prompt as one
user turn; the prompts open with their own role line, so there is no system prompt):

* ``ptr.requirements`` (D.1, verbatim): the query's key requirements, one ``- `` line each.
* ``ptr.match`` (D.2, verbatim): the bundle's tools that fulfil ONE requirement, one ``- Name: description`` line
  each; asked once per requirement.

Where the PDF's extraction lost text (the words are the paper's, the line breaks ours):

* D.1's Example 2 lost its closing quote and the ``-`` of "Provides shopping cart functionality"; D.3's Listing 2
  (the same prompt, filled in) has both. D.1 shows the query as a bare ``XXX``; the listings quote it.
* D.2 shows the tools as ``Available Tools: XX:xxxxx; XX:xxxxxx.``; D.3's listings write one
  ``- **Name**: description`` line per tool, which we follow. D.2's last lines ("... list the tools from the
  available tools that can fulfill it. Requirement: "XXX" Matched Tools:") are split across a page in the figure;
  the listings give them whole. The typos "provid" and "requirments" are the paper's and stay.

Sampling: temperature 0 (§2.2; the released code's ``temperature=0``, ``max_tokens=1024``).

Reading the answers (never ``eval``): ``read_requirements`` takes the bullet lines (``-``, ``*``, ``•``, ``1.``),
or every non-empty line when none is bulleted, and stops where a model runs on into another example.
``read_matches`` keeps the names of the bundle's tools a line names (``- Name: ...``, ``- **Name**: ...``, case and
spacing forgiven); names outside the bundle are counted, never kept. The released code kept only lines starting
with ``Tool`` and then its caller dropped every name starting with ``tool``, so no matched tool survived; we keep
every matched bundle tool (see ``train.papers.ptr.coverage``).

The offline writers (no model; deterministic):

* requirements: ``split_requirements`` — the query's first paragraph (RecTools queries carry generator leftovers,
  "Explanation:" / "Tool Combination:" lists naming the gold tools, after a blank line; ``**`` marks dropped),
  cut at sentence ends (``.``, ``?``, ``!``, ``;``, a line break), at commas and at the conjunctions " and ",
  " then ", " as well as ", " also ", " plus ". A piece with fewer than ``MIN_WORDS`` content words (fillers such
  as "I want to", "the", "please" do not count) is not a requirement of its own: followed by a bare conjunction it
  joins the next piece ("find" + "and book a hotel"), otherwise the previous one ("Paris" + ", France"), with the
  text that separated them. Repeated pieces (case-insensitive) are dropped; a query with no piece is one
  requirement. The answer is D.1's layout, ``- `` per requirement, so it goes through the same reader.
* match: a bundle tool matches when the cosine of the embeddings of the requirement and of ``"Name: description"``
  is at least ``threshold``; the answer lists them in bundle order, or ``None``. The embedder and the threshold
  are bound into the writer by ``offline_writers(embedder, threshold)`` (no module state), and both are part of
  the backend's model name (``offline_version``), so the response cache never serves one threshold's answers to
  another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from train.teacher.backends import OfflineBackend, StageParams, TeacherRequest
from train.teacher.cache import ResponseCache, Teacher

REQUIREMENTS_STAGE, MATCH_STAGE = "ptr.requirements", "ptr.match"
OFFLINE_VERSION = "ptr-1"  # bump when an offline writer's text changes (it is part of the cache's model name)
PARAMS = StageParams(temperature=0.0, max_tokens=1024)  # §2.2, the released code
DEFAULT_THRESHOLD = 0.3  # the offline matcher's cosine threshold, set on training rows (docs/ptr.md, "Stages 2-3")
MIN_WORDS = 2  # content words a requirement needs to stand alone (the splitter's glue rule)

REQUIREMENTS_USER = (  # D.1
    "You are an assistant helping to extract key requirements from user queries.\n\n"
    "Example 1:\n"
    "User Query:\n"
    '"I want a website where users can create accounts, post messages, and follow other users."\n\n'
    "Key Requirements:\n"
    "- Users can create accounts\n"
    "- Users can post messages\n"
    "- Users can follow other users\n\n"
    "Example 2:\n"
    "User Query:\n"
    '"I need an e-commerce platform that supports product listings, shopping cart functionality, payment '
    'processing, and order tracking."\n\n'
    "Key Requirements:\n"
    "- Supports product listings\n"
    "- Provides shopping cart functionality\n"
    "- Handles payment processing\n"
    "- Offers order tracking\n\n"
    "Now, given the following user query, extract the key requirements.\n\n"
    "User Query:\n"
    '"{query}"\n\n'
    "Key Requirements:\n"
)
MATCH_HEAD = (  # D.2, up to its tool list
    "You are an assistant helping to match tools to requirements, as long as the tool description can roughly "
    "provid the needed information for requirments, it does not need to be very specific, ignore the proper "
    "nouns.\n\n"
    "Available Tools:\n"
)
MATCH_TAIL = (  # D.2, after its tool list
    "\nExample 1:\n"
    "Requirement:\n"
    '"I want to know the latest news about Tesla"\n\n'
    "Matched Tools:\n"
    "- NewsTool: Stay connected to global events with our up-to-date news around the world.\n\n"
    "Example 2:\n"
    "Requirement:\n"
    '"Please provide me with the current stock price of Apple"\n\n'
    "Matched Tools:\n"
    "- FinanceTool: Stay informed with the latest financial updates, real-time insights, and analysis on a wide "
    "range of options, stocks, cryptocurrencies, and more.\n\n"
    "Now, for the following requirement, list the tools from the available tools that can fulfill it.\n\n"
    "Requirement:\n"
    '"{requirement}"\n\n'
    "Matched Tools:\n"
)
NO_MATCH = "None"


# ---------------------------------------------------------------- the prompts


def requirements_prompt(query: str) -> str:
    return REQUIREMENTS_USER.replace("{query}", query)


def match_prompt(requirement: str, tools: Mapping[str, str]) -> str:
    listing = "".join(f"- **{name}**: {description}\n" for name, description in tools.items())
    return MATCH_HEAD + listing + MATCH_TAIL.replace("{requirement}", requirement)


def requirements_request(query: str) -> TeacherRequest:
    return TeacherRequest(REQUIREMENTS_STAGE, None, requirements_prompt(query), PARAMS, context={"query": query})


def match_request(requirement: str, tools: Mapping[str, str]) -> TeacherRequest:
    context = {"requirement": requirement, "tools": dict(tools)}
    return TeacherRequest(MATCH_STAGE, None, match_prompt(requirement, tools), PARAMS, context=context)


# ---------------------------------------------------------------- reading the answers back

_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)])\s+")
_RUN_ON = re.compile(r"^\s*(?:example\s*\d*\s*:|user query\s*:|requirement\s*:|now, )", re.IGNORECASE)
_HEADER = re.compile(r"^\s*(?:key requirements(?: extracted)?|matched tools|tool matches)\s*:?\s*$", re.IGNORECASE)


def _clean(text: str) -> str:
    return text.replace("**", "").strip().strip("\"'`").strip()


def read_requirements(text: str) -> list[str]:
    """D.1's answer -> its requirements (empty when nothing readable: the caller counts it)."""
    lines: list[tuple[bool, str]] = []
    for line in text.splitlines():
        if _RUN_ON.match(line) and lines:  # the model ran on into another example
            break
        if not line.strip() or _HEADER.match(line) or _RUN_ON.match(line):
            continue
        bulleted = bool(_BULLET.match(line))
        lines.append((bulleted, _clean(_BULLET.sub("", line, count=1))))
    picked = [t for b, t in lines if b] if any(b for b, _ in lines) else [t for _, t in lines]
    return [t for t in picked if t]


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).lower()


_SUMMARY = re.compile(r"matched with tools?\s*:\s*(.*)$", re.IGNORECASE)
_NONE = ("none", "n/a", "no tools", "no matched tools")


def _line_names(line: str) -> tuple[list[str], bool]:
    """The names one answer line gives, and whether it has the shape of a list entry (not a sentence of prose).
    ``- Name: description`` gives Name; the listings' summary ``- Requirement: '...' matched with Tools: A, B``
    gives A and B."""
    body = _clean(_BULLET.sub("", line, count=1))
    summary = _SUMMARY.search(body)
    if summary:
        return [_clean(n) for n in summary.group(1).split(",")], True
    head, colon, _ = body.partition(":")
    return [_clean(head)], bool(colon) or bool(_BULLET.match(line))


def read_matches(text: str, bundle: Sequence[str]) -> tuple[list[str], list[str]]:
    """D.2's answer -> (bundle tools it names, in bundle order; names it gives that are not in the bundle).

    A line names a tool by what precedes its first ``:`` (or the whole line without one); ``None`` lines name
    nothing. ``([], [])`` for an answer that names nothing, whether it says ``None`` or is unreadable."""
    by_key = {_key(name): name for name in bundle}
    named: set[str] = set()
    unknown: list[str] = []
    for line in text.splitlines():
        if _RUN_ON.match(line) and (named or unknown):
            break
        if not line.strip() or _HEADER.match(line) or _RUN_ON.match(line):
            continue
        heads, listed = _line_names(line)
        for head in heads:
            if not head or head.lower().rstrip(".") in _NONE:
                continue
            if _key(head) in by_key:
                named.add(by_key[_key(head)])
            elif listed and len(head.split()) <= 4:  # a tool named outside the bundle (prose is not counted)
                unknown.append(head)
    return [name for name in bundle if name in named], unknown


def match_answer(names: Sequence[str], tools: Mapping[str, str]) -> str:
    """The answer D.2's examples show: ``- Name: description`` per matched tool, or ``None``."""
    return "\n".join(f"- {name}: {tools.get(name, '')}" for name in names) or NO_MATCH


# ---------------------------------------------------------------- the offline writers

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.?!;])\s+|\n+")
_CUT = re.compile(r"(,\s*(?:and\s+|then\s+)?|\s+(?:and|then|as well as|also|plus)\s+)", re.IGNORECASE)
# fmt: off
_FILLER = frozenset({
    "i", "i'm", "im", "me", "my", "we", "our", "you", "your", "can", "could", "would", "please", "want", "need",
    "like", "to", "a", "an", "the", "it", "its", "and", "or", "of", "for", "in", "on", "with", "at", "by", "also",
    "then",
})
# fmt: on


def content_words(text: str) -> int:
    """Words that carry content: not a filler ("I want to", "the", "please") and not a lone number."""
    words = re.findall(r"[a-z0-9'&-]+", text.lower())
    return sum(1 for w in words if w not in _FILLER and not w.isdigit())


def split_requirements(query: str, min_words: int = MIN_WORDS) -> list[str]:
    """The offline D.1: the query's first paragraph cut at sentence ends, commas and conjunctions; a piece with
    fewer than ``min_words`` content words is glued back, with its cut, onto its neighbour (module docstring)."""
    text = query.replace("**", " ").strip()
    paragraphs = [p.strip() for p in _PARAGRAPH.split(text) if p.strip()]
    text = paragraphs[0].strip("\"'") if paragraphs else ""  # what follows a blank line is not the request
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        tokens = _CUT.split(sentence.strip(" \t\"'.?!;:"))  # piece, cut, piece, cut, ... (the cuts are kept)
        glued: list[str] = []
        carry = ""  # a short piece waiting for the piece after it ("find" + " and " + "book a hotel")
        for i in range(0, len(tokens), 2):
            part = carry + tokens[i].strip(" \t\"'.?!;:")
            before, after = (tokens[i - 1] if i else ""), (tokens[i + 1] if i + 1 < len(tokens) else "")
            carry = ""
            if not part.strip():
                continue
            short = content_words(part) < min_words
            if short and after and "," not in after:  # a bare conjunction follows: the verbs share what follows
                carry = part + after
            elif short and glued:  # "Paris, France": the piece completes the one before it
                glued[-1] = f"{glued[-1]}{before}{part}"
            else:
                glued.append(part)
        if carry:
            glued.append(carry.strip())
        pieces.extend(glued)
    seen: set[str] = set()
    unique = [p for p in pieces if not (p.lower() in seen or seen.add(p.lower()))]
    return unique or ([text] if text else [])


def tool_text(name: str, description: str) -> str:
    """How a tool is embedded everywhere in PTR: the released code's ``"name: description"``."""
    return f"{name}: {description}"


def offline_requirements(request: TeacherRequest) -> str:
    return "\n".join(f"- {r}" for r in split_requirements(str(request.context["query"])))


def embedding_matcher(embedder: Any, threshold: float = DEFAULT_THRESHOLD):
    """The offline D.2 writer: bundle tools whose ``"name: description"`` embedding has cosine >= ``threshold``
    with the requirement's. ``embedder``: ``encode(list[str]) -> unit rows`` (``train.papers.ptr.rerank.Embedder``).
    Tool vectors are kept per writer (a bundle's tools are asked about once per requirement)."""
    memo: dict[str, np.ndarray] = {}

    def vectors(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            memo.update(zip(missing, np.asarray(embedder.encode(missing), dtype=np.float32)))
        return np.stack([memo[t] for t in texts])

    def write(request: TeacherRequest) -> str:
        tools: Mapping[str, str] = request.context["tools"]
        if not tools:
            return NO_MATCH
        requirement = np.asarray(embedder.encode([str(request.context["requirement"])]), dtype=np.float32)[0]
        sims = vectors([tool_text(n, d) for n, d in tools.items()]) @ requirement
        return match_answer([n for n, s in zip(tools, sims) if s >= threshold], tools)

    return write


def offline_writers(embedder: Any, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    return {REQUIREMENTS_STAGE: offline_requirements, MATCH_STAGE: embedding_matcher(embedder, threshold)}


def offline_version(embedder_name: str, threshold: float = DEFAULT_THRESHOLD) -> str:
    """The offline backend's model name: the writers' version, the embedder and the threshold (the cache key)."""
    return f"{OFFLINE_VERSION}:{embedder_name}:{threshold:g}"


def offline_backend(embedder: Any, threshold: float = DEFAULT_THRESHOLD) -> OfflineBackend:
    name = str(getattr(embedder, "name", type(embedder).__name__))
    return OfflineBackend(offline_writers(embedder, threshold), offline_version(name, threshold))


def offline_teacher(embedder: Any, threshold: float = DEFAULT_THRESHOLD, cache: ResponseCache | None = None) -> Teacher:
    """PTR's offline LLM: the splitter and the embedding matcher behind the teacher's cache and counts."""
    return Teacher(offline_backend(embedder, threshold), cache)


__all__ = [
    "DEFAULT_THRESHOLD",
    "MATCH_STAGE",
    "MIN_WORDS",
    "NO_MATCH",
    "OFFLINE_VERSION",
    "PARAMS",
    "REQUIREMENTS_STAGE",
    "embedding_matcher",
    "match_answer",
    "match_prompt",
    "match_request",
    "offline_backend",
    "offline_requirements",
    "offline_teacher",
    "offline_version",
    "offline_writers",
    "read_matches",
    "read_requirements",
    "requirements_prompt",
    "requirements_request",
    "split_requirements",
    "tool_text",
]
