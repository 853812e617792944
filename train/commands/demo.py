"""``tooltrain demo``: a tour of the data verbs on a sample the package ships (seconds, no model, no training).

It runs the data pipeline a user runs on their own corpus, verb by verb, on a 60-conversation glaive
sample (English and Chinese): convert -> validate -> stats -> render. Each step prints exactly what the
standalone verb prints. Its files go to their own folder (runs/data-demo/ by default), never into the
training demo's run folder (``tooltrain train recipe=demo`` trains in runs/demo/).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from train.commands.outputs import add_out_dir

# Its own folder: the training demo's run folder is runs/demo/, which a rerun of `tooltrain train recipe=demo`
# resumes from; nothing else may write there.
DEFAULT_OUTPUT_DIR = Path("runs/data-demo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_out_dir(
        parser,
        "-o",
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        help=f"the folder the tour writes its files to (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--format", default="chatml", help="chat format to render with (default: chatml, the demo model's)"
    )


def demo_sample() -> Path:
    return Path(str(resources.files("train") / "assets" / "demo" / "glaive_sample.json"))


def run(args: argparse.Namespace, run_verb: Callable[[list[str]], int]) -> int:
    """Each step through ``run_verb`` (the CLI's ``main``, handed in by ``train.cli``: a command never imports the
    CLI)."""
    out: Path = args.out_dir
    canonical = out / "glaive_sample.jsonl"
    steps = [
        (
            "convert the shipped glaive sample to canonical JSON Lines, rejecting tool-invalid records",
            ["data", "convert", "glaive", str(demo_sample()), "-o", str(canonical), "--validate"],
        ),
        ("validate it against its tools", ["data", "validate", str(canonical)]),
        ("count what is in it", ["data", "stats", str(canonical)]),
        (
            f"render it to token ids and loss labels ({args.format})",
            [
                "data",
                "render",
                str(canonical),
                "--format",
                args.format,
                "-o",
                str(out / f"rendered.{args.format}.jsonl"),
                "--show",
                "1",
            ],
        ),
    ]
    for number, (what, argv) in enumerate(steps, start=1):
        print(f"\n[{number}/{len(steps)}] {what}\n$ tooltrain {' '.join(argv)}", flush=True)
        code = run_verb(argv)
        if code != 0:
            print(f"demo step {number} failed with exit code {code}")
            return code
    print(f"\ndemo finished: files in {out}")
    return 0
