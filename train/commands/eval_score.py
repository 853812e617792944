"""``tooltrain eval score BENCH --predictions P.jsonl --references R.jsonl [--per-item OUT.jsonl] [-o METRICS.json]``.

Reads prediction and reference rows (JSON Lines, or a JSON array), hands them to the bench's scorer
registered in ``train.evaluation.SCORERS`` (joined by ``id`` inside the scorer; BENCH may also be
``module:attr`` naming a ``ScorerSpec`` of your own), prints the metrics as plain
tables, and lists everything not scored: unreadable lines (``file:line: reason``), references
without a prediction (scored wrong), predictions without a reference, repeated ids, references the
scorer cannot use. ``--per-item`` writes one JSON line per scored item, ``-o`` the metrics JSON.
Exit 0 when scoring ran (whatever it found), 2 when an input cannot be read or the arguments are wrong.
``eval score bfcl`` with a folder of per-category predictions and the BFCL data folder scores every
category and prints BFCL's leaderboard summaries (``train/commands/eval_score_bfcl.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from train.commands.outputs import check_outputs, output_file, write_results
from train.sources._common import Rejected, SourceError, iter_json_records

ISSUE_KEYS = (
    "missing_prediction_ids",
    "unknown_prediction_ids",
    "duplicate_prediction_ids",
    "duplicate_reference_ids",
    "rows_without_id",
    "unreadable_predictions",
    "reference_errors",
)
MAX_LISTED = 10

EPILOG_HEAD = """\
Row layouts (one JSON object per line; every row has an "id"; predictions and references are joined by id):

