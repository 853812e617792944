"""``tooltrain export RUN_DIR [--out-dir DIR] [--dtype auto|float32|...] [--push-to-hub REPO [--private]]``.

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

README.md is a Hugging Face model card (``train.engine.model_card``). ``--push-to-hub REPO [--private]`` uploads the
finished export to that model repo through huggingface_hub (``train.engine.hub_push``): an id the Hub refuses,
offline mode or no token are refused before anything is exported; a push that fails later (authentication, the
network) is one ``error:`` line naming the repo and the reason, exit 2, the export kept and said so.
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
    parser.add_argument(
        "--push-to-hub",
        metavar="REPO",
        default=None,
        help="then upload the export to this Hugging Face model repo (OWNER/NAME; created when missing), "
        "with the token of HF_TOKEN or `hf auth login`",
    )
    parser.add_argument(
        "--private", action="store_true", help="with --push-to-hub: create the repo private (an existing one keeps its)"
    )


def run(args: argparse.Namespace) -> int:
    from train.engine.export import export_run
    from train.engine.hub_push import PushError, check_push, push_folder
    from train.engine.run_folder import RunFolderError

    if args.private and not args.push_to_hub:
        print("error: --private goes with --push-to-hub REPO", file=sys.stderr)
        return 2
    token = None
    if args.push_to_hub:
        try:  # what needs no network, before minutes of merging
            token = check_push(args.push_to_hub)
        except PushError as err:
            print(f"error: {err}; nothing was exported", file=sys.stderr)
            return 2
    try:
        result = export_run(args.run_dir, args.out_dir, args.dtype)
    except RunFolderError as err:  # a run folder that cannot be read; an ExportError is one
        print(f"error: {err}", file=sys.stderr)
        return 2
    what = "adapter merged into its base model" if result.merged_adapter else "full model"
    print(f"exported {result.source} ({what}, {result.parameters:,} parameters, {result.dtype}) -> {result.output_dir}")
    print(f"serve it with: {result.serve}")
    if token is None:
        return 0
    try:
        url = push_folder(result.output_dir, args.push_to_hub, token, private=args.private)
    except PushError as err:
        print(
            f"error: {err}; the export is complete and kept in {result.output_dir} "
            f"(upload it with `hf upload {args.push_to_hub} {result.output_dir}`)",
            file=sys.stderr,
        )
        return 2
    print(f"pushed to {url}")
    return 0
