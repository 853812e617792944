"""Evaluation under ZeRO-3 gathers the whole model once per evaluation, not once per generated token (#26 item 10).

ZeRO-3 is emulated on the tiny recipe's model (random init, CPU): its parameters carry DeepSpeed's marks (``ds_id``,
``ds_numel``) and a parameter offload registers a forward hook on every module that holds parameters, counting the
gathers DeepSpeed's hooks would make (one per module forward: every new token). ``deepspeed.zero.GatheredParameters``
is replaced by a recording context; trl's ``remove_hooks``/``add_hooks`` run for real on the emulated offload,
reached, as in training, through an accelerate-style wrapper whose ``.optimizer`` holds ``parameter_offload``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import pytest

from train.engine import distributed, gather
from train.engine import eval_callback as callback
from train.evaluation.generate import HFBackend, generate

GIB = 1024**3


class FakeZero3:
    """DeepSpeed ZeRO-3's parameter offload as evaluation sees it: every forward of a module with parameters
    gathers them (``fetches``), through hooks trl's ``remove_hooks`` takes off and ``add_hooks`` puts back."""

    def __init__(self, model):
        self.module, self.fetches = model, 0
        self.forward_hooks, self.backward_hooks = [], []
        for index, param in enumerate(model.parameters()):
            param.ds_id, param.ds_numel, param.ds_active_sub_modules = index, param.numel(), set()
        model.ds_external_parameters = list  # no parameter outside its module
        self._register_deepspeed_module(model)

    def _register_deepspeed_module(self, module):  # what trl's add_hooks calls
        for sub in module.modules():
            if next(sub.parameters(recurse=False), None) is not None:
                self.forward_hooks.append(sub.register_forward_pre_hook(self.fetch))

    def fetch(self, module, args):
        self.fetches += 1

    def undo(self):
        for hook in self.forward_hooks:
            hook.remove()
        for param in self.module.parameters():
            del param.ds_id, param.ds_numel, param.ds_active_sub_modules
        del self.module.ds_external_parameters


class RecordingGather:
    """``deepspeed.zero.GatheredParameters``: records each gather (the weights are whole already on one CPU)."""

    gathers: ClassVar[list[int]] = []

    def __init__(self, params, modifier_rank=None, fwd_module=None, enabled=True):
        self.params = list(params)

    def __enter__(self):
        RecordingGather.gathers.append(len(self.params))

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny recipe's model and tokenizer, its chat format, and heldout items from the demo conversations."""
    import torch

    from train.data.inputs import resolve_input
    from train.engine.config import compose
    from train.engine.model import build_model
    from train.formats import get_format
    from train.schema import Conversation
    from train.sources import get_reader
    from train.tokenizers import load_tokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLTRAIN_CACHE", str(tmp_path_factory.mktemp("cache")))
        cfg = compose(["recipe=tiny", "eval=heldout", "data.eval_fraction=0.2"])
        tok = load_tokenizer(cfg.model.tokenizer)
        model = build_model(cfg.model, len(tok), torch.float32, "sdpa", seed=42)
    demo = resolve_input("pkg://train/assets/demo/glaive_sample.json")
    convs = [c for c in get_reader("glaive")([demo]) if isinstance(c, Conversation)]
    items = callback.load_benchmarks(cfg.eval, convs)["heldout"].items
    return model, tok, get_format(cfg.model.chat_format), items


@pytest.fixture
def zero3(tiny, monkeypatch):
    """The tiny model under emulated ZeRO-3, the Trainer's optimizer for it, and the recorded gathers."""
    import deepspeed

    monkeypatch.setattr(deepspeed.zero, "GatheredParameters", RecordingGather)
    RecordingGather.gathers = []
    offload = FakeZero3(tiny[0])
    optimizer = SimpleNamespace(optimizer=SimpleNamespace(parameter_offload=offload))  # accelerate's wrapper
    yield offload, optimizer
    offload.undo()


