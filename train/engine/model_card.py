"""An export's README.md: a Hugging Face model card, from what the run folder knows.

``model_card(metadata, run_config, summary)`` is a pure function of the export's ``tooltrain_export.json``
(``metadata``), the run's config (config.yaml) and its ``summary.json``; either of the last two may be None (a
run killed before its summary, a test that has only the serving metadata), and the card then says less.

The card has two parts:

* YAML front matter the Hub reads (written by ``huggingface_hub.ModelCardData``): ``base_model`` and ``datasets``
  only where they are Hub ids (``hub_model_id``, ``hub_dataset_id``: a local folder or file is named in the body
  instead, never guessed into an id), ``library_name``, ``pipeline_tag``, ``tags`` (tooltrain, tool-use,
  function-calling, the recipe, the chat format) and ``license`` only when the run's config carries one
  (``model.license``). No ``model-index``: the Hub reads its ``dataset.type`` as a Hub dataset id, and tooltrain's
  evaluations run on its own subsets and held-out splits, which have none; the results are a table in the body.
* The body: base model, recipe, method, the data with per-source counts (``summary["data"]["per_source"]``), the
  evaluations before and after training (``summary["eval"]``, as ``train.engine.summary.eval_before_after`` lays
  them out), the paper tables (``summary["paper_tables"]``), then the serving text: chat format, serve commands,
  tool-call parser, control tokens typed as text.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath
from typing import Any

from train.engine.paper_table import table_lines
from train.engine.summary import METRIC_NAMES, data_line, rate_text, shown_metrics

TAGS = ("tooltrain", "tool-use", "function-calling")


# ---------------------------------------------------------------- Hub ids


def _valid_repo_id(text: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def _cached_repo_id(path: str, kind: str) -> str | None:
    """``Org/Name`` for a path inside huggingface_hub's cache folder of that repo (``models--Org--Name/...``)."""
    for part in PurePath(path).parts:
        if part.startswith(f"{kind}--") and part.count("--") >= 2:
            owner, name = part.removeprefix(f"{kind}--").split("--", 1)
            return f"{owner}/{name}" if _valid_repo_id(f"{owner}/{name}") else None
    return None


def hub_model_id(path: str | None, local: bool) -> str | None:
    """The Hub model ``model.path`` names, or None for a local folder. ``local``: whether the path is a folder here,
    which is how transformers tells the two apart (a folder wins); a folder inside the Hub cache is its repo's."""
    if not path:
        return None
    cached = _cached_repo_id(path, "models")
    if cached or local:
        return cached
    return path if _valid_repo_id(path) else None


def hub_dataset_id(path: str) -> str | None:
    """The Hub dataset a data input comes from: ``hf://datasets/Org/Name/...``, or a file in the Hub cache's folder of
    that dataset; None for any other path (a local file is never read as an id: ``data/x`` may be either)."""
    found = re.match(r"hf://datasets/([^/@]+/[^/@]+)", path)
    if found:
        return found.group(1) if _valid_repo_id(found.group(1)) else None
    return _cached_repo_id(path, "datasets")


# ---------------------------------------------------------------- front matter


def _plain(run_config: Any) -> dict[str, Any]:
    """The config as plain dicts (an OmegaConf config is resolved; a dict is taken as is)."""
    if run_config is None:
        return {}
    from omegaconf import DictConfig, OmegaConf

    if isinstance(run_config, DictConfig):
        return OmegaConf.to_container(run_config, resolve=True)  # type: ignore[return-value]
    return dict(run_config)


def _inputs(cfg: dict[str, Any]) -> list[list[str]]:
    """Each data source's inputs, in data.sources order."""
    return [[str(path) for path in source.get("inputs") or []] for source in (cfg.get("data") or {}).get("sources", [])]


