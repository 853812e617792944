"""What a dataset build reads and the key its cache goes by: ``resolve_input`` (a data source's path, ``pkg://``
inside the installed package) and ``cache_key``, a hash of everything the rows depend on: the data config (less the
keys that only say how the build runs), the input files' bytes, the chat format, the tokenizer's definition and the
pipeline version. A second run with the same key loads the rows instead of rebuilding them.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from train.base.records import file_sha256, input_files
from train.formats import FALLBACK
from train.sources import SourceError

# Bump when rendering, masking or the row layout change in a way the cache key cannot see.
# 2: the build also keeps the eval split's conversations (eval_conversations.jsonl).
# 3: rows carry loss_weights when a part weighs other than 0 or 1; "reasoning" is weighed apart from "text".
# 4: a conversation whose id an earlier one used is left out (invalid: duplicate-id); records are read as
#    strict JSON (no NaN, 1e400 or duplicate keys), lone surrogates and records over data.max_record_bytes refused.
# 5: the cache is memory-mapped columns (train.data.token_store), not JSON Lines rows; a JSONL cache is rebuilt.
# 6: a conversation whose id an earlier source used is kept, renamed s<i>/<id>, not left out; the eval split goes by
#    the id its source gave it; layout.json records each file's size and checksum (verified when opened).
# 7: .parquet, .arrow, .csv and datasets folders are read as tables (train.sources.tables), not as JSON Lines.
PIPELINE_VERSION = "7"
# data config keys that say how the build runs, not what it builds: left out of the cache key
BUILD_ONLY_KEYS = ("num_workers",)


def cache_key(data_cfg: dict[str, Any], format_name: str, tokenizer: Any, extra: dict[str, Any] | None = None) -> str:
    """The cache key of a build: 20 hex digits of a SHA-256 over what the rows depend on (module docstring)."""
    from train.tokenizers import BUILD_VERSION

    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            {
                "data": _keyed(data_cfg),
                "format": format_name,
                "pipeline": PIPELINE_VERSION,
                "extra": extra or {},
                "tokenizer_build": BUILD_VERSION,
            },
            sort_keys=True,
        ).encode()
    )
    # The whole tokenizer definition, not only its vocabulary: normalizer, pre-tokenizer, model and
    # merges, added and special tokens (a fast tokenizer serializes them deterministically), and
    # which tokens play eos/pad/... for transformers.
    backend = getattr(tokenizer, "backend_tokenizer", None)
    definition = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    digest.update(definition.encode())
    digest.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    if format_name == FALLBACK:  # the fallback format renders with the tokenizer's own chat template
        digest.update(str(getattr(tokenizer, "chat_template", None)).encode())
    for spec in data_cfg.get("sources", []):
        for path in spec["inputs"]:
            for file in input_files(resolve_input(path)):
                digest.update(str(file.name).encode())
                digest.update(bytes.fromhex(file_sha256(file)) if file.exists() else b"missing")
    return digest.hexdigest()[:20]


def _keyed(data_cfg: dict[str, Any]) -> dict[str, Any]:
    """The data config as the key sees it: less BUILD_ONLY_KEYS, and a source's defaults (weight 1, no fraction, no
    column mapping) left out, so a config that does not set them keys as one written before they existed."""
    keyed = {key: value for key, value in data_cfg.items() if key not in BUILD_ONLY_KEYS}
    if "sources" in keyed:
        defaults = (("weight", 1.0), ("fraction", None), ("columns", {}))  # a source's defaults
        keyed["sources"] = [
            {k: v for k, v in dict(spec).items() if (k, v) not in defaults} for spec in keyed["sources"]
        ]
    return keyed


def resolve_input(path: str) -> Path:
    """``pkg://train/assets/x.json`` -> the file inside the installed package; anything else as is. A package that
    is not installed (``pkg://bfcl_eval/...`` without bfcl-eval) is a SourceError naming it."""
    if path.startswith("pkg://"):
        package, _, inner = path[len("pkg://") :].partition("/")
        try:
            return Path(str(resources.files(package) / inner))
        except ModuleNotFoundError:
            raise SourceError(
                f"{path}: no installed package {package!r} ships it (install it: docs/evaluation.md names the "
                "benchmark packages and how to install them)"
            ) from None
    return Path(path).expanduser()
