"""``eval.toolbench_verify``: ToolVerifier's self-verification on ToolBench after a training run (seed 003, issue 14).

When a recipe sets the key, the run's last act (``train.engine.run.finish``, after the final evaluation and the saved
model,
on a single-rank run) is ``verify_toolbench`` with the trained model as the selector (ToolSelect's plain-completion
prompt, greedy, ``model_completer``), the configured teacher writing questions, answers, parameters and verdicts, and
the first ``cases_per_task`` cases of each ToolBench task. Table 2 is printed here, Table 1 (the paper's main
table) last of all by the engine (``paper.table``: the measured rows beside the paper's); the metrics go to
``summary.json["toolbench_verify"]`` and one trace row per case to ``RUN_DIR/toolbench_verify.traces.jsonl`` -- the
same run as ``tooltrain eval run toolbench RUN_DIR --verify tool,params --limit-per-task N`` (docs/toolverifier.md).

The key, every sub-key optional::

    toolbench_verify:
      cases_per_task: 5           # the first N cases of each task; null: all (420)
      verify: [tool, params]      # the stages switched on: tool, params (both, one, or [] for none)
      teacher: {kind: offline}    # train.teacher.make_backend's config, as the toolgt builder takes it
      backends: {}                # per stage: selector (trained | gold | a teacher), question, answer, params,
                                  # params_sampled, verify, call (a teacher each); the others ask `teacher`
                                  # (train.papers.toolverifier.stages: the paper's three models)
      data: pkg://train/assets/toolverifier_tiny/toolbench   # the ToolBench folder (the 20 cases the package ships)
      max_new_tokens: 512         # the selector's budget for its Thought and Act

On more than one rank nothing is run in-process (the model is sharded or replicated, and verification is one
sequential pass): the summary records why, and the line printed gives the command that runs it on the saved model.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

DEFAULT_DATA = "pkg://train/assets/toolverifier_tiny/toolbench"
DEFAULTS: dict[str, Any] = {
    "cases_per_task": None,
    "verify": ["tool", "params"],
    "teacher": {"kind": "offline"},
    "backends": {},
    "data": DEFAULT_DATA,
    "max_new_tokens": 512,
}
STAGES = ("tool", "params")
TRACES_FILE = "toolbench_verify.traces.jsonl"


def _positive_int(value: Any, none_ok: bool) -> bool:
    if value is None:
        return none_ok
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def toolbench_verify_problems(node: Any) -> list[str]:
    """What is wrong with an ``eval.toolbench_verify`` mapping (plain Python values), each naming the valid choices.
    No I/O: the data folder is checked with the run's other inputs (``train.engine.run_dir.check_inputs``)."""
    from train.teacher.factory import BACKEND_SETTINGS

    where = "eval.toolbench_verify"
    if not isinstance(node, dict):
        return [f"{where} must be a mapping of {', '.join(DEFAULTS)}, got {node!r}"]
    problems = [
        f"{where}.{key}: unknown key; valid: {', '.join(DEFAULTS)}" for key in sorted(set(node) - set(DEFAULTS))
    ]
    if not _positive_int(node.get("cases_per_task"), none_ok=True):
        problems.append(
            f"{where}.cases_per_task must be an integer >= 1 (or null: all cases), got {node['cases_per_task']!r}"
        )
    if not _positive_int(node.get("max_new_tokens", 1), none_ok=False):
        problems.append(f"{where}.max_new_tokens must be an integer >= 1, got {node['max_new_tokens']!r}")
    verify = node.get("verify", DEFAULTS["verify"])
    if not isinstance(verify, list) or any(stage not in STAGES for stage in verify):
        problems.append(f"{where}.verify={verify!r}: a list of stages; valid: {', '.join(STAGES)} (or [] for none)")
    if not isinstance(node.get("data", DEFAULT_DATA), str):
        problems.append(f"{where}.data must be the ToolBench folder (a path), got {node['data']!r}")
    if isinstance(verify, list):
        from train.papers.toolverifier.stages import backends_problems

        problems += backends_problems(node.get("backends", {}), f"{where}.backends", verify)
    teacher = node.get("teacher", DEFAULTS["teacher"])
    kind = teacher.get("kind", "offline") if isinstance(teacher, dict) else None
    if kind not in BACKEND_SETTINGS:
        problems.append(f"{where}.teacher.kind={kind!r}: valid: {', '.join(BACKEND_SETTINGS)}")
    else:
        unknown = sorted(set(teacher) - {"kind", *BACKEND_SETTINGS[kind]})
        if unknown:
            valid = ", ".join(BACKEND_SETTINGS[kind]) or "none"
            problems.append(f"{where}.teacher: unknown setting(s) {unknown} for kind {kind!r}; valid: {valid}")
    return problems


