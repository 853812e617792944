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
retriever that executes the model's retrieval calls for HR@k: ``embedder``, ``alpha``, ``k``).
``--predictions`` writes those rows (re-scorable with ``tooltrain eval score``) with each generation
beside them. ``heldout`` on a run directory without
``--data`` evaluates the run's own eval split. BENCH comes first, as in ``tooltrain eval score BENCH``; the old
order (MODEL BENCH) is an error that names the new one. Exit 0 when scoring ran, 2 when an input is unusable.

``bfcl_v4`` as BENCH runs the BFCL v4 suite from the installed ``bfcl-eval`` package, one benchmark per category
(``--category NAME``, repeatable, restricts it; ``--limit`` is per category; ``run_bfcl_v4``), and prints the
leaderboard table. ``--summary bfcl_v4`` prints that table for ``bfcl`` too (over the categories scored).

``--summary NAME`` prints a paper's own numbers beside its table rows (``train.papers``: each paper's
``Summary``). A paper may add a form of this verb of its own, with its options (``PaperSpec.eval_run_form``, found
through ``train.papers``): ``toolbench --verify tool,params`` runs a self-verification instead (its options are
refused for another bench, exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.commands.arg_types import non_negative_number
from train.commands.outputs import check_outputs, output_file, write_results
from train.evaluation.tasks import task_names

SUITE = "bfcl_v4"  # not a task: a suite of benchmarks (run_bfcl_v4), one per category of the official package


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
        f"({', '.join(task_names())}; {SUITE}: the BFCL v4 suite from the bfcl-eval package; "
        "or module:attr naming a ScorerSpec with a task)",
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
        help="a task option, repeatable (metabench: embedder=NAME, alpha=A, k=K for the retriever it calls)",
    )
    arg("--limit", type=int, metavar="N", help="evaluate the first N usable references (bfcl_v4: per category)")
    arg("--category", action="append", metavar="NAME", help=f"{SUITE} only: run this category (repeatable)")
    arg("--max-new-tokens", type=int, default=256, metavar="N", help="tokens generated per turn (default 256)")
    arg("--batch-size", type=int, default=8, metavar="N", help="prompts per generate call (default 8)")
    arg("--temperature", type=non_negative_number, default=0.0, metavar="T", help="0 (default): greedy")
    arg("--backend", choices=("hf", "vllm"), default="hf", help="hf (default) or vllm (GPU, when installed)")
    arg("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto")
    from train.papers import summaries

    papers = {name: summary for name, summary in summaries().items() if summary.run_benches}
    arg(
        "--summary",
        choices=(SUITE, *papers),
        help=f"{SUITE}: BFCL v4 as the leaderboard reports it, beside reference models (bfcl, {SUITE}); "
        + "; ".join(summary.help for summary in papers.values()),
    )
    for form in paper_forms():
        form.add_arguments(parser)
    arg("-o", "--output", type=output_file, metavar="METRICS.json", help="write metrics, counts and issues as JSON")
    arg(
        "--predictions",
        type=output_file,
        metavar="OUT.jsonl",
        help="write one prediction row (and its generation) per item",
    )


def paper_forms() -> list[Any]:
    """The papers' own forms of this verb (``PaperSpec.eval_run_form``), their modules in ``PAPERS`` order: each adds
    its options, checks them and, when the command line chooses it, runs instead of generation and scoring."""
    from train.papers import specs

    return [importlib.import_module(spec.eval_run_form) for _, spec in specs() if spec.eval_run_form]


def read_paths(args: argparse.Namespace) -> list[Path]:
    """What ``eval run`` reads: the --data files or folders, and MODEL when it is a folder (a run or a model)."""
    model = Path(args.model)
    return [*(args.data or []), *([model] if model.is_dir() else [])]


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

    from train.engine.run_folder import format_options as run_format_options
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
    """Counts over the model's answers, as the records' own kind counts them (its ``summarize``: a one-shot
    ``Generation`` counts prompts, an episode record each of its answers); no records count as no prompts."""
    from train.evaluation.generate import Generation

    kind = type(generations[0]) if generations else Generation
    return kind.summarize(generations)


