"""The ``tooltrain`` command: data and eval verbs through argparse, training through Hydra.

``tooltrain train recipe=NAME key=value ...`` hands its arguments to Hydra untouched; every other
verb is ``tooltrain GROUP VERB ...`` (or ``tooltrain VERB ...`` for the few in TOP_VERBS) and lives
in ``train/commands/<group>/<verb>.py`` exposing ``add_arguments(parser)`` and ``run(args) -> int``; a paper's own
verbs live in its wing (``train/papers/<paper>/verbs/``) and come from its ``PaperSpec.verbs`` (``verb_tables``).
Modules are imported only when their verb runs, so ``tooltrain data stats`` never pays for
importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# group -> verb -> (module, one-line help): the CLI's own verbs; the papers' come from the registry (verb_tables)
VERBS: dict[str, dict[str, tuple[str, str]]] = {
    "data": {
        "convert": ("train.commands.data.convert", "convert a source dataset into canonical JSON Lines"),
        "validate": ("train.commands.data.validate", "check canonical conversations against their tools"),
        "stats": ("train.commands.data.stats", "count conversations, turns, calls and tools"),
        "render": ("train.commands.data.render", "render conversations to token ids and loss labels"),
        "build": (
            "train.commands.data.build",
            "build a recipe's training set with its data builder (and the benchmark it writes)",
        ),
    },
    "eval": {
        "score": ("train.commands.eval.score", "score model predictions against a benchmark's references"),
        "run": ("train.commands.eval.run", "generate a benchmark's answers with a model or a run, then score them"),
    },
    "bench": {
        "render": (
            "train.commands.bench.render",
            "conversations/s of tooltrain's render+tokenize+mask next to trl's chat-template path",
        ),
        "data": (
            "train.commands.bench.data",
            "the data path at scale: render+tokenize+mask rates next to trl's, build and read RSS",
        ),
        "train": (
            "train.commands.bench.train",
            "training tokens/s, padding efficiency and peak memory: packed, padded and trl's SFTTrainer",
        ),
    },
}
DEMO_HELP = (
    "a tour of the data verbs (convert, validate, stats, render) on a sample the package ships, in seconds; "
    "no training: the training demo is `tooltrain train recipe=demo`"
)
# verbs without a group: tooltrain VERB ... -> (module, one-line help)
TOP_VERBS: dict[str, tuple[str, str]] = {
    "export": (
        "train.commands.export",
        "merge a run's LoRA adapter into its base model: safetensors weights + tokenizer",
    ),
}


def verb_tables(argv: list[str] | None = None) -> dict[str, dict[str, tuple[str, str]]]:
    """Every group's verbs: the CLI's own (VERBS), then each paper's (``PaperSpec.verbs``, in ``PAPERS`` order) under
    its group. When ``argv`` names one of the CLI's own verbs, only that verb's parser is read: the papers' specs are
    not loaded (``tooltrain data stats`` pays for no paper). A paper's verb that takes a verb's name is an error."""
    if argv is not None and (argv[:1] and argv[0] in TOP_VERBS or argv[1:2] and argv[1] in VERBS.get(argv[0], {})):
        return VERBS
    from train.papers import specs

    tables = {group: dict(verbs) for group, verbs in VERBS.items()}
    for name, spec in specs():
        for command, entry in spec.verbs.items():
            group, verb = command.split()
            if verb in tables.setdefault(group, {}):
                raise ValueError(f"paper {name}: verb {command!r} is taken (by {tables[group][verb][0]})")
            tables[group][verb] = entry
    return tables


def _build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooltrain", description="Train tool-use language models; prepare, check and score their data."
    )
    # read (and removed) by main before this parser runs; here for --help
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the libraries' warnings, log lines and progress bars (hidden by default; also TOOLTRAIN_VERBOSE=1)",
    )
    tables = verb_tables(argv)
    groups = parser.add_subparsers(dest="group", metavar="{demo,train,launch," + ",".join([*TOP_VERBS, *tables]) + "}")
    groups.add_parser("demo", help=DEMO_HELP)
    groups.add_parser("train", help="train a recipe: tooltrain train recipe=NAME [key=value ...]")
    groups.add_parser(
        "launch",
        help="launch a recipe on N nodes: tooltrain launch recipe=NAME [--nodes N ...]; Slurm batch "
        "script, torchrun or deepspeed (--dry-run prints it and writes the sbatch file; starts nothing)",
    )
    for verb, (module_name, help_text) in TOP_VERBS.items():
        verb_parser = groups.add_parser(verb, help=help_text, description=help_text)
        if argv[:1] == [verb]:
            module = importlib.import_module(module_name)
            module.add_arguments(verb_parser)
            verb_parser.set_defaults(_module=module)
    for group, verbs in tables.items():
        group_parser = groups.add_parser(group, help=f"{group} verbs: {', '.join(verbs)}")
        sub = group_parser.add_subparsers(dest="verb", metavar="{" + ",".join(verbs) + "}", required=True)
        for verb, (module_name, help_text) in verbs.items():
            verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
            # Only the verb being run imports its module: argument definitions live with the code.
            if argv[:2] == [group, verb]:
                module = importlib.import_module(module_name)
                module.add_arguments(verb_parser)
                verb_parser.set_defaults(_module=module)
    return parser


def demo_parser() -> argparse.ArgumentParser:
    from train.commands import demo

    parser = argparse.ArgumentParser(prog="tooltrain demo", description=DEMO_HELP)
    demo.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one verb; its exit code. Ctrl-C anywhere (imports included: they take seconds) is one ``error:`` line
    and exit 130, never a traceback."""
    try:
        return _run_verb(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("error: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


def _run_verb(argv: list[str]) -> int:
    from train.engine.console import quiet_libraries, take_verbose_flag

    argv = take_verbose_flag(argv)
    quiet_libraries()  # before any verb imports transformers; --verbose / TOOLTRAIN_VERBOSE=1 keep the noise
    if argv[:1] == ["train"]:
        from train.commands.train_help import train_help, wants_help

        if wants_help(argv[1:]):  # a usage, not Hydra's 140-line config dump
            print(train_help())
            return 0
        from train.engine.entry import hydra_main

        return hydra_main(argv[1:])
    if argv[:1] == ["launch"]:  # its own parser: options and Hydra overrides may interleave
        from train.commands import launch

        return launch.main(argv[1:])
    if argv[:1] == ["demo"]:
        from train.commands import demo

        return demo.run(demo_parser().parse_args(argv[1:]), main)
    parser = _build_parser(argv)
    args = parser.parse_args(argv)
    if args.group is None:
        parser.print_help()
        return 2
    from train.commands.outputs import OutputError

    try:
        return args._module.run(args)
    except OutputError as err:  # -o names a path that cannot be written
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tooltrain data stats x | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0
