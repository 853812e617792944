"""The weighted loss never builds the full logits (#26 item 3): through the Trainer's compute_loss, on tiny
random Llamas (fp32, CPU; untied, tied and LoRA), the chunked loss and every trainable gradient equal the
full-logits reference (weighted_causal_lm_loss on the model's logits), the output head never gives more than a
chunk of positions' logits, and models that transform their logits after the head keep the full-logits path."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from train.data.packing import IGNORE_INDEX
from train.engine.loss import (
    LOSS_CHUNK,
    WeightedLoss,
    chunkable_head,
    next_token_nll,
    weighted_causal_lm_loss,
    weighted_next_token_loss,
)

VOCAB = 97


def _llama(kind: str = "untied", max_positions: int = 64):
    """A tiny random Llama: ``untied``, ``tied`` (head = input embeddings), ``lora`` (B random too, so every
    LoRA gradient is nonzero) or ``lora_head`` (LoRA on the output head too)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=kind == "tied",
        use_cache=False,
    )
    model = LlamaForCausalLM(config)
    if kind not in ("lora", "lora_head"):
        return model
    from train.engine.model import apply_lora

    peft_cfg = OmegaConf.create({"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": None})
    head = ["lm_head"] if kind == "lora_head" else []
    model = apply_lora(model, peft_cfg, ["q_proj", "k_proj", "v_proj", "o_proj", *head])
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    return model


def _batch(rows: int, length: int, seed: int = 1) -> dict[str, torch.Tensor]:
    """Random tokens and weights; each row's first third untrained (a prompt), so rows differ in trained counts."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, VOCAB, (rows, length), generator=generator)
    labels = input_ids.clone()
    for row in range(rows):
        labels[row, : length // 3 + row] = IGNORE_INDEX
    weights = torch.rand(rows, length, generator=generator) * 3 * labels.ne(IGNORE_INDEX)
    return {"input_ids": input_ids, "labels": labels, "loss_weights": weights}


def _trainer(model, tmp_path, loss: WeightedLoss):
    from transformers import Trainer, TrainingArguments

    loss.attach(model)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, remove_unused_columns=False)
    return Trainer(model=model, args=args, compute_loss_func=loss)


def _trainable_grads(model) -> dict[str, torch.Tensor]:
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    return grads


def _head_outputs(monkeypatch) -> list[int]:
    """The numel of every vocabulary-wide ``F.linear`` output from now on (the head's logits, in forward and in
    backward's recomputation; the weighted loss computes its chunks inside the head's call, not through it)."""
    sizes: list[int] = []
    linear = torch.nn.functional.linear

    def recording_linear(*args, **kwargs):
        out = linear(*args, **kwargs)
        if out.shape[-1] == VOCAB:
            sizes.append(out.numel())
        return out

    monkeypatch.setattr(torch.nn.functional, "linear", recording_linear)
    return sizes


def _reference(model, batch: dict, n: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The full-logits loss and gradients: the weighted loss on the model's own [batch, seq, vocab] logits."""
    logits = model(input_ids=batch["input_ids"]).logits
    assert logits.shape == (*batch["input_ids"].shape, VOCAB)  # a forward without weights keeps its logits
    loss = weighted_causal_lm_loss(logits, batch["labels"], batch["loss_weights"], n)
    loss.backward()
    return loss.detach(), _trainable_grads(model)


# 2 rows of 24 positions: 16 + 15 = 31 trained positions (predicting a label). Chunks of 31 and 1 divide them,
# 4 and 7 do not, 64 is larger than all of them.
@pytest.mark.parametrize("kind", ["untied", "tied", "lora", "lora_head"])
@pytest.mark.parametrize("chunk", [1, 4, 7, 31, 64])
def test_the_chunked_loss_and_gradients_equal_the_full_logits(tmp_path, monkeypatch, kind, chunk):
    model = _llama(kind)
    batch = _batch(rows=2, length=24)
    assert int(batch["labels"][:, 1:].ne(IGNORE_INDEX).sum()) == 31
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=chunk))
    sizes = _head_outputs(monkeypatch)
    n = torch.tensor(40)  # the Trainer's num_items_in_batch: the global batch's trained tokens

    loss = trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
    loss.backward()
    grads = _trainable_grads(model)
    assert sizes and max(sizes) <= min(chunk, 31) * VOCAB  # the head's call scores chunks, gives no logits

    reference, reference_grads = _reference(model, batch, n)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    assert grads.keys() == reference_grads.keys() and grads
    if kind.startswith("lora"):
        assert all("lora_" in name for name in grads)
    for name, grad in grads.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-5, atol=1e-7, msg=name)


