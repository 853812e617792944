"""Meta-Tool retrieval throughput: a batch of meta_tool queries against a 10,000-tool library.

    .venv/bin/python benchmarks/bench_retrieval.py [--tools 10000] [--queries 100] [--repeat 5] [--embedder NAME]

The library is synthesised from real tools: ToolLens (464), MetaTool (199) and the BFCL v2 question
files (every distinct function), then copies of them under perturbed names (``<name>__v<n>``) until
``--tools``. Copies keep their texts, so only the unique texts are embedded (the cache dedupes);
scoring still runs over every one of the ``--tools`` rows. The queries are the rule teacher's
hypotheses for the first ToolLens test requests.

Prints the figures as text, then every number as JSON. Reports, best of ``--repeat`` runs:
* index: cold build (embedding every unique description and required-parameter text into a fresh
  cache) and warm load (a second index from the cache);
* encode: embedding the batch's hypothesis texts (descriptions + parameter phrases), no cache;
* score: Algorithm 1 over the whole library + top-5, from embedded queries — queries/s;
* end to end: encode + score — queries/s.
Needs ../shared/data (the real tool files).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train.papers.metatool import retrieve as metatool
from train.papers.metatool.hypothesis import RuleTeacher
from train.retrieval.embed import DEFAULT_EMBEDDER, load_embedder
from train.retrieval.index import ToolIndex, description_text, required_param_texts
from train.schema import Conversation, Tool, ToolLibrary, ToolQuery

DATA = Path(os.environ.get("TOOLTRAIN_SHARED_DATA", REPO.parent / "shared" / "data"))


def real_tools(data: Path) -> tuple[list[Tool], list[str]]:
    """(distinct real tools, ToolLens test requests)."""
    from train.sources import bfcl, toollens
    from train.sources import metatool as metatool_source

    tools: dict[str, Tool] = {}
    requests: list[str] = []
    for record in toollens.read([data / "toollens"]):
        if isinstance(record, ToolLibrary):
            tools.update((t.name, t) for t in record.tools)
        elif isinstance(record, ToolQuery) and record.meta.get("split") == "test":
            requests.append(record.query)
    for record in metatool_source.read(
        [data / "metatool" / "multi_tool_query_golden.json", data / "metatool" / "plugin_des.json"]
    ):
        if isinstance(record, ToolLibrary):
            tools.update((t.name, t) for t in record.tools if t.name not in tools)
    for path in sorted((data / "bfcl_v2").glob("BFCL_v2_*.json")):
        for record in bfcl.read([path]):
            if isinstance(record, Conversation):
                tools.update((t.name, t) for t in record.tools if t.name not in tools)
    return list(tools.values()), requests


def synthesise(tools: list[Tool], size: int) -> list[Tool]:
    out = list(tools[:size])
    copy = 1
    while len(out) < size:
        for tool in tools:
            if len(out) == size:
                break
            out.append(Tool(f"{tool.name}__v{copy}", tool.description, tool.parameters))
        copy += 1
    return out


def best(function, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=metatool.DEFAULT_ALPHA)
    parser.add_argument("--k", type=int, default=metatool.DEFAULT_K)
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    args = parser.parse_args()

    real, requests = real_tools(DATA)
    library = synthesise(real, args.tools)
    teacher = RuleTeacher()
    hypotheses = [teacher.hypothesis(text) for text in requests[: args.queries]]
    embedder = load_embedder(args.embedder)
    embedder.encode(["warm up"], "query")  # model load is not part of any timing

    with tempfile.TemporaryDirectory() as cache:
        os.environ["TOOLTRAIN_CACHE"] = cache
        start = time.perf_counter()
        index = ToolIndex.build(library, embedder)
        cold = time.perf_counter() - start
        warm, index = best(lambda: ToolIndex.build(library, embedder), args.repeat)
        encode_s, encoded = best(lambda: metatool.encode_hypotheses(index, hypotheses, use_cache=False), args.repeat)
        score_s, ranking = best(lambda: metatool.rank(index, encoded, args.alpha, args.k), args.repeat)

    n_params = sum(len(h.param_description) for h in hypotheses)
    print(
        f"Algorithm 1 (alpha {args.alpha}, top-{args.k}) over {len(library):,} tools, {len(hypotheses)} meta_tool "
        f"queries, embedder {args.embedder}:"
    )
    print(f"  score + top-k: {len(hypotheses) / score_s:,.1f} queries/s ({score_s:.4f} s for the batch)")
    print(f"  end to end (embed the queries, then score): {len(hypotheses) / (encode_s + score_s):,.1f} queries/s")
    print(f"  library index: {cold:.2f} s cold (embedding), {warm:.3f} s warm (from the cache)")
    print(
        json.dumps(
            {
                "machine": (
                    f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                    f"Python {platform.python_version()}"
                ),
                "embedder": args.embedder,
                "library": {
                    "tools": len(library),
                    "real_tools": len(real),
                    "required_param_rows": len(index.params),
                    "unique_texts": len({description_text(t) for t in library})
                    + len({p for t in library for p in required_param_texts(t)}),
                },
                "queries": {"count": len(hypotheses), "param_phrases": n_params, "alpha": args.alpha, "k": args.k},
                "seconds": {
                    "index_cold": round(cold, 3),
                    "index_warm": round(warm, 4),
                    "encode": round(encode_s, 4),
                    "score_top_k": round(score_s, 4),
                },
                "queries_per_s": {
                    "score_top_k": round(len(hypotheses) / score_s, 1),
                    "end_to_end": round(len(hypotheses) / (encode_s + score_s), 1),
                },
                "ranking_shape": list(ranking.shape),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
