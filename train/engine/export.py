"""A finished (or interrupted) run -> one standalone model: the LoRA adapter merged into its base.

``export_run(run_dir, out)`` takes what it needs of RUN_DIR from ``train.engine.run_folder.RunFolder``: the run's
config (to rebuild the base model exactly as training built it, seed included), its trained weights (``final/`` or,
for a run that never finished, its newest complete checkpoint, checked before they are loaded), its tokenizer, chat
format and merged model. It writes safetensors weights, the model config and the tokenizer, ready for
``from_pretrained`` or a converter. A full fine-tune (``peft=none``) is re-saved as is.

The train/serve contract: the tokenizer is saved with the chat template of the run's chat format
(``train.formats.serving.chat_template``: tools, calls and tool results rendered exactly as the run
trained on them), checked on a probe conversation before anything is written; the generation config
stops at every token that ends an assistant turn in that format; ``tooltrain_export.json`` and
``README.md`` name the vLLM / SGLang tool-call parser that reads the format's calls and the command
that serves the model. README.md is a Hugging Face model card (``train.engine.model_card``): base model, recipe,
data, evaluations before and after training, paper tables, then the serving text.

What it writes goes to a temporary folder beside OUT, renamed onto OUT only when everything is written
(``export_folder``): a full disk leaves no partial model, and OUT is never the run folder it reads nor inside it.
A run folder that cannot be read is a ``RunFolderError``; an export that cannot be written where asked, an
``ExportError`` (one of them): either is one ``error:`` line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from train.engine.run_folder import RunFolder, RunFolderError

if TYPE_CHECKING:
    from train.formats import ChatFormat

EXPORT_DTYPES = ("auto", "float32", "bfloat16", "float16")


class ExportError(RunFolderError):
    """An export refused or failed: its target, its dtype, its chat template, a failed write."""


@dataclass
class ExportResult:
    output_dir: Path
    source: Path  # the final/ or checkpoint-N folder that was exported
    merged_adapter: bool
    dtype: str
    parameters: int
    serve: str = ""  # the vLLM command that serves the export with its chat template and tool-call parser


def resolve_export_dtype(name: str, run: RunFolder) -> Any:
    """``auto``: the dtype the run trained in (summary.json), else the config's for this machine."""
    from train.engine.model import DTYPES

    if name not in EXPORT_DTYPES:
        raise ExportError(f"unknown dtype {name!r}; valid: {', '.join(EXPORT_DTYPES)}")
    if name != "auto":
        return DTYPES[name]
    trained = run.trained_dtype()
    return DTYPES[trained] if trained in DTYPES else run.dtype("auto")


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
    from train.formats.serving import control_text, serving, sglang_command, vllm_command

    spec = serving(fmt)  # the format's own serving attribute: a module:attr format brings its own
    folder = str(output_dir)
    return {
        "chat_format": fmt.name,
        "format_options": {name: getattr(fmt, name) for name in format_options(type(fmt))},
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
        # a prompt rendered to a string re-reads control tokens typed as text (train.formats.serving.control_text)
        "control_text": control_text(fmt),
    }


def write_serving_readme(
    folder: Path,
    metadata: dict[str, Any],
    output_dir: Path | None = None,
    run: RunFolder | None = None,
) -> None:
    """README.md in ``folder``: the model card (``train.engine.model_card``) of the export that will be at
    ``output_dir`` (default: ``folder`` itself), from its metadata and, given ``run``, the run's config and summary."""
    from train.engine.model_card import model_card

    output_dir = output_dir or folder
    config, summary, base = None, None, None
    if run is not None:
        config, summary, base = run.config, run_summary(run), base_model_id(run)
    text = model_card(metadata, config, summary, output_dir, base)
    (folder / "README.md").write_text(text, encoding="utf-8")


def run_summary(run: RunFolder) -> dict[str, Any] | None:
    """The run's summary.json, None when it wrote none (a run killed before its end); a damaged one is named."""
    from train.engine.run_folder import read_json

    path = run.path / "summary.json"
    summary = read_json(path) if path.is_file() else None
    return summary if isinstance(summary, dict) else None


def base_model_id(run: RunFolder) -> str | None:
    """The Hub id of the run's base model (``model.path`` when it is not a folder here), else None."""
    from train.base.errors import choice
    from train.engine.model_card import hub_model_id

    model = run.config.model
    if choice(model.source) != "pretrained" or not model.get("path"):
        return None
    return hub_model_id(str(model.path), Path(str(model.path)).expanduser().is_dir())


def generation_settings(model: Any, tokenizer: Any, fmt: ChatFormat, random_init: bool) -> None:
    """The KV cache on, and generation stopping where the format ends an assistant turn.

    A random-init model (``model.source=config``) has no generation settings of its own: its config carries the
    config class's defaults (bos 1, eos 2, and use_cache off as training left it), ids of no tokenizer in
    particular. Its settings are written from the run's tokenizer and format instead. A pretrained base keeps its
    own eos ids, with the format's end-of-turn tokens added."""
    from transformers import GenerationConfig

    from train.formats.serving import end_of_turn_ids

    model.config.use_cache = True  # training turns the KV cache off; inference wants it
    if not random_init:
        model.generation_config.eos_token_id = stop_token_ids(model, tokenizer, fmt)
        model.generation_config.use_cache = True
        return
    stops = end_of_turn_ids(fmt, tokenizer) or [tokenizer.eos_token_id]
    special = {"bos_token_id": tokenizer.bos_token_id, "pad_token_id": tokenizer.pad_token_id}
    for key, value in {**special, "eos_token_id": stops[0] if len(stops) == 1 else stops}.items():
        setattr(model.config, key, value)
    model.generation_config = GenerationConfig(**special, eos_token_id=stops, use_cache=True)


