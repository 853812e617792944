"""``tooltrain eval score bfcl --predictions RESULT_DIR --references DATA_DIR``: every category, and the leaderboard.

BFCL keeps one file per category on both sides: ``bfcl generate`` writes ``result/<model>/BFCL_v3_<category>_result
.json`` and the data folder holds ``BFCL_v3_<category>.json`` with ``possible_answer/`` beside it. Given a folder
of prediction files (BFCL's decoded ``{"id", "result": [{"func_name": {"arg": value}}]}`` lines, one file per
category, named ``[BFCL_vN_]<category>[_result].json[l]``) and the BFCL data folder, this scores each category
with ``score_bfcl`` and aggregates them with ``summarize_bfcl``: BFCL's weighted and unweighted summaries
(``--summary v4``, the default, ``v3`` or ``v2``: the formulas of ``train/evaluation/bfcl/scorer.py``; v2 is chosen
by itself when every prediction file is named ``BFCL_v2_*``), the leaderboard's table (``--summary bfcl_v4``: v4 and
v3 overall and every leaderboard column, beside published reference models, ``bfcl.leaderboard``), or a paper's
(``--summary NAME``: the ``Summary`` of ``train.papers``, which ``tooltrain eval run bfcl MODEL --summary NAME``
prints too).
``--category`` (repeatable) restricts the categories scored.

Prints one row per category (accuracy, correct, total), the summary numbers, the categories the summary
counts as 0 (not scored here: exec, REST, multi-turn and agentic categories need BFCL's executors), and
every issue per category (missing predictions, unknown or repeated ids, unreadable lines). ``-o`` writes
``{"bench", "predictions", "references", "metrics": {"by_category", "summary"}, "counts", "issues"}``;
``--per-item`` one line per item with its ``category``. Exit 2 when an input is missing or unreadable.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from train.base.records import SourceError
from train.commands.eval.score_report import issue_lines, metric_tables, read_rows, split_result
from train.commands.outputs import write_results

SUFFIXES = (".json", ".jsonl")
_VERSION = re.compile(r"^BFCL_v(\d+)_")


def category_of(path: Path) -> str:
    """The canonical category a BFCL file is for (``BFCL_v3_simple_python_result.json`` -> simple_python)."""
    from train.evaluation.bfcl.scorer import canonical_category

    return canonical_category(path.stem.removesuffix("_result"))


def unscorable_reason(path: Path) -> str:
    from train.evaluation.bfcl.summary import V2_CATEGORIES, V4_CATEGORIES

    bare = _VERSION.sub("", path.stem.removesuffix("_result"))
    if bare in (*V4_CATEGORIES, *V2_CATEGORIES):
        return f"{bare}: not scorable here (exec, REST, multi-turn and agentic categories need BFCL's executors)"
    return "not named after a BFCL category"


def files_by_category(folder: Path, role: str) -> tuple[dict[str, Path], list[dict[str, str]]]:
    """(category -> file, files that name no scorable category) for the JSON files directly in ``folder``."""
    if not folder.is_dir():
        raise SourceError(f"{folder}: {'not a folder' if folder.exists() else 'no such folder'} ({role})")
    found: dict[str, Path] = {}
    others: list[dict[str, str]] = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in SUFFIXES):
        try:
            category = category_of(path)
        except ValueError:
            others.append({"file": str(path), "reason": unscorable_reason(path)})
            continue
        if category in found:
            raise SourceError(f"{found[category]} and {path} are both {role} for {category}")
        found[category] = path
    return found, others


def summary_version(files: list[Path], requested: str | None) -> str:
    if requested:
        return requested
    versions = {match.group(1) for match in (_VERSION.match(path.name) for path in files) if match}
    return "v2" if versions == {"2"} else "v4"


def score_folders(args: argparse.Namespace) -> dict[str, Any]:
    """Every category's result, the summary, and the files not scored; SourceError when an input is unusable."""
    from train.evaluation.bfcl.scorer import canonical_category, score_bfcl
    from train.evaluation.bfcl.summary import summarize_bfcl
    from train.papers import summaries

    if len(args.references) != 1:
        raise SourceError(
            f"with a folder of predictions, give the BFCL data folder once as --references (got {len(args.references)})"
        )
    data = args.references[0]
    predicted, not_scored = files_by_category(args.predictions, "prediction files")
    questions, _ = files_by_category(data, "question files")
    if args.category:
        try:
            wanted = [canonical_category(name) for name in args.category]
        except ValueError as err:
            raise SourceError(f"--category: {err}") from None
        absent = [name for name in wanted if name not in predicted]
        if absent:
            raise SourceError(f"no prediction file for {', '.join(absent)} in {args.predictions}")
        predicted = {name: predicted[name] for name in wanted}
    if not predicted:
        raise SourceError(f"{args.predictions}: no prediction file named after a scorable BFCL category")
    results: dict[str, Any] = {}
    for category, path in sorted(predicted.items()):
        if category not in questions:
            raise SourceError(f"no questions file for {category} in {data}")
        answers_path = data / "possible_answer" / questions[category].name
        rows, pred_where, bad = read_rows(path, "prediction")
        question_rows, ref_where, bad_refs = read_rows(questions[category], "reference")
        answers = None
        if answers_path.is_file():
            answers, where, more_bad = read_rows(answers_path, "reference")
            ref_where = {**where, **ref_where}
            bad_refs += more_bad
        try:
            result = score_bfcl(rows, question_rows, answers, category)
        except ValueError as err:  # a category that needs its possible-answer file
            raise SourceError(f"{err} ({answers_path} not found)") from None
        result["missing_prediction_ids"] = [
            item["id"] for item in result["per_item"] if item.get("error_type") == "missing_prediction"
        ]
        _, issues = split_result(result)
        results[category] = {
            "result": result,
            "issues": issues,
            "unreadable": bad + bad_refs,
            "where": {"predictions": pred_where, "references": ref_where},
        }
    scores = {category: entry["result"] for category, entry in results.items()}
    if args.summary == "bfcl_v4":  # the leaderboard's table (v4 and v3 overall, reference models)
        from train.evaluation.bfcl.leaderboard import leaderboard, leaderboard_lines

        board = leaderboard(scores)
        lines = leaderboard_lines(board, ours=str(args.predictions.name))
        return {"categories": results, "summary": board, "paper_lines": lines, "not_scored": not_scored}
    paper = summaries().get(args.summary)
    if paper is not None:  # a paper's summary of the categories (--summary NAME, train.papers): its lines and data
        lines, summary = paper.lines("bfcl", {"by_category": scores}, [str(args.predictions)])
        return {"categories": results, "summary": summary, "paper_lines": lines, "not_scored": not_scored}
    version = summary_version(list(predicted.values()), args.summary)
    return {"categories": results, "summary": summarize_bfcl(scores, version), "not_scored": not_scored}


