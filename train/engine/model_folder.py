"""A model folder named on the command line brings its own tokenizer and chat format.

``tooltrain train recipe=tiny model.path=/some/model`` used to keep the recipe's model group for everything but
the weights: source=config (the path was ignored and a random tiny model trained), or, with source=pretrained, the
group's 1,024-token tokenizer on a 151k-vocabulary model; both ended in "run completed". The model group's
tokenizer and chat format belong to the group's own weights, so once the command line names other weights
(``model.path``), what it does not name itself follows that folder:

- ``model.source`` becomes ``pretrained`` (the path is what loads);
- ``model.tokenizer`` becomes the path: the folder's own tokenizer, loaded as ``train.tokenizers.load_tokenizer``
  loads any path, so training, export and ``eval run`` (``train.engine.run_folder.run_tokenizer``) all read that one;
- ``model.chat_format`` is read from the folder (``infer_chat_format``: its chat template, its ``model_type``),
  or refused with the valid choices; a recipe's plain-text layout or its variant of the folder's family is kept
  (``folder_chat_format``, reading the format's ``any_tokenizer`` and ``variant_of``).

A key given on the command line (``model.tokenizer=...``) is kept as given: "given" is read from the overrides
Hydra parsed (``explicit_keys``), which is the only place a recipe's default and a user's choice differ. The
fit of the tokenizer to the model's embeddings is checked where the model is known (``train.engine.model``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from train.base.errors import ConfigError

# Files a saved tokenizer leaves (transformers' save_pretrained, sentencepiece, tiktoken, Mistral's tekken).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "tekken.json")
# A chat template's marker -> the chat format (train.formats) whose family writes it; first match wins, so a
# DeepSeek-R1 distill of Qwen (ChatML ids, DeepSeek template) reads as deepseek_v3.
TEMPLATE_MARKERS = (
    ("<|channel|>", "harmony"),
    ("<|header_start|>", "llama4"),
    ("<|start_header_id|>", "llama3_1"),
    ("<\uff5cAssistant\uff5c>", "deepseek_v3"),
    ("### Instruction", "deepseek_coder"),
    ("[SYSTEM_PROMPT]", "mistral_v7"),
    ("[INST]", "mistral"),  # v3 or Nemo: told apart by the vocabulary (MISTRAL_VOCAB)
    ("<|im_start|>", "chatml"),  # Qwen's ChatML: told apart by model_type (MODEL_TYPES)
)
# config.json's model_type -> the format, for families with one format (and for ChatML templates of Qwen models)
MODEL_TYPES = {
    "qwen2": "qwen2_5",
    "qwen2_moe": "qwen2_5",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3",
    "llama4": "llama4",
    "llama4_text": "llama4",
    "deepseek_v3": "deepseek_v3",
    "gpt_oss": "harmony",
}
MISTRAL_VOCAB = {32768: "mistral_v3", 131072: "mistral_nemo"}


def explicit_keys(overrides: list[str]) -> set[str]:
    """The config keys the command line sets (``model.path=X``, ``+key=X``, ``++key=X``, ``~key``)."""
    return {item.lstrip("+~").split("=", 1)[0].strip() for item in overrides}


def apply_model_folder(cfg: Any, overrides: list[str]) -> None:
    """When ``overrides`` set ``model.path``, make the model's source, tokenizer and chat format follow it (unless
    they are set too). ConfigError when the folder cannot say its chat format. Idempotent."""
    given = explicit_keys(overrides)
    path = cfg.model.get("path")
    if "model.path" not in given or not path:
        return
    path = str(path)
    if "model.source" not in given:
        cfg.model.source = "pretrained"
    local = Path(path).expanduser()
    looks_local = local.is_absolute() or path.startswith((".", "~")) or local.exists()
    if looks_local and not local.is_dir():
        raise ConfigError(f"model.path={path} is not a folder (a model saved with save_pretrained, or a hub id)")
    if "model.tokenizer" not in given:
        if looks_local and not any((local / name).is_file() for name in TOKENIZER_FILES):
            raise ConfigError(
                f"model.path={path} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
                "name the model's tokenizer with model.tokenizer=..."
            )
        cfg.model.tokenizer = path
    if "model.chat_format" not in given:
        cfg.model.chat_format = folder_chat_format(
            str(cfg.model.chat_format), local if looks_local else cached_snapshot(path), path
        )


def folder_chat_format(composed: str, folder: Path | None, name: str) -> str:
    """The chat format a run on the model in ``folder`` uses, given the one the recipe composed: a plain-text
    layout fits any tokenizer and a paper's variant of the folder's own family stays (a recipe chose them on
    purpose); a family format follows the folder. A paper's variant of another family is refused: switching would
    drop the paper's layout, keeping it would render with control tokens this model does not have."""
    any_tokenizer, family = recipe_layout(composed)
    if any_tokenizer:
        return composed
    found = infer_chat_format(folder, name)
    if family is None:
        return found
    if family == found:
        return composed
    is_a = "of no family tooltrain writes" if found == "auto" else f"a {found} model"
    raise ConfigError(
        f"the recipe's chat format {composed} is its paper's layout for {family} models, but model.path={name} is "
        f"{is_a}; set model.chat_format={found} (the plain family format) or another of its layouts"
    )


