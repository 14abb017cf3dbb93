"""Users' own Hugging Face configs, round 3: Kimi K2's own model_type, and checkpoints that ship quantized.

Kimi K2 (moonshotai/Kimi-K2-Instruct) is DeepSeek-V3's architecture under ``model_type: kimi_k2``; its fixture
(tests/fixtures/users_round3/kimi-k2-instruct.json) holds the fields of its config.json. Published: "1T total
parameters, 32B activated" (model card), 1.04T in the Kimi K2 report (arXiv 2507.20534).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.model.arch import load_config_file
from twinloop.model.hf_quant import checkpoint_format
from twinloop.model.params import param_counts

FIXTURES = Path(__file__).parents[1] / "fixtures" / "users_round3"
KIMI = FIXTURES / "kimi-k2-instruct.json"


def test_kimi_k2_reads_as_deepseek_v3_with_its_published_size() -> None:
    arch = load_config_file(KIMI)  # before: "unsupported model_type 'kimi_k2'"
    p = param_counts(arch)
    assert arch.attention == "mla" and arch.n_routed_experts == 384 and arch.mtp_layers == 0
    assert p.total / 1.04e12 - 1 == pytest.approx(0.0, abs=0.02), f"{p.total:,}"
    assert p.active / 32e9 - 1 == pytest.approx(0.0, abs=0.04), f"{p.active:,}"


def test_kimi_k25_wrapper_reads_its_text_config() -> None:
    text = {k: v for k, v in json.loads(KIMI.read_text()).items() if k not in ("model_type", "quantization_config")}
    wrapped = {"model_type": "kimi_k25", "vision_config": {"vt_num_hidden_layers": 27}, "text_config": text}
    from twinloop.model.hf_config import parse_hf_config

    arch = parse_hf_config(wrapped, "kimi-k2.5")
    assert arch.text_only_of == "kimi_k25" and param_counts(arch).total == param_counts(load_config_file(KIMI)).total


_W8F = {"num_bits": 8, "type": "float"}  # Neural Magic's FP8 checkpoints
_W8I = {"num_bits": 8, "type": "int"}


@pytest.mark.parametrize(
    ("quant", "weights", "experts"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8", None),  # DeepSeek-V3, Kimi K2
        ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, "fp8", None),  # Llama 3.1 405B FP8
        ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "bf16", "mxfp4"),  # gpt-oss
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4", None),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": _W8F}}}, "fp8", None),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": _W8I}}}, "int8", None),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8", None),
    ],
)
def test_quantization_config_names_the_checkpoint_dtype(quant: dict[str, Any], weights: str, experts: str) -> None:
    fmt = checkpoint_format({"quantization_config": quant}, "c.json")
    assert fmt is not None and (fmt.weight_dtype, fmt.expert_dtype) == (weights, experts)


@pytest.mark.parametrize(
    "quant",
    [
        {"quant_method": "gptq", "bits": 4, "group_size": 128},
        {"quant_method": "awq", "bits": 4, "version": "gemm"},
        {"quant_method": "bitsandbytes", "load_in_4bit": True},
        {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}},
        "fp8",
    ],
)
def test_a_quantization_without_a_dtype_is_one_error_naming_the_field(quant: Any) -> None:
    with pytest.raises(InputError, match=r"c\.json: quantization_config") as exc:
        checkpoint_format({"quantization_config": quant}, "c.json")
    assert "\n" not in str(exc.value)


def test_no_quantization_config_is_none() -> None:
    assert checkpoint_format({"model_type": "llama"}, "c.json") is None


def test_plan_serve_weighs_an_fp8_checkpoint_in_fp8(cli_json: Callable[..., Any]) -> None:
    # The catalog's DeepSeek-V3 is its released config.json, quantization_config included (FP8 e4m3, 128x128 blocks).
    out = cli_json("plan", "serve", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8")
    # Before: 1,342 GB of BF16 weights, refused on 8 H200 (or planned in BF16 on more GPUs).
    assert out["weight_dtype"] == "fp8" and out["weight_bytes_total"] == pytest.approx(671e9 * 1.0, rel=0.01)
    bf16 = cli_json("plan", "serve", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "16", "--tp", "16",
                    "--weight-dtype", "bf16")  # fmt: skip
    # Twice the bytes, less the embeddings and norms that stay in BF16 either way.
    assert bf16["weight_dtype"] == "bf16" and 1.98 < bf16["weight_bytes_total"] / out["weight_bytes_total"] < 2


def test_plan_serve_refuses_a_4bit_gptq_checkpoint_in_one_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    cfg = json.loads(KIMI.read_text()) | {"quantization_config": {"quant_method": "gptq", "bits": 4}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    res = cli("plan", "serve", "--model", str(path), "--gpus", "16", "--tp", "16")
    assert res.exit_code == 2 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert f"{path}: quantization_config.quant_method" in line and "4-bit" in line and "--weight-dtype" in line
    ok = cli("plan", "serve", "--model", str(path), "--gpus", "16", "--tp", "16", "--weight-dtype", "fp4", "--json")
    assert ok.exit_code == 0, ok.stderr


# Configs as their repositories publish them (rope_scaling dicts, null sliding windows, explicit head_dim, longrope
# lists, torch_dtype, an FP8 quantization_config): all read before this round too; kept as the record of it.
# Published sizes: the model cards (Llama 3.1 8B/70B: 8.03B/70.6B on the Hub; Mistral NeMo: 12B, 12.2B on the Hub;
# Qwen2.5-72B: 72.7B; Phi-3-mini-128k: 3.8B).
@pytest.mark.parametrize(
    ("name", "published", "gap"),
    [
        ("llama-3.1-8b", 8.03e9, 0.001),
        ("llama-3.1-70b-fp8", 70.6e9, 0.001),
        ("mistral-nemo", 12.2e9, 0.005),
        ("qwen2.5-72b", 72.7e9, 0.001),
        ("phi-3-mini-128k", 3.8e9, 0.01),
    ],
)
def test_published_configs_count_their_published_size(name: str, published: float, gap: float) -> None:
    total = param_counts(load_config_file(FIXTURES / f"{name}.json")).total
    assert abs(total / published - 1) <= gap, f"{total:,}"


def test_a_config_without_num_key_value_heads_is_multi_head() -> None:
    cfg = json.loads((FIXTURES / "llama-3.1-8b.json").read_text())
    del cfg["num_key_value_heads"]
    from twinloop.model.hf_config import parse_hf_config

    arch = parse_hf_config(cfg, "mha")
    assert arch.attention == "mha" and arch.n_kv_heads == arch.n_heads == 32


def test_qwen25_vl_reads_its_language_model_flat_or_nested() -> None:
    """Qwen2.5-VL as first released keeps the language model's fields at the top level; re-saved by newer
    transformers it nests them in ``text_config`` (``qwen2_5_vl_text``). Before: "unsupported model_type".
    The language model is Qwen2.5-7B's: 7.62B ("7.61B" on its model card); the vision tower is not counted.
    """
    from twinloop.model.hf_config import parse_hf_config

    flat = json.loads((FIXTURES / "qwen2.5-vl-7b-instruct.json").read_text())
    arch = load_config_file(FIXTURES / "qwen2.5-vl-7b-instruct.json")
    assert arch.text_only_of == "qwen2_5_vl" and arch.qkv_bias and arch.n_kv_heads == 4
    assert param_counts(arch).total == 7_615_616_512
    text = {k: v for k, v in flat.items() if k not in ("vision_config", "architectures")}
    nested = {"model_type": "qwen2_5_vl", "vision_config": flat["vision_config"],
              "text_config": {**text, "model_type": "qwen2_5_vl_text"}}  # fmt: skip
    assert param_counts(parse_hf_config(nested, "vl")).total == 7_615_616_512
