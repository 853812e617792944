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
    chunked_weighted_causal_lm_loss,
    weighted_causal_lm_loss,
)

VOCAB = 97


def _llama(kind: str = "untied", max_positions: int = 64):
    """A tiny random Llama: ``untied``, ``tied`` (head = input embeddings) or ``lora`` (B random too, so every
    LoRA gradient is nonzero)."""
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
    if kind != "lora":
        return model
    from train.engine.model import apply_lora

    peft_cfg = OmegaConf.create({"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": None})
    model = apply_lora(model, peft_cfg, ["q_proj", "k_proj", "v_proj", "o_proj"])
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


def _head_outputs(model) -> list[int]:
    """The numel of every output the model's head gives from now on (forward and backward's recomputation)."""
    sizes: list[int] = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, out: sizes.append(out.numel()))
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
@pytest.mark.parametrize("kind", ["untied", "tied", "lora"])
@pytest.mark.parametrize("chunk", [1, 4, 7, 31, 64])
def test_the_chunked_loss_and_gradients_equal_the_full_logits(tmp_path, kind, chunk):
    model = _llama(kind)
    batch = _batch(rows=2, length=24)
    assert int(batch["labels"][:, 1:].ne(IGNORE_INDEX).sum()) == 31
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=chunk))
    sizes = _head_outputs(model)
    n = torch.tensor(40)  # the Trainer's num_items_in_batch: the global batch's trained tokens

    loss = trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
    loss.backward()
    grads = _trainable_grads(model)
    assert sizes and max(sizes) <= min(chunk, 31) * VOCAB  # the forward's own head call gets no positions

    reference, reference_grads = _reference(model, batch, n)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    assert grads.keys() == reference_grads.keys() and grads
    if kind == "lora":
        assert all("lora_" in name for name in grads)
    for name, grad in grads.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-5, atol=1e-7, msg=name)


def test_a_weighted_forward_never_holds_more_than_a_chunk_of_logits(tmp_path):
    """The default chunk on a row longer than two chunks: the head's largest output, in forward and in
    backward, is LOSS_CHUNK x vocabulary; the full logits would be the row's length x vocabulary."""
    length = 2 * LOSS_CHUNK + 300
    model = _llama("lora", max_positions=length)
    batch = _batch(rows=1, length=length)
    trainer = _trainer(model, tmp_path, WeightedLoss())
    sizes = _head_outputs(model)

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
    labels = torch.full_like(batch["labels"], IGNORE_INDEX)
    hidden = model.model(input_ids=batch["input_ids"]).last_hidden_state
    loss = chunked_weighted_causal_lm_loss(hidden, model.lm_head, labels, batch["loss_weights"], torch.tensor(3))
    loss.backward()  # the Trainer backpropagates every micro batch's loss, trained tokens or not
    assert loss.item() == 0.0


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


def test_models_that_transform_their_logits_keep_the_full_logits(tmp_path):
    model = _gemma2()
    batch = _batch(rows=2, length=24)
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    sizes = _head_outputs(model)

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


def test_a_sharded_head_keeps_the_full_logits(tmp_path):
    """ZeRO-3 marks its partitioned parameters with ``ds_id``: chunk calls would each gather the head (a number
    of collectives that differs between ranks), so such a head gets the full-logits loss, decided once."""
    model = _llama("lora")
    batch = _batch(rows=2, length=24)
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    model.get_output_embeddings().weight.ds_id = 0
    sizes = _head_outputs(model)

    loss = trainer.compute_loss(model, dict(batch))
    assert sizes == [2 * 24 * VOCAB]
    del model.get_output_embeddings().weight.ds_id  # decided by the first weighted forward, for the run
    trainer.compute_loss(model, dict(batch))
    assert sizes == [2 * 24 * VOCAB] * 2
    with torch.no_grad():
        expected = weighted_causal_lm_loss(
            model(input_ids=batch["input_ids"]).logits, batch["labels"], batch["loss_weights"]
        )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
