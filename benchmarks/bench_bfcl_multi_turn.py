"""Time BFCL multi-turn episodes on CPU (or GPU) with a recipe's model: seconds per episode.

    .venv/bin/python benchmarks/bench_bfcl_multi_turn.py [--model tiny_llama|smollm2_135m] [--ids A,B]
        [--max-new-tokens 48] [--max-steps 3] [--threads 2]

Plays the given multi_turn_base entries (default: multi_turn_base_105 and _132, two user turns each, the entries
of conf/eval/bfcl_v4_mini.yaml) with the model as ``bfcl_multi_turn`` does in the eval callback (one batch of
episodes, ``generate.run_episodes``, greedy), then prints seconds per episode, answers (steps) and tokens, and the
verdicts. ``tiny_llama`` is random (recipe=tiny's model, seed 42); ``smollm2_135m`` is SmolLM2-135M-Instruct from
its local copy (offline). Needs bfcl-eval installed (--no-deps is enough).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny_llama")
    parser.add_argument("--ids", default="multi_turn_base_105,multi_turn_base_132")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from train.data.inputs import resolve_input
    from train.engine.config import compose
    from train.engine.model import build_model
    from train.evaluation.generate import HFBackend, run_episodes
    from train.evaluation.tasks import evaluate_generations, get_task, read_references
    from train.formats import get_format
    from train.tokenizers import load_tokenizer

    torch.set_num_threads(args.threads)
    cfg = compose(["recipe=tiny", f"model={args.model}"])
    tokenizer = load_tokenizer(cfg.model.tokenizer)
    model = build_model(cfg.model, len(tokenizer), torch.float32, "sdpa", seed=42).eval()
    task = get_task("bfcl_multi_turn", {"ids": args.ids, "max_steps": args.max_steps})
    files = [resolve_input(f"pkg://bfcl_eval/data/{p}BFCL_v4_multi_turn_base.json") for p in ("", "possible_answer/")]
    items = task.prepare(read_references(files, None, task)[0]).items
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    backend = HFBackend(model, pad, batch_size=8)
    fmt = get_format(cfg.model.chat_format)
    started = time.perf_counter()
    with torch.no_grad():
        records = run_episodes([task.episode(i) for i in items], fmt, tokenizer, backend, args.max_new_tokens)
    seconds = time.perf_counter() - started
    outcome = evaluate_generations(task, items, records)
    steps = sum(len(r.steps) for r in records)
    tokens = sum(s["new_tokens"] for r in records for s in r.steps)
    prompt = max(s["prompt_tokens"] for r in records for s in r.steps)
    print(
        f"{args.model}: {len(items)} episodes in {seconds:.1f} s ({seconds / len(items):.1f} s per episode, batched), "
        f"{steps} answers, {tokens} new tokens, longest prompt {prompt} tokens, {torch.get_num_threads()} threads; "
        f"accuracy {outcome.metrics['overall']['accuracy']}"
    )
    for record in records:
        print("  ", [s["text"][:80] if s["text"] else s["error"] for s in record.steps])


if __name__ == "__main__":
    main()