def bench_problem(bench: str, model: str) -> str | None:
    """Why BENCH cannot be a bench, or None (a registered one or a ``module:attr``; ``task_class`` checks it has a
    task); the old order (MODEL BENCH) is named as such."""
    from train.evaluation import SCORERS

    if SCORERS.known(bench) or bench == SUITE:
        return None
    if model in task_names():
        return f"BENCH comes first, as in tooltrain eval score BENCH: tooltrain eval run {model} {bench} ..."
    return f"unknown benchmark {bench!r}; valid: {', '.join(task_names())} (or module:attr for your own)"


def arguments_problem(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot run (before anything is read or loaded), or None."""
    from train.papers import summaries

    forms = paper_forms()
    problem = bench_problem(args.bench, args.model) or next(filter(None, (form.problem(args) for form in forms)), None)
    if problem or any(form.chosen(args) for form in forms):
        return problem
    if args.max_new_tokens < 1 or args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        return "--max-new-tokens, --batch-size and --limit must be >= 1"
    if args.category and args.bench != SUITE:
        return f"--category goes with {SUITE} (bfcl reads the category from its question file)"
    if args.summary == SUITE:
        return None if args.bench in ("bfcl", SUITE) else f"--summary {SUITE} goes with bfcl or {SUITE}"
    summary = summaries().get(args.summary)
    return None if summary is None else summary.problem(args.summary, args.bench, summary.run_benches)


def make_task(args: argparse.Namespace) -> Any:
    """The bench's task with its ``--option`` values (TaskError: an unknown bench lists the valid ones)."""
    from train.evaluation.tasks import TaskError, get_task, task_class

    options_types = task_class(args.bench).OPTIONS
    try:
        return get_task(args.bench, parse_options(args.option, options_types))
    except (TaskError, ValueError) as err:
        raise TaskError(f"--option: {err}") from None


@dataclass
class Generated:
    """What ``generate_all`` made: the model, its format, the prepared items, the unreadable rows, the generations."""

    loaded: LoadedModel
    format_name: str
    prepared: Any
    rejected: list[dict[str, str]]
    generations: list[Any]


def chat_format_for(args: argparse.Namespace, loaded: LoadedModel) -> tuple[str, Any]:
    """The format name and the format: ``--format`` or the model's, with the run's options (when evaluating in the
    run's own format) and the command line's ``--format-option`` on top."""
    from train.formats import get_format, parse_format_option

    format_name = args.chat_format or loaded.chat_format
    if format_name is None:
        raise ModelError(
            f"{args.model}: give --format (the model directory does not say which chat format it was trained with)"
        )
    options = dict(loaded.format_options) if format_name == loaded.chat_format else {}
    options.update(parse_format_option(format_name, spec) for spec in args.format_options)
    return format_name, get_format(format_name, options)


def references(args: argparse.Namespace, task: Any, loaded: LoadedModel) -> tuple[Any, list[dict[str, str]]]:
    """The task's prepared items from ``--data`` (or a run's own eval split for heldout), and the unreadable rows."""
    from train.evaluation.tasks import TaskError, read_references

    rejected: list[dict[str, str]] = []
    if args.data:
        conversations, rejected = read_references(args.data, args.source, task)
    elif args.bench == "heldout" and loaded.run_cfg is not None:
        conversations = run_eval_split(loaded.run_cfg, loaded.tokenizer)
    else:
        raise ModelError("give --data (only heldout on a run directory defaults to the run's eval split)")
    prepared = task.prepare(conversations, args.limit, args.data or [])
    for note in prepared.notes:
        print(note, flush=True)
    if not prepared.items:
        raise TaskError(
            f"no reference to evaluate: {len(conversations)} conversations, "
            f"{len(prepared.skipped)} unusable, {len(rejected)} unreadable"
        )
    return prepared, rejected


def generate_items(task: Any, items: list[Any], fmt: Any, tokenizer: Any, backend: Any, max_new_tokens: int) -> list:
    """One generation per item, or one played episode per item for an episodic task (``bfcl_multi_turn``):
    ``train.evaluation.generate.generate_for_task``, the rule the eval callback follows too."""
    from train.evaluation.generate import generate_for_task

    return generate_for_task(task, items, fmt, tokenizer, backend, max_new_tokens)


def open_model(args: argparse.Namespace) -> tuple[LoadedModel, str, Any, Any]:
    """MODEL loaded, its format name and format, and the generation backend (for a suite of benchmarks)."""
    loaded = load(args.model, args.dtype, args.tokenizer)
    format_name, fmt = chat_format_for(args, loaded)
    return loaded, format_name, fmt, backend_for(args, loaded)


def generate_all(args: argparse.Namespace, task: Any) -> Generated:
    """MODEL loaded, the references read and prepared, one generation per item."""
    loaded = load(args.model, args.dtype, args.tokenizer)
    format_name, fmt = chat_format_for(args, loaded)
    prepared, rejected = references(args, task, loaded)
    backend = backend_for(args, loaded)
    generations = generate_items(task, prepared.items, fmt, loaded.tokenizer, backend, args.max_new_tokens)
    return Generated(loaded, format_name, prepared, rejected, generations)


def paper_summary(args: argparse.Namespace, metrics: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``--summary NAME``: the paper's lines printed (its ``Summary``, from ``train.papers``); ``{NAME_summary: data}``
    for the metrics JSON, empty without one."""
    from train.papers import summaries

    if args.summary is None:
        return {}
    if args.summary == SUITE:  # the leaderboard's table over the categories this run scored
        from train.evaluation.bfcl.leaderboard import leaderboard, leaderboard_lines

        board = leaderboard(metrics.get("by_category") or {})
        print("\n" + "\n".join(leaderboard_lines(board, ours=names[0])))
        return {f"{SUITE}_summary": board}
    lines, data = summaries()[args.summary].lines(args.bench, metrics, names)
    print("\n" + "\n".join(lines))
    return {f"{args.summary}_summary": data}


def print_unused(prepared: Any, rejected: list[dict[str, str]]) -> None:
    unused = (("references the task cannot use (not evaluated)", prepared.skipped), ("unreadable references", rejected))
    for title, rows in unused:
        if rows:
            print(f"{title}: {len(rows)}")
            for row in rows[:10]:
                print(f"  {row.get('id', row.get('location'))}: {row['reason']}")


def run(args: argparse.Namespace) -> int:
    from train.commands.eval.score_report import metric_tables
    from train.evaluation.generate import GenerationError
    from train.evaluation.tasks import TaskError, evaluate_generations, prediction_records

    problem = arguments_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.bench == SUITE:
        from train.commands.eval import run_bfcl_v4

        return run_bfcl_v4.run(args, lambda: open_model(args), generate_items, generation_summary)
    chosen = next((form for form in paper_forms() if form.chosen(args)), None)
    if chosen is not None:  # a paper's own form of the verb (--verify): it loads MODEL when it is ready to
        return chosen.run(args, lambda: selector_model(args), read_paths(args))
    check_outputs([args.predictions, args.output], read_paths(args))  # before the model is loaded
    try:
        task = make_task(args)
    except TaskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        made = generate_all(args, task)
    except (ModelError, TaskError, GenerationError, ValueError, OSError) as err:  # a RunFolderError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    loaded, prepared = made.loaded, made.prepared
    outcome = evaluate_generations(task, prepared.items, made.generations)
    summary = generation_summary(made.generations)
    decoding = "greedy" if args.temperature <= 0 else f"temperature {args.temperature}"
    print(
        f"{args.bench}: {len(prepared.items)} items, {loaded.description}, {made.format_name}, {args.backend}, "
        f"{decoding}, max {args.max_new_tokens} new tokens"
    )
    print(metric_tables(outcome.metrics))
    print("\ngeneration  " + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in summary.items()))
    paper = paper_summary(args, outcome.metrics, [args.model, loaded.description])
    print_unused(prepared, made.rejected)
    report = {
        "bench": args.bench,
        "model": loaded.description,
        "format": made.format_name,
        "data": [str(p) for p in args.data or []],
        "metrics": outcome.metrics,
        "generation": summary,
        **paper,
        "issues": {"skipped_references": prepared.skipped, "unreadable_references": made.rejected},
    }
    records = prediction_records(outcome, made.generations) if args.predictions else []
    return write_results(args.predictions, records, args.output, report, inputs=read_paths(args))


def selector_model(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """MODEL for a paper's form of the verb (``--verify``'s selector): loaded as any MODEL is, on the device, in eval
    mode."""
    loaded = load(args.model, args.dtype, args.tokenizer)
    device, _ = _device_and_dtype("auto")
    return loaded.model.to(device).eval(), loaded.tokenizer, loaded.description
