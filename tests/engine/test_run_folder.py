"""The room for a run folder (``train.engine.run_folder``): what export, ``eval run``, PTR's backbone and training
read of a finished or interrupted run. The run folders are built here by hand, in seconds: the tiny recipe's config
as training writes it, and one LoRA adapter on its random-init base (its B matrices made non-zero, so merging it
changes the model) saved as final/, or as checkpoints with and without the completion marker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from train.engine.checkpoints import mark_complete
from train.engine.config import compose
from train.engine.resume_config import _to_yaml
from train.engine.run_folder import RunFolder, RunFolderError, run_tokenizer

PROBE = torch.tensor([[5, 17, 300, 42, 9, 128]])


def logits(model) -> torch.Tensor:
    model.eval()  # LoRA's dropout off
    with torch.no_grad():
        return model(input_ids=PROBE).logits


@pytest.fixture(autouse=True)
def cache(tooltrain_cache, monkeypatch):
    monkeypatch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))  # the tiny tokenizer is built once per session


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tooltrain_cache):
    """(the tiny recipe's config, a saved adapter folder, the adapted model's logits on PROBE, the base model's)."""
    from train.engine.model import apply_lora, build_model

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(tooltrain_cache))
        cfg = compose(["recipe=tiny"])
        base = build_model(cfg.model, len(run_tokenizer(cfg)), torch.float32, "sdpa", seed=cfg.seed)
    base_logits = logits(base)
    model = apply_lora(base, cfg.peft, list(cfg.model.lora_target_modules))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:  # zero at init: the adapter would change nothing
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    adapter = tmp_path_factory.mktemp("adapter")
    model.save_pretrained(str(adapter))
    return cfg, adapter, logits(model), base_logits


def make_run(root: Path, trained, final: bool = True, checkpoints: dict[int, bool] | None = None) -> Path:
    """RUN_DIR with config.yaml, final/ when ``final``, and checkpoint-N (complete or cut short) per ``checkpoints``."""
    cfg, adapter, *_ = trained
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(_to_yaml(cfg), encoding="utf-8")
    if final:
        shutil.copytree(adapter, root / "final")
    for step, complete in (checkpoints or {}).items():
        shutil.copytree(adapter, root / f"checkpoint-{step}")
        if complete:
            mark_complete(root / f"checkpoint-{step}", step)
    return root


def test_a_finished_run_is_its_final_adapter_merged_into_the_base_it_names(tmp_path, trained):
    run = RunFolder(make_run(tmp_path / "run", trained, checkpoints={2: True}))
    assert run.weights == tmp_path / "run" / "final"
    assert run.label == f"{tmp_path / 'run'} (final)"
    assert (run.chat_format_name, run.chat_format().name, run.random_init) == ("chatml", "chatml", True)
    tokenizer = run.tokenizer()
    assert len(tokenizer) == len(run_tokenizer(run.config))  # no tokenizer saved beside final/: rebuilt as trained
    model, merged = run.merged_model(tokenizer, torch.float32)
    assert merged and not hasattr(model, "peft_config")  # one plain transformers model
    torch.testing.assert_close(logits(model), trained[2])  # the same seeded base, with the adapter merged in
    assert not torch.allclose(logits(model), trained[3], atol=1e-3)  # ... which changes it
    model, loaded_tokenizer = run.load(run.dtype())
    assert len(loaded_tokenizer) == len(tokenizer) and model.dtype == torch.float32  # the config's dtype (tiny: fp32)
    torch.testing.assert_close(logits(model), trained[2])


def test_an_interrupted_run_is_read_from_its_newest_complete_checkpoint(tmp_path, trained):
    run_dir = make_run(tmp_path / "run", trained, final=False, checkpoints={2: True, 4: True, 6: False})
    run = RunFolder(run_dir)
    assert run.weights == run_dir / "checkpoint-4"  # checkpoint-6 has no completion marker: a save cut short
    assert run.label == f"{run_dir} (checkpoint-4)"
    model, _ = run.load(torch.float32)
    torch.testing.assert_close(logits(model), trained[2])