"""
EPILOG_TAIL = """
A reference without a prediction is scored wrong; a prediction without a reference, a repeated id, an
unreadable line (file:line) and a reference the scorer cannot use are counted and listed, never dropped.
See docs/evaluation.md for the exact metric definitions.
"""


def epilog() -> str:
    """The row layouts of every registered scorer (``ScorerSpec.layout``), one block per benchmark."""
    from train.evaluation import SCORERS

    blocks = []
    for name in SCORERS.names():
        first, *rest = SCORERS.get(name).layout.splitlines()
        blocks.append("\n".join([f"  {name:<11} {first}", *(f"{'':14}{line}" for line in rest)]))
    return EPILOG_HEAD + "\n".join(blocks) + "\n" + EPILOG_TAIL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    from train.evaluation import SCORERS

    parser.epilog = epilog()
    parser.add_argument("bench", metavar="BENCH",
                        help=f"benchmark whose scorer to run: {', '.join(SCORERS)}; or module:attr (a ScorerSpec)")
    parser.add_argument("--predictions", type=Path, required=True, metavar="P.jsonl",
                        help="model predictions; bfcl: or a folder of per-category prediction files")
    parser.add_argument(
        "--references", type=Path, action="append", required=True, metavar="R.jsonl",
        help="reference rows; bfcl: the questions file, then (again) the possible-answer file; "
             "or, with a folder of predictions, the BFCL data folder",
    )  # fmt: skip
    parser.add_argument(
        "--category", action="append", metavar="NAME",
        help="bfcl only: the category scored (default: from the questions file name); with folders, repeatable: "
             "only these categories",
    )  # fmt: skip
    parser.add_argument("--summary", choices=("v4", "v2"),
                        help="bfcl folders only: BFCL's leaderboard formulas (default v4; v2 for BFCL_v2_* files)")
    parser.add_argument("--languages", metavar="CODES", help="itc only: restrict langid to these comma-separated codes, or 'itc' for the paper's 29")
    parser.add_argument("--per-item", type=output_file, metavar="OUT.jsonl", help="write one JSON line per scored item")
    parser.add_argument("-o", "--output", type=output_file, metavar="METRICS.json", help="write the metrics and issues as JSON")


# ---------------------------------------------------------------- reading


def read_rows(path: Path, role: str) -> tuple[list[dict[str, Any]], dict[Any, str], list[dict[str, str]]]:
    """(rows with an id, id -> "file:line", unreadable lines as {"location", "reason"}); SourceError if unreadable."""
    if not path.is_file():
        raise SourceError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    rows: list[dict[str, Any]] = []
    where: dict[Any, str] = {}
    bad: list[dict[str, str]] = []
    for item in iter_json_records(path, salvage=False):  # a broken array of rows: exit 2, as before
        if isinstance(item, Rejected):
            bad.append({"location": item.location, "reason": item.reason})
            continue
        location, row = item
        row_id = row.get("id") if isinstance(row, dict) else None
        if not isinstance(row_id, (str, int)) or isinstance(row_id, bool):
            bad.append({"location": location, "reason": f"{role} row is not an object with a string 'id'"})
            continue
        rows.append(row)
        where.setdefault(row_id, location)
    return rows, where, bad


# ---------------------------------------------------------------- scoring


def run_scorer(args: argparse.Namespace, predictions: list[dict], references: list[list[dict]]) -> dict[str, Any]:
    from train.evaluation import get_scorer

    try:
        scorer = get_scorer(args.bench)
    except ValueError as err:  # an unknown name lists the registered ones
        raise SourceError(str(err)) from None
    if args.bench == "bfcl":
        return _score_bfcl(scorer, args, predictions, references)
    if len(references) != 1:
        raise SourceError(f"{args.bench} takes one --references file, got {len(references)}")
    if args.bench == "itc" and args.languages:
        from train.evaluation.itc import ITC_LANGUAGES

        codes = ITC_LANGUAGES if args.languages == "itc" else tuple(c.strip() for c in args.languages.split(",") if c.strip())
        try:
            return scorer(predictions, references[0], languages=codes)
        except ValueError as err:  # a code langid does not know
            raise SourceError(f"--languages: {err}") from None
    return scorer(predictions, references[0])


def _score_bfcl(scorer, args: argparse.Namespace, predictions: list[dict], references: list[list[dict]]) -> dict[str, Any]:
    from train.evaluation.bfcl import canonical_category

    if len(references) > 2:
        raise SourceError(f"bfcl takes the questions file and optionally the possible-answer file, got {len(references)} --references")
    if args.category and len(args.category) > 1:
        raise SourceError("one --category per prediction file (several: give folders of files)")
    try:
        category = canonical_category(args.category[0] if args.category else args.references[0].stem)
    except ValueError as err:
        raise SourceError(f"{err} (give --category)") from None
    answers = references[1] if len(references) == 2 else None
    try:
        result = scorer(predictions, references[0], answers, category)
    except ValueError as err:  # e.g. a category that needs its possible-answer file
        raise SourceError(str(err)) from None
    result["missing_prediction_ids"] = [i["id"] for i in result["per_item"] if i.get("error_type") == "missing_prediction"]
    return result


def split_result(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, issues): scorers return both in one dict; issues are the keys in ISSUE_KEYS."""
    metrics = {k: v for k, v in result.items() if k not in ISSUE_KEYS and k != "per_item"}
    issues = {k: result[k] for k in ISSUE_KEYS if result.get(k)}
    # A reference the scorer could not use is not scored at all, so it is not "missing a prediction".
    unusable = {error.get("id") for error in issues.get("reference_errors", [])}
    missing = [i for i in issues.get("missing_prediction_ids", []) if i not in unusable]
    issues.pop("missing_prediction_ids", None)
    if missing:
        issues["missing_prediction_ids"] = missing
    return metrics, issues


# ---------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _flat(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    fmt = lambda row: "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))  # noqa: E731
    return [fmt(header), *(fmt(row) for row in rows)]


def metric_tables(metrics: dict[str, Any]) -> str:
    """Top-level scalars as one table; a section of scalars as metric/value rows; a section of sections
    (by category, by task) as one row per entry and one column per metric."""
    blocks: list[str] = []
    scalars = {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}
    if scalars:
        blocks.append("\n".join(_table(["metric", "value"], [[k, _cell(v)] for k, v in scalars.items()])))
    for name, section in metrics.items():
        if not isinstance(section, dict) or not section:
            continue
        if not all(isinstance(v, dict) for v in section.values()):
            table = _table([name, "value"], [[key, _cell(value)] for key, value in _flat(section).items()])
            blocks.append("\n".join(table))
            continue
        rows = {row: _flat(values) for row, values in section.items()}
        columns = list(dict.fromkeys(column for values in rows.values() for column in values))
        table = _table([name, *columns], [[row, *(_cell(values.get(c)) for c in columns)] for row, values in rows.items()])
        blocks.append("\n".join(table))
    return "\n\n".join(blocks)


