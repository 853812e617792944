"""``tooltrain eval recommend DATASET --retriever bm25|dense --llm offline|http|hf|RUN_DIR --stages 1,2,3
[--protocol random20|first100] [--seeds 5]``: PTR's tool recommendation (seed 001) in Table 1's layout.

DATASET is rectools, metatool, toollens, a comma list of them, or all, read from ``--data`` (a folder laid out as
/work/shared/data: ``rectools_ptr/`` and ``toollens/``; ``train/papers/ptr/data.py``). Per dataset: the test split,
bundles from its past queries, each query's recommendation, then the paper's Recall and NDCG, TRACC, and the
textbook Recall@K / NDCG@K, as mean ± std over the seeds, with the paper's rows beside them
(``train/papers/ptr/evaluate.py``). ``-o`` writes every run's numbers as JSON, ``--per-item`` one JSON line per
(seed, test query): gold, bundle, recommendation, scores.

``--stages`` picks the stages (1: the bundle alone, Table 1's "N/A" rows; 1,2,3: the full pipeline; 2,3: Table 2's
"w/o tool bundle acquisition"; ``train/papers/ptr/pipeline.py`` documents each switch). Stage 2 asks ``--llm``:
``offline`` (a deterministic requirement splitter and an embedding-threshold matcher, no network), ``http`` (an
OpenAI-compatible endpoint: ``--llm-base-url``, ``--llm-model``, ``--llm-api-key-env``, ``--llm-timeout``), ``hf``
(a local model folder: ``--llm-path``, ``--llm-chat-format``), or a tooltrain run folder (its trained model, loaded
as ``tooltrain eval run`` loads a run). ``--llm`` is not ``--teacher`` (the spelling of the commands that build
data with a teacher) because it also takes a run folder, and the issue and the paper name PTR's backbone "the LLM";
its settings follow the ``--teacher-*`` pattern under the ``--llm-`` prefix. A backbone that batches (hf, a run
folder) gets ``--batch-size`` queries' questions asked ahead in batched ``generate`` calls, with the answers asking
one by one gives (``train/papers/ptr/batching.py``); ``--max-new-tokens`` caps stage 2's answers (default 1024).
With stage 2 or 3 on, ``--per-item`` lines carry each query's trace (bundle, requirements, matches, unsolved
problems, the three views, ranking, seconds).
Exit 0 when the evaluation ran, 2 when an input cannot be read or an argument is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from train.commands.outputs import Outputs, check_outputs, output_file

# The --llm-* options: train.teacher.backends.BACKEND_SETTINGS' keys for http and hf (None: not given).
LLM_SETTINGS = ("base_url", "model", "api_key_env", "timeout", "path", "chat_format")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from train.papers.ptr.bundles import RETRIEVERS
    from train.papers.ptr.data import PROTOCOLS
    from train.retrieval.embed import DEFAULT_EMBEDDER

    arg = parser.add_argument
    arg("dataset", metavar="DATASET", help="rectools, metatool, toollens, a comma list of them, or all")
    arg("--data", type=Path, default=Path("data"), metavar="ROOT",
        help="the folder holding rectools_ptr/ and toollens/ (default: data)")  # fmt: skip
    arg("--retriever", choices=RETRIEVERS, default="bm25", help="stage 1's bundle retriever (bm25, the paper's code)")
    arg("--embedder", default=DEFAULT_EMBEDDER, metavar="NAME", help=f"--retriever dense: (default {DEFAULT_EMBEDDER})")
    arg("--stages", default="1", metavar="1,2,3", help="the stages to run (1: bundle acquisition alone)")
    arg("--clean-queries", action="store_true",
        help="cut each query at its first blank line (RecTools' generator leftovers; off: as published)")  # fmt: skip
    arg("--limit", type=int, metavar="N", help="the first N test queries of each run (default: all)")
    llm = parser.add_argument_group("stage 2's LLM").add_argument
    llm("--llm", default="offline", metavar="offline|http|hf|RUN_DIR",
        help="offline (default, no network), http, hf, or a tooltrain run folder")  # fmt: skip
    llm("--llm-base-url", metavar="URL", help="http: the OpenAI-compatible base URL (…/v1)")
    llm("--llm-model", metavar="NAME", help="http: the model name")
    llm("--llm-api-key-env", metavar="VAR", help="http: the environment variable holding the API key")
    llm("--llm-timeout", type=float, metavar="S", help="http: seconds to connect and for each read (60)")
    llm("--llm-path", metavar="DIR", help="hf: the local model folder")
    llm("--llm-chat-format", metavar="F", help="hf: the chat format to prompt it with (chatml)")
    llm("--batch-size", type=int, default=8, metavar="N",
        help="hf / RUN_DIR: questions per batched generate, N queries' questions asked ahead at a time (8; 1: one "
             "by one); the answers are the same")  # fmt: skip
    llm("--max-new-tokens", type=int, metavar="N",
        help="stage 2's answer cap in tokens (default 1024, the paper's max_tokens)")  # fmt: skip
    arg("--protocol", choices=PROTOCOLS, default="random20",
        help="random20: seeded 20%% test, bundles from the rest (default); first100: the released code's")  # fmt: skip
    arg("--seeds", type=int, default=5, metavar="N", help="random20: seeds 0..N-1, mean ± std (5)")
    arg("--device", metavar="DEV", help="embedder device (cpu, cuda)")
    arg("--no-cache", action="store_true", help="embed everything anew and write no cache file")
    arg("--per-item", type=output_file, metavar="OUT.jsonl", help="one JSON line per (seed, test query)")
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="every run's numbers as JSON")


def run(args: argparse.Namespace) -> int:
    from train.papers.ptr.backbone import load_run_backend
    from train.papers.ptr.data import DataError
    from train.papers.ptr.evaluate import Settings, evaluate, format_table, parse_datasets
    from train.teacher.backends import TeacherError

    inputs = read_paths(args)
    check_outputs([args.per_item, args.output], inputs)  # before any work: never onto (or into) what is read
    try:
        stages = tuple(int(part) for part in args.stages.split(",") if part.strip())
    except ValueError:
        return _error(f"--stages takes a comma list of 1, 2, 3, got {args.stages!r}")
    llm_settings = {key: getattr(args, f"llm_{key}") for key in LLM_SETTINGS}
    try:
        settings = Settings(
            datasets=parse_datasets(args.dataset), root=args.data, retriever=args.retriever, embedder=args.embedder,
            stages=stages, protocol=args.protocol, seeds=args.seeds, llm=args.llm, llm_settings=llm_settings,
            device=args.device, cache=not args.no_cache, clean_queries=args.clean_queries, limit=args.limit,
            batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
        )  # fmt: skip
        results = evaluate(settings, load_run=load_run_backend)
    except (DataError, ValueError, OSError, TeacherError) as err:
        return _error(str(err))
    print(format_table(settings, results))
    for result in results:
        if result.rejected:
            print(f"{result.dataset}: read {result.read}, rejected {result.rejected}", file=sys.stderr)
        if result.teacher:
            print(f"{result.dataset}: stage 2's LLM {result.teacher}", file=sys.stderr)
    with Outputs([args.per_item, args.output], inputs) as outputs:
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


def read_paths(args: argparse.Namespace) -> list[Path]:
    """What the evaluation reads: the data folder, and the backbone's folder (a run, or --llm-path)."""
    paths = [args.data]
    if args.llm not in ("offline", "http", "hf"):
        paths.append(Path(args.llm))
    if args.llm_path:
        paths.append(Path(args.llm_path))
    return paths


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