def test_a_damaged_checkpoint_is_skipped_unless_it_is_the_complete_one_read(tmp_path, trained):
    run_dir = make_run(tmp_path / "run", trained, final=False, checkpoints={2: True, 8: False})
    (run_dir / "checkpoint-8" / "adapter_model.safetensors").write_bytes(b"cut")  # the save a kill interrupted
    shutil.copytree(run_dir / "checkpoint-2", run_dir / "damaged-checkpoint-6")  # set aside by a resume
    assert RunFolder(run_dir).weights == run_dir / "checkpoint-2"

    weights = run_dir / "checkpoint-2" / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0xFF  # the complete checkpoint's bytes changed since its marker was written
    weights.write_bytes(bytes(data))
    with pytest.raises(RunFolderError, match=r"adapter_model.safetensors is damaged: its bytes changed since it was"):
        RunFolder(run_dir).check()


def test_what_is_missing_is_one_sentence_naming_it(tmp_path, trained):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunFolderError) as missing_config:
        RunFolder(empty).check()
    assert str(missing_config.value) == f"{empty} has no config.yaml: is it a tooltrain run directory?"

    no_weights = make_run(tmp_path / "no_weights", trained, final=False, checkpoints={2: False})
    with pytest.raises(RunFolderError) as missing_weights:
        RunFolder(no_weights).check()
    assert str(missing_weights.value) == (
        f"{no_weights} holds no trained weights: neither final/ nor a complete checkpoint-N/"
    )

    garbled = make_run(tmp_path / "garbled", trained)
    (garbled / "config.yaml").write_text("model: [unclosed\n", encoding="utf-8")
    with pytest.raises(RunFolderError, match=r"config.yaml is damaged: not a readable config \("):
        RunFolder(garbled).check()  # the config is read before the weights

    (garbled / "config.yaml").write_text("seed: 1\n", encoding="utf-8")
    with pytest.raises(RunFolderError, match=r"is damaged: not a tooltrain run config \(no model section\)"):
        RunFolder(garbled).check()


def test_hydras_copy_of_the_config_is_read_for_older_runs(tmp_path, trained):
    run_dir = make_run(tmp_path / "run", trained)
    (run_dir / ".hydra").mkdir()
    (run_dir / "config.yaml").rename(run_dir / ".hydra" / "config.yaml")
    assert RunFolder(run_dir).config.model.name == "tiny_llama"


def test_the_tokenizer_saved_beside_the_weights_wins_and_the_format_keeps_its_options(tmp_path, trained):
    run_dir = make_run(tmp_path / "run", trained)
    saved = run_tokenizer(trained[0])
    saved.add_tokens(["<extra_0>", "<extra_1>"], special_tokens=True)
    saved.save_pretrained(str(run_dir / "final"))
    assert len(RunFolder(run_dir).tokenizer()) == len(saved)

    cfg = RunFolder(run_dir).config
    cfg.model.chat_format = "qwen3"
    cfg.data.format_options = {"mode": "non_thinking", "answer_style": "toolgt_text"}
    (run_dir / "config.yaml").write_text(_to_yaml(cfg), encoding="utf-8")
    run = RunFolder(run_dir)
    assert run.format_options == {"mode": "non_thinking", "answer_style": "toolgt_text"}
    fmt = run.chat_format()
    assert (fmt.name, fmt.mode, fmt.answer_style) == ("qwen3", "non_thinking", "toolgt_text")

    cfg.data.format_options = {"no_such_option": 1}
    (run_dir / "config.yaml").write_text(_to_yaml(cfg), encoding="utf-8")
    with pytest.raises(RunFolderError, match="^the run's chat format cannot be built: "):
        RunFolder(run_dir).chat_format()
