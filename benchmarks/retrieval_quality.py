"""Retrieval quality on real data: HR@1/3/5 of history, keyword and meta_tool retrieval, and the α sweep.

    .venv/bin/python benchmarks/retrieval_quality.py [--sample N] [--alpha 0.5,0.65,0.8,1.0] [--embedder NAME]
        [--json OUT.json]

Datasets (../shared/data, read by tooltrain's own readers):
* ToolLens test split: 1,877 requests over its 464 tools, about 2.7 gold tools each;
* MetaTool single-tool queries (``all_clean_data.csv``): 20,614 requests over its 199 tools.
Methods, as ``tooltrain eval retrieval`` runs them (``train/papers/metatool/retrieval_eval.py``): dialogue-history
retrieval
(the request against each tool's JSON), keyword retrieval (the request's ToolSearcher keywords, BM25 over
"name description"), and meta_tool retrieval (Algorithm 1) with hypotheses from the offline teacher (its
rule-based reading of the request), at every ``--alpha``; ``--gold`` adds the gold-hypothesis upper bound.
One table of every (dataset, method) row at the first α, then the α sweep table. ``--sample N`` takes a
deterministic sample of N queries per dataset (the same one ``eval retrieval --sample`` takes) for a quick look.
The same numbers one dataset at a time: ``tooltrain eval retrieval --method ... --queries Q.jsonl`` after
``tooltrain data convert toollens|metatool``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train.papers.metatool.retrieval_eval import evaluate, sample_queries
from train.papers.metatool.teacher import OfflineTeacher
from train.retrieval.embed import DEFAULT_EMBEDDER, load_embedder
from train.retrieval.index import ToolIndex
from train.schema import ToolLibrary, ToolQuery

DATA = Path(os.environ.get("TOOLTRAIN_SHARED_DATA", REPO.parent / "shared" / "data"))
KS = (1, 3, 5)


def toollens_test(data: Path) -> tuple[list, list[ToolQuery]]:
    from train.sources import toollens

    records = list(toollens.read([data / "toollens"]))
    tools = [t for r in records if isinstance(r, ToolLibrary) for t in r.tools]
    return tools, [r for r in records if isinstance(r, ToolQuery) and r.meta.get("split") == "test"]


def metatool_single(data: Path) -> tuple[list, list[ToolQuery]]:
    from train.sources import metatool

    records = list(metatool.read([data / "metatool" / "all_clean_data.csv", data / "metatool" / "plugin_des.json"]))
    tools = [t for r in records if isinstance(r, ToolLibrary) for t in r.tools]
    return tools, [r for r in records if isinstance(r, ToolQuery)]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in [header, *rows]
    )


def rates(row: dict) -> list[str]:
    return [f"{row[f'HR@{k}']:.4f}" if row[f"HR@{k}"] is not None else "-" for k in KS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, help="a deterministic sample of N queries per dataset")
    parser.add_argument("--alpha", default="0.5,0.65,0.8,1.0", help="Algorithm 1's α values (the first: main table)")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument("--gold", action="store_true", help="also the gold-hypothesis upper bound")
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write every row as JSON")
    args = parser.parse_args()
    alphas = [float(a) for a in args.alpha.split(",") if a.strip()]
    if not DATA.is_dir():
        print(f"error: {DATA} not found (set TOOLTRAIN_SHARED_DATA)", file=sys.stderr)
        return 2
    embedder = load_embedder(args.embedder)
    teacher = OfflineTeacher(seed=0)
    main_rows, sweep_rows, records = [], [], []
    for name, load in (("toollens/test", toollens_test), ("metatool/single", metatool_single)):
        tools, queries = load(DATA)
        queries = sample_queries(queries, args.sample)
        index = ToolIndex(tools, embedder)
        runs = [
            ("history", "history", None),
            ("keyword (bm25)", "keyword", None),
            ("metatool (offline teacher)", "metatool", "teacher"),
        ]
        if args.gold:
            runs.append(("metatool (gold, upper bound)", "metatool", "gold"))
        for label, method, hypothesis in runs:
            start = time.perf_counter()
            result = evaluate(
                queries,
                index,
                method,
                alphas=alphas if method == "metatool" else alphas[:1],
                ks=KS,
                hypothesis=hypothesis or "teacher",
                teacher=teacher,
            )
            seconds = time.perf_counter() - start
            first = result["rows"][0]
            main_rows.append([name, label, str(result["queries"]), str(result["pairs"]), *rates(first)])
            for row in result["rows"] if hypothesis == "teacher" else []:
                sweep_rows.append([name, f"{row['alpha']:g}", *rates(row)])
            records.append(
                {
                    "dataset": name,
                    "method": label,
                    "queries": result["queries"],
                    "pairs": result["pairs"],
                    "unknown_gold": result["unknown_gold"],
                    "rows": result["rows"],
                    "seconds": round(seconds, 1),
                }
            )
            print(f"  {name}: {label} done in {seconds:.1f} s", file=sys.stderr, flush=True)
    sampled = f", a sample of {args.sample} queries per dataset" if args.sample else ""
    print(f"HR@k, embedder {args.embedder}{sampled}")
    print(table(["dataset", "method", "queries", "pairs", *(f"HR@{k}" for k in KS)], main_rows))
    if alphas:
        print(f"\nα sweep: metatool, offline-teacher hypotheses (main table: α = {alphas[0]:g})")
        print(table(["dataset", "alpha", *(f"HR@{k}" for k in KS)], sweep_rows))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"embedder": args.embedder, "sample": args.sample, "results": records}, ensure_ascii=False, indent=2
            )
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
