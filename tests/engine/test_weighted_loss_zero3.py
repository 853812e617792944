"""The weighted loss stays chunked under ZeRO-3 and FSDP2 (#26 item 3): the head's weight is a partition outside
the head's call, so the chunks run inside that call and backward's recomputation inside the engine's backward
gathering.

In process, without DeepSpeed: a head whose weight is empty outside its call and its backward, gathered as
ZeRO-3's module hooks gather it (``GatheredInItsCalls``), gives the full-logits loss and gradients with gradient
checkpointing on, never more than a chunk of logits, and is gathered as often as in an unweighted pass.
Under DeepSpeed (slow: torchrun, 1 and 2 CPU ranks, gloo): LoRA, gradient checkpointing on (the combination
whose recomputation once crashed), the engine's ZeRO-3 arguments; the micro-batch losses and the adapter after
SGD steps equal the full-logits reference's, and no vocabulary-wide tensor larger than a chunk is built.
Under FSDP2 (slow: torchrun, 2 CPU ranks, ``fully_shard`` as accelerate wraps, and with the head a unit of its
own): the loss and every gradient equal the full-logits ones, LoRA and full fine-tuning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from train.engine.loss import WeightedLoss, weighted_causal_lm_loss

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # importlib mode: the tiny models, batches and sharded runs beside this file
    sys.path.insert(0, HERE)

from test_weighted_loss_chunked import VOCAB, _batch, _llama, _trainable_grads, _trainer
from weighted_loss_sharded_run import CHUNK
from weighted_loss_sharded_run import VOCAB as RUN_VOCAB

REPO = Path(__file__).resolve().parents[2]
RUN = Path(HERE) / "weighted_loss_sharded_run.py"


class _OnBackward(torch.autograd.Function):
    """The identity; calls ``then()`` when backward passes through it."""

    @staticmethod
    def forward(ctx, tensor, then):
        ctx.then = then
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        ctx.then()
        return grad, None


class GatheredInItsCalls:
    """ZeRO-3's contract for a module's own weight, on one process: an empty partition (marked ``ds_id``) except
    inside the module's call and inside its backward, gathered when backward reaches the module's output and
    released once it has passed the module's input, as ZeRO-3's module hooks do. Counts the gathers."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module, self.full, self.gathers = module, module.weight.data, 0
        module.weight.ds_id = 0
        self.release()
        module.register_forward_pre_hook(self._pre_forward)
        module.register_forward_hook(self._post_forward)

    def gather(self) -> None:
        self.module.weight.data = self.full
        self.gathers += 1

    def release(self) -> None:
        self.module.weight.data = torch.empty(0, dtype=self.full.dtype)

    def _pre_forward(self, module, args):
        self.gather()
        return (_OnBackward.apply(args[0], self.release), *args[1:])

    def _post_forward(self, module, args, out):
        self.release()
        return _OnBackward.apply(out, self.gather)


def _vocabulary_outputs(monkeypatch) -> list[int]:
    """The numel of every vocabulary-wide ``F.linear`` output from now on (forward and recomputation)."""
    sizes: list[int] = []
    linear = torch.nn.functional.linear

    def recording_linear(*args, **kwargs):
        out = linear(*args, **kwargs)
        if out.shape[-1] == VOCAB:
            sizes.append(out.numel())
        return out

    monkeypatch.setattr(torch.nn.functional, "linear", recording_linear)
    return sizes


@pytest.mark.parametrize("kind", ["lora", "untied"])  # a frozen head (LoRA) and a trained one (full fine-tuning)
def test_a_head_gathered_only_in_its_calls_gives_the_full_logits_loss_in_chunks(tmp_path, monkeypatch, kind):
    model = _llama(kind)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    batch = _batch(rows=2, length=24)  # 31 trained positions: 8 chunks of 4
    trainer = _trainer(model, tmp_path, WeightedLoss(chunk=4))
    head = GatheredInItsCalls(model.get_output_embeddings())  # after the Trainer, as DeepSpeed's hooks come
    sizes = _vocabulary_outputs(monkeypatch)
    n = torch.tensor(40)

    loss = trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
    loss.backward()
    grads = _trainable_grads(model)
    assert sizes and max(sizes) <= 4 * VOCAB  # chunks, never the [2, 24, vocabulary] logits
    assert head.gathers == 2  # once for the head's call, once for its backward: as many as an unweighted pass
    assert head.module.weight.numel() == 0  # released

    logits = model(input_ids=batch["input_ids"]).logits
    reference = weighted_causal_lm_loss(logits, batch["labels"], batch["loss_weights"], n)
    reference.backward()
    assert head.gathers == 4
    reference_grads = _trainable_grads(model)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    assert grads.keys() == reference_grads.keys() and grads
    assert ("lm_head.weight" in grads) == (kind == "untied")
    for name, grad in grads.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-5, atol=1e-7, msg=name)