def evaluation(tiny, monkeypatch, prompts: int, new_tokens: int, gather_weights: str = "auto"):
    """A GenerationEval of ``prompts`` heldout items on a 2-rank ZeRO-3 world's flag, with what it asked of the
    backend (``synced_gpus``), what it generated, and what it announced."""
    import torch

    model, tok, fmt, items = tiny
    seen: dict[str, list] = {"synced_gpus": [], "generations": [], "announced": []}

    def backend(*args, synced_gpus=False, **kwargs):
        seen["synced_gpus"].append(synced_gpus)
        return HFBackend(*args, **kwargs)  # one process: lock-step would wait on ranks that are not there

    def recorded(*args):
        generations = generate(*args)
        seen["generations"].extend(g.to_dict() for g in generations)
        return generations

    monkeypatch.setattr(callback, "HFBackend", backend)
    monkeypatch.setattr(callback, "generate", recorded)
    torch.set_num_threads(1)
    run = callback.GenerationEval(
        {"heldout": callback.Benchmark(callback.get_task("heldout", {}), items[:prompts], new_tokens)},
        fmt,
        tok,
        log=lambda logged: None,
        world=distributed.World(0, 0, 1, 1, 0),
        synced_gpus=True,  # what generation_needs_sync says for ZeRO-3 on several ranks
        batch_size=2,
        announce=seen["announced"].append,
        gather_weights=gather_weights,
    )
    return run, model, seen


@pytest.mark.parametrize(("prompts", "new_tokens"), [(2, 3), (4, 10)])
def test_zero3_evaluation_gathers_the_whole_model_once_whatever_it_generates(
    tiny, zero3, monkeypatch, prompts, new_tokens
):
    offload, optimizer = zero3
    run, model, seen = evaluation(tiny, monkeypatch, prompts, new_tokens)
    run.evaluate(model, 2, optimizer=optimizer)
    assert RecordingGather.gathers == [len(list(model.parameters()))]  # every parameter, once
    assert offload.fetches == 0  # no module gathered its own weights for a token
    assert seen["synced_gpus"] == [False]  # whole weights on every rank: no forward waits on another
    assert sum(g["new_tokens"] for g in seen["generations"]) > prompts  # it did generate tokens
    # ZeRO-3's hooks are back for training: the next forward gathers module by module again
    import torch

    model(input_ids=torch.tensor([[1, 2, 3]]))
    assert offload.fetches > 0 and RecordingGather.gathers == [len(list(model.parameters()))]


def test_the_trainers_optimizer_reaches_the_evaluation(tiny, zero3, monkeypatch):
    offload, optimizer = zero3
    run, model, _ = evaluation(tiny, monkeypatch, 2, 3)
    state = SimpleNamespace(global_step=3, max_steps=3, is_world_process_zero=False)
    run.on_step_end(None, state, SimpleNamespace(should_log=True), model=model, optimizer=optimizer)
    state.global_step = 0
    run.at_start = True
    run.on_train_begin(None, state, SimpleNamespace(should_log=True), model=model, optimizer=optimizer)
    assert len(RecordingGather.gathers) == 2 and offload.fetches == 0  # at the end and at start, once each


def test_whole_weights_generate_what_the_per_token_path_generates(tiny, zero3, monkeypatch):
    offload, optimizer = zero3
    run, model, gathered = evaluation(tiny, monkeypatch, 4, 10)
    run.evaluate(model, 2, optimizer=optimizer)
    per_token, model, today = evaluation(tiny, monkeypatch, 4, 10, gather_weights="never")
    per_token.evaluate(model, 2, optimizer=optimizer)
    assert gathered["generations"] == today["generations"] and len(today["generations"]) == 4
    assert RecordingGather.gathers == [len(list(model.parameters()))]  # never: today's path, no gather
    assert offload.fetches > 10 * 2 and today["synced_gpus"] == [True]  # a gather per module per token, lock-step
    assert today["announced"] == [today["announced"][0]]  # never is the config's choice: nothing to explain


def test_a_model_that_does_not_fit_keeps_the_per_token_path_and_says_why(tiny, zero3, monkeypatch):
    offload, optimizer = zero3
    need = gather.full_bytes(tiny[0])
    monkeypatch.setattr(gather, "free_bytes", lambda device: need)  # fits, but leaves generation no room
    run, model, seen = evaluation(tiny, monkeypatch, 2, 3)
    run.evaluate(model, 2, optimizer=optimizer)
    assert RecordingGather.gathers == [] and offload.fetches > 0 and seen["synced_gpus"] == [True]
    note = seen["announced"][1]
    assert note.startswith("eval: generating with ZeRO-3's per-token gathers (slower): the whole model (")
    assert note.endswith("; eval.gather_weights=always forces it")
    run, model, seen = evaluation(tiny, monkeypatch, 2, 3, gather_weights="always")
    run.evaluate(model, 2, optimizer=optimizer)
    assert len(RecordingGather.gathers) == 1 and seen["synced_gpus"] == [False]


