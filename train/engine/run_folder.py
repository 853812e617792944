"""A run folder as everything after training reads it: ``tooltrain export``, ``tooltrain eval run RUN_DIR``, a
paper's ``--llm RUN_DIR`` backbone; and the one tokenizer rule training itself follows, so all of them agree on every
id.

What ``run(cfg)`` leaves in RUN_DIR, finished or interrupted, and how it is read here (``RunFolder``):

* its saved config: ``config.yaml``, the resolved config (Hydra's ``.hydra/config.yaml`` for older runs), which
  rebuilds the base model exactly as training built it, seed included (``load_run_config``);
* its trained weights: ``final/`` when the run finished, else its newest complete checkpoint (one carrying the
  completion marker, ``train.engine.checkpoints``: a save a kill cut short is never read), checked before anything
  is loaded (``verify_weights``: a truncated, garbled or changed file is named, never half-loaded);
* its tokenizer: the one saved beside the weights, else rebuilt from the config as training built it
  (``run_tokenizer``);
* its chat format, with the format options it trained with (``run_format``);
* its merged model: the LoRA adapter merged into that base (``merged_model``), or a full fine-tune as saved.

What is missing or damaged is a ``RunFolderError``: one sentence naming the file and why, which every verb prints
as its one ``error:`` line.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from train.engine.checkpoints import latest_complete_checkpoint

if TYPE_CHECKING:
    from train.formats import ChatFormat


class RunFolderError(ValueError):
    """A run or model folder that cannot be read: what is missing or damaged, and where."""


# The files a load reads from a weights folder (besides *.safetensors): JSON that transformers and peft parse.
# Others in a checkpoint (optimizer.pt, rng_state.pth, trainer_state.json) are resume's, never read here.
LOADED_JSON = (
    "adapter_config.json",
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


class RunFolder:
    """RUN_DIR, each part read once when first asked for, in the order the caller asks (a verb's first error is the
    first part it reads)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @cached_property
    def config(self) -> Any:
        return load_run_config(self.path)

    @cached_property
    def weights(self) -> Path:
        return find_trained_weights(self.path)

    def check(self) -> None:
        """The config read, then the weights found and checked: what is missing or damaged is a ``RunFolderError``
        here, before anything slow is loaded."""
        _ = self.config, self.weights

    @property
    def label(self) -> str:
        """RUN_DIR and the weights folder read from it, for a description: ``runs/x (checkpoint-6)``."""
        return f"{self.path} ({self.weights.name})"

    @property
    def chat_format_name(self) -> str:
        return str(self.config.model.chat_format)

    @property
    def format_options(self) -> dict[str, Any]:
        return format_options(self.config)

    def chat_format(self) -> ChatFormat:
        return run_format(self.config)

    @property
    def random_init(self) -> bool:
        """Whether the base model is built from its config with random weights (``model.source=config``)."""
        from train.base.errors import choice

        return choice(self.config.model.source) == "config"

    def dtype(self, name: str = "auto") -> Any:
        """The torch dtype to load in: ``name``, or for ``auto`` the config's dtype on this machine."""
        import torch

        from train.engine.model import resolve_dtype

        return resolve_dtype(str(self.config.model.dtype) if name == "auto" else name, torch.cuda.is_available())

    def trained_dtype(self) -> str | None:
        """The dtype name the run trained in, as its summary.json records it; None when it does not say."""
        summary = self.path / "summary.json"
        if not summary.is_file():
            return None
        trained = read_json(summary)
        return trained.get("dtype") if isinstance(trained, dict) else None

    def tokenizer(self) -> Any:
        return run_tokenizer(self.config, self.weights)

    def merged_model(self, tokenizer: Any, dtype: Any) -> tuple[Any, bool]:
        """The trained model sized for ``tokenizer``, in ``dtype``, and whether an adapter was merged."""
        return merged_model(self.config, self.weights, len(tokenizer), dtype)

    def load(self, dtype: Any) -> tuple[Any, Any]:
        """The merged model in ``dtype`` and its tokenizer: what ``eval run`` and a backbone generate with."""
        tokenizer = self.tokenizer()
        model, _ = self.merged_model(tokenizer, dtype)
        return model, tokenizer


# ---------------------------------------------------------------- the parts, each one rule


def load_run_config(run_dir: Path) -> Any:
    """The config the run trained with: RUN_DIR/config.yaml, or Hydra's copy for older runs."""
    import yaml
    from omegaconf import OmegaConf

    for candidate in (run_dir / "config.yaml", run_dir / ".hydra" / "config.yaml"):
        if candidate.is_file():
            try:
                cfg = OmegaConf.load(candidate)
            except (OSError, ValueError, TypeError, yaml.YAMLError) as err:
                one_line = " ".join(str(err).split())  # yaml's messages span lines
                raise damaged(candidate, f"not a readable config ({type(err).__name__}: {one_line})") from None
            if not hasattr(cfg, "get") or "model" not in cfg:
                raise damaged(candidate, "not a tooltrain run config (no model section)")
            return cfg
    raise RunFolderError(f"{run_dir} has no config.yaml: is it a tooltrain run directory?")