def card_metadata(
    metadata: dict[str, Any], cfg: dict[str, Any], summary: dict[str, Any], base_model: str | None
) -> dict[str, Any]:
    """The front matter's keys, in the order written; a key with nothing to say is left out."""
    recipe = (summary.get("run") or {}).get("recipe")
    datasets = [hub for paths in _inputs(cfg) for hub in map(hub_dataset_id, paths) if hub]
    license_ = (cfg.get("model") or {}).get("license")
    return {
        "base_model": base_model,
        "datasets": list(dict.fromkeys(datasets)) or None,
        "library_name": "transformers",
        "license": str(license_) if license_ else None,
        "pipeline_tag": "text-generation",
        "tags": list(dict.fromkeys([*TAGS, *([recipe] if recipe else []), metadata["chat_format"]])),
    }


def front_matter(fields: dict[str, Any]) -> str:
    from huggingface_hub import ModelCardData

    return "---\n" + ModelCardData(**{k: v for k, v in fields.items() if v is not None}).to_yaml() + "\n---\n"


# ---------------------------------------------------------------- body


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def base_model_name(cfg: dict[str, Any], base_model: str | None) -> str:
    """The base model in a few words, for the card's first sentence."""
    model = cfg.get("model") or {}
    if base_model:
        return f"[{base_model}](https://huggingface.co/{base_model})"
    if model.get("source") == "pretrained" and model.get("path"):
        return f"`{model['path']}`"
    return f"`{model.get('name')}`" + (" (random weights)" if model.get("source") == "config" else "")


def base_model_line(cfg: dict[str, Any], base_model: str | None) -> str:
    """The base model and where it came from, for the Training list."""
    model = cfg.get("model") or {}
    if not model:
        return "unknown"
    name = base_model_name(cfg, base_model)
    if base_model:
        return name
    if model.get("source") == "pretrained" and model.get("path"):
        return f"{name} (a local folder)"
    if model.get("source") == "config":
        return f"none: `{model.get('name')}` built from its config with random weights (model.source=config)"
    return f"{name} (model.source={model.get('source')})"


def method_line(cfg: dict[str, Any], metadata: dict[str, Any]) -> str:
    peft = cfg.get("peft") or {}
    if not metadata.get("merged_adapter"):
        return "full fine-tune (peft=none): every weight trained"
    targets = peft.get("target_modules") or (cfg.get("model") or {}).get("lora_target_modules") or []
    dora = "DoRA" if peft.get("use_dora") else "LoRA"
    shape = f"r {peft['r']}, alpha {peft['alpha']}" if "r" in peft and "alpha" in peft else "its saved settings"
    on = f" on {', '.join(targets)}" if targets else ""
    return f"{dora} ({shape}){on}, merged into the base weights"


def training_section(metadata: dict[str, Any], cfg: dict[str, Any], summary: dict[str, Any], base: str | None) -> str:
    recipe = (summary.get("run") or {}).get("recipe")
    lines = [
        f"- Base model: {base_model_line(cfg, base)}",
        f"- Recipe: `{recipe}` (`tooltrain train recipe={recipe}`)" if recipe else "- Recipe: not recorded",
        f"- Method: {method_line(cfg, metadata)}",
        f"- Chat format: `{metadata['chat_format']}`",
    ]
    if summary:
        lines.append(f"- Run: {summary.get('status', 'unknown')} after {summary.get('steps', 0):,} steps")
    dtype = f", exported in {metadata['dtype']}" if metadata.get("dtype") else ""
    lines.append(f"- Weights: `{metadata['weights']}` of `{metadata['run_dir']}`{dtype}")
    return "## Training\n\n" + "\n".join(lines) + "\n"


