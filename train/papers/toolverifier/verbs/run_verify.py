"""``tooltrain eval run toolbench MODEL --verify STAGES``: ToolVerifier's self-verification (seed 003), the form of
``eval run`` that prints Table 1 and Table 2 (``docs/toolverifier.md``). Not a verb: the paper's
``PaperSpec.eval_run_form``, which ``train.commands.eval.run`` finds through ``PAPERS``: it adds the options
(``add_arguments``), checks them (``problem``), and when ``--verify`` is given (``chosen``) hands ``run`` the loader of
the selector model and what the verb reads (``PaperSpec``'s docstring states the contract).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.commands.outputs import check_outputs, write_results

VERIFY_CHOICES = "tool,params, tool, params, none"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``eval run``'s options for this form: --verify, --limit-per-task and the --teacher options."""
    from train.teacher import add_teacher_arguments

    parser.add_argument(
        "--verify",
        metavar="STAGES",
        help="toolbench: ToolVerifier's self-verification (seed 003): tool,params (all four Table 1 rows), tool, "
        "params or none; MODEL is the tool selector, the --teacher writes questions, parameters and calls",
    )
    arg = parser.add_argument
    arg("--limit-per-task", type=int, metavar="N", help="with --verify: score each task's first N cases")
    arg(
        "--backends",
        metavar="JSON|FILE",
        help="with --verify: a model per stage (a JSON object or a YAML file): selector (trained: MODEL | gold | a "
        "teacher), question, answer, params, params_sampled, verify, call (a teacher mapping each, as "
        "eval.toolbench_verify.backends); the others ask --teacher",
    )
    add_teacher_arguments(parser)


def verify_options_given(args: argparse.Namespace) -> list[str]:
    """The ToolVerifier options on the command line: --verify, --limit-per-task, and each --teacher option that
    differs from its default."""
    from train.teacher import add_teacher_arguments

    given = [
        name
        for name, value in (
            ("--verify", args.verify),
            ("--limit-per-task", args.limit_per_task),
            ("--backends", args.backends),
        )
        if value is not None
    ]
    teacher_parser = argparse.ArgumentParser(add_help=False)
    add_teacher_arguments(teacher_parser)
    for key, default in vars(teacher_parser.parse_args([])).items():
        if getattr(args, key) != default:
            given.append("--" + key.replace("_", "-"))
    return given


def chosen(args: argparse.Namespace) -> bool:
    """``--verify`` is given: this form runs instead of ``eval run``'s generation and scoring."""
    return args.verify is not None


def problem(args: argparse.Namespace) -> str | None:
    """Why the ToolVerifier options cannot run as given, or None."""
    from train.papers.toolverifier.verify import VerifySwitches

    given = verify_options_given(args)
    if not given:
        return None
    if args.bench != "toolbench":
        return f"{', '.join(given)}: ToolVerifier's self-verification is for toolbench, not {args.bench}"
    if args.verify is None:
        return f"{', '.join(given)} need --verify ({VERIFY_CHOICES})"
    try:
        switches = VerifySwitches.parse(args.verify)
    except ValueError:
        return f"--verify {args.verify!r}: valid: {VERIFY_CHOICES}"
    if args.backends is not None:
        from train.papers.toolverifier.stages import backends_problems, read_backends

        try:
            backends = read_backends(args.backends)
        except ValueError as err:
            return str(err)
        stages = [name for name, on in (("tool", switches.tool), ("params", switches.params)) if on]
        problems = backends_problems(backends, "--backends", stages)
        if problems:
            return "; ".join(problems)
    if args.limit_per_task is not None and args.limit_per_task < 1:
        return "--limit-per-task must be >= 1"
    if args.max_new_tokens < 1:
        return "--max-new-tokens must be >= 1"
    refused = [
        (args.limit is not None, "--limit (use --limit-per-task)"),
        (args.backend != "hf", "--backend vllm"),
        (args.temperature != 0, "--temperature (the selector is greedy, §2.2)"),
        (args.summary is not None, "--summary"),
        (bool(args.option), "--option"),
    ]
    named = [name for bad, name in refused if bad]
    return f"--verify does not take {', '.join(named)}" if named else None