def recipe_layout(composed: str) -> tuple[bool, str | None]:
    """(whether the format is plain text any tokenizer writes, the family it is a variant of or None): what the
    format's class says (``ChatFormat.any_tokenizer``, ``ChatFormat.variant_of``); a name no format answers to is
    neither (the folder's format replaces it; the config check names the valid ones)."""
    from train.formats import format_class

    try:
        cls = format_class(composed)
    except ValueError:
        return False, None
    return cls.any_tokenizer, cls.variant_of


def cached_snapshot(repo_id: str) -> Path | None:
    """A hub id's files already in the Hugging Face cache (nothing is downloaded to compose a config)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - not a valid repo id, no cache: nothing to read
        return None
    return Path(found).parent if isinstance(found, str) else None


def infer_chat_format(folder: Path | None, name: str) -> str:
    """The chat format of the model in ``folder`` (None: not a local folder, nothing to read): an exact format its
    files name, else ``auto`` when it has a chat template of a family tooltrain does not write (resolved to the
    ``template`` fallback, which renders with that template, and said so: ``train.engine.chat_format_auto``);
    ConfigError with the valid choices when it has neither."""
    from train.formats import AUTO, FORMATS

    config = _read_json(folder / "config.json") if folder is not None else {}
    model_type = str(config.get("model_type") or (config.get("text_config") or {}).get("model_type") or "")
    template = read_chat_template(folder) if folder is not None else ""
    found = format_from(model_type, template, config.get("vocab_size"))
    if found is not None:
        return found
    if template:
        return AUTO
    if folder is None:
        seen = "it is not a local folder nor in the Hugging Face cache, so nothing says"
    else:
        said = f"model_type {model_type!r}" if model_type else "no model_type"
        seen = f"its config.json has {said} and its tokenizer {'a chat template' if template else 'no chat template'}"
        seen += " that tooltrain does not recognise"
    raise ConfigError(
        f"cannot tell which chat format model.path={name} uses ({seen}); set model.chat_format to one of: "
        f"{', '.join(FORMATS)}, {AUTO}"
    )


def format_from(model_type: str, template: str, vocab_size: Any = None) -> str | None:
    """The format a model's ``model_type`` and chat template name together, or None when they do not say."""
    family = next((fmt for marker, fmt in TEMPLATE_MARKERS if marker in template), None)
    by_type = MODEL_TYPES.get(model_type)
    if family == "chatml":
        return by_type if by_type in ("qwen2_5", "qwen3") else "chatml"
    if family == "mistral":
        return MISTRAL_VOCAB.get(vocab_size) if isinstance(vocab_size, int) else None
    return family or by_type


def read_chat_template(folder: Path) -> str:
    """The folder's chat template(s) as one text: tokenizer_config.json's ``chat_template`` (a string, or a list of
    named templates), or the chat_template.jinja / chat_template.json that newer transformers save beside it."""
    texts = []
    value = _read_json(folder / "tokenizer_config.json").get("chat_template")
    value = value if value is not None else _read_json(folder / "chat_template.json").get("chat_template")
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, list):
        texts += [str(item.get("template", "")) for item in value if isinstance(item, dict)]
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        texts.append(jinja.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or unreadable: the format is then refused, naming what was seen
        return {}
    return data if isinstance(data, dict) else {}
