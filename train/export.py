"""A finished (or interrupted) run -> one standalone model: the LoRA adapter merged into its base.

``export_run(run_dir, out)`` reads what ``run(cfg)`` leaves in RUN_DIR: ``config.yaml`` (the
resolved config, to rebuild the base model exactly as training built it, seed included) and the
adapter in ``final/`` or, for a run that never finished, its newest complete checkpoint. It writes
safetensors weights, the model config and the tokenizer, ready for ``from_pretrained`` or a
converter. A full fine-tune (``peft=none``) is re-saved as is.

The train/serve contract: the tokenizer is saved with the chat template of the run's chat format
(``train.formats.serving.chat_template``: tools, calls and tool results rendered exactly as the run
trained on them), checked on a probe conversation before anything is written; the generation config
stops at every token that ends an assistant turn in that format; ``tooltrain_export.json`` and
``README.md`` name the vLLM / SGLang tool-call parser that reads the format's calls and the command
that serves the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from train.callbacks import latest_complete_checkpoint

if TYPE_CHECKING:
    from train.formats import ChatFormat

EXPORT_DTYPES = ("auto", "float32", "bfloat16", "float16")


class ExportError(ValueError):
    pass


@dataclass
class ExportResult:
    output_dir: Path
    source: Path  # the final/ or checkpoint-N folder that was exported
    merged_adapter: bool
    dtype: str
    parameters: int
    serve: str = ""  # the vLLM command that serves the export with its chat template and tool-call parser


def find_trained_weights(run_dir: Path) -> Path:
    """RUN_DIR/final when the run finished, else its newest complete checkpoint."""
    final = run_dir / "final"
    if (final / "adapter_config.json").is_file() or (final / "config.json").is_file():
        return final
    checkpoint = latest_complete_checkpoint(run_dir)
    if checkpoint is None:
        raise ExportError(f"{run_dir} holds no trained weights: neither final/ nor a complete checkpoint-N/")
    return checkpoint


def load_run_config(run_dir: Path) -> Any:
    """The config the run trained with: RUN_DIR/config.yaml, or Hydra's copy for older runs."""
    from omegaconf import OmegaConf

    for candidate in (run_dir / "config.yaml", run_dir / ".hydra" / "config.yaml"):
        if candidate.is_file():
            return OmegaConf.load(candidate)
    raise ExportError(f"{run_dir} has no config.yaml: is it a tooltrain run directory?")


def resolve_export_dtype(name: str, run_dir: Path, model_cfg: Any) -> Any:
    """``auto``: the dtype the run trained in (summary.json), else the config's for this machine."""
    import torch

    from train.model import DTYPES, resolve_dtype

    if name not in EXPORT_DTYPES:
        raise ExportError(f"unknown dtype {name!r}; valid: {', '.join(EXPORT_DTYPES)}")
    if name != "auto":
        return DTYPES[name]
    summary = run_dir / "summary.json"
    if summary.is_file():
        trained = json.loads(summary.read_text(encoding="utf-8")).get("dtype")
        if trained in DTYPES:
            return DTYPES[trained]
    return resolve_dtype(str(model_cfg.dtype), torch.cuda.is_available())


def merged_model(cfg: Any, weights: Path, vocab_size: int, dtype: Any) -> tuple[Any, bool]:
    """The trained model as one plain transformers model, and whether an adapter was merged."""
    from transformers import AutoModelForCausalLM

    from train.model import build_model

    if not (weights / "adapter_config.json").is_file():
        return AutoModelForCausalLM.from_pretrained(str(weights), dtype=dtype, use_safetensors=True), False
    from peft import PeftModel

    # Same builder and seed as training: a random-init base (source=config) comes out identical.
    base = build_model(cfg.model, vocab_size, dtype, "sdpa", seed=cfg.seed)
    model = PeftModel.from_pretrained(base, str(weights))
    return model.merge_and_unload(), True


def run_format(cfg: Any) -> ChatFormat:
    """The chat format the run trained in, with the format options it trained with."""
    from omegaconf import OmegaConf

    from train.formats import get_format

    options = cfg.data.get("format_options") if "data" in cfg else None
    options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
    try:
        return get_format(str(cfg.model.chat_format), options)
    except ValueError as err:
        raise ExportError(f"the run's chat format cannot be built: {err}") from None


def probe_conversation() -> Any:
    """A short conversation with a system prompt, tools, a call, its result and an answer."""
    from train.schema import Conversation

    return Conversation.from_dict(
        {
            "id": "export-probe",
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city.",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                }
            ],
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call0000a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call0000a", "name": "get_weather", "content": '{"temperature": 18}'},
                {"role": "assistant", "content": "18 degrees in Paris."},
            ],
        }
    )


def selection_probe() -> Any:
    """A question, two candidate tools and the choice of one, without arguments (ToolSelect's shape)."""
    from train.schema import Conversation

    return Conversation.from_dict(
        {
            "id": "export-selection-probe",
            "tools": [
                {"type": "function", "function": {"name": "Weather", "description": "Current weather for a city."}},
                {"type": "function", "function": {"name": "News", "description": "Top news for a topic."}},
            ],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": "The user asks for the weather.",
                    "tool_calls": [{"id": "call0000a", "type": "function", "function": {"name": "Weather"}}],
                },
            ],
        }
    )


