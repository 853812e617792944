"""Packed vs unpacked loss (and LoRA gradients) through the engine's own data path, per attention kernel.

The engine feeds the Trainer packed rows (``train.data.packing``: PackedRows + the collator ``train.engine.run.
packed_collator`` picks for the kernel): samples concatenated, position ids restarting at 0 per sample, no attention
mask. sdpa/eager/flex get the plain batch and transformers builds the block-diagonal mask from the positions;
flash-family kernels (``train.engine.attention.is_flash_family``) get the batch with its samples' boundaries
(``SampleBoundaries``: ``cu_seq_lens_q/k``), because transformers derives them only for a batch of one row.

For the first packed rows holding >= 2 samples this computes each sample's per-token NLL inside its packed row (micro
batch of --micro-batch rows, through the engine's collator) and alone (batch of 1), and compares
  * the mean loss over all trained tokens (tolerance --tol),
  * the gradients of a LoRA adapter (B initialised non-zero) of sum(NLL): relative L2 difference;
and runs a negative control that must differ, so the check can see cross-sample attention: for sdpa/eager/flex the
same rows with NON-restarting positions; for a flash-family kernel the same rows WITHOUT the boundaries (what the
engine fed flash kernels before SampleBoundaries: at micro batch >= 2 the kernel attends across samples).

Flash kernels: ``flash_attention_2`` is checked when flash_attn is importable; always, ``torch_flash_emulation``:
transformers' own flash code path (the part that decides where samples begin) with pure-torch stand-ins for the two
kernels, registered exactly as the CPU tests do (tests/varlen_emulation.py). On cuda that checks the engine's
boundaries through transformers' varlen path in the GPU image's transformers, with no flash_attn wheel.

  python benchmarks/gpu/packing_check.py --out pack.json                 # on a GPU: every kernel, bf16 (+ sdpa fp32)
  python benchmarks/gpu/packing_check.py --device cpu --tiny --out p.json  # the CPU smoke (fp32, fewer rows)
Exit 1 when a variant fails isolation (or its control does not detect contamination).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # train/ from this checkout; tests/varlen_emulation.py

EMULATION = "torch_flash_emulation"  # tests/varlen_emulation.py's NAME (asserted when it is installed)
GPU_VARIANTS = "sdpa:bfloat16,sdpa:float32,eager:bfloat16,flex_attention:bfloat16,torch_flash_emulation:bfloat16"
CPU_VARIANTS = "sdpa:float32,eager:float32,torch_flash_emulation:float32"
MODEL_INPUTS = ("input_ids", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")


class Patches:
    """The two calls of pytest's monkeypatch that tests/varlen_emulation.py's ``install`` makes (no pytest on the GPU
    machine); the patches last for this process."""

    @staticmethod
    def setitem(mapping, key, value) -> None:
        mapping[key] = value

    @staticmethod
    def setattr(target, name, value) -> None:
        if not hasattr(target, name):  # as monkeypatch(raising=True): a transformers that moved them fails loudly
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        setattr(target, name, value)


def token_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-position NLL (fp32) of next-token targets (0 where ignored); shape of labels[..., 1:]."""
    return F.cross_entropy(
        logits[..., :-1, :].float().transpose(1, 2), labels[..., 1:], ignore_index=-100, reduction="none"
    )


def forward_nll(model, batch: dict) -> torch.Tensor:
    """NLL of a collated batch, the model getting what the Trainer would pass it (labels stay here)."""
    return token_nll(model(**{k: v for k, v in batch.items() if k in MODEL_INPUTS}).logits, batch["labels"])


def lora_model(cfg, vocab: int, attn: str, dtype: torch.dtype, device: str):
    from train.engine.model import apply_lora, build_model

    with torch.device(device):
        model = build_model(cfg.model, vocab, dtype, attn, seed=cfg.seed)
    model = apply_lora(model, cfg.peft, list(cfg.model.lora_target_modules))
    with torch.no_grad():  # LoRA B starts at 0 (then A gets no gradient): give it values
        g = torch.Generator(device="cpu").manual_seed(0)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_((torch.randn(p.shape, generator=g) * 0.05).to(p))
    model.eval()  # no LoRA dropout: both computations must see the same function
    return model


