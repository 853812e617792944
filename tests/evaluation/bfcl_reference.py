"""The official BFCL checker (bfcl-eval, installed --no-deps) and a comparison corpus built from BFCL's data.

Used by tests/evaluation/test_bfcl_parity.py and benchmarks/bench_bfcl_scorer.py. Nothing here is scorer
logic: the official side calls bfcl-eval's own functions, with its decoder taken as the identity (our
predictions are BFCL's decoded output already), exactly as ``eval_runner._evaluate_single_ast_entry`` and
``_evaluate_single_relevance_entry`` use them.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bfcl_corpus import perturb_ast_item, perturb_relevance_item

from train.evaluation.bfcl.scorer import CATEGORIES, canonical_category, score_bfcl

PLAIN_MODEL = "tooltrain-plain"  # a model name without "_" (BFCL maps "_" to "/" before its lookup)
DOT_MODEL = "tooltrain-dot"  # the same with BFCL's underscore_to_dot option on

V2_FILE_NAMES = {"simple_python": "simple", "simple_java": "java", "simple_javascript": "javascript"}


def load_official() -> types.SimpleNamespace:
    """Import bfcl-eval's checker without its vendor SDKs: ``constants.model_config`` (which imports them
    all) is replaced by a stub holding only the two model entries the checker looks up."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-root-"))  # it creates dirs there
    if "bfcl_eval.constants.model_config" not in sys.modules:
        stub = types.ModuleType("bfcl_eval.constants.model_config")
        stub.MODEL_CONFIG_MAPPING = {}
        sys.modules["bfcl_eval.constants.model_config"] = stub
    import bfcl_eval
    from bfcl_eval import utils
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval import ast_checker

    mapping = sys.modules["bfcl_eval.constants.model_config"].MODEL_CONFIG_MAPPING
    for name, dot in ((PLAIN_MODEL, False), (DOT_MODEL, True)):
        mapping.setdefault(name, _model_config(name, dot))
    return types.SimpleNamespace(
        ast_checker=ast_checker.ast_checker,
        utils=utils,
        Language=Language,
        data_dir=Path(bfcl_eval.__file__).parent / "data",
        mapping=mapping,
    )


def _model_config(name: str, underscore_to_dot: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        underscore_to_dot=underscore_to_dot,
        display_name=name,
        url="",
        org="tooltrain",
        license="Apache-2.0",
        input_price=None,
        output_price=None,
        is_fc_model=False,
    )


@dataclass
class Case:
    corpus: str  # "v2" | "v4"
    category: str  # canonical (v4) name
    item_id: str
    label: str  # which perturbation
    result: Any
    functions: list
    ground_truth: list | None
    underscore_to_dot: bool = False

    @property
    def key(self) -> str:
        return f"{self.corpus}/{self.category}/{self.item_id}/{self.label}"


def official_verdict(official: types.SimpleNamespace, case: Case) -> tuple[str, str]:
    """("valid" | "invalid" | "raises <Exception>", error_type) from bfcl-eval's own code.

    The error types of the decode and (ir)relevance steps are the labels ``eval_runner`` writes.
    """
    spec = CATEGORIES[case.category]
    decoded = not isinstance(case.result, str)  # a string result stands for a failed decode
    if spec.check in ("irrelevance", "relevance"):
        has_call = decoded and not official.utils.is_empty_output(case.result)
        if spec.check == "irrelevance":
            return ("invalid", "irrelevance_error:decoder_success") if has_call else ("valid", "")
        return ("valid", "") if has_call else ("invalid", "relevance_error:decoder_failed")
    if not decoded:
        return "invalid", "ast_decoder:decoder_failed"
    if not official.utils.is_function_calling_format_output(case.result):
        return "invalid", "ast_decoder:decoder_wrong_output_format"
    language = {"python": official.Language.PYTHON, "java": official.Language.JAVA}.get(
        spec.language, official.Language.JAVASCRIPT
    )
    model = DOT_MODEL if case.underscore_to_dot else PLAIN_MODEL
    try:
        verdict = official.ast_checker(case.functions, case.result, case.ground_truth, language, case.category, model)
    except Exception as error:  # noqa: BLE001 -- the official checker raising is what the exception list records
        return f"raises {type(error).__name__}", ""
    return ("valid", "") if verdict["valid"] else ("invalid", verdict["error_type"])


def our_verdict(case: Case) -> tuple[str, str]:
    """Through the public API, one single-item category at a time."""
    question = {"id": case.item_id, "function": case.functions}
    answers = None if case.ground_truth is None else [{"id": case.item_id, "ground_truth": case.ground_truth}]
    scored = score_bfcl(
        [{"id": case.item_id, "result": case.result}],
        [question],
        answers,
        case.category,
        underscore_to_dot=case.underscore_to_dot,
    )
    item = scored["per_item"][0]
    return ("valid" if item["valid"] else "invalid"), item["error_type"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def category_files(data_dir: Path, version: str, category: str) -> tuple[Path, Path | None]:
    stem = V2_FILE_NAMES.get(category, category) if version == "v2" else category
    name = f"BFCL_{version}_{stem}.json"
    answers = data_dir / "possible_answer" / name
    return data_dir / name, (answers if answers.exists() else None)


def load_category(data_dir: Path, version: str, category: str) -> tuple[list[dict], list[dict] | None]:
    questions_path, answers_path = category_files(data_dir, version, category)
    return read_jsonl(questions_path), (read_jsonl(answers_path) if answers_path else None)


def build_corpus(data_dirs: dict[str, Path], keep: Callable[[str, str], bool] | None = None) -> list[Case]:
    """Every item of every scorable category of each version, each with its gold prediction and perturbations.

    ``keep(category, item_id)`` selects a subset of the items (all of each kept item's cases are built).
    """
    cases = []
    for version, data_dir in data_dirs.items():
        for category in CATEGORIES:
            questions, answers = load_category(data_dir, version, canonical_category(category))
            for position, question in enumerate(questions):
                if keep is not None and not keep(category, question["id"]):
                    continue
                functions = question["function"]
                if answers is None:
                    for label, result in perturb_relevance_item(functions):
                        cases.append(Case(version, category, question["id"], label, result, functions, None))
                    continue
                ground_truth = answers[position]["ground_truth"]
                language = CATEGORIES[category].language
                for label, result, dot in perturb_ast_item(functions, ground_truth, language):
                    cases.append(Case(version, category, question["id"], label, result, functions, ground_truth, dot))
    return cases