def issue_lines(issues: dict[str, Any], where: dict[str, dict[Any, str]], unreadable: list[dict[str, str]]) -> list[str]:
    """One summary line per kind of issue, then up to MAX_LISTED details each, with file:line where known."""
    lines: list[str] = []

    def listed(title: str, details: list[str]) -> None:
        if details:
            lines.append(f"{title}: {len(details)}")
            lines.extend(f"  {detail}" for detail in details[:MAX_LISTED])
            if len(details) > MAX_LISTED:
                lines.append(f"  ... {len(details) - MAX_LISTED} more")

    ref, pred = where["references"], where["predictions"]
    listed("unreadable lines (skipped)", [f"{bad['location']}: {bad['reason']}" for bad in unreadable])
    listed("references without a prediction (scored wrong)", [f"{ref.get(i, '?')}: id {i!r}" for i in issues.get("missing_prediction_ids", [])])
    listed("predictions without a reference (not scored)", [f"{pred.get(i, '?')}: id {i!r}" for i in issues.get("unknown_prediction_ids", [])])
    listed("repeated prediction ids (first kept)", [f"id {i!r}" for i in issues.get("duplicate_prediction_ids", [])])
    listed("repeated reference ids (first kept)", [f"id {i!r}" for i in issues.get("duplicate_reference_ids", [])])
    listed("references the scorer cannot use (not scored)", [f"{ref.get(e.get('id'), '?')}: id {e.get('id')!r}: {e.get('reason')}" for e in issues.get("reference_errors", [])])
    listed("other rows not scored", [json.dumps(row, ensure_ascii=False) for row in issues.get("rows_without_id", []) + issues.get("unreadable_predictions", [])])
    return lines


def counts(result: dict[str, Any], issues: dict[str, Any], unreadable: list[dict[str, str]]) -> dict[str, int]:
    return {
        "items": len(result.get("per_item", [])),
        "unreadable_lines": len(unreadable),
        **{key.removesuffix("_ids"): len(value) for key, value in issues.items()},
    }


def run(args: argparse.Namespace) -> int:
    # before any scoring: --per-item onto the predictions would destroy them
    check_outputs([args.per_item, args.output], [args.predictions, *args.references])
    from train.evaluation import get_scorer

    try:  # before any reading: an unknown name lists the registered ones
        get_scorer(args.bench)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.bench == "bfcl" and args.predictions.is_dir():
        from train.commands import eval_score_bfcl

        return eval_score_bfcl.run(args)
    try:
        predictions, pred_where, bad = read_rows(args.predictions, "prediction")
        references, ref_where = [], {}
        for path in args.references:
            rows, where, bad_refs = read_rows(path, "reference")
            references.append(rows)
            ref_where.update({key: value for key, value in where.items() if key not in ref_where})
            bad += bad_refs
        result = run_scorer(args, predictions, references)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    metrics, issues = split_result(result)
    summary = counts(result, issues, bad)
    print(f"{args.bench}: {summary['items']} items scored from {args.predictions} against {', '.join(map(str, args.references))}")
    print(metric_tables(metrics))
    details = issue_lines(issues, {"references": ref_where, "predictions": pred_where}, bad)
    if details:
        print("\n" + "\n".join(details))
    report = {
        "bench": args.bench,
        "predictions": str(args.predictions),
        "references": [str(p) for p in args.references],
        "metrics": metrics,
        "counts": summary,
        "issues": {**issues, "unreadable_lines": bad},
    }
    return write_results(args.per_item, result.get("per_item", []), args.output, report,
                         inputs=[args.predictions, *args.references])
