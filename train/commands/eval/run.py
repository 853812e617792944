"""``tooltrain eval run BENCH MODEL --data FILE... [-o METRICS.json] [--predictions OUT.jsonl]``: generate, then score.

MODEL is one of
  * a run directory (``tooltrain train`` output): its ``final/`` adapter (or newest complete
    checkpoint) on the base model its ``config.yaml`` names, with the run's chat format and tokenizer;
  * a Hugging Face model directory (``config.json``; an exported run's format is read from the run);
    give ``--format`` (and ``--tokenizer`` when the directory has none);
  * a model config name from ``conf/model`` or a unique prefix of one (``tiny`` -> tiny_llama,
    ``smollm2`` -> smollm2_135m): the base model as training would build it.

The bench's task (``train.evaluation.tasks``) turns each reference conversation into a prompt, the
model writes the target turn (greedy unless ``--temperature``), the chat format parses it, and the
bench's scorer scores the prediction rows. ``--option KEY=VALUE`` sets a task option (metabench: the
retriever that executes the model's meta_tool calls for HR@k: ``embedder``, ``alpha``, ``k``).
``--predictions`` writes those rows (re-scorable with ``tooltrain eval score``) with each generation
beside them. ``heldout`` on a run directory without
``--data`` evaluates the run's own eval split. BENCH comes first, as in ``tooltrain eval score BENCH``; the old
order (MODEL BENCH) is an error that names the new one. Exit 0 when scoring ran, 2 when an input is unusable.

``toolbench --verify tool,params`` runs ToolVerifier's self-verification instead (seed 003, §2.2-2.3, §3.1): MODEL
is the tool selector (ToolSelect's plain-completion prompt, greedy, its own tokenizer), a teacher (``--teacher
offline|http|hf``, offline by default) writes the contrastive questions, answers, parameters and calls, every case
is offered all 17 tools, and each Table 1 row the switches allow is scored (``tool,params``: all four; ``tool``:
none + tool; ``params``: none + params; ``none``: none). It prints Table 1 (per task and pooled) and Table 2
(selection accuracy without / with tool verification) beside the paper's numbers; ``-o`` gets the metrics and the
per-case traces go beside it (``METRICS.traces.jsonl``, or ``--predictions``): one row per case holding each row's
trace. ``--limit-per-task N`` scores each task's first N cases (demonstrations still come from all of them).
``--verify``, ``--limit-per-task`` and the ``--teacher`` options are refused for another bench (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.commands.arg_types import non_negative_number
from train.commands.outputs import check_outputs, output_file, write_results
from train.evaluation.tasks import task_names


class ModelError(ValueError):
    pass


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    chat_format: str | None
    description: str
    run_cfg: Any = None  # the run's config when MODEL is a run directory
    model_dir: Path | None = None  # a directory vLLM can load
    format_options: dict[str, Any] = field(default_factory=dict)  # the run's data.format_options, if any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arg = parser.add_argument
    # BENCH is checked in run() (bench_problem), not by choices=: the old order MODEL BENCH gets its own message
    arg(
        "bench",
        metavar="BENCH",
        help="benchmark: its task builds the prompts, its scorer scores "
        f"({', '.join(task_names())}; or module:attr naming a ScorerSpec with a task)",
    )
    arg("model", metavar="MODEL", help="a run directory, a HF model directory, or a conf/model name (tiny, smollm2)")
    arg(
        "--data",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="reference conversations (canonical JSON Lines) or the bench's own files",
    )
    arg("--source", metavar="READER", help="read --data with this reader (default: canonical, else the bench's own)")
    arg("--format", dest="chat_format", metavar="F", help="chat format (default: the run's or the model config's)")
    arg(
        "--format-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="format_options",
        help="a chat format option, repeatable (default: the run's data.format_options)",
    )
    arg("--tokenizer", metavar="T", help="tokenizer name or directory (default: the model's)")
    arg(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a task option, repeatable (metabench: embedder=NAME, alpha=A, k=K for the meta_tool retriever)",
    )
    arg("--limit", type=int, metavar="N", help="evaluate the first N usable references")
    arg("--max-new-tokens", type=int, default=256, metavar="N", help="tokens generated per turn (default 256)")
    arg("--batch-size", type=int, default=8, metavar="N", help="prompts per generate call (default 8)")
    arg("--temperature", type=non_negative_number, default=0.0, metavar="T", help="0 (default): greedy")
    arg("--backend", choices=("hf", "vllm"), default="hf", help="hf (default) or vllm (GPU, when installed)")
    arg("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto")
    arg(
        "--summary",
        choices=("toolgt", "itc"),
        help="bfcl, nexus: ToolGT's numbers (seed 004 §3.3) beside the paper's "
        "Table 2 row for the model: bfcl W, non-live / live / relevance, exec-free BFCL; "
        "nexus: its ToolGT tasks, W / U; itc: the ITC paper's Table 3 / 5 / 7 rows for the model "
        "beside the measured macro and micro numbers",
    )
    arg(
        "--verify",
        metavar="STAGES",
        help="toolbench: ToolVerifier's self-verification (seed 003): tool,params (all four Table 1 rows), tool, "
        "params or none; MODEL is the tool selector, the --teacher writes questions, parameters and calls",
    )
    arg("--limit-per-task", type=int, metavar="N", help="with --verify: score each task's first N cases")
    from train.teacher import add_teacher_arguments

    add_teacher_arguments(parser)
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="write metrics, counts and issues as JSON")
    arg(
        "--predictions",
        type=output_file,
        metavar="OUT.jsonl",
        help="write one prediction row (and its generation) per item",
    )


# ---------------------------------------------------------------- loading the model


def model_config_name(name: str) -> str:
    """``name`` itself or the one conf/model config it is a prefix of."""
    from train.engine.config import CONF_DIR

    names = sorted(path.stem for path in (CONF_DIR / "model").glob("*.yaml"))
    if name in names:
        return name
    matches = [n for n in names if n.startswith(name + "_")]
    if len(matches) != 1:
        raise ModelError(f"{name!r} is not a directory, nor a model config ({', '.join(names)})")
    return matches[0]


def _device_and_dtype(name: str, configured: str = "auto") -> tuple[Any, Any]:
    import torch

    from train.engine.model import resolve_dtype

    gpu = torch.cuda.is_available()
    return torch.device("cuda" if gpu else "cpu"), resolve_dtype(configured if name == "auto" else name, gpu)


def load_run(run_dir: Path, dtype_name: str) -> LoadedModel:
    from train.engine.run_folder import RunFolder

    run = RunFolder(run_dir)
    model, tokenizer = run.load(run.dtype(dtype_name))
    return LoadedModel(
        model, tokenizer, run.chat_format_name, run.label, run_cfg=run.config, format_options=run.format_options
    )


def load_model_dir(model_dir: Path, dtype_name: str, tokenizer_name: str | None) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from train.engine.run_folder import load_run_config, read_json, verify_weights
    from train.tokenizers import BUILDERS, load_tokenizer

    verify_weights(model_dir)  # a truncated or garbled file: a RunFolderError naming it, before loading
    chat_format, format_options = None, {}
    provenance = model_dir / "tooltrain_export.json"
    if provenance.is_file():  # an exported run: its format is the run's
        named = read_json(provenance)
        run_dir = Path(named["run_dir"]) if isinstance(named, dict) and named.get("run_dir") else None
        if run_dir is not None and run_dir.is_dir():
            run_cfg = load_run_config(run_dir)
            chat_format, format_options = str(run_cfg.model.chat_format), run_format_options(run_cfg)
    if tokenizer_name in BUILDERS:
        tokenizer = load_tokenizer(tokenizer_name)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_name or str(model_dir))
    _, dtype = _device_and_dtype(dtype_name)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype, use_safetensors=True)
    return LoadedModel(
        model, tokenizer, chat_format, str(model_dir), model_dir=model_dir, format_options=format_options
    )


def run_format_options(cfg: Any) -> dict[str, Any]:
    """The chat format options a run was trained with: evaluation renders its prompts the same way."""
    from omegaconf import OmegaConf

    options = cfg.data.get("format_options") if "data" in cfg else None
    return dict(OmegaConf.to_container(options, resolve=True)) if options else {}


def load_named(name: str, dtype_name: str) -> LoadedModel:
    from train.engine.config import compose
    from train.engine.model import build_model
    from train.tokenizers import load_tokenizer

    config_name = model_config_name(name)
    cfg = compose([f"model={config_name}"])
    tokenizer = load_tokenizer(cfg.model.tokenizer, trust_remote_code=bool(cfg.model.trust_remote_code))
    _, dtype = _device_and_dtype(dtype_name, str(cfg.model.dtype))
    model = build_model(cfg.model, len(tokenizer), dtype, "sdpa", seed=cfg.seed)
    return LoadedModel(model, tokenizer, str(cfg.model.chat_format), config_name)


def load(spec: str, dtype_name: str, tokenizer_name: str | None) -> LoadedModel:
    path = Path(spec)
    if path.is_dir():
        if (path / "config.yaml").is_file() or (path / ".hydra" / "config.yaml").is_file():
            return load_run(path, dtype_name)
        if (path / "config.json").is_file():
            return load_model_dir(path, dtype_name, tokenizer_name)
        raise ModelError(f"{path}: neither a run directory (config.yaml) nor a model directory (config.json)")
    return load_named(spec, dtype_name)


# ---------------------------------------------------------------- references


def run_eval_split(cfg: Any, tokenizer: Any) -> list[Any]:
    """The run's own eval split (the dataset build is cached, so this loads it)."""
    from omegaconf import OmegaConf

    from train.base.cache import cache_root
    from train.data.dataset import build_dataset

    data_cfg = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
    cache = Path(cfg.data.cache_dir or cache_root() / "datasets")
    built = build_dataset(data_cfg, cfg.model.chat_format, tokenizer, cache)
    return built.eval_conversations