def test_one_rank_that_cannot_hold_the_model_keeps_every_rank_on_the_per_token_path(tiny, zero3, monkeypatch):
    _, optimizer = zero3
    monkeypatch.setattr(gather.distributed, "any_rank", lambda flag: True)  # another rank says it does not fit
    run, model, seen = evaluation(tiny, monkeypatch, 2, 3)
    run.evaluate(model, 2, optimizer=optimizer)
    assert RecordingGather.gathers == [] and seen["synced_gpus"] == [True]
    assert seen["announced"][1].endswith("the whole model does not fit another rank")


def test_models_zero3_does_not_partition_are_left_alone(tiny, monkeypatch):
    import deepspeed

    monkeypatch.setattr(deepspeed.zero, "GatheredParameters", RecordingGather)
    RecordingGather.gathers = []
    run, model, seen = evaluation(tiny, monkeypatch, 2, 3)
    run.evaluate(model, 2)  # DDP, ZeRO-2, one GPU: no ds_id, nothing to gather
    assert RecordingGather.gathers == [] and seen["synced_gpus"] == [True] and len(seen["announced"]) == 1


def test_zero3_without_its_optimizer_says_so(tiny, zero3, monkeypatch):
    run, model, seen = evaluation(tiny, monkeypatch, 2, 3)
    run.evaluate(model, 2, optimizer=None)
    assert RecordingGather.gathers == [] and seen["synced_gpus"] == [True]
    assert seen["announced"][1].endswith("no ZeRO-3 optimizer holds its hooks")


def test_the_decision_weighs_the_full_size_against_free_memory():
    # Llama-2-70B in bf16 (toolverifier on 8x80 GB): 140 GB does not fit one GPU with 79 GiB free
    gather_70b, note = gather.gather_decision("auto", 69_000_000_000 * 2, 79 * GIB)
    assert not gather_70b and "(128.5 GiB) does not fit 80% of a rank's free memory (79.0 GiB)" in note
    assert gather.gather_decision("auto", 8_000_000_000 * 2, 60 * GIB) == (True, None)  # an 8B LoRA
    assert gather.gather_decision("auto", 49 * GIB, 60 * GIB)[0] is False  # generation keeps a fifth
    assert gather.gather_decision("always", 10**15, 0) == (True, None)
    assert gather.gather_decision("never", 1, 10**15) == (False, None)


def test_gather_modes_are_checked():
    assert [gather.gather_mode(value) for value in ("auto", "always", "never", None)] == [
        "auto",
        "always",
        "never",
        "auto",
    ]
    with pytest.raises(gather.ConfigError, match=r"eval.gather_weights='sometimes': valid: auto, always, never"):
        gather.gather_mode("sometimes")


def test_the_zero3_optimizer_is_found_through_its_wrappers():
    import torch

    zero = SimpleNamespace(parameter_offload=object())
    accelerate_wrapper = SimpleNamespace(optimizer=zero)
    assert gather.zero3_holder(accelerate_wrapper) is accelerate_wrapper
    assert gather.zero3_holder(SimpleNamespace(optimizer=accelerate_wrapper)) is accelerate_wrapper
    plain = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    assert gather.zero3_holder(plain) is None and gather.zero3_holder(SimpleNamespace(optimizer=plain)) is None
    assert gather.zero3_holder(None) is None


class FakeBlock:
    """An FSDP2 module as ``fsdp2_unsharded`` drives it: its calls recorded, in order, with every block's."""

    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def set_reshard_after_forward(self, value, recurse=True):
        self.calls.append((self.name, "reshard_after_forward", value, recurse))

    def unshard(self):
        self.calls.append((self.name, "unshard"))

    def reshard(self):
        self.calls.append((self.name, "reshard"))