def test_a_weighted_forward_never_holds_more_than_a_chunk_of_logits(tmp_path, monkeypatch):
    """The default chunk on a row longer than two chunks: the head's largest output, in forward and in
    backward, is LOSS_CHUNK x vocabulary; the full logits would be the row's length x vocabulary."""
    length = 2 * LOSS_CHUNK + 300
    model = _llama("lora", max_positions=length)
    batch = _batch(rows=1, length=length)
    trainer = _trainer(model, tmp_path, WeightedLoss())
    sizes = _head_outputs(monkeypatch)

    loss = trainer.compute_loss(model, dict(batch))
    loss.backward()
    grads = _trainable_grads(model)
    assert max(sizes) == LOSS_CHUNK * VOCAB

    reference, reference_grads = _reference(model, batch, None)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-5, atol=1e-7, msg=name)


def test_a_batch_with_nothing_trained_gives_a_zero_loss_on_the_graph():
    model = _llama("untied")
    batch = _batch(rows=1, length=8)
    nothing = torch.zeros_like(batch["loss_weights"])
    hidden = model.model(input_ids=batch["input_ids"]).last_hidden_state
    nll = next_token_nll(model.lm_head, hidden, batch["input_ids"], nothing)
    loss = weighted_next_token_loss(nll, batch["input_ids"], batch["labels"], nothing, torch.tensor(3))
    loss.backward()  # the Trainer backpropagates every micro batch's loss, trained tokens or not
    assert loss.item() == 0.0


def test_a_weighted_label_that_is_not_its_input_token_is_refused(tmp_path):
    """The head never sees the labels (the Trainer keeps them from the model): it scores each weighted
    position's next input token, which is the label wherever rows train. A label that differs is refused."""
    model = _llama("untied")
    batch = _batch(rows=2, length=24)
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    batch["labels"][1, 20] = (batch["input_ids"][1, 20] + 1) % VOCAB
    with pytest.raises(RuntimeError, match="a weighted label differs from its input token"):
        trainer.compute_loss(model, dict(batch))
    batch["loss_weights"][1, 20] = 0.0  # a label that weighs nothing is not scored: nothing to refuse
    trainer.compute_loss(model, dict(batch))


def _gemma2():
    """A tiny Gemma 2: its logits are softcapped after the head (tanh(logits / cap) * cap)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        final_logit_softcapping=0.05,  # strong (raw logits reach 0.2): a loss on the raw head output differs
        use_cache=False,
    )
    return Gemma2ForCausalLM(config)


def test_which_heads_are_chunked():
    untied, lora = _llama("untied"), _llama("lora")
    assert chunkable_head(untied) is untied.lm_head
    assert chunkable_head(lora) is lora.get_output_embeddings()
    assert chunkable_head(_gemma2()) is None  # softcapped logits: not the head's output


def test_models_that_transform_their_logits_keep_the_full_logits(tmp_path, monkeypatch):
    model = _gemma2()
    batch = _batch(rows=2, length=24)
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    sizes = _head_outputs(monkeypatch)

    loss = trainer.compute_loss(model, dict(batch))
    assert sizes == [2 * 24 * VOCAB]
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"]).logits
        raw = model.lm_head(model.model(input_ids=batch["input_ids"]).last_hidden_state)
    expected = weighted_causal_lm_loss(logits, batch["labels"], batch["loss_weights"])
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert expected.item() != pytest.approx(
        weighted_causal_lm_loss(raw, batch["labels"], batch["loss_weights"]).item(), rel=1e-4
    )


def test_a_lora_wrapped_head_under_zero3_keeps_the_full_logits(tmp_path, monkeypatch):
    """ZeRO-3 marks its partitioned parameters with ``ds_id`` and gathers each module's own around its call: the
    Linear inside a LoRA-wrapped head would be gathered at every chunk (a number of collectives that differs
    between ranks), so such a head gets the full-logits loss, decided by the first weighted forward. A head's
    own partitioned weight is chunked (test_weighted_loss_zero3)."""
    model = _llama("lora_head")
    batch = _batch(rows=2, length=24)
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    head = model.get_output_embeddings()
    head.base_layer.weight.ds_id = 0
    sizes = _head_outputs(monkeypatch)

    loss = trainer.compute_loss(model, dict(batch))
    full = list(sizes)  # the head's Linear and its LoRA B, each for every position
    assert full == [2 * 24 * VOCAB] * 2
    del head.base_layer.weight.ds_id  # decided by the first weighted forward, for the run
    trainer.compute_loss(model, dict(batch))
    assert sizes == full * 2
    with torch.no_grad():
        expected = weighted_causal_lm_loss(
            model(input_ids=batch["input_ids"]).logits, batch["labels"], batch["loss_weights"]
        )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
