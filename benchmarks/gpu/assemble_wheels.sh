#!/usr/bin/env bash
# Assembles the wheels the GPU machine lacks into .whl/ (git-ignored), for its Python 3.12 on manylinux x86_64:
#   .whl/core   what `tooltrain train` imports beyond the image: hydra-core, omegaconf, antlr4 runtime, jsonschema
#   .whl/bench  trl's SFTTrainer and Liger for the benchmark: trl, datasets (the newest that accepts the image's
#               huggingface_hub), dill, multiprocess, liger-kernel
#   .whl/zero   DeepSpeed for stage 4 (ZeRO-3), and pydantic
# Binary-or-pure packages come from PyPI as they are (pip download --only-binary=:all: --no-deps); the two PyPI has
# only as an sdist are built here (antlr4-python3-runtime: pure Python; deepspeed with DS_BUILD_OPS=0: its ops
# JIT-compile on first use). Versions are pinned to what the kit of 2026-11-27 carried (../shared/gpu/README.md).
#
#   bash benchmarks/gpu/assemble_wheels.sh            # from the checkout's root or anywhere; PY picks the pip
# Each pip call is bounded (pip --timeout, and `timeout`); a failure prints one `error:` line and leaves the .whl/
# of an earlier run as it was. Nothing outside .whl/ is written or deleted.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=$ROOT/.whl
STAGE=$DEST/.staging
PY=${PY:-python3}
NET_TIMEOUT=${NET_TIMEOUT:-30}      # pip's per-connection timeout, seconds
CALL_TIMEOUT=${CALL_TIMEOUT:-600}   # the most one pip call may take (the deepspeed build included)
T0=$SECONDS

CORE=(hydra-core==1.3.8 omegaconf==2.3.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
      referencing==0.37.0 rpds-py==2026.9.1)
CORE_SDIST=(antlr4-python3-runtime==4.9.3)
BENCH=(trl==1.16.0 datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 liger-kernel==0.8.5)
ZERO=(pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 hjson==3.1.0 typing-inspection==0.4.5)
ZERO_SDIST=(deepspeed==0.19.8)

fail() { echo "error: $*" >&2; exit 1; }

download() {  # download GROUP SPEC...: binary or pure wheels for CPython 3.12 on manylinux2014 x86_64
  local group=$1; shift
  timeout "$CALL_TIMEOUT" "$PY" -m pip download -q --disable-pip-version-check --timeout "$NET_TIMEOUT" --retries 2 \
    --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64 \
    --no-deps -d "$STAGE/$group" "$@" || fail "pip download of $* into .whl/$group failed (network? a version gone?)"
}

build() {  # build GROUP SPEC...: a wheel from PyPI's sdist (no dependencies; the build's own needs in isolation)
  local group=$1; shift
  timeout "$CALL_TIMEOUT" "$PY" -m pip wheel -q --disable-pip-version-check --timeout "$NET_TIMEOUT" --retries 2 \
    --no-deps --no-binary=:all: -w "$STAGE/$group" "$@" || fail "pip wheel of $* into .whl/$group failed"
}

"$PY" -m pip --version > /dev/null 2>&1 || fail "$PY has no pip: set PY to a Python that has one"
rm -rf "$STAGE"  # a staging folder an interrupted run left: inside .whl/ only
mkdir -p "$STAGE/core" "$STAGE/bench" "$STAGE/zero"
download core "${CORE[@]}"
build core "${CORE_SDIST[@]}"
download bench "${BENCH[@]}"
download zero "${ZERO[@]}"
# deepspeed's setup.py imports torch: built against this Python's torch, without isolation; no op is compiled
DS_BUILD_OPS=0 build zero --no-build-isolation "${ZERO_SDIST[@]}"

for group in core bench zero; do
  for whl in "$STAGE/$group"/*; do
    case $whl in
      *-py3-none-any.whl | *-py2.py3-none-any.whl | *-py312-none-any.whl | *cp312*manylinux*x86_64*.whl) ;;
      *) fail "$(basename "$whl") in .whl/$group is not for CPython 3.12 on manylinux x86_64" ;;
    esac
  done
done
for group in core bench zero; do  # all assembled: replace the groups of an earlier run
  rm -rf "${DEST:?}/$group"
  mv "$STAGE/$group" "$DEST/$group"
done
rmdir "$STAGE"
ls "$DEST"/core "$DEST"/bench "$DEST"/zero
echo "assembled $(find "$DEST" -name '*.whl' | wc -l) wheels, $(du -sh "$DEST" | cut -f1), in $((SECONDS - T0)) s"