def traces_path(args: argparse.Namespace) -> Path | None:
    """``--predictions`` when given, else beside ``-o``: METRICS.json -> METRICS.traces.jsonl."""
    from train.commands.outputs import written_in_place

    if args.predictions is not None:
        return args.predictions
    if args.output is None or written_in_place(args.output):
        return None
    return args.output.with_name(f"{args.output.stem}.traces.jsonl")


def run(args: argparse.Namespace, selector_model: Callable[[], tuple[Any, Any, str]], inputs: list[Path]) -> int:
    """``eval run toolbench MODEL --verify ...``: ToolVerifier's Tables 1 and 2 in one run. ``selector_model()`` loads
    MODEL: (model on its device, tokenizer, description); its errors are ``error:`` lines, exit 2. ``inputs``: what
    ``eval run`` reads (no output may go onto them)."""
    import time

    from train.evaluation.tasks import TaskError, get_task, read_references
    from train.papers.toolverifier.bench import format_table_5, format_tables, model_completer, verify_toolbench
    from train.papers.toolverifier.demos import DemonstrationError, find_weather_xlsx, toolbench_demonstrations
    from train.papers.toolverifier.stages import make_selector, make_teachers, read_backends, selector_kind
    from train.papers.toolverifier.verify import VerifySwitches, text_selector
    from train.teacher import teacher_config

    traces_file = traces_path(args)
    check_outputs([traces_file, args.output], inputs)  # before the model is loaded
    started = time.monotonic()
    try:
        if not args.data:
            raise TaskError("--verify needs --data (the ToolBench folder or its canonical conversations)")
        backends = read_backends(args.backends) if args.backends is not None else {}
        teacher = make_teachers(teacher_config(args), backends)
        references, rejected = read_references(args.data, args.source, get_task("toolbench"))
        if not references:
            raise TaskError(f"no reference to evaluate: {len(rejected)} unreadable")
        xlsx = find_weather_xlsx(args.data)
        demonstrations = toolbench_demonstrations(references, xlsx)
        described = [f"{selector_kind(backends)} (not MODEL)"]

        def trained() -> object:  # MODEL is loaded only when it is the selector
            model, tokenizer, described[0] = selector_model()
            return text_selector(model_completer(model, tokenizer, args.max_new_tokens))

        selector = make_selector(backends, trained, references, args.max_new_tokens)
        metrics, traces = verify_toolbench(
            selector,
            teacher,
            references,
            VerifySwitches.parse(args.verify),
            demonstrations,
            args.limit_per_task,
        )
    except (TaskError, DemonstrationError, ValueError, OSError) as err:  # ModelError, RunFolderError: ValueErrors
        print(f"error: {err}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - started
    description = described[0]
    print(f"toolbench --verify: {description} as the selector (greedy, max {args.max_new_tokens} new tokens)")
    gold = selector_kind(backends) == "gold"  # Table 5's setting: its rows, not Table 1's, are the comparison
    print(format_tables(metrics, table_1=not gold))
    if gold:
        print(format_table_5(metrics))
    if xlsx is None:
        print("no weather/Tool_Documentations_weather.xlsx beside --data: weather demonstrations are leave-one-out too")
    if rejected:
        print(f"unreadable references: {len(rejected)}")
        for row in rejected[:10]:
            print(f"  {row.get('id', row.get('location'))}: {row['reason']}")
    print(f"wall time {seconds:.1f} s")
    report = {
        "bench": "toolbench",
        "model": description,
        "data": [str(p) for p in args.data],
        "verify": metrics["verify"],
        "selector": selector_kind(backends),
        "backends": backends,
        "metrics": metrics,
        "wall_seconds": round(seconds, 1),
        "issues": {"unreadable_references": rejected},
    }
    return write_results(traces_file, traces, args.output, report, inputs=inputs)