# ---------------------------------------------------------------- running


def parse_options(pairs: list[str], types: dict[str, type]) -> dict[str, Any]:
    """``["alpha=0.8", "embedder=hash-bow"]`` -> ``{"alpha": 0.8, "embedder": "hash-bow"}``, typed by the task."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        kind = types.get(key, str)
        try:
            options[key] = kind(value)
        except ValueError:
            raise ValueError(f"{key}: expected {kind.__name__}, got {value!r}") from None
    return options


def backend_for(args: argparse.Namespace, loaded: LoadedModel) -> Any:
    from train.evaluation.generate import HFBackend, VllmBackend

    if args.backend == "vllm":
        if loaded.model_dir is None:
            raise ModelError(
                "the vllm backend loads a model directory: export the run first "
                "(tooltrain export RUN_DIR) and pass RUN_DIR/merged"
            )
        return VllmBackend(str(loaded.model_dir), temperature=args.temperature)
    device, _ = _device_and_dtype("auto")
    model = loaded.model.to(device).eval()
    tokenizer = loaded.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return HFBackend(model, pad_id, args.batch_size, temperature=args.temperature)


def generation_summary(generations: list[Any]) -> dict[str, int]:
    return {
        "prompts": len(generations),
        "prompt_errors": sum(1 for g in generations if (g.error or "").startswith("prompt")),
        "parse_errors": sum(1 for g in generations if (g.error or "").startswith("parse")),
        "stopped": sum(1 for g in generations if g.stopped),
        "hit_max_new_tokens": sum(1 for g in generations if g.text is not None and not g.stopped),
    }


def bench_problem(bench: str, model: str) -> str | None:
    """Why BENCH cannot be a bench, or None (a registered one or a ``module:attr``; ``task_class`` checks it has a
    task); the old order (MODEL BENCH) is named as such."""
    from train.evaluation import SCORERS

    if SCORERS.known(bench):
        return None
    if model in task_names():
        return f"BENCH comes first, as in tooltrain eval score BENCH: tooltrain eval run {model} {bench} ..."
    return f"unknown benchmark {bench!r}; valid: {', '.join(task_names())} (or module:attr for your own)"


def toolgt_summary(args: argparse.Namespace, metrics: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Print ToolGT's numbers for the bench (bfcl or nexus) beside the paper's; returns what was printed."""
    from train.commands.eval.score_bfcl import toolgt_lines
    from train.evaluation.bfcl.summary import summarize_bfcl
    from train.papers.toolgt.paper_tables import ARM_LABELS, paper_model

    if args.bench == "bfcl":
        summary = summarize_bfcl(metrics["by_category"], "toolgt")
        print("\n" + "\n".join(toolgt_lines(summary, names)))
        return summary
    nexus = metrics["toolgt"]
    print(f"\nToolGT Nexus (seed 004, Table 7): {nexus['note']}")
    for task, score in nexus["tasks"].items():
        print(f"  {task:<12} {100 * score['accuracy']:6.2f}  ({score['correct']}/{score['total']})")
    weighted, unweighted = nexus["weighted_average"], nexus["unweighted_average"]
    if weighted is not None:
        print(f"  W / U over these tasks: {100 * weighted:.2f} / {100 * unweighted:.2f}")
    model = paper_model(*names)
    if model is not None:
        print(f"paper, Table 2 (Nexus W / U over all 8 tasks), {model.label}:")
        for arm, row in model.arms.items():
            print(f"  {ARM_LABELS[arm]:<22} {row.nexus_w:.2f} / {row.nexus_u:.2f}")
    return nexus


