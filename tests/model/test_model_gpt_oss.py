"""gpt-oss (``model_type: gpt_oss``): parameters against OpenAI's model card, sinks, windows, MXFP4 experts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.model.arch import from_hf_config, load_model
from twinloop.model.params import param_counts
from twinloop.plan.serve import build_request, plan_serve

CATALOG = Path(__file__).parents[2] / "src" / "twinloop" / "catalog" / "models"
GIB = 2**30

#: gpt-oss model card (OpenAI, arXiv:2508.10925): checkpoint size with MXFP4 experts, GiB, printed to 0.1. Its
#: parameter counts are rows of tests/fixtures/hf_configs/published.json.
CHECKPOINT_GIB = {"gpt-oss-120b": 60.8, "gpt-oss-20b": 12.8}


@pytest.mark.parametrize("name", sorted(CHECKPOINT_GIB))
def test_mxfp4_experts_weigh_the_checkpoint_size(name: str) -> None:
    plan = plan_serve(build_request(model=name, gpu="h100-sxm", gpus=1, tp=1, expert_dtype="mxfp4", prompt_tokens=512))
    assert plan.weight_bytes_total / GIB == pytest.approx(CHECKPOINT_GIB[name], abs=0.1)
    assert plan.expert_dtype == "mxfp4" and plan.weight_dtype == "bf16"


def test_120b_needs_mxfp4_experts_to_fit_one_h100() -> None:
    with pytest.raises(InputError, match="--expert-dtype") as exc:
        plan_serve(build_request(model="gpt-oss-120b", gpu="h100-sxm", gpus=1, tp=1))
    assert "\n" not in str(exc.value)


def test_unknown_expert_dtype_is_one_line() -> None:
    with pytest.raises(InputError, match=r"--expert-dtype.*mxfp4"):
        plan_serve(build_request(model="gpt-oss-20b", gpu="h100-sxm", gpus=1, tp=1, expert_dtype="fp3"))


def test_expert_dtype_equal_to_weights_changes_nothing() -> None:
    kw = dict(model="mixtral-8x7b", gpu="h100-sxm", gpus=8, tp=8, weight_dtype="fp8", prompt_tokens=512)
    same = plan_serve(build_request(**kw, expert_dtype="fp8"))
    default = plan_serve(build_request(**kw))
    assert same.weight_bytes_total == default.weight_bytes_total and same.tpot_s == default.tpot_s


def _tiny(**fields: object) -> dict[str, object]:
    return {
        "model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
        "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 4096, **fields,
    }  # fmt: skip


def test_every_weight_bias_and_sink_is_counted() -> None:
    p = param_counts(from_hf_config(_tiny(), "tiny"))
    h, i, q, kv, e = 64, 32, 4 * 16, 2 * 16, 8
    attention = (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + 4  # biased Q/K/V/O and one sink per head
    experts = e * (h * 2 * i + 2 * i + i * h + h)  # gate_up with its bias, down with its bias
    router = h * e + e
    layer = attention + experts + router + 2 * h  # two RMSNorms
    assert p.total == 4 * layer + h + 2 * 100 * h  # final norm, untied embedding and head


def test_layer_types_and_defaults() -> None:
    # transformers' default layer_types: even layers (i + 1 odd) slide; window 128 from the class defaults
    a = from_hf_config(_tiny(num_hidden_layers=5), "x")
    assert (a.n_sliding_layers, a.sliding_window) == (3, 128)
    b = from_hf_config(_tiny(layer_types=["full_attention"] * 4, sliding_window=128), "x")
    assert b.n_sliding_layers == 0
    sparse = from_hf_config({"model_type": "gpt_oss"}, "x")  # every size from the config class: the 120b
    assert param_counts(sparse).total == param_counts(load_model("gpt-oss-120b")).total


def test_catalog_file_is_the_hub_config_layout() -> None:
    cfg = json.loads((CATALOG / "gpt-oss-20b.json").read_text())
    assert cfg["quantization_config"]["quant_method"] == "mxfp4" and len(cfg["layer_types"]) == 24
