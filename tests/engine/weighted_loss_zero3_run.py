"""One ZeRO-3 training run of a tiny LoRA Llama with per-token loss weights, for test_weighted_loss_zero3.

Run under torchrun, one or more CPU ranks (gloo):

    python -m torch.distributed.run --standalone --nproc_per_node=N tests/engine/weighted_loss_zero3_run.py OUT MODE

MODE ``chunked`` trains with the engine's ``WeightedLoss``; ``full`` with the reference, the weighted loss on the
model's own logits. Both run the engine's ZeRO-3 TrainingArguments (``training_arguments_for``) with gradient
checkpointing on, LoRA on the attention projections, and SGD at learning rate 1 without clipping, so the
adapter after a step is the adapter before it minus the gradient. Rank 0 writes ``OUT/MODE.json`` (every rank's
micro-batch losses, the largest vocabulary-wide output of the head module and input of ``F.cross_entropy``, and
the number of ``F.cross_entropy`` calls) and ``OUT/MODE.pt`` (the adapter before and after training, gathered).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

VOCAB = 97
CHUNK = 8
ROWS = 8  # 2 steps of 2 micro-batches of 2 rows on one rank, or of one micro-batch of 2 rows on each of 2 ranks
STEPS = 2


def tiny_lora_llama():
    """A tiny random untied Llama with LoRA on q/k/v/o, B random too (every adapter gradient nonzero)."""
    from omegaconf import OmegaConf
    from transformers import LlamaConfig, LlamaForCausalLM

    from train.engine.model import apply_lora

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    peft_cfg = OmegaConf.create({"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": None})
    model = apply_lora(LlamaForCausalLM(config), peft_cfg, ["q_proj", "k_proj", "v_proj", "o_proj"])
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    return model


def weighted_rows() -> list[dict]:
    """Rows of 20 to 34 tokens, labels the input ids after a prompt, random weights where trained."""
    from train.data.packing import IGNORE_INDEX

    generator = torch.Generator().manual_seed(1)
    rows = []
    for index in range(ROWS):
        length = 20 + 2 * index
        ids = torch.randint(1, VOCAB, (length,), generator=generator).tolist()
        prompt = 5 + index % 4
        labels = [IGNORE_INDEX] * prompt + ids[prompt:]
        weights = [0.0] * prompt + (torch.rand(length - prompt, generator=generator) * 3).tolist()
        rows.append({"input_ids": ids, "labels": labels, "loss_weights": weights})
    return rows


class FullLogitsLoss:
    """The reference: the weighted loss on the model's own [batch, seq, vocab] logits."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.weights = None
        model.register_forward_pre_hook(self._take_weights, with_kwargs=True)

    def _take_weights(self, module, args, kwargs):
        kwargs = dict(kwargs)
        self.weights = kwargs.pop("loss_weights")
        return args, kwargs

    def __call__(self, outputs, labels, num_items_in_batch=None):
        from train.engine.loss import weighted_causal_lm_loss

        return weighted_causal_lm_loss(outputs["logits"], labels, self.weights, num_items_in_batch)


def record_vocabulary_outputs(model: torch.nn.Module) -> dict[str, int]:
    """The largest vocabulary-wide tensor (numel) the head module gives and the loss's ``cross_entropy`` takes,
    in forward and in backward's recomputations, and the number of ``cross_entropy`` calls. (``F.cross_entropy``,
    not ``F.linear``: ZeRO-3 replaces ``F.linear`` with its own when it starts.)"""
    import torch.nn.functional as F

    seen = {"head": 0, "cross_entropy": 0, "cross_entropy_calls": 0}
    cross_entropy = F.cross_entropy

    def recording_cross_entropy(logits, *args, **kwargs):
        seen["cross_entropy"] = max(seen["cross_entropy"], logits.numel())
        seen["cross_entropy_calls"] += 1
        return cross_entropy(logits, *args, **kwargs)

    F.cross_entropy = recording_cross_entropy

    def record_head(module, args, out):
        if out.dim() and out.shape[-1] == VOCAB:
            seen["head"] = max(seen["head"], out.numel())

    model.get_output_embeddings().register_forward_hook(record_head)
    return seen


def adapter_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The LoRA tensors, gathered (ZeRO-3 keeps each rank's partition only)."""
    import deepspeed

    adapter = {name: param for name, param in model.named_parameters() if "lora_" in name}
    with deepspeed.zero.GatheredParameters(list(adapter.values())):
        return {name: param.detach().clone() for name, param in adapter.items()}


def main(out: Path, mode: str) -> None:
    import torch.distributed as dist
    from omegaconf import OmegaConf
    from transformers import Trainer, TrainingArguments

    from train.data.packing import PaddedCollator
    from train.engine.distributed import World, training_arguments_for
    from train.engine.loss import WeightedLoss

    model = tiny_lora_llama()  # built before the TrainingArguments, as run.py builds it: no zero.Init
    before = {name: param.detach().clone() for name, param in model.named_parameters() if "lora_" in name}
    world = World.from_env()
    dist_cfg = OmegaConf.create(
        {
            "strategy": "zero3",
            "zero_stage": None,
            "offload_optimizer": False,
            "offload_params": False,
            "gradient_checkpointing": True,
        }
    )
    grad_accum = 2 // world.world_size
    args = TrainingArguments(
        output_dir=str(out / mode),
        per_device_train_batch_size=2,
        gradient_accumulation_steps=grad_accum,
        max_steps=STEPS,
        learning_rate=1.0,
        optim="sgd",
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        remove_unused_columns=False,
        seed=0,
        data_seed=0,
        **training_arguments_for(dist_cfg, world, 2, grad_accum, 0.0, False),
    )
    if mode == "chunked":
        loss_func = WeightedLoss(chunk=CHUNK)
        loss_func.attach(model)
    else:
        loss_func = FullLogitsLoss(model)
    losses: list[float] = []

    def recording_loss(outputs, labels, num_items_in_batch=None):
        loss = loss_func(outputs, labels, num_items_in_batch)
        losses.append(loss.item())
        return loss

    seen = record_vocabulary_outputs(model)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=weighted_rows(),
        data_collator=PaddedCollator(pad_token_id=0),
        compute_loss_func=recording_loss,
    )
    trainer.train()

    gathered: list = [None] * world.world_size
    dist.all_gather_object(gathered, {"losses": losses, **seen})
    after = adapter_of(model)
    if world.is_main:
        torch.save({"before": before, "after": after}, out / f"{mode}.pt")
        (out / f"{mode}.json").write_text(json.dumps(gathered))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
