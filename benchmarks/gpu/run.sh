#!/usr/bin/env bash
# tooltrain's GPU check: one H100/H200 with no network, one command of at most ~8 minutes, from the checkout's root:
#
#   bash benchmarks/gpu/assemble_wheels.sh && bash benchmarks/gpu/prepare.sh     # here, with a network: .whl/, assets
#   bash benchmarks/gpu/run.sh                    # there, with .whl and .gpucheck-assets carried (allow BUDGET + 40 s)
#
# Stages (each gated by the time left; every figure lands in $OUT/results.json, the whole log in $OUT/log.txt):
#   0  probe: GPU, driver, the image's package versions, one bf16 matmul (context only: MFU divides by the peak below)
#   1  install the carried wheels (.whl/core: what `tooltrain train` imports; .whl/bench: trl, datasets, liger) into
#      $SITE, and the staged Llama-3 tokenizer (.gpucheck-assets) into $TOOLTRAIN_CACHE (no llama-models, no network)
#   2a correctness: packed vs unpacked loss + LoRA gradients on cuda through the engine's collator, for sdpa (bf16,
#      fp32), eager, flex and the flash-family path (SampleBoundaries; flash_attn when importable, else transformers'
#      flash code with pure-torch kernels), each with a negative control (benchmarks/gpu/packing_check.py)
#   2b the CLI end to end on cuda: recipe=tiny in bf16 with kernels=liger, generation eval before/after
#   3  throughput: random-init Llama-3.1-8B (model.source=config) + LoRA r16 on all linear layers, packed 4,096-token
#      rows, micro batch 1 x 4 accumulation, 2 warm-up + 5 timed steps, real tokens/s, MFU and peak memory:
#      tooltrain sdpa | trl SFTTrainer sdpa | both again with Liger | tooltrain flex (benchmarks/gpu/bench_one.py; an
#      out-of-memory run is retried once with gradient checkpointing)
#   4  only with >= 150 s left: one-rank ZeRO-3 (tiny; then with liger) and FSDP2 (tiny)
# A rerun on the warm machine can pick stages and benches: STAGES="1 3" BENCHES="tt_flex" BUDGET=220 bash ...
# SMOKE=1: the same plumbing on a CPU (tests/benchmarks/test_gpu_kit.py): no install, tiny configs, no stage 0/2b/4.
# MFU's peak, the engine's one rule (train/engine/flops.py peak_flops), the same in `tooltrain train`, `tooltrain bench
# train` and here: bench_one.py's --peak-tflops (e.g. BENCH_EXTRA="--peak-tflops 835"), else $TOOLTRAIN_PEAK_TFLOPS,
# else the data-sheet dense bf16 peak by the GPU's name (H100 SXM 989, PCIe 756, NVL 835; H200 989); a GPU the table
# lacks and no override: MFU null, tokens/s still measured. Set TOOLTRAIN_PEAK_TFLOPS for a GPU run at other clocks.
set -u -o pipefail
T0=$SECONDS
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
BUDGET=${BUDGET:-450}                 # seconds this script may use; give the run call timeout_s = BUDGET + 40
OUT=${OUT:-/tmp/gpucheck_out}
W=${W:-$OUT/parts}                    # per-stage JSON files, merged into $OUT/results.json at the end
RUNS=${RUNS:-/tmp/tt_runs}            # run folders
SITE=${SITE:-/tmp/site} SITE_DS=${SITE_DS:-/tmp/site_ds}   # where the carried wheels are installed
ASSETS=${ASSETS:-$ROOT/.gpucheck-assets}
SMOKE=${SMOKE:-0}
mkdir -p "$OUT" "$W"
left() { echo $((BUDGET - (SECONDS - T0))); }
stamp() { echo "=== [$((SECONDS - T0)) s] $*"; }

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True WANDB_MODE=disabled TOOLTRAIN_VERBOSE=0 OMP_NUM_THREADS=8
export TOOLTRAIN_CACHE=${TOOLTRAIN_CACHE:-/tmp/tt_cache}
PY=${PY:-python3}
if [ "$SMOKE" = 1 ]; then
  STAGES=${STAGES:-2a 3} SKIP_INSTALL=1
  PACK_ARGS=${PACK_ARGS:---device cpu --tiny}
  BENCH_EXTRA=${BENCH_EXTRA:---tiny --device cpu --peak-tflops 1 --warmup 0 --steps 1}
  export OMP_NUM_THREADS=1
fi
PACK_ARGS=${PACK_ARGS:-}              # e.g. --variants sdpa:bfloat16,torch_flash_emulation:bfloat16
BENCH_EXTRA=${BENCH_EXTRA:-}          # words added to every bench_one.py call
TINY_KERNELS=${TINY_KERNELS:-liger}
SKIP_INSTALL=${SKIP_INSTALL:-0}
STAGES=${STAGES:-0 1 2a 2b 3 4}
BENCHES=${BENCHES:-tt_sdpa trl_sdpa tt_sdpa_liger trl_sdpa_liger tt_flex tt_flex_liger}
want() { [[ " $STAGES " == *" $1 "* ]]; }
export PYTHONPATH=$ROOT

