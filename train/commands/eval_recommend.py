"""``tooltrain eval recommend DATASET --retriever bm25|dense --llm offline|http|hf|RUN_DIR --stages 1,2,3
[--protocol random20|first100] [--seeds 5]``: PTR's tool recommendation (seed 001) in Table 1's layout.

DATASET is rectools, metatool, toollens, a comma list of them, or all, read from ``--data`` (a folder laid out as
/work/shared/data: ``rectools_ptr/`` and ``toollens/``; ``train/recommend/data.py``). Per dataset: the test split,
bundles from its past queries, each query's recommendation, then the paper's Recall and NDCG, TRACC, and the
textbook Recall@K / NDCG@K, as mean ± std over the seeds, with the paper's rows beside them
(``train/recommend/evaluate.py``). ``-o`` writes every run's numbers as JSON, ``--per-item`` one JSON line per
(seed, test query): gold, bundle, recommendation, scores.

Stages 2-3 (functional coverage mapping, multi-view re-ranking) are not built yet: ``--stages`` other than 1 is
an error. Exit 0 when the evaluation ran, 2 when an input cannot be read or an argument is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from train.commands.outputs import Outputs, check_outputs, output_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from train.recommend.bundles import RETRIEVERS
    from train.recommend.data import PROTOCOLS
    from train.retrieval.embed import DEFAULT_EMBEDDER

    arg = parser.add_argument
    arg("dataset", metavar="DATASET", help="rectools, metatool, toollens, a comma list of them, or all")
    arg("--data", type=Path, default=Path("data"), metavar="ROOT",
        help="the folder holding rectools_ptr/ and toollens/ (default: data)")  # fmt: skip
    arg("--retriever", choices=RETRIEVERS, default="bm25", help="stage 1's bundle retriever (bm25, the paper's code)")
    arg("--embedder", default=DEFAULT_EMBEDDER, metavar="NAME", help=f"--retriever dense: (default {DEFAULT_EMBEDDER})")
    arg("--llm", default="offline", metavar="offline|http|hf|RUN_DIR", help="stages 2-3's backbone (offline)")
    arg("--stages", default="1", metavar="1,2,3", help="the stages to run (1: bundle acquisition alone)")
    arg("--protocol", choices=PROTOCOLS, default="random20",
        help="random20: seeded 20%% test, bundles from the rest (default); first100: the released code's")  # fmt: skip
    arg("--seeds", type=int, default=5, metavar="N", help="random20: seeds 0..N-1, mean ± std (5)")
    arg("--device", metavar="DEV", help="embedder device (cpu, cuda)")
    arg("--no-cache", action="store_true", help="embed everything anew and write no cache file")
    arg("--per-item", type=output_file, metavar="OUT.jsonl", help="one JSON line per (seed, test query)")
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="every run's numbers as JSON")


def run(args: argparse.Namespace) -> int:
    from train.recommend.data import DataError
    from train.recommend.evaluate import LLM_KINDS, Settings, evaluate, format_table, parse_datasets

    check_outputs([args.per_item, args.output])
    try:
        stages = tuple(int(part) for part in args.stages.split(",") if part.strip())
    except ValueError:
        return _error(f"--stages takes a comma list of 1, 2, 3, got {args.stages!r}")
    if args.llm not in LLM_KINDS and not Path(args.llm).is_dir():
        return _error(f"--llm {args.llm!r} is neither {', '.join(LLM_KINDS)} nor a tooltrain run folder")
    try:
        settings = Settings(
            datasets=parse_datasets(args.dataset), root=args.data, retriever=args.retriever, embedder=args.embedder,
            stages=stages, protocol=args.protocol, seeds=args.seeds, llm=args.llm, device=args.device,
            cache=not args.no_cache,
        )  # fmt: skip
        results = evaluate(settings)
    except (DataError, ValueError, OSError) as err:
        return _error(str(err))
    print(format_table(settings, results))
    for result in results:
        if result.rejected:
            print(f"{result.dataset}: read {result.read}, rejected {result.rejected}", file=sys.stderr)
    with Outputs([args.per_item, args.output]) as outputs:
        if args.per_item:
            fh = outputs.open(args.per_item)
            for result in results:
                for row in result.trace:
                    fh.write(json.dumps({"dataset": result.dataset, **row}, ensure_ascii=False) + "\n")
        if args.output:
            document = {"settings": {**vars(settings), "root": str(settings.root), "stages": list(settings.stages)},
                        "datasets": [result.to_dict() for result in results]}  # fmt: skip
            outputs.open(args.output).write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    return 0


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
