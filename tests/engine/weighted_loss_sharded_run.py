"""Sharded training runs of a tiny Llama with per-token loss weights, for test_weighted_loss_zero3.

Run under torchrun, one or more CPU ranks (gloo):

    python -m torch.distributed.run --standalone --nproc_per_node=N tests/engine/weighted_loss_sharded_run.py OUT MODE

MODE ``chunked`` trains with the engine's ``WeightedLoss`` under DeepSpeed ZeRO-3; ``full`` with the reference,
the weighted loss on the model's own logits. Both run the engine's ZeRO-3 TrainingArguments
(``training_arguments_for``) with gradient checkpointing on, LoRA on the attention projections, and SGD at
learning rate 1 without clipping, so the adapter after a step is the adapter before it minus the gradient.
Rank 0 writes ``OUT/MODE.json`` (every rank's micro-batch losses, the largest vocabulary-wide output of the head
module and input of ``F.cross_entropy``, and the number of ``F.cross_entropy`` calls) and ``OUT/MODE.pt`` (the
adapter before and after training, gathered).

MODE ``fsdp2`` compares the two losses under FSDP2 instead (``fsdp2_main``): raw ``fully_shard``, because
accelerate runs FSDP2 only on GPUs.
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


def tiny_llama():
    """A tiny random untied Llama."""
    from transformers import LlamaConfig, LlamaForCausalLM

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
    return LlamaForCausalLM(config)


def tiny_lora_llama():
    """``tiny_llama`` with LoRA on q/k/v/o, B random too (every adapter gradient nonzero)."""
    from omegaconf import OmegaConf

    from train.engine.model import apply_lora

    peft_cfg = OmegaConf.create({"kind": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": None})
    model = apply_lora(tiny_llama(), peft_cfg, ["q_proj", "k_proj", "v_proj", "o_proj"])
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


def fsdp2_main(out: Path) -> None:
    """FSDP2 (``fully_shard``, as accelerate wraps a model: each decoder layer, then the root; or the head as a
    unit of its own too, resharded after its call), one forward and backward of each rank's 2 rows with the
    weighted loss chunked and on the full logits. Rank 0 writes ``OUT/fsdp2.json``: per case and rank, both
    losses, the largest gradient difference and the largest gradient, and the head module's output shapes."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from train.data.packing import PaddedCollator

    dist.init_process_group("gloo")
    rank, mesh = dist.get_rank(), init_device_mesh("cpu", (dist.get_world_size(),))
    batch = PaddedCollator(pad_token_id=0)(weighted_rows()[2 * rank : 2 * rank + 2])
    results = {}
    for kind in ("lora", "full"):
        for units in ("layers", "layers+head"):
            chunked, full = (fsdp2_pass(kind, units, mode, mesh, dict(batch)) for mode in ("chunked", "full"))
            results[f"{kind}/{units}"] = {
                "losses": [chunked[0], full[0]],
                "grad_diff": max((chunked[1][name] - grad).abs().max().item() for name, grad in full[1].items()),
                "grad_max": max(grad.abs().max().item() for grad in full[1].values()),
                "grads": sorted(chunked[1]) == sorted(full[1]) and len(full[1]),
                "head_shapes": [chunked[2], full[2]],
            }
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, results)
    if rank == 0:
        (out / "fsdp2.json").write_text(json.dumps(gathered))
    dist.destroy_process_group()


def fsdp2_pass(kind: str, units: str, mode: str, mesh, batch: dict) -> tuple[float, dict, list]:
    """One forward and backward under ``fully_shard``: the loss, the full trainable gradients, the head's output
    shapes."""
    from torch.distributed.fsdp import fully_shard

    from train.engine.loss import WeightedLoss

    model = tiny_lora_llama() if kind == "lora" else tiny_llama()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    loss_func = WeightedLoss(chunk=CHUNK) if mode == "chunked" else FullLogitsLoss(model)
    if mode == "chunked":
        loss_func.attach(model)
    base = model.get_base_model() if kind == "lora" else model
    for layer in base.model.layers:
        fully_shard(layer, mesh=mesh)
    if units == "layers+head":
        fully_shard(base.lm_head, mesh=mesh)
    fully_shard(model, mesh=mesh)
    shapes: list = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, out: shapes.append(list(out.shape)))
    labels = batch.pop("labels")
    loss = loss_func(model(**batch), labels, torch.tensor(60))
    loss.backward()
    grads = {name: param.grad.full_tensor() for name, param in model.named_parameters() if param.requires_grad}
    return loss.item(), grads, shapes


if __name__ == "__main__":
    if sys.argv[2] == "fsdp2":
        fsdp2_main(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]), sys.argv[2])
