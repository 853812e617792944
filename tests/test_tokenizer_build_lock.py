"""load_tokenizer builds a named tokenizer once for all the processes that want it at the same moment (the ranks
of a node, the workers of a test run): one builds under a lock, the others wait and read its files."""

from __future__ import annotations

import threading
import time

from train.tokenizers import BUILD_VERSION, BUILDERS, load_tokenizer


def test_concurrent_loads_build_once_and_all_get_the_same_tokenizer(tmp_path, monkeypatch):
    from train.tokenizers import tiny

    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    real_build = getattr(tiny, BUILDERS["tiny_chatml"].split(":")[1])
    builds = []

    def slow_build():
        builds.append(threading.get_ident())
        time.sleep(0.5)  # long enough that every other loader arrives while this one builds
        return real_build()

    monkeypatch.setattr(tiny, BUILDERS["tiny_chatml"].split(":")[1], slow_build)
    import transformers

    transformers.PreTrainedTokenizerFast  # noqa: B018 - resolved before the threads: transformers' lazy import is not thread-safe
    loaded: list = [None] * 3

    def load(slot: int) -> None:
        loaded[slot] = load_tokenizer("tiny_chatml")

    threads = [threading.Thread(target=load, args=(slot,)) for slot in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(builds) == 1
    assert (tmp_path / "tokenizers" / f"tiny_chatml-v{BUILD_VERSION}" / "tokenizer.json").is_file()
    text = "<|im_start|>user\nhi there<|im_end|>"
    assert len({tuple(tok(text)["input_ids"]) for tok in loaded}) == 1


def test_cache_false_builds_every_time_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tmp_path))
    load_tokenizer("tiny_chatml", cache=False)
    assert not (tmp_path / "tokenizers").exists()