# ---------------------------------------------------------------- where the export is written


def check_export_target(run_dir: Path, output_dir: Path) -> None:
    """An ``ExportError`` unless ``output_dir`` may receive the export, checked before anything is loaded.

    Refused: a file; the run folder itself, a folder inside it (final/ or a checkpoint would be overwritten by the
    model it was merged from) or one holding it; a folder holding anything but an earlier export (replacing it
    would delete files that are not the export's). The one place inside the run that is the export's own is the
    default, RUN_DIR/merged."""
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"--out-dir {output_dir} is a file, not a folder: give a folder (created when missing)")
    run, out = os.path.realpath(run_dir), os.path.realpath(output_dir)
    inside = out == run or out.startswith(run.rstrip(os.sep) + os.sep)
    if inside and out != os.path.join(run, "merged"):
        raise ExportError(
            f"refusing to export into {output_dir}: it is {'the' if out == run else 'inside the'} run folder {run_dir} "
            "that the export reads; "
            f"give an --out-dir outside it (the default, {run_dir / 'merged'}, is the export's own)"
        )
    if run.startswith(out.rstrip(os.sep) + os.sep):
        raise ExportError(f"refusing to export into {output_dir}: it holds the run folder {run_dir}")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not (output_dir / "tooltrain_export.json").is_file():
        raise ExportError(
            f"refusing to export into {output_dir}: it holds files and is not an earlier export "
            "(no tooltrain_export.json); give a new or empty folder"
        )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _publish(staging: Path, output_dir: Path) -> None:
    """Every file synced and given the modes a plain ``open`` would (safetensors and ``mkdtemp`` make them 0600 /
    0700: others on a shared cluster could not read the model), then ``staging`` renamed onto ``output_dir``; an
    earlier export there is swapped out and removed only once the new one is in place."""
    mask = _umask()
    for path in [*staging.rglob("*"), staging]:
        if path.is_dir():
            os.chmod(path, 0o777 & ~mask)
            continue
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(path, 0o666 & ~mask)
    if not output_dir.exists():
        os.rename(staging, output_dir)
        return
    previous = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.old-", dir=output_dir.parent))
    os.rename(output_dir, previous / output_dir.name)
    try:
        os.rename(staging, output_dir)
    except OSError:
        os.rename(previous / output_dir.name, output_dir)  # the earlier export back as it was
        raise
    shutil.rmtree(previous, ignore_errors=True)


def write_error(err: Exception) -> str:
    """The OS's reason: safetensors wraps it as "Error while serializing: I/O error: File too large (os error 27)"."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    found = re.search(r"I/O error: (.+?) \(os error \d+\)", str(err))
    return found.group(1) if found else str(err)


@contextlib.contextmanager
def export_folder(output_dir: Path) -> Iterator[Path]:
    """A temporary folder beside ``output_dir`` to write the export into, renamed onto it when the block ends
    normally. A failed write (a full disk, a file-size limit) is an ``ExportError`` with the OS's reason; on any
    exception the partial folder is removed and ``output_dir`` is as it was."""
    from safetensors import SafetensorError

    try:
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.tmp-", dir=output_dir.parent))
    except OSError as err:
        raise ExportError(f"cannot write {output_dir}: {err.strerror or err}") from None
    try:
        yield staging
        _publish(staging, output_dir)
    except (OSError, SafetensorError) as err:  # safetensors reports a failed write as its own error
        shutil.rmtree(staging, ignore_errors=True)
        raise ExportError(f"cannot write {output_dir}: {write_error(err)}; the partial export was removed") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def export_run(run_dir: Path, output_dir: Path | None = None, dtype: str = "auto") -> ExportResult:
    from train.formats.serving import chat_template
    from train.formats.template import SERVING as TEMPLATE_SERVING

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir} is not a directory")
    output_dir = Path(output_dir) if output_dir is not None else run_dir / "merged"
    check_export_target(run_dir, output_dir)
    run = RunFolder(run_dir)
    weights = run.weights  # before the config, as export always read them: its first error stays the same
    fmt = run.chat_format()
    torch_dtype = resolve_export_dtype(dtype, run)
    tokenizer = run.tokenizer()  # checkpoints carry no tokenizer: then rebuilt as the run built it
    # The template a server renders prompts with is the format's, never whatever the base tokenizer shipped; the
    # fallback format (train.formats.template) trained on the model's own template, so that one ships.
    if fmt.serving is not TEMPLATE_SERVING:  # the model's own template renders as the fallback did: nothing to check
        tokenizer.chat_template = chat_template(fmt)
        check_chat_template(tokenizer, fmt)
    model, merged = run.merged_model(tokenizer, torch_dtype)
    generation_settings(model, tokenizer, fmt, random_init=run.random_init)
    parameters = sum(p.numel() for p in model.parameters())
    provenance = {
        "run_dir": str(run_dir),
        "weights": weights.name,
        "merged_adapter": merged,
        "dtype": str(torch_dtype).removeprefix("torch."),
    }
    metadata = {**provenance, **serving_metadata(fmt, output_dir, model.generation_config.eos_token_id, tokenizer)}
    with export_folder(output_dir) as staging:
        model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
        (staging / "tooltrain_export.json").write_text(json.dumps(metadata, indent=1), encoding="utf-8")
        write_serving_readme(staging, metadata, output_dir, run)
    return ExportResult(
        output_dir=output_dir,
        source=weights,
        merged_adapter=merged,
        dtype=provenance["dtype"],
        parameters=parameters,
        serve=metadata["serve"]["vllm"],
    )