main() {
if want 0; then
stamp "0 probe"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/nvsmi.txt"
"$PY" "$HERE/probe.py" | tee "$W/probe.json"
fi

stamp "1 install"  # always: PYTHONPATH and the tokenizer cache are needed by every later stage
if [ "$SKIP_INSTALL" != 1 ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .whl/core/*.whl .whl/bench/*.whl || { echo "error: the carried wheels in .whl/ did not install"; exit 1; }
fi
if [ "$SMOKE" != 1 ]; then  # a rerun with SKIP_INSTALL=1 on the warm machine finds the first run's $SITE
  [ -d "$SITE" ] && export PYTHONPATH=$SITE:$ROOT
  if [ -d "$ASSETS/tokenizers" ]; then
    mkdir -p "$TOOLTRAIN_CACHE/tokenizers" && cp -r "$ASSETS/tokenizers/." "$TOOLTRAIN_CACHE/tokenizers/"
  else
    echo "no $ASSETS/tokenizers: run bash benchmarks/gpu/prepare.sh first (the 8B benches need the llama3 tokenizer)"
  fi
fi
if [ "$SMOKE" != 1 ]; then  # a clear early failure on the GPU machine; the smoke run's stages import the same
  "$PY" -c "import train.engine.entry, train.engine.run, trl, datasets; print('imports ok: tooltrain, trl', \
trl.__version__, 'datasets', datasets.__version__)" || { echo "error: imports failed"; exit 1; }
fi

if want 2a; then
stamp "2a packed vs unpacked through the engine's collator"
# shellcheck disable=SC2086  # PACK_ARGS is a list of words
timeout 170 "$PY" "$HERE/packing_check.py" --out "$W/pack.json" --workdir "$RUNS/packcheck" $PACK_ARGS
echo "packing_check rc=$?"
fi

if want 2b; then
stamp "2b tiny recipe end to end on cuda (bf16, $TINY_KERNELS, eval)"
rm -rf "$RUNS/tiny_gpu"
timeout 120 "$PY" -m train train recipe=tiny model.dtype=auto kernels="$TINY_KERNELS" eval=heldout \
  data.eval_fraction=0.2 eval.at_start=true eval.benchmarks.0.limit=8 eval.benchmarks.0.max_new_tokens=32 \
  train.max_steps=4 output_dir="$RUNS/tiny_gpu"
echo "tiny rc=$?" | tee "$W/tiny_rc.txt"
fi

bench() {  # bench NAME NEED_S TIMEOUT_S args...
  local name=$1 need=$2 t=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then
    echo "skip $name: $(left) s left"; echo "{\"skipped\": \"$(left) s left\"}" > "$W/b_$name.json"; return
  fi
  stamp "3 bench $name"
  # shellcheck disable=SC2086  # BENCH_EXTRA is a list of words
  timeout "$t" "$PY" "$HERE/bench_one.py" --out "$W/b_$name.json" --run-dir "$RUNS/bench" "$@" $BENCH_EXTRA
  local rc=$?
  if [ $rc = 3 ] && [ "$(left)" -gt "$need" ]; then
    stamp "3 bench $name: out of memory, again with gradient checkpointing"
    # shellcheck disable=SC2086
    timeout "$t" "$PY" "$HERE/bench_one.py" --out "$W/b_${name}_gc.json" --run-dir "$RUNS/bench" --gc 1 "$@" \
      $BENCH_EXTRA
  fi
}
declare -A BENCH_ARGS=(
  [tt_sdpa]="90 150 --path tooltrain --attn sdpa --kernels none"
  [trl_sdpa]="90 150 --path trl --attn sdpa --kernels none"
  [tt_sdpa_liger]="80 150 --path tooltrain --attn sdpa --kernels liger"
  [trl_sdpa_liger]="80 150 --path trl --attn sdpa --kernels liger"
  [tt_flex]="120 180 --path tooltrain --attn flex_attention --kernels none"
  [tt_flex_liger]="110 180 --path tooltrain --attn flex_attention --kernels liger"
  [tt_padded]="80 150 --path tooltrain_padded --attn sdpa --kernels none"
)
if want 3; then
  for name in $BENCHES; do
    # shellcheck disable=SC2086  # the table entries are word lists
    bench "$name" ${BENCH_ARGS[$name]}
  done
fi

if want 4 && [ "$(left)" -ge 150 ]; then
  stamp "4 one-rank ZeRO-3 and FSDP2 (tiny)"
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_DS" \
      .whl/zero/*.whl; then
    echo "zero wheels failed to install: ZeRO-3 runs skipped"
  fi
  for spec in "zero3:none" "zero3:liger" "fsdp2:none"; do
    strat=${spec%%:*} k=${spec##*:}
    [ "$(left)" -lt 45 ] && break
    rm -rf "${RUNS:?}/$strat-$k"
    PYTHONPATH=$SITE_DS:$PYTHONPATH timeout 100 "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 \
      -m train train recipe=tiny model.dtype=auto distributed="$strat" kernels="$k" train.max_steps=4 \
      train.save_steps=2 output_dir="$RUNS/$strat-$k" > "$W/dist_$strat-$k.log" 2>&1
    rc=$?
    adapter=false; [ -f "$RUNS/$strat-$k/final/adapter_model.safetensors" ] && adapter=true
    "$PY" -c 'import json, sys; s, k, rc, a, log = sys.argv[1:]; lines = open(log, errors="replace").read().splitlines()
err = next((l[:300] for l in lines if "Error" in l or "error:" in l or "mismatch" in l), "")
print(json.dumps({"strategy": s, "kernels": k, "rc": int(rc), "final_adapter": a == "true", "first_error": err}))' \
      "$strat" "$k" "$rc" "$adapter" "$W/dist_$strat-$k.log" | tee "$W/dist_$strat-$k.json"
  done
else
  echo "skip stage 4: $(left) s left"
fi

stamp "5 results"
"$PY" "$HERE/results.py" "$W" "$OUT" "$RUNS"
stamp "done ($(left) s of the budget left)"
}

main 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
