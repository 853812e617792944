"""``tooltrain export RUN_DIR [--out-dir DIR] [--dtype auto|float32|bfloat16|float16]``.

Merges the LoRA adapter a training run saved (RUN_DIR/final, or its newest complete checkpoint
when the run did not finish) into the base model and writes safetensors weights, the model config
and the tokenizer to OUT (default RUN_DIR/merged), the tokenizer carrying the chat template of the
run's chat format (tools, calls and results as the run trained on them), with README.md and
tooltrain_export.json naming the vLLM / SGLang tool-call parser and the serve command.

The export is written to a temporary folder beside OUT and renamed onto it when complete (an earlier
export there is replaced whole; a full disk leaves nothing partial). OUT may not be a file, the run
folder or a folder inside it other than RUN_DIR/merged, or a folder holding files that are not an
earlier export. A damaged file of the run (a truncated safetensors file, garbled JSON or config.yaml)
is named in the error. Exit code 0 on success, 2 on any of these or when RUN_DIR holds nothing to export.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from train.commands.outputs import add_out_dir
from train.engine.export import EXPORT_DTYPES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a training run's output_dir")
    add_out_dir(
        parser, "-o", "--output", default=None, help="the folder the model is written to (default: RUN_DIR/merged)"
    )
    parser.add_argument(
        "--dtype", choices=EXPORT_DTYPES, default="auto", help="weights dtype (default: the dtype the run trained in)"
    )


def run(args: argparse.Namespace) -> int:
    from train.engine.export import export_run
    from train.engine.run_folder import RunFolderError

    try:
        result = export_run(args.run_dir, args.out_dir, args.dtype)
    except RunFolderError as err:  # a run folder that cannot be read; an ExportError is one
        print(f"error: {err}", file=sys.stderr)
        return 2
    what = "adapter merged into its base model" if result.merged_adapter else "full model"
    print(f"exported {result.source} ({what}, {result.parameters:,} parameters, {result.dtype}) -> {result.output_dir}")
    print(f"serve it with: {result.serve}")
    return 0