def run(args: argparse.Namespace) -> int:
    try:
        scored = score_folders(args)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    categories = scored["categories"]
    by_category = {
        name: {key: entry["result"][key] for key in ("accuracy", "correct", "total")}
        for name, entry in categories.items()
    }
    summary = scored["summary"]
    items = sum(entry["total"] for entry in by_category.values())
    print(f"bfcl: {items} items in {len(by_category)} categories from {args.predictions} against {args.references[0]}")
    paper_lines = scored.get("paper_lines")
    if paper_lines is not None:
        print(metric_tables({"by_category": by_category}))
        print("\n" + "\n".join(paper_lines))
    else:
        shown = {key: value for key, value in summary.items() if key not in ("categories", "missing")}
        print(metric_tables({"by_category": by_category, "summary": shown}))
    lines = []
    if paper_lines is None and summary["missing"]:  # a paper's lines list what they leave out themselves
        lines.append(
            f"categories not scored, counted as 0 by the {summary['version']} summary: {len(summary['missing'])}"
        )
        lines += textwrap.wrap(", ".join(summary["missing"]), 100, initial_indent="  ", subsequent_indent="  ")
    for row in scored["not_scored"]:
        lines.append(f"prediction file not scored: {row['file']}: {row['reason']}")
    for name, entry in categories.items():
        details = issue_lines(entry["issues"], entry["where"], entry["unreadable"])
        lines += [line if line.startswith(" ") else f"{name}: {line}" for line in details]
    if lines:
        print("\n" + "\n".join(lines))
    report = {
        "bench": "bfcl",
        "predictions": str(args.predictions),
        "references": [str(args.references[0])],
        "metrics": {"by_category": by_category, "summary": summary},
        "counts": {"items": items, "categories": len(by_category), "files_not_scored": len(scored["not_scored"])},
        "issues": {
            "files_not_scored": scored["not_scored"],
            **{
                name: {**entry["issues"], "unreadable_lines": entry["unreadable"]} for name, entry in categories.items()
            },
        },
    }
    rows = ({**item, "category": name} for name, entry in categories.items() for item in entry["result"]["per_item"])
    return write_results(args.per_item, rows, args.output, report, inputs=[args.predictions, *args.references])