def data_section(cfg: dict[str, Any], summary: dict[str, Any]) -> str:
    """The sources and their inputs; with the summary's per-source counts where it has them."""
    sources = (cfg.get("data") or {}).get("sources") or []
    data = summary.get("data") or {}
    if not sources and not data:
        return ""
    lines = ["## Data", ""]
    if data:
        lines += [data_line(data) + ".", ""]
    counted = {entry["source"]: entry for entry in data.get("per_source") or []}
    inputs = _inputs(cfg)
    if counted:
        lines += [
            "| # | reader | inputs | weight | read | accepted | rejected | after weighting |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for index, entry in sorted(counted.items()):
            paths = ", ".join(f"`{_cell(p)}`" for p in (inputs[index] if index < len(inputs) else []))
            lines.append(
                f"| {index} | {_cell(entry['name'])} | {paths} | {entry.get('weight', 1.0):g} | {entry['read']:,} "
                f"| {entry['accepted']:,} | {entry['rejected']:,} | {entry['weighted']:,} |"
            )
    else:
        for index, source in enumerate(sources):
            paths = ", ".join(f"`{p}`" for p in inputs[index])
            lines.append(f"- {index}: `{source.get('name')}` reading {paths}")
    if (cfg.get("data") or {}).get("builder"):
        lines += ["", f"Built into training samples by the `{cfg['data']['builder']}` data builder."]
    return "\n".join(lines) + "\n"


def _point_label(point: dict[str, Any], before: bool) -> str:
    return "before (step 0, the base model)" if before else f"after (step {point['step']:,})"


def eval_section(summary: dict[str, Any], exported_step: int | None) -> str:
    """Per benchmark, a table of its rates before and after training (the metrics the end-of-run summary prints:
    ``train.engine.summary.shown_metrics``)."""
    evals = summary.get("eval") or {}
    blocks = []
    for bench, points in evals.items():
        shown = [(point, before) for point, before in ((points.get("before"), True), (points.get("after"), False))]
        shown = [(point, before) for point, before in shown if point]
        if not shown:
            continue
        last = shown[-1][0]
        total = last.get("total")
        rates = shown_metrics([point for point, _ in shown])
        head = f"### `{bench}`" + (f" on {total:,} conversations" if total is not None else "")
        table = [
            "| metric | " + " | ".join(_point_label(point, before) for point, before in shown) + " |",
            "|---|" + "---:|" * len(shown),
        ]
        table += [
            f"| {METRIC_NAMES.get(key, key)} | " + " | ".join(rate_text(point.get(key)) for point, _ in shown) + " |"
            for key in rates
        ]
        blocks.append("\n".join([head, "", *table]))
    if not blocks:
        return "## Evaluation\n\nNo evaluation ran during training.\n" if summary else ""
    after = [points["after"]["step"] for points in evals.values() if points.get("after")]
    note = ""
    if exported_step is not None and after and max(after) != exported_step:
        note = f"\n\nThis export holds the weights of step {exported_step:,}, not those of the last evaluation.\n"
    intro = "Measured by tooltrain during training on its evaluation data (rates in %).\n\n"
    return "## Evaluation\n\n" + intro + "\n\n".join(blocks) + "\n" + note


def paper_section(summary: dict[str, Any]) -> str:
    tables = summary.get("paper_tables") or {}
    if not tables:
        return ""
    blocks = ["```\n" + "\n".join(table_lines(table)) + "\n```" for table in tables.values()]
    return "## Paper tables\n\nThe paper's rows, then this run's (from summary.json).\n\n" + "\n\n".join(blocks) + "\n"


def exported_step(weights: str, summary: dict[str, Any]) -> int | None:
    """The training step of the exported weights: a checkpoint's number, or the run's last step for final/."""
    found = re.fullmatch(r"checkpoint-(\d+)", weights)
    if found:
        return int(found.group(1))
    return summary.get("steps") if weights == "final" and summary else None


# ---------------------------------------------------------------- serving (the README before it was a card)


SERVING = """## Chat format

Exported by `tooltrain export` from `{run_dir}` ({weights}). Chat format: `{chat_format}`{options}.

`chat_template.jinja` (also loaded by `AutoTokenizer.from_pretrained`) renders system prompts, tools, tool
calls and tool results exactly as this model was trained on them, and raises where the format refuses a
conversation. Generation stops at {stop_tokens} (`generation_config.json`).

## Serve

vLLM:

    {vllm}

SGLang:

    {sglang}

{parsers}
{notes}

## Control tokens typed as text

{control_text}

## Render a prompt yourself

    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained("{folder}")
    prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)

What a Jinja template cannot reproduce of tooltrain's rendering (e.g. numbers in JSON tool results are kept
as written) is listed in tooltrain's docs/formats.md, "Serving an exported model".
"""


def parsers_line(parser: dict[str, Any]) -> str:
    if not parser["vllm"]:  # no server parser reads the format's answers (deepseek_coder, toolselect_text)
        return "Tool-call parser: none: no server parser reads this format's answers, so the servers run as plain chat."
    fit = "they read this format's calls as tooltrain's own parser does" if parser["exact"] else "an approximate fit"
    return f"Tool-call parser: `{parser['vllm']}` (vLLM), `{parser['sglang']}` (SGLang); {fit}."


def control_text_section(metadata: dict[str, Any]) -> str:
    """The warning about control tokens typed as text, and the requests that avoid it."""
    control = metadata["control_text"]
    lines = [control["warning"], ""]
    for server, request in (
        ("vLLM", control["token_id_requests"]["vllm"]),
        ("SGLang", control["token_id_requests"]["sglang"]),
    ):
        lines.append(f"- {server}: `POST {request['endpoint']}` with `{request['field']}`: {request['value']}")
    lines.append(f"- the ids, encoded as training encoded them: `{control['encode_as_trained']}`")
    return "\n".join(lines)


def serving_text(metadata: dict[str, Any], output_dir: Path) -> str:
    parser = metadata["tool_call_parser"]
    options = ", ".join(f"{k}={v!r}" for k, v in metadata["format_options"].items())
    return SERVING.format(
        run_dir=metadata["run_dir"],
        weights=metadata["weights"],
        chat_format=metadata["chat_format"],
        options=f" ({options})" if options else "",
        stop_tokens=", ".join(f"`{token}`" for token in metadata["stop_tokens"]),
        vllm=metadata["serve"]["vllm"],
        sglang=metadata["serve"]["sglang"],
        parsers=parsers_line(parser),
        notes=parser["notes"],
        control_text=control_text_section(metadata),
        folder=str(output_dir),
    )


# ---------------------------------------------------------------- the card


def model_card(
    metadata: dict[str, Any],
    run_config: Any = None,
    summary: dict[str, Any] | None = None,
    output_dir: Path | None = None,
    base_model: str | None = None,
) -> str:
    """README.md of the export at ``output_dir`` (for its paths, and its title when the run has no name; default:
    the run's merged/), from its ``tooltrain_export.json`` (``metadata``), the run's config and summary.json;
    ``base_model``: the Hub id of the base model (``hub_model_id``), None when it has none."""
    cfg, summary = _plain(run_config), summary or {}
    output_dir = Path(output_dir) if output_dir is not None else Path(metadata["run_dir"]) / "merged"
    run = summary.get("run") or {}
    intro = "A tool-calling model trained with tooltrain"
    intro += (f" (recipe `{run['recipe']}`)" if run.get("recipe") else "") + (
        f" from {base_model_name(cfg, base_model)}." if cfg else "."
    )
    sections = [
        f"# {run.get('name') or output_dir.name}\n\n{intro}\n",  # the run's name: an export is often merged/
        training_section(metadata, cfg, summary, base_model),
        data_section(cfg, summary),
        eval_section(summary, exported_step(metadata["weights"], summary)),
        paper_section(summary),
        serving_text(metadata, output_dir),
    ]
    fields = card_metadata(metadata, cfg, summary, base_model)
    return front_matter(fields) + "\n" + "\n".join(section for section in sections if section)