def settings_of(node: Any) -> dict[str, Any]:
    """The key with its defaults filled in (``node``: the composed DictConfig node or a plain mapping)."""
    from omegaconf import DictConfig, OmegaConf

    given = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    return {**DEFAULTS, **given}


def _write_atomically(path: Path, text: str) -> None:
    """Write a sibling temporary file, then rename it over ``path``: a reader never sees half a file."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def verify_after_training(
    node: Any, model: Any, tokenizer: Any, out: Path, world_size: int, selector: Any = None
) -> dict[str, Any]:
    """Run the verification for ``eval.toolbench_verify`` (main rank only), print the tables, write the traces;
    returns what ``summary.json["toolbench_verify"]`` holds. ``selector``: a ``(instruction, tools) -> name`` to use
    instead of the trained model (tests script it)."""
    from train.evaluation.tasks import TaskError
    from train.papers.toolverifier.demos import DemonstrationError

    settings = settings_of(node)
    verify = ",".join(settings["verify"]) or "none"
    if world_size > 1:
        reason = (
            f"not run on {world_size} ranks (one sequential pass over a sharded model); run it on the saved model: "
            f"tooltrain eval run toolbench {out} --data {settings['data']} --verify {verify}"
        )
        print(f"eval.toolbench_verify: {reason}", flush=True)
        return {"skipped": reason}
    try:
        return _verify(settings, verify, model, tokenizer, out, selector)
    except (TaskError, DemonstrationError, ValueError, OSError) as err:  # the trained model is saved already
        print(f"error: eval.toolbench_verify: {err}", flush=True)
        return {"error": str(err)}


def _verify(settings: dict[str, Any], verify: str, model: Any, tokenizer: Any, out: Path, selector: Any) -> dict:
    from train.data.inputs import resolve_input
    from train.evaluation.tasks import get_task, read_references
    from train.papers.toolverifier.bench import format_tables, model_completer, verify_toolbench
    from train.papers.toolverifier.demos import find_weather_xlsx, toolbench_demonstrations
    from train.papers.toolverifier.stages import make_selector, make_teachers, selector_kind
    from train.papers.toolverifier.verify import VerifySwitches, text_selector

    started = time.monotonic()
    data = resolve_input(settings["data"])
    backends = dict(settings["backends"] or {})
    kind = dict(settings["teacher"]).get("kind", "offline")
    teacher = make_teachers(settings["teacher"], backends)  # a model's answers are cached: a question is asked once
    references, rejected = read_references([data], "toolbench", get_task("toolbench"))
    xlsx = find_weather_xlsx([data])
    if selector is None:
        max_new_tokens = int(settings["max_new_tokens"])
        selector = make_selector(
            backends,
            lambda: text_selector(model_completer(model, tokenizer, max_new_tokens)),
            references,
            max_new_tokens,
        )
    was_training = getattr(model, "training", False)
    if model is not None:
        model.eval()
    try:
        metrics, traces = verify_toolbench(
            selector,
            teacher,
            references,
            VerifySwitches.parse(verify),
            toolbench_demonstrations(references, xlsx),
            settings["cases_per_task"],
        )
    finally:
        if was_training:
            model.train()
    seconds = round(time.monotonic() - started, 1)
    chosen = selector_kind(backends)
    who = "the trained model" if chosen == "trained" else chosen
    print(f"eval.toolbench_verify: {who} as the selector, {kind} teacher, --verify {verify}", flush=True)
    print(format_tables(metrics, table_1=False), flush=True)  # Table 1 ends the run (the paper's table)
    if xlsx is None:
        print("no weather/Tool_Documentations_weather.xlsx in the data: weather demonstrations are leave-one-out too")
    if rejected:
        print(f"eval.toolbench_verify: {len(rejected)} unreadable ToolBench case(s), first: {rejected[0]}")
    _write_atomically(out / TRACES_FILE, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in traces))
    print(f"eval.toolbench_verify: {len(traces)} case traces in {out / TRACES_FILE} ({seconds} s)", flush=True)
    return {
        "data": str(settings["data"]),
        "cases_per_task": settings["cases_per_task"],
        "verify": verify,
        "teacher": kind,
        "selector": chosen,
        "backends": backends,
        "metrics": metrics,
        "traces": TRACES_FILE,  # relative to the run folder, as summary.json's other paths
        "unreadable_references": rejected,
        "seconds": seconds,
    }


__all__ = [
    "DEFAULTS",
    "DEFAULT_DATA",
    "TRACES_FILE",
    "settings_of",
    "toolbench_verify_problems",
    "verify_after_training",
]
