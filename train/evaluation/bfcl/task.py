"""BFCL as a generation task, and its ``ScorerSpec`` (registered as ``bfcl`` in ``train.evaluation.SCORERS``).

=========== ============================================== ==========================================
task        turn written                                   prediction row
=========== ============================================== ==========================================
bfcl        the reader's gold turn, else a new turn        ``{"id", "result": [{name: {arg: value}}],
                                                           "well_formed"}``
=========== ============================================== ==========================================

In the Java and JavaScript categories a text answer (``answer_style=toolgt_text``: the generation carries the
``answer_text`` the format read) is decoded as BFCL decodes a prompting model's answer (``decode``), so values
arrive as strings of source text; native calls keep their JSON values, as BFCL's function-calling handlers do.
A failed generation gets the error text as ``result``, BFCL's own decode-failure form (wrong for call categories,
"no call" for irrelevance, as in the leaderboard). Only the single-turn AST categories are generated: multi-turn
and agentic ones need BFCL's executors. The task also reports ``well_formed_rate`` (``task_base.well_formed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from train.evaluation import ScorerSpec
from train.evaluation.bfcl.decode import DECODERS, decode_text_answer
from train.evaluation.bfcl.scorer import CATEGORIES, canonical_category, is_call_list, score_bfcl
from train.evaluation.task_base import EvalItem, Task, well_formed, well_formed_rate
from train.schema import Conversation


class BfclTask(Task):
    """BFCL AST categories, scored per category with BFCL's checker (``train.evaluation.bfcl.scorer``)."""

    name = "bfcl"
    native_source = "bfcl"

    def target(self, conv: Conversation) -> int:
        meta = conv.meta
        if "question_turns" in meta or "bfcl_functions" not in meta:
            raise ValueError(
                "not a single-turn BFCL question (multi-turn and agentic categories need BFCL's executors)"
            )
        try:
            spec = CATEGORIES[canonical_category(str(meta.get("category")))]
        except ValueError as err:
            raise ValueError(str(err)) from None
        if spec.check not in ("irrelevance", "relevance") and "ground_truth" not in meta:
            raise ValueError(f"category {spec.name} needs meta.ground_truth (read the possible-answer file too)")
        last = len(conv.messages) - 1
        # the reader appends the gold turn; without an answer file the question ends with the user
        return last if last >= 0 and conv.messages[last].role == "assistant" else len(conv.messages)

    def prediction(self, item: EvalItem, generation: Any) -> dict[str, Any]:
        language = CATEGORIES[canonical_category(str(item.conversation.meta.get("category")))].language
        answer = generation.answer_text  # set when the format read the answer as text
        if language in DECODERS and generation.text is not None and answer is not None:
            result = decode_text_answer(answer, language)  # BFCL's Java/JS reading, not the Python one
            return {"id": item.id, "result": result, "well_formed": is_call_list(result) and len(result) > 0}
        read = {"well_formed": well_formed(generation)}
        if generation.error:
            return {"id": item.id, "result": generation.error, **read}
        # Native calls keep their JSON values, as BFCL's function-calling handlers do (Java/JS tools declare strings).
        return {"id": item.id, "result": [{call.name: call.arguments} for call in generation.tool_calls], **read}

    def score(self, items: Sequence[EvalItem], predictions: list[dict[str, Any]]) -> dict[str, Any]:
        by_category: dict[str, list[int]] = {}
        for position, item in enumerate(items):
            by_category.setdefault(canonical_category(str(item.conversation.meta["category"])), []).append(position)
        per_item: list[dict[str, Any]] = []
        sections: dict[str, Any] = {}
        for category, positions in sorted(by_category.items()):
            chosen = [items[p] for p in positions]
            questions = [{"id": item.id, "function": item.conversation.meta["bfcl_functions"]} for item in chosen]
            answers = [{"id": item.id, "ground_truth": item.conversation.meta.get("ground_truth")} for item in chosen]
            result = score_bfcl([predictions[p] for p in positions], questions, answers, category)
            sections[category] = {key: result[key] for key in ("accuracy", "correct", "total")}
            per_item += [{**row, "category": category} for row in result["per_item"]]
        correct = sum(section["correct"] for section in sections.values())
        total = sum(section["total"] for section in sections.values())
        overall = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
        rate = well_formed_rate(predictions)
        return {"overall": overall, "by_category": sections, "well_formed_rate": rate, "per_item": per_item}


SPEC = ScorerSpec(
    score=score_bfcl,
    task=BfclTask,
    layout="""\
--references QUESTIONS.json [--references POSSIBLE_ANSWER.json] --category NAME (default: read from
the questions file name). predictions: {"id", "result": [{"func_name": {"arg": value}}]}.
Every category and the leaderboard summaries: --predictions RESULT_DIR --references BFCL_DATA_DIR
(files [BFCL_vN_]CATEGORY[_result].json[l]; possible_answer/ inside the data folder)
[--category NAME ...] [--summary v4|v2]: accuracy per category, weighted/unweighted summaries.""",
)

__all__ = ["SPEC", "BfclTask"]
