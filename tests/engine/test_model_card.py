"""Issue 28 item 7: the export's README.md is a Hugging Face model card (``train.engine.model_card``), built from
hand-made metadata, config and summary: front matter the Hub reads (parsed here by huggingface_hub's own
``ModelCard``), Hub ids only where they are ids, the data with per-source counts, evaluations before and after,
the paper tables, and the serving text as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from train.engine.model_card import hub_dataset_id, hub_model_id, model_card

OUT = Path("/exports/tool-model")


def metadata(**changes) -> dict:
    base = {
        "run_dir": "runs/x",
        "weights": "final",
        "merged_adapter": True,
        "dtype": "bfloat16",
        "chat_format": "qwen2_5",
        "format_options": {},
        "chat_template": "chat_template.jinja",
        "stop_tokens": ["<|im_end|>"],
        "tool_call_parser": {
            "vllm": "hermes",
            "sglang": "qwen25",
            "exact": True,
            "notes": "hermes notes.",
            "reasoning_parser": None,
        },
        "serve": {"vllm": f"vllm serve {OUT} --tool-call-parser hermes", "sglang": f"sglang {OUT}"},
        "control_text": {
            "warning": "Control tokens warning.",
            "token_id_requests": {
                "vllm": {"endpoint": "/v1/completions", "field": "prompt", "value": "ids"},
                "sglang": {"endpoint": "/generate", "field": "input_ids", "value": "ids"},
            },
            "encode_as_trained": "tokenize_prompt(...)",
        },
    }
    return {**base, **changes}


def config(**model):
    return OmegaConf.create(
        {
            "model": {
                "name": "qwen2_5_7b",
                "source": "pretrained",
                "path": "Qwen/Qwen2.5-7B-Instruct",
                "lora_target_modules": ["q_proj", "v_proj"],
                **model,
            },
            "peft": {"kind": "lora", "r": 16, "alpha": 32, "target_modules": None},
            "data": {
                "sources": [
                    {"name": "xlam", "inputs": ["hf://datasets/Salesforce/xlam-function-calling-60k/data.json"]},
                    {
                        "name": "toolace",
                        "inputs": [
                            "/home/me/.cache/huggingface/hub/datasets--Team-ACE--ToolACE/snapshots/abc/data.json"
                        ],
                    },
                    {"name": "glaive", "inputs": ["data/mine.jsonl"]},
                ],
                "builder": None,
            },
        }
    )


SUMMARY = {
    "status": "completed",
    "steps": 120,
    "run": {"name": "r", "model": "qwen2_5_7b", "chat_format": "qwen2_5", "recipe": "itc_qwen2_5_7b"},
    "data": {
        "read": 900,
        "train_rows": 850,
        "invalid": 50,
        "per_source": [
            {"source": 0, "name": "xlam", "weight": 3.0, "read": 300, "accepted": 280, "rejected": 20, "weighted": 840},
            {"source": 1, "name": "ace", "weight": 1, "read": 500, "accepted": 480, "rejected": 20, "weighted": 480},
            {"source": 2, "name": "glaive", "weight": 0.5, "read": 100, "accepted": 90, "rejected": 10, "weighted": 45},
        ],
    },
    "eval": {
        "heldout": {
            "before": {"step": 0, "exact_match": 0.25, "name_accuracy": 0.5, "total": 40, "kl": 1.5},
            "after": {"step": 120, "exact_match": 0.75, "name_accuracy": 0.875, "total": 40, "kl": 0.25},
        },
        "bfcl": {"before": None, "after": {"step": 120, "accuracy": 0.5}},
    },
    "paper_tables": {
        "p": {
            "title": "Paper Table 1",
            "columns": ["Acc"],
            "paper": [{"row": "Paper model", "Acc": 90.0}],
            "measured": [{"row": "this run", "Acc": {"unrun": "not in the tiny eval"}}],
            "notes": ["measured on 40 items"],
        }
    },
}


def split(card: str) -> tuple[str, str]:
    assert card.startswith("---\n")
    head, body = card[4:].split("\n---\n", 1)
    return head, body


def test_the_front_matter_is_what_the_hub_reads_and_parses_with_huggingface_hub():
    from huggingface_hub import ModelCard

    card = model_card(metadata(), config(), SUMMARY, OUT, "Qwen/Qwen2.5-7B-Instruct")
    head, _ = split(card)
    assert head == (
        "base_model: Qwen/Qwen2.5-7B-Instruct\n"
        "datasets:\n- Salesforce/xlam-function-calling-60k\n- Team-ACE/ToolACE\n"
        "library_name: transformers\n"
        "pipeline_tag: text-generation\n"
        "tags:\n- tooltrain\n- tool-use\n- function-calling\n- itc_qwen2_5_7b\n- qwen2_5"
    )
    parsed = ModelCard(card)
    assert parsed.data.to_dict() == {
        "base_model": "Qwen/Qwen2.5-7B-Instruct",
        "datasets": ["Salesforce/xlam-function-calling-60k", "Team-ACE/ToolACE"],
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["tooltrain", "tool-use", "function-calling", "itc_qwen2_5_7b", "qwen2_5"],
    }
    assert parsed.text.startswith(
        "\n# r\n\nA tool-calling model trained with tooltrain (recipe `itc_qwen2_5_7b`) from "
        "[Qwen/Qwen2.5-7B-Instruct](https://huggingface.co/Qwen/Qwen2.5-7B-Instruct).\n"
    )


def test_a_license_goes_in_only_when_the_config_carries_one():
    from huggingface_hub import ModelCard

    assert "license" not in ModelCard(model_card(metadata(), config(), SUMMARY, OUT, None)).data.to_dict()
    card = model_card(metadata(), config(license="apache-2.0"), SUMMARY, OUT, None)
    assert ModelCard(card).data.license == "apache-2.0"


def test_the_body_names_base_model_recipe_method_data_and_local_inputs():
    _, body = split(model_card(metadata(), config(), SUMMARY, OUT, "Qwen/Qwen2.5-7B-Instruct"))
    assert (
        "## Training\n\n"
        "- Base model: [Qwen/Qwen2.5-7B-Instruct](https://huggingface.co/Qwen/Qwen2.5-7B-Instruct)\n"
        "- Recipe: `itc_qwen2_5_7b` (`tooltrain train recipe=itc_qwen2_5_7b`)\n"
        "- Method: LoRA (r 16, alpha 32) on q_proj, v_proj, merged into the base weights\n"
        "- Chat format: `qwen2_5`\n"
        "- Run: completed after 120 steps\n"
        "- Weights: `final` of `runs/x`, exported in bfloat16\n"
    ) in body
    assert (
        "## Data\n\n900 conversations read -> 850 training samples; left out 50: 50 invalid.\n\n"
        "| # | reader | inputs | weight | read | accepted | rejected | after weighting |\n"
        "|---|---|---|---:|---:|---:|---:|---:|\n"
        "| 0 | xlam | `hf://datasets/Salesforce/xlam-function-calling-60k/data.json` | 3 | 300 | 280 | 20 | 840 |\n"
    ) in body
    assert "| 2 | glaive | `data/mine.jsonl` | 0.5 | 100 | 90 | 10 | 45 |\n" in body  # a local file: body only


def test_evaluations_before_and_after_are_a_table_per_benchmark():
    _, body = split(model_card(metadata(), config(), SUMMARY, OUT, None))
    assert (
        "### `heldout` on 40 conversations\n\n"
        "| metric | before (step 0, the base model) | after (step 120) |\n"
        "|---|---:|---:|\n"
        "| call exact match | 25.0% | 75.0% |\n"
        "| name accuracy | 50.0% | 87.5% |\n"
        "| kl | 1.5 | 25.0% |\n"
    ) in body
    assert "### `bfcl`\n\n| metric | after (step 120) |\n|---|---:|\n| accuracy | 50.0% |\n" in body
    assert "This export holds the weights of step" not in body


def test_the_paper_tables_are_printed_as_the_summary_prints_them():
    _, body = split(model_card(metadata(), config(), SUMMARY, OUT, None))
    assert "## Paper tables\n\nThe paper's rows, then this run's (from summary.json).\n\n```\nPaper Table 1\n" in body
    assert "  this run     n/a[1]\n" in body and "[1] not in the tiny eval" in body


def test_a_checkpoint_export_says_its_weights_are_not_the_last_evaluated():
    _, body = split(model_card(metadata(weights="checkpoint-100"), config(), SUMMARY, OUT, None))
    assert "This export holds the weights of step 100, not those of the last evaluation.\n" in body


def test_the_serving_text_stays_and_a_card_needs_no_config_or_summary():
    card = model_card(metadata(), None, None, OUT)
    head, body = split(card)
    assert head.startswith("library_name: transformers\npipeline_tag: text-generation\ntags:\n- tooltrain\n")
    assert body.startswith("\n# tool-model\n\nA tool-calling model trained with tooltrain.\n")  # no run name
    assert "## Training" in body and "- Recipe: not recorded\n" in body and "## Data" not in body
    assert "## Evaluation" not in body and "## Paper tables" not in body
    assert "## Chat format\n\nExported by `tooltrain export` from `runs/x` (final). Chat format: `qwen2_5`." in body
    assert f"    vllm serve {OUT} --tool-call-parser hermes\n" in body
    assert "Tool-call parser: `hermes` (vLLM), `qwen25` (SGLang); they read this format's calls" in body
    assert f'tokenizer = AutoTokenizer.from_pretrained("{OUT}")' in body


def test_a_run_without_evaluations_and_a_full_fine_tune_say_so():
    summary = {**SUMMARY, "eval": {}, "paper_tables": {}}
    _, body = split(model_card(metadata(merged_adapter=False), config(), summary, OUT, None))
    assert "## Evaluation\n\nNo evaluation ran during training.\n" in body
    assert "- Method: full fine-tune (peft=none): every weight trained\n" in body
    _, body = split(model_card(metadata(), config(source="config", path=None, name="tiny_llama"), summary, OUT))
    assert "- Base model: none: `tiny_llama` built from its config with random weights (model.source=config)\n" in body
    head, body = split(model_card(metadata(), config(path="/data/models/qwen"), summary, OUT, None))
    assert "- Base model: `/data/models/qwen` (a local folder)\n" in body and "base_model" not in head
    assert "from `/data/models/qwen`.\n" in body


@pytest.mark.parametrize(
    ("path", "local", "expected"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", False, "Qwen/Qwen2.5-7B-Instruct"),
        ("gpt2", False, "gpt2"),
        ("models/qwen", True, None),  # a folder here wins, as in transformers
        ("/data/models/qwen", False, None),
        ("/hf/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/0123", True, "Qwen/Qwen2.5-7B-Instruct"),
        (None, False, None),
    ],
)
def test_the_base_model_is_a_hub_id_only_where_it_is_one(path, local, expected):
    assert hub_model_id(path, local) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("hf://datasets/Team-ACE/ToolACE/data.json", "Team-ACE/ToolACE"),
        ("hf://datasets/Team-ACE/ToolACE@main/data.json", "Team-ACE/ToolACE"),
        ("/c/hub/datasets--Salesforce--xlam-fc-60k/snapshots/1/x.json", "Salesforce/xlam-fc-60k"),
        ("data/ToolACE/data.json", None),
        ("Team-ACE/ToolACE", None),  # a local path as far as the readers go
        ("pkg://train/assets/demo/glaive_sample.json", None),
    ],
)
def test_a_dataset_is_a_hub_id_only_where_it_is_one(path, expected):
    assert hub_dataset_id(path) == expected