def check_chat_template(tokenizer: Any, fmt: ChatFormat) -> None:
    """The tokenizer's template renders the probe exactly as the format does, or ExportError."""
    from train.formats.hf import to_hf_messages

    conv = probe_conversation()
    try:
        fmt.render(conv)
    except ValueError:  # a single-sample layout (toolselect_text) holds no system turn or tool result
        conv = selection_probe()
    messages, tools = to_hf_messages(conv)
    first_answer = next(i for i, message in enumerate(conv.messages) if message.role == "assistant")
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    prompt = tokenizer.apply_chat_template(
        messages[:first_answer], tools=tools, tokenize=False, add_generation_prompt=True
    )
    if rendered != fmt.render_text(conv) or prompt != "".join(s.text for s in fmt.render_prompt(conv, first_answer)):
        raise ExportError(f"the {fmt.name} chat template does not render the probe conversation as the format does")


def stop_token_ids(model: Any, tokenizer: Any, fmt: ChatFormat) -> list[int]:
    """The generation config's eos ids, and every token that ends an assistant turn in ``fmt``."""
    from train.formats.serving import end_of_turn_ids

    configured = model.generation_config.eos_token_id
    configured = [] if configured is None else [configured] if isinstance(configured, int) else list(configured)
    return list(dict.fromkeys([*configured, *end_of_turn_ids(fmt, tokenizer)]))


def serving_metadata(fmt: ChatFormat, output_dir: Path, stop_ids: list[int], tokenizer: Any) -> dict[str, Any]:
    """What ``tooltrain_export.json`` says about serving: format, template, stop tokens, parsers, commands."""
    from train.formats import format_options
    from train.formats.serving import serving, sglang_command, vllm_command

    spec = serving(fmt.name)
    folder = str(output_dir)
    return {
        "chat_format": fmt.name,
        "format_options": {name: getattr(fmt, name) for name in format_options(fmt.name)},
        "chat_template": "chat_template.jinja",
        "stop_tokens": [tokenizer.convert_ids_to_tokens(i) for i in stop_ids],
        "tool_call_parser": {
            "vllm": spec.vllm_parser,
            "sglang": spec.sglang_parser,
            "exact": spec.exact,
            "notes": spec.notes,
            # vLLM's and SGLang's parser that reads a leading reasoning block off; None when the format has none
            "reasoning_parser": spec.reasoning_parser or None,
        },
        "serve": {"vllm": vllm_command(folder, fmt), "sglang": sglang_command(folder, fmt)},
    }


README = """# {folder_name}

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


def write_serving_readme(output_dir: Path, metadata: dict[str, Any]) -> None:
    parser = metadata["tool_call_parser"]
    options = ", ".join(f"{k}={v!r}" for k, v in metadata["format_options"].items())
    text = README.format(
        folder_name=output_dir.name,
        run_dir=metadata["run_dir"],
        weights=metadata["weights"],
        chat_format=metadata["chat_format"],
        options=f" ({options})" if options else "",
        stop_tokens=", ".join(f"`{token}`" for token in metadata["stop_tokens"]),
        vllm=metadata["serve"]["vllm"],
        sglang=metadata["serve"]["sglang"],
        parsers=parsers_line(parser),
        notes=parser["notes"],
        folder=str(output_dir),
    )
    (output_dir / "README.md").write_text(text, encoding="utf-8")


def run_tokenizer(cfg: Any, weights: Path | None = None) -> Any:
    """The tokenizer a run trains with: the one it saved beside ``weights`` when there is one, else the one its config
    names, to which a random-init model's run adds the format's missing control tokens (``model.source=config``:
    its embeddings are sized by this tokenizer; ``train.formats.control_tokens``). Training, export, ``eval run`` and
    PTR's run-folder backbone all take it from here, so they agree on every id."""
    if weights is not None and (weights / "tokenizer.json").is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(weights))
    from train.config import choice
    from train.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(cfg.model.tokenizer, trust_remote_code=bool(cfg.model.trust_remote_code))
    if choice(cfg.model.source) == "config":
        from train.formats.control_tokens import add_missing_control_tokens

        add_missing_control_tokens(tokenizer, run_format(cfg))
    return tokenizer


def export_run(run_dir: Path, output_dir: Path | None = None, dtype: str = "auto") -> ExportResult:
    from train.formats.serving import chat_template

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir} is not a directory")
    output_dir = Path(output_dir) if output_dir is not None else run_dir / "merged"
    weights = find_trained_weights(run_dir)
    cfg = load_run_config(run_dir)
    fmt = run_format(cfg)
    torch_dtype = resolve_export_dtype(dtype, run_dir, cfg.model)
    tokenizer = run_tokenizer(cfg, weights)  # checkpoints carry no tokenizer: then rebuilt as the run built it
    # The template a server renders prompts with is the format's, never whatever the base tokenizer shipped.
    tokenizer.chat_template = chat_template(fmt)
    check_chat_template(tokenizer, fmt)
    model, merged = merged_model(cfg, weights, len(tokenizer), torch_dtype)
    model.config.use_cache = True  # training turns the KV cache off; inference wants it
    model.generation_config.eos_token_id = stop_token_ids(model, tokenizer, fmt)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(output_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(output_dir))
    parameters = sum(p.numel() for p in model.parameters())
    provenance = {
        "run_dir": str(run_dir),
        "weights": weights.name,
        "merged_adapter": merged,
        "dtype": str(torch_dtype).removeprefix("torch."),
    }
    metadata = {**provenance, **serving_metadata(fmt, output_dir, model.generation_config.eos_token_id, tokenizer)}
    (output_dir / "tooltrain_export.json").write_text(json.dumps(metadata, indent=1), encoding="utf-8")
    write_serving_readme(output_dir, metadata)
    return ExportResult(
        output_dir=output_dir,
        source=weights,
        merged_adapter=merged,
        dtype=provenance["dtype"],
        parameters=parameters,
        serve=metadata["serve"]["vllm"],
    )
