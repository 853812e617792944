"""``tooltrain eval score BENCH --predictions P.jsonl --references R.jsonl [--per-item OUT.jsonl] [-o METRICS.json]``.

Reads prediction and reference rows (JSON Lines, or a JSON array), hands them to the bench's scorer
registered in ``train.evaluation.SCORERS`` (joined by ``id`` inside the scorer; BENCH may also be
``module:attr`` naming a ``ScorerSpec`` of your own), prints the metrics as plain
tables, and lists everything not scored: unreadable lines (``file:line: reason``), references
without a prediction (scored wrong), predictions without a reference, repeated ids, references the
scorer cannot use. ``--per-item`` writes one JSON line per scored item, ``-o`` the metrics JSON.
Exit 0 when scoring ran (whatever it found), 2 when an input cannot be read or the arguments are wrong.
``eval score bfcl`` with a folder of per-category predictions and the BFCL data folder scores every
category and prints BFCL's leaderboard summaries (``train/commands/eval/score_bfcl.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from train.base.records import SourceError
from train.commands.eval.score_report import counts, issue_lines, metric_tables, read_rows, split_result
from train.commands.outputs import check_outputs, output_file, write_results
from train.evaluation.bfcl.summary import BFCL_SUMMARIES

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
    parser.add_argument(
        "bench",
        metavar="BENCH",
        help=f"benchmark whose scorer to run: {', '.join(SCORERS)}; or module:attr (a ScorerSpec)",
    )
    parser.add_argument(
        "--predictions",
        type=Path,
        required=True,
        metavar="P.jsonl",
        help="model predictions; bfcl: or a folder of per-category prediction files",
    )
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
    from train.papers import summaries

    papers = {name: summary for name, summary in summaries().items() if summary.score_benches}
    parser.add_argument(
        "--summary",
        choices=(*BFCL_SUMMARIES, *papers),
        help="bfcl folders only: BFCL's leaderboard formulas (default v4; v2 for BFCL_v2_* files; bfcl_v4: the "
        "leaderboard's table beside reference models); or a paper's "
        "numbers beside its tables: "
        + "; ".join(f"{summary.help} ({' or '.join(summary.score_benches)})" for summary in papers.values()),
    )
    for options in bench_options():
        options.add_arguments(parser)
    parser.add_argument("--per-item", type=output_file, metavar="OUT.jsonl", help="write one JSON line per scored item")
    parser.add_argument(
        "-o", "--output", type=output_file, metavar="METRICS.json", help="write the metrics and issues as JSON"
    )


def bench_options() -> list[Any]:
    """The ``eval score`` options the registered benchmarks add (``ScorerSpec.options``), in registration order."""
    from train.evaluation import SCORERS

    return [spec.options for spec in map(SCORERS.get, SCORERS.names()) if spec.options is not None]


# ---------------------------------------------------------------- scoring


def run_scorer(args: argparse.Namespace, predictions: list[dict], references: list[list[dict]]) -> dict[str, Any]:
    from train.evaluation import SCORERS, get_scorer

    try:
        scorer = get_scorer(args.bench)
    except ValueError as err:  # an unknown name lists the registered ones
        raise SourceError(str(err)) from None
    if args.bench == "bfcl":
        return _score_bfcl(scorer, args, predictions, references)
    if len(references) != 1:
        raise SourceError(f"{args.bench} takes one --references file, got {len(references)}")
    # a registered bench's own options (a module:attr bench's are not on the parser: --help lists the registered)
    options = SCORERS.get(args.bench).options if args.bench in SCORERS.names() else None
    if options is None:
        return scorer(predictions, references[0])
    try:
        return options.score(scorer, args, predictions, references[0])
    except ValueError as err:  # a value of the bench's own options (--languages: a code langid does not know)
        raise SourceError(str(err)) from None


def _score_bfcl(
    scorer, args: argparse.Namespace, predictions: list[dict], references: list[list[dict]]
) -> dict[str, Any]:
    from train.evaluation.bfcl.scorer import canonical_category

    if len(references) > 2:
        raise SourceError(
            f"bfcl takes the questions file and optionally the possible-answer file, got {len(references)} --references"
        )
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
    result["missing_prediction_ids"] = [
        i["id"] for i in result["per_item"] if i.get("error_type") == "missing_prediction"
    ]
    return result


def summary_problem(args: argparse.Namespace) -> str | None:
    """Why ``--summary`` or a benchmark's own option (``--matching``) cannot go with BENCH, or None."""
    from train.papers import summaries

    paper = summaries().get(args.summary)
    problem = None if paper is None else paper.problem(args.summary, args.bench, paper.score_benches)
    return problem or next(filter(None, (options.problem(args) for options in bench_options())), None)


def paper_summary(args: argparse.Namespace, metrics: dict[str, Any]) -> dict[str, Any]:
    """``--summary NAME`` of a paper on one file's metrics: its lines printed; ``{NAME_summary: data}`` for the
    metrics JSON (empty without one, and for bfcl, whose summaries are for its folder form, as v4 and v2 are)."""
    from train.papers import summaries

    paper = summaries().get(args.summary)
    if paper is None or args.bench == "bfcl":
        return {}
    lines, data = paper.lines(args.bench, metrics, [str(args.predictions)])
    print("\n" + "\n".join(lines))
    return {f"{args.summary}_summary": data}


def run(args: argparse.Namespace) -> int:
    # before any scoring: --per-item onto the predictions would destroy them
    check_outputs([args.per_item, args.output], [args.predictions, *args.references])
    from train.evaluation import get_scorer

    try:  # before any reading: an unknown name lists the registered ones
        get_scorer(args.bench)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    problem = summary_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.bench == "bfcl" and args.predictions.is_dir():
        from train.commands.eval import score_bfcl  # the folder form of this verb, not a verb of its own

        return score_bfcl.run(args)
    try:
        predictions, pred_where, bad = read_rows(args.predictions, "prediction")
        references, ref_where = [], {}
        for path in args.references:
            rows, where, bad_refs = read_rows(path, "reference")
            references.append(rows)
            ref_where.update({key: value for key, value in where.items() if key not in ref_where})
            bad += bad_refs
        if not any(references):  # a score over nothing is no score: '-' for every metric would look like one
            given = ", ".join(map(str, args.references))
            raise SourceError(f"no reference to score against: {given} holds no readable row")
        result = run_scorer(args, predictions, references)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    metrics, issues = split_result(result)
    summary = counts(result, issues, bad)
    print(
        f"{args.bench}: {summary['items']} items scored from {args.predictions} "
        f"against {', '.join(map(str, args.references))}"
    )
    print(metric_tables(metrics))
    paper = paper_summary(args, metrics)
    details = issue_lines(issues, {"references": ref_where, "predictions": pred_where}, bad)
    if details:
        print("\n" + "\n".join(details))
    report = {
        "bench": args.bench,
        "predictions": str(args.predictions),
        "references": [str(p) for p in args.references],
        "metrics": metrics,
        "counts": summary,
        **paper,
        "issues": {**issues, "unreadable_lines": bad},
    }
    return write_results(
        args.per_item, result.get("per_item", []), args.output, report, inputs=[args.predictions, *args.references]
    )