def multi_sample_rows(data, count: int) -> tuple[list, list[list[int]]]:
    """The first ``count`` packed rows holding >= 2 samples, and each row's sample indices."""
    rows, members = [], []
    for i in range(len(data.rows)):
        idx = data.rows.order[data.rows.starts[i] : data.rows.starts[i + 1]]
        if len(idx) >= 2:
            rows.append(data.rows[i])
            members.append([int(j) for j in idx])
        if len(rows) == count:
            break
    return rows, members


def control_batch(batch: dict, attn: str, device: str) -> dict:
    """What a kernel that ignores the packing sees: flash-family without boundaries; others with flat positions."""
    from train.engine.attention import is_flash_family

    if is_flash_family(attn):
        return {k: v for k, v in batch.items() if not k.startswith(("cu_seq_lens", "max_length"))}
    flat = torch.arange(batch["input_ids"].shape[1], device=device).expand_as(batch["input_ids"])
    return {**batch, "position_ids": flat}


def run_variant(cfg, data, attn: str, dtype_name: str, args) -> dict:
    from train.engine.run import packed_collator

    dev = args.device
    tok = data.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    model = lora_model(cfg, len(tok), attn, getattr(torch, dtype_name), dev)
    lora = [p for p in model.parameters() if p.requires_grad]
    rows, members = multi_sample_rows(data, args.rows)
    collate = packed_collator(pad_id, cfg.data.max_seq_len, attn)  # the engine's own choice for this kernel
    sums = {"packed": 0.0, "alone": 0.0, "control": 0.0, "n": 0}
    per_sample = []
    grad_packed = [torch.zeros_like(p, dtype=torch.float32) for p in lora]
    grad_alone = [torch.zeros_like(p, dtype=torch.float32) for p in lora]
    t0 = time.perf_counter()
    for b in range(0, len(rows), args.micro_batch):
        collated = collate(rows[b : b + args.micro_batch])
        batch = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in collated.items()}
        model.zero_grad(set_to_none=True)
        packed = forward_nll(model, batch)
        packed.sum().backward()
        for acc, p in zip(grad_packed, lora):
            acc += p.grad.float()
        packed = packed.detach()
        with torch.no_grad():
            control = forward_nll(model, control_batch(batch, attn, dev))
        width = batch["input_ids"].shape[1]
        for r, sample_ids in enumerate(members[b : b + args.micro_batch]):
            start = 0
            for s in sample_ids:
                ids, trained, _ = data.built.train.arrays(s)
                n = len(ids)
                # alone = batch of 1, right-padded to the row width: causal attention makes the padding invisible
                # to the sample's own positions, and one static shape keeps flex_attention from recompiling
                x = torch.full((1, width), pad_id, dtype=torch.long, device=dev)
                x[0, :n] = torch.as_tensor(ids, device=dev)
                lab = torch.full_like(x, -100)
                lab[0, :n] = torch.where(torch.as_tensor(trained, device=dev).bool(), x[0, :n], -100)
                model.zero_grad(set_to_none=True)
                alone = forward_nll(model, {"input_ids": x, "labels": lab})[0]
                alone.sum().backward()
                for acc, p in zip(grad_alone, lora):
                    if p.grad is not None:
                        acc += p.grad.float()
                alone = alone.detach()
                mask = lab[0, 1:n] != -100  # packed position p predicts token p+1: positions start .. start+n-2
                pk, ct = packed[r, start : start + n - 1][mask], control[r, start : start + n - 1][mask]
                al = alone[: n - 1][mask]
                if al.numel():
                    per_sample.append((abs(pk.mean() - al.mean()).item(), abs(ct.mean() - al.mean()).item()))
                    sums["packed"] += pk.sum().item()
                    sums["alone"] += al.sum().item()
                    sums["control"] += ct.sum().item()
                    sums["n"] += int(al.numel())
                start += n
    return summarize(attn, dtype_name, rows, members, sums, per_sample, grad_packed, grad_alone, t0, args)


