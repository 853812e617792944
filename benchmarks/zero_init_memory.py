"""Host memory of each ZeRO-3 rank while it builds a pretrained model (issue 26, item 7), on CPU ranks.

``before``: the model built first, the TrainingArguments after (main before item 7): every rank loads the whole model.
``after``: the run's order (``train.engine.run``): TrainingArguments first, then ``distributed.build_context``, so the
model is built under zero.Init and only rank 0 reads the checkpoint. Prints, per rank, the parameters it holds and
its anonymous memory (RssAnon) over the build, after it and at its peak (sampled every 2 ms).

  python benchmarks/zero_init_memory.py make /tmp/zi_model        # a 427M-parameter Llama, fp32, 4 shards
  MALLOC_MMAP_THRESHOLD_=65536 OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node 4 \\
      benchmarks/zero_init_memory.py after /tmp/zi_model bfloat16

bfloat16 converts the fp32 checkpoint as it loads (a 70B fp16 checkpoint trained in bf16 does the same); float32 maps
the file instead (the node's ranks share its pages). A fixed MALLOC_MMAP_THRESHOLD_ hands freed blocks back to the
system at once; with glibc's default the gathered blocks stay in each CPU rank's heap for reuse (GPU ranks gather on
the GPU).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # train/ from this checkout


def make(folder: str) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=8000,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(folder, max_shard_size="500MB")


def anonymous_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:")) / 1024


def measure(mode: str, folder: str, dtype_name: str) -> None:
    from omegaconf import OmegaConf

    from train.engine.config import compose
    from train.engine.distributed import World, build_context, model_placement
    from train.engine.model import build_model
    from train.engine.run import set_up, training_args

    world, dtype, out = World.from_env(), getattr(torch, dtype_name), Path(f"/tmp/zero_init_memory_{mode}")
    overrides = ["recipe=tiny", "distributed=zero3", f"model.dtype={dtype_name}", "train.global_batch_size=8"]
    cfg = compose([*overrides, f"output_dir={out}"])
    env = set_up(cfg, world, out)
    OmegaConf.set_struct(cfg, False)
    cfg.model.source, cfg.model.path = "pretrained", folder
    args = training_args(cfg, env) if mode == "after" else None
    if args is not None:
        args.device  # noqa: B018 - accelerate's process group, started before the build is measured
    base, peak, done = anonymous_mib(), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], anonymous_mib())
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()
    started = time.time()
    if args is None:
        model = build_model(cfg.model, 8000, dtype, "sdpa", seed=0)
    else:
        with build_context(model_placement(cfg.distributed, False, False, True), args):
            model = build_model(cfg.model, 8000, dtype, "sdpa", seed=0)
    seconds = time.time() - started
    done.set()

    def held(param: torch.Tensor) -> int:
        local = getattr(param, "ds_tensor", None)
        return (param if local is None else local).numel() * param.element_size()

    holds = sum(held(p) for p in model.parameters()) / 2**20
    whole = sum(getattr(p, "ds_numel", p.numel()) * p.element_size() for p in model.parameters()) / 2**20
    print(
        f"rank {world.rank} {mode} {dtype_name}: holds {holds:.0f} of {whole:.0f} MiB of parameters; anonymous "
        f"memory +{anonymous_mib() - base:.0f} MiB after the build, peak +{peak[0] - base:.0f} MiB; {seconds:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        measure(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "bfloat16")