def run(args: argparse.Namespace) -> int:
    from train.commands.eval.run_verify import read_paths, run_verify, verify_problem
    from train.commands.eval.score_report import metric_tables
    from train.engine.export import ExportError
    from train.evaluation.generate import GenerationError, generate
    from train.evaluation.tasks import (
        TaskError,
        evaluate_generations,
        get_task,
        prediction_records,
        read_references,
        task_class,
    )
    from train.formats import get_format, parse_format_option

    problem = bench_problem(args.bench, args.model) or verify_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.verify is not None:
        return run_verify(args, lambda: selector_model(args))
    if args.max_new_tokens < 1 or args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        print("error: --max-new-tokens, --batch-size and --limit must be >= 1", file=sys.stderr)
        return 2
    if args.summary == "toolgt" and args.bench not in ("bfcl", "nexus"):
        print(f"error: --summary toolgt is for bfcl and nexus, not {args.bench}", file=sys.stderr)
        return 2
    if args.summary == "itc" and args.bench != "itc":
        print(f"error: --summary itc is for itc, not {args.bench}", file=sys.stderr)
        return 2
    check_outputs([args.predictions, args.output], read_paths(args))  # before the model is loaded
    try:  # an unknown benchmark lists the valid ones
        options_types = task_class(args.bench).OPTIONS
    except TaskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        task = get_task(args.bench, parse_options(args.option, options_types))
    except (TaskError, ValueError) as err:
        print(f"error: --option: {err}", file=sys.stderr)
        return 2
    try:
        loaded = load(args.model, args.dtype, args.tokenizer)
        format_name = args.chat_format or loaded.chat_format
        if format_name is None:
            raise ModelError(
                f"{args.model}: give --format (the model directory does not say which chat format it was trained with)"
            )
        # the run's own options hold only when evaluating in the run's format; the command line adds to them
        options = dict(loaded.format_options) if format_name == loaded.chat_format else {}
        options.update(parse_format_option(format_name, spec) for spec in args.format_options)
        fmt = get_format(format_name, options)
        rejected: list[dict[str, str]] = []
        if args.data:
            conversations, rejected = read_references(args.data, args.source, task)
        elif args.bench == "heldout" and loaded.run_cfg is not None:
            conversations = run_eval_split(loaded.run_cfg, loaded.tokenizer)
        else:
            raise ModelError("give --data (only heldout on a run directory defaults to the run's eval split)")
        prepared = task.prepare(conversations, args.limit, args.data or [])
        if not prepared.items:
            raise TaskError(
                f"no reference to evaluate: {len(conversations)} conversations, "
                f"{len(prepared.skipped)} unusable, {len(rejected)} unreadable"
            )
        backend = backend_for(args, loaded)
        prompts = [(item.conversation, item.target) for item in prepared.items]
        generations = generate(prompts, fmt, loaded.tokenizer, backend, args.max_new_tokens)
    except (ModelError, TaskError, ExportError, GenerationError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    outcome = evaluate_generations(task, prepared.items, generations)
    summary = generation_summary(generations)
    decoding = "greedy" if args.temperature <= 0 else f"temperature {args.temperature}"
    print(
        f"{args.bench}: {len(prepared.items)} items, {loaded.description}, {format_name}, {args.backend}, "
        f"{decoding}, max {args.max_new_tokens} new tokens"
    )
    print(metric_tables(outcome.metrics))
    print("\ngeneration  " + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in summary.items()))
    toolgt = itc = None
    if args.summary == "toolgt":
        toolgt = toolgt_summary(args, outcome.metrics, [args.model, loaded.description])
    elif args.summary == "itc":
        from train.papers.itc.paper_tables import summary as itc_summary

        lines, itc = itc_summary(outcome.metrics, [args.model, loaded.description])
        print("\n" + "\n".join(lines))
    unused = (("references the task cannot use (not evaluated)", prepared.skipped), ("unreadable references", rejected))
    for title, rows in unused:
        if rows:
            print(f"{title}: {len(rows)}")
            for row in rows[:10]:
                print(f"  {row.get('id', row.get('location'))}: {row['reason']}")
    report = {
        "bench": args.bench,
        "model": loaded.description,
        "format": format_name,
        "data": [str(p) for p in args.data or []],
        "metrics": outcome.metrics,
        "generation": summary,
        **({"toolgt_summary": toolgt} if toolgt is not None else {}),
        **({"itc_summary": itc} if itc is not None else {}),
        "issues": {"skipped_references": prepared.skipped, "unreadable_references": rejected},
    }
    records = prediction_records(outcome, generations) if args.predictions else []
    return write_results(args.predictions, records, args.output, report, inputs=read_paths(args))


def selector_model(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """``--verify``'s selector: MODEL loaded as any MODEL is, on the device, in eval mode."""
    loaded = load(args.model, args.dtype, args.tokenizer)
    device, _ = _device_and_dtype("auto")
    return loaded.model.to(device).eval(), loaded.tokenizer, loaded.description