def find_trained_weights(run_dir: Path) -> Path:
    """RUN_DIR/final when the run finished, else its newest complete checkpoint; checked (``verify_weights``)."""
    final = run_dir / "final"
    if (final / "adapter_config.json").is_file() or (final / "config.json").is_file():
        verify_weights(final)
        return final
    checkpoint = latest_complete_checkpoint(run_dir)
    if checkpoint is None:
        raise RunFolderError(f"{run_dir} holds no trained weights: neither final/ nor a complete checkpoint-N/")
    verify_weights(checkpoint)
    return checkpoint


def damaged(path: Path, reason: str) -> RunFolderError:
    return RunFolderError(f"{path} is damaged: {reason}")


def verify_weights(folder: Path) -> None:
    """A ``RunFolderError`` naming the first file of ``folder`` that a load would choke on: a safetensors file whose
    header or length is wrong (``safe_open`` checks the header and that the data is as long as it says), a JSON file
    that does not parse, an adapter config without its weights. Cheap: no tensor is read."""
    from safetensors import SafetensorError, safe_open

    if (folder / "adapter_config.json").is_file() and not (folder / "adapter_model.safetensors").is_file():
        raise damaged(folder / "adapter_model.safetensors", "missing (adapter_config.json names an adapter)")
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError, ValueError) as err:  # truncated, garbled header, unreadable
            raise damaged(path, f"not a readable safetensors file ({err})") from None
    for name in LOADED_JSON:
        path = folder / name
        if path.is_file():
            read_json(path)
    _check_saved_sums(folder)


def _check_saved_sums(folder: Path) -> None:
    """A checkpoint's completion marker lists each file's size and CRC-32 (``train.engine.checkpoints.mark_complete``):
    the files a load reads must still match them, which also catches a same-size corruption that every header
    check passes. Files only a resume reads (optimizer, rng) are resume's concern, not a load's."""
    from train.engine.checkpoints import crc_problem, recorded_files, size_problem

    recorded = recorded_files(folder)
    if recorded is None:
        return  # final/, or a checkpoint of an older run: the header checks above are all there is
    loaded = [*(path.name for path in sorted(folder.glob("*.safetensors"))), *LOADED_JSON]
    names = [name for name in loaded if name in recorded and (folder / name).is_file()]
    sizes = {name: (folder / name).stat().st_size for name in names}
    problem = size_problem(recorded, sizes, names) or crc_problem(folder, recorded, names)
    if problem:
        name, _, reason = problem.partition(": ")
        raise damaged(folder / name, reason)


def read_json(path: Path) -> Any:
    """``path`` parsed, or a ``RunFolderError`` saying it is damaged and where."""
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise damaged(path, f"not valid JSON ({err})") from None
    except OSError as err:
        raise RunFolderError(f"cannot read {path}: {err.strerror or err}") from None


def format_options(cfg: Any) -> dict[str, Any]:
    """The chat format options a run trained with (``data.format_options``): what renders its prompts the same way."""
    from omegaconf import OmegaConf

    options = cfg.data.get("format_options") if "data" in cfg else None
    return dict(OmegaConf.to_container(options, resolve=True)) if options else {}


def run_format(cfg: Any) -> ChatFormat:
    """The chat format the run trained in, with the format options it trained with."""
    from train.formats import get_format

    try:
        return get_format(str(cfg.model.chat_format), format_options(cfg))
    except ValueError as err:
        raise RunFolderError(f"the run's chat format cannot be built: {err}") from None


def run_tokenizer(cfg: Any, weights: Path | None = None) -> Any:
    """The tokenizer a run trains with: the one it saved beside ``weights`` when there is one, else the one its config
    names, to which a random-init model's run adds the format's missing control tokens (``model.source=config``:
    its embeddings are sized by this tokenizer; ``train.formats.control_tokens``). Training, export, ``eval run`` and
    a paper's run-folder backbone all take it from here, so they agree on every id."""
    if weights is not None and (weights / "tokenizer.json").is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(weights))
    from train.base.errors import choice
    from train.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(cfg.model.tokenizer, trust_remote_code=bool(cfg.model.trust_remote_code))
    if choice(cfg.model.source) == "config":
        from train.formats.control_tokens import add_missing_control_tokens

        add_missing_control_tokens(tokenizer, run_format(cfg))
    return tokenizer


def merged_model(cfg: Any, weights: Path, vocab_size: int, dtype: Any) -> tuple[Any, bool]:
    """The trained model as one plain transformers model, and whether an adapter was merged."""
    from transformers import AutoModelForCausalLM

    from train.engine.model import build_model

    if not (weights / "adapter_config.json").is_file():
        return AutoModelForCausalLM.from_pretrained(str(weights), dtype=dtype, use_safetensors=True), False
    from peft import PeftModel

    # Same builder and seed as training: a random-init base (source=config) comes out identical.
    base = build_model(cfg.model, vocab_size, dtype, "sdpa", seed=cfg.seed)
    model = PeftModel.from_pretrained(base, str(weights))
    return model.merge_and_unload(), True