def summarize(attn, dtype_name, rows, members, sums, per_sample, grad_packed, grad_alone, t0, args) -> dict:
    n = max(sums["n"], 1)
    num = sum(((a - b) ** 2).sum() for a, b in zip(grad_packed, grad_alone)).sqrt().item()
    den = sum((b**2).sum() for b in grad_alone).sqrt().item()
    res = {
        "attn": attn, "dtype": dtype_name, "rows": len(rows), "samples": sum(map(len, members)), "tokens": sums["n"],
        "loss_alone": sums["alone"] / n, "loss_packed": sums["packed"] / n, "loss_control": sums["control"] / n,
        "max_sample_diff": max((p for p, _ in per_sample), default=None),
        "max_sample_diff_control": max((c for _, c in per_sample), default=None),
        "lora_grad_rel_diff": num / max(den, 1e-30), "seconds": round(time.perf_counter() - t0, 2),
    }  # fmt: skip
    if not per_sample:
        return {**res, "error": "no packed row holds two samples", "isolated": False, "control_detects": False}
    res["diff"] = abs(res["loss_packed"] - res["loss_alone"])
    res["diff_control"] = abs(res["loss_control"] - res["loss_alone"])
    grad_tol = args.grad_tol_fp32 if dtype_name == "float32" else args.grad_tol_bf16
    res["isolated"] = res["diff"] <= args.tol and res["lora_grad_rel_diff"] <= grad_tol
    res["control_detects"] = res["max_sample_diff_control"] > 10 * max(res["max_sample_diff"], args.tol)
    return res


def install_flash_kernels(variants: list[str]) -> None:
    """Register the pure-torch flash stand-in when a variant asks for it (as tests/engine/test_packed_varlen.py)."""
    if any(spec.split(":")[0] == EMULATION for spec in variants):
        import varlen_emulation

        assert varlen_emulation.install(Patches()) == EMULATION


def default_variants(device: str, tiny: bool) -> str:
    if tiny or not device.startswith("cuda"):
        return CPU_VARIANTS
    real_flash = importlib.util.find_spec("flash_attn") is not None
    return GPU_VARIANTS + (",flash_attention_2:bfloat16" if real_flash else "")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="the CPU smoke: fp32 variants, 2 rows")
    ap.add_argument("--variants", default=None, help="ATTN:DTYPE,...; default: every kernel this machine has")
    ap.add_argument("--rows", type=int, default=None, help="packed rows checked (default 6; 2 with --tiny)")
    ap.add_argument("--micro-batch", type=int, default=2, help=">= 2: where flash kernels need the boundaries")
    ap.add_argument("--init-range", type=float, default=0.2, help="weights' std: larger than 0.02 so context matters")
    ap.add_argument("--tol", type=float, default=1e-3, help="max |mean loss packed - unpacked|")
    ap.add_argument("--grad-tol-fp32", type=float, default=1e-4)
    ap.add_argument("--grad-tol-bf16", type=float, default=3e-2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--workdir", default="/tmp/tt_packcheck")
    ap.add_argument("overrides", nargs="*", help="extra config overrides (recipe=tiny is first)")
    args = ap.parse_args(argv)
    args.variants = args.variants or default_variants(args.device, args.tiny)
    args.rows = args.rows or (2 if args.tiny else 6)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import transformers

    from train.engine import distributed
    from train.engine.config import compose
    from train.engine.run import prepare_data, set_up

    cfg = compose(["recipe=tiny", f"output_dir={args.workdir}", f"+model.arch.initializer_range={args.init_range}",
                   "peft.dropout=0.0", *args.overrides])  # fmt: skip
    data = prepare_data(cfg, set_up(cfg, distributed.World.from_env(), Path(cfg.output_dir)))
    variants = args.variants.split(",")
    install_flash_kernels(variants)
    out = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__, "micro_batch": args.micro_batch,
        "flash_attn_importable": importlib.util.find_spec("flash_attn") is not None, "variants": [],
    }  # fmt: skip
    ok = True
    for spec in variants:
        attn, dtype_name = spec.split(":")
        try:
            res = run_variant(cfg, data, attn, dtype_name, args)
        except Exception as err:  # noqa: BLE001 - one kernel failing must not hide the others
            traceback.print_exc()
            res = {"attn": attn, "dtype": dtype_name, "error": f"{type(err).__name__}: {str(err)[:300]}",
                   "isolated": False, "control_detects": False}  # fmt: skip
        out["variants"].append(res)
        ok = ok and res["isolated"] and res["control_detects"]
        print(json.dumps(res), flush=True)
    out["ok"] = ok
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "variants"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