def test_fsdp2_blocks_stay_unsharded_through_the_evaluation_and_go_back_after(monkeypatch):
    import torch

    calls: list[tuple] = []
    blocks = [FakeBlock(name, calls) for name in ("root", "layer0", "layer1")]
    monkeypatch.setattr(gather, "fsdp2_blocks", lambda model: blocks)
    with gather.whole_weights(torch.nn.Linear(2, 2), None, "auto") as whole:
        calls.append("generate")
    assert whole is True
    assert calls == [
        ("layer0", "reshard_after_forward", False, False),  # the root never reshards after forward: left alone
        ("layer1", "reshard_after_forward", False, False),
        ("root", "unshard"),
        ("layer0", "unshard"),
        ("layer1", "unshard"),
        "generate",
        ("layer0", "reshard_after_forward", True, False),  # as training shards them
        ("layer1", "reshard_after_forward", True, False),
        ("root", "reshard"),
        ("layer0", "reshard"),
        ("layer1", "reshard"),
    ]
    calls.clear()
    monkeypatch.setattr(gather, "free_bytes", lambda device: 0)
    notes: list[str] = []
    with gather.whole_weights(torch.nn.Linear(2, 2), None, "auto", notes.append) as whole:
        pass
    assert whole is False and calls == [] and notes[0].startswith("eval: generating with FSDP2's per-token gathers")


# ---- FSDP2, for real, on two CPU ranks -------------------------------------------------------------------

FSDP2_RANK = """
import os, pathlib
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from torch.distributed.fsdp._fully_shard import _fsdp_param_group
from transformers import LlamaConfig, LlamaForCausalLM
from train.engine import gather

dist.init_process_group("gloo")
rank = dist.get_rank()
gathers = [0]
all_gather = _fsdp_param_group.foreach_all_gather
def counted(*args, **kwargs):
    gathers[0] += 1
    return all_gather(*args, **kwargs)
_fsdp_param_group.foreach_all_gather = counted
torch.manual_seed(0)
config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=4)
model = LlamaForCausalLM(config)
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)
register_fsdp_forward_method(model, "generate")  # what the Trainer does under FSDP2
ids = torch.tensor([[1, 2, 3, 4 + rank]])
new = 10 + 5 * rank  # ranks generate different lengths

def generate(synced):
    with torch.no_grad():
        out = model.eval().generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                    min_new_tokens=new, do_sample=False, synced_gpus=synced, pad_token_id=0)
    model.train()
    return out, gathers[0]

gathers[0] = 0
with gather.whole_weights(model, None, "auto") as whole:  # before any forward, as eval.at_start does
    once, whole_gathers = generate(not whole)
gathers[0] = 0
sharded = all(not g.is_unsharded for m in gather.fsdp2_blocks(model) for g in m._get_fsdp_state()._fsdp_param_groups)
per_token, token_gathers = generate(True)
gathers[0] = 0
model(input_ids=ids, labels=ids).loss.backward()
same = torch.equal(once, per_token)
# each rank writes its own file: lines two ranks print to one pipe came back with one missing under a loaded --all
result = " ".join(map(str, (rank, whole, whole_gathers, token_gathers, same, sharded, gathers[0])))
pathlib.Path(os.environ["RESULT_DIR"], f"rank{rank}.txt").write_text(result)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_fsdp2_generation_unshards_each_block_once_and_training_reshards_again(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "fsdp2_rank.py"
    script.write_text(FSDP2_RANK)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo), "RESULT_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    results = [(tmp_path / f"rank{rank}.txt").read_text().split() for rank in (0, 1)]
    # rank, whole, gathers whole, gathers per token, same tokens, resharded after, gathers of a training fwd+bwd
    assert results == [
        ["0", "True", "4", "46", "True", "True", "7"],  # 4 FSDP modules once; 15 tokens x 3 blocks + the root
        ["1", "True", "4", "46", "True", "True", "7"],  # the root once, each block in forward and again in backward
    ]


def test_eval_gather_weights_is_a_config_choice_checked_at_compose_time():
    from train.engine.config import compose

    assert compose(["recipe=tiny", "eval.gather_weights=never"]).eval.gather_weights.value == "never"
    assert compose(["recipe=tiny"]).eval.gather_weights.value == "auto"
    with pytest.raises(Exception) as caught:  # Hydra's ConfigCompositionException, OmegaConf's error as its cause
        compose(["recipe=tiny", "eval.gather_weights=sometimes"])
    message = f"{caught.value} {caught.value.__cause__ or ''}"
    assert "sometimes" in message and all(choice in message for choice in ("auto", "always", "never"))