# ---- under DeepSpeed ZeRO-3 and FSDP2 ----------------------------------------------------------------------------


def _sharded_run(out: Path, mode: str, ranks: int) -> None:
    """``weighted_loss_sharded_run.py OUT MODE`` under torchrun."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "TORCH_EXTENSIONS_DIR": str(out / "extensions"),  # stays empty: nothing is compiled
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    result = subprocess.run(
        [*command, str(RUN), str(out), mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def _zero3_run(out: Path, mode: str, ranks: int) -> tuple[list[dict], dict]:
    """A ZeRO-3 run: every rank's records and the adapter before and after training."""
    _sharded_run(out, mode, ranks)
    return json.loads((out / f"{mode}.json").read_text()), torch.load(out / f"{mode}.pt")


@pytest.fixture(scope="module")
def full_logits_run(tmp_path_factory):
    """The reference: the weighted loss on the model's own logits, ZeRO-3 on one rank."""
    return _zero3_run(tmp_path_factory.mktemp("full"), "full", ranks=1)


def _by_micro_batch(records: list[dict]) -> list[float]:
    """The micro-batch losses in the order one rank accumulating them would see them (rank r, step s: r + s*R)."""
    return [loss for step in zip(*(record["losses"] for record in records), strict=True) for loss in step]


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2])
def test_zero3_with_lora_and_checkpointing_trains_the_full_logits_weighted_loss_in_chunks(
    tmp_path, full_logits_run, ranks
):
    full, full_adapter = full_logits_run
    chunked, adapter = _zero3_run(tmp_path, "chunked", ranks)
    assert len(chunked) == ranks
    # the second step's losses follow an SGD step at learning rate 1: equal losses and adapters, equal gradients
    assert _by_micro_batch(chunked) == pytest.approx(_by_micro_batch(full), rel=1e-6)
    assert adapter["after"].keys() == full_adapter["after"].keys() and adapter["after"]
    for name, tensor in adapter["after"].items():
        assert not torch.equal(tensor, adapter["before"][name]), name  # trained
        torch.testing.assert_close(tensor, full_adapter["after"][name], rtol=0, atol=1e-6, msg=name)

    assert full[0]["head"] > CHUNK * RUN_VOCAB  # the reference builds the logits, and this measure sees them
    for record in chunked:
        assert record["head"] == 0  # the head gives no vocabulary-wide output
        assert 0 < record["cross_entropy"] <= CHUNK * RUN_VOCAB  # the loss takes a chunk of logits at a time
    if ranks == 2:  # ranks with different numbers of chunks: no collective per chunk, or they would hang
        assert chunked[0]["cross_entropy_calls"] != chunked[1]["cross_entropy_calls"]


@pytest.mark.slow
def test_fsdp2_gives_the_full_logits_weighted_loss_and_gradients_in_chunks(tmp_path):
    _sharded_run(tmp_path, "fsdp2", ranks=2)
    ranks = json.loads((tmp_path / "fsdp2.json").read_text())
    assert len(ranks) == 2
    for cases in ranks:
        assert sorted(cases) == ["full/layers", "full/layers+head", "lora/layers", "lora/layers+head"]
        for name, case in cases.items():
            chunked, full = case["losses"]
            assert chunked == pytest.approx(full, rel=1e-6), name
            assert case["grads"] == (21 if name.startswith("full") else 16), name  # the same trainable tensors
            assert case["grad_diff"] <= 1e-5 * case["grad_max"], name
            chunked_shapes, full_shapes = case["head_shapes"]
            assert [len(shape) for shape in chunked_shapes] == [2]  # one head call, [batch, seq]: no logits
            assert full_shapes[0][-1] == RUN_VOCAB
