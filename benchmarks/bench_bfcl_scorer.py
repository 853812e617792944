"""Time tooltrain's BFCL scorer against the official checker (bfcl-eval) on the same BFCL v4 items.

    .venv/bin/python benchmarks/bench_bfcl_scorer.py [--repeat 3] [--categories simple_python,irrelevance]

Two workloads, both over the 13 scorable v4 categories shipped in the bfcl-eval package:
* gold: one prediction per question (its first possible answers; [] for the relevance categories), scored
  a category at a time: ``score_bfcl`` versus the official per-item loop of eval_runner (format check, then
  ``ast_checker`` / ``is_empty_output``).
* corpus: the parity corpus (gold + perturbations, tests/evaluation/bfcl_corpus.py), one case at a time:
  ``check_ast`` / ``check_relevance`` versus the same official calls.
Reports the best of ``--repeat`` runs of each: seconds for tooltrain and for bfcl-eval on the same items, both
checkers' throughput and the speed-up. Before timing, both must give the same number of valid items. The
default is every scorable v4 category (the full corpus: ~163,000 cases, minutes per run on a small machine);
``--categories`` restricts both workloads for a quick check. Needs bfcl-eval installed (--no-deps is enough).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "evaluation")]

import bfcl_reference as ref
from bfcl_corpus import perturb_ast_item

from train.evaluation.bfcl.scorer import CATEGORIES, check_ast, check_relevance, score_bfcl


def _best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def gold_workload(data_dir: Path, categories: list[str]) -> dict[str, tuple]:
    workload = {}
    for category, spec in ((name, CATEGORIES[name]) for name in categories):
        questions, answers = ref.load_category(data_dir, "v4", category)
        if answers is None:
            predictions = [{"id": question["id"], "result": []} for question in questions]
        else:
            predictions = [
                {"id": q["id"], "result": next(perturb_ast_item(q["function"], a["ground_truth"], spec.language))[1]}
                for q, a in zip(questions, answers)
            ]
        workload[category] = (predictions, questions, answers)
    return workload


def run_ours_gold(workload: dict) -> int:
    return sum(score_bfcl(p, q, a, category)["correct"] for category, (p, q, a) in workload.items())


def run_official_gold(official, workload: dict) -> int:
    correct = 0
    for category, (predictions, questions, answers) in workload.items():
        for position, (prediction, question) in enumerate(zip(predictions, questions)):
            ground_truth = None if answers is None else answers[position]["ground_truth"]
            case = ref.Case(
                "v4", category, question["id"], "gold", prediction["result"], question["function"], ground_truth
            )
            correct += ref.official_verdict(official, case)[0] == "valid"
    return correct


def run_ours_cases(cases: list) -> int:
    valid = 0
    for case in cases:
        spec = CATEGORIES[case.category]
        if case.ground_truth is None:
            verdict = check_relevance(case.result, spec.check)
        else:
            verdict = check_ast(
                case.result, case.functions, case.ground_truth, spec, underscore_to_dot=case.underscore_to_dot
            )
        valid += verdict["valid"]
    return valid


def run_official_cases(official, cases: list) -> int:
    return sum(ref.official_verdict(official, case)[0] == "valid" for case in cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--categories", help="comma list of v4 categories (default: all 13 scorable ones)")
    args = parser.parse_args()
    categories = [c.strip() for c in args.categories.split(",")] if args.categories else list(CATEGORIES)
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise SystemExit(f"error: unknown categories {unknown}; valid: {', '.join(CATEGORIES)}")

    official = ref.load_official()
    workload = gold_workload(official.data_dir, categories)
    items = sum(len(questions) for _, questions, _ in workload.values())
    cases = ref.build_corpus({"v4": official.data_dir}, keep=lambda category, _: category in categories)
    assert run_ours_gold(workload) == run_official_gold(official, workload), "the checkers disagree (gold)"
    assert run_ours_cases(cases) == run_official_cases(official, cases), "the checkers disagree (corpus)"

    scope = "all scorable v4 categories" if not args.categories else ", ".join(categories)
    print(
        f"BFCL AST scoring, {scope}; python {platform.python_version()} on {platform.machine()}, best of {args.repeat}"
    )
    rows = [
        (f"gold, {items} items", items, lambda: run_ours_gold(workload), lambda: run_official_gold(official, workload)),
        (
            f"corpus, {len(cases)} cases",
            len(cases),
            lambda: run_ours_cases(cases),
            lambda: run_official_cases(official, cases),
        ),
    ]
    columns = ("tooltrain s", "bfcl-eval s", "tooltrain/s", "bfcl-eval/s")
    print(f"{'workload':<24}" + "".join(f"{c:>13}" for c in columns) + f"{'speed-up':>10}")
    for name, count, ours, theirs in rows:
        mine, official_s = _best(ours, args.repeat), _best(theirs, args.repeat)
        print(
            f"{name:<24}{mine:>13.3f}{official_s:>13.3f}{count / mine:>13,.0f}{count / official_s:>13,.0f}"
            f"{official_s / mine:>9.1f}x"
        )


if __name__ == "__main__":
    main()
