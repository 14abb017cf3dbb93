"""Parsing Hugging Face configs: every supported model_type, bad input, catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.arch import (
    SUPPORTED_MODEL_TYPES,
    catalog_model_names,
    from_hf_config,
    load_config_file,
    load_model,
)

FIXTURES = Path(__file__).parent / "fixtures"
HF_CONFIGS = Path(__file__).parents[1] / "fixtures" / "hf_configs"


def _inner_type(p: Path) -> Any:
    cfg = json.loads(p.read_text())
    return cfg["text_config"].get("model_type") if "text_config" in cfg else cfg.get("model_type")


FIXTURE_TYPES = {
    _inner_type(p): p
    for p in sorted(FIXTURES.glob("*.json")) + sorted(HF_CONFIGS.glob("*.json"))
    if p.stem not in ("bad-json", "unsupported", "mamba-130m-hf", "jamba-v0.1", "published")
}
MOE_TYPES = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "phimoe",
    "llama4_text",
    "gpt_oss",
    "glm4_moe",
)


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_every_supported_type_has_a_parsing_fixture(model_type: str) -> None:
    arch = load_config_file(FIXTURE_TYPES[model_type])
    assert arch.model_type == model_type
    assert arch.n_dense_layers + arch.n_moe_layers == arch.n_layers
    assert arch.is_moe == (model_type in MOE_TYPES)


def test_fixture_specific_fields() -> None:
    assert load_config_file(FIXTURES / "qwen2-0.5b.json").qkv_bias
    q3 = load_config_file(FIXTURES / "qwen3-0.6b.json")
    assert q3.qk_norm and q3.head_dim == 128 and q3.n_heads * q3.head_dim != q3.hidden
    lite = load_config_file(FIXTURES / "deepseek-v2-lite.json")
    assert (lite.attention, lite.q_lora_rank, lite.n_dense_layers, lite.router_bias) == ("mla", 0, 1, False)
    v3 = load_model("deepseek-v3")
    assert (v3.n_dense_layers, v3.n_moe_layers, v3.node_limit, v3.router_bias, v3.mtp_layers) == (3, 58, 4, True, 1)
    assert load_config_file(FIXTURES / "qwen1.5-moe-a2.7b.json").shared_expert_gate


def test_unsupported_model_type_names_the_supported_ones() -> None:
    with pytest.raises(InputError) as exc:
        load_config_file(FIXTURES / "unsupported.json")
    assert "model_type" in str(exc.value) and "'bert'" in str(exc.value)
    for t in SUPPORTED_MODEL_TYPES:
        assert t in str(exc.value)


def test_malformed_json_names_file_and_line() -> None:
    with pytest.raises(InputError) as exc:
        load_config_file(FIXTURES / "bad-json.json")
    assert "bad-json.json" in str(exc.value) and "line 4" in str(exc.value)


def test_missing_field_is_named() -> None:
    cfg = json.loads((FIXTURES / "tiny-llama.json").read_text())
    del cfg["intermediate_size"]
    with pytest.raises(InputError, match="intermediate_size"):
        from_hf_config(cfg, "x", "x.json")


def test_underscore_keys_are_ignored() -> None:
    cfg = json.loads((FIXTURES / "tiny-llama.json").read_text())
    cfg["_anything"] = {"weird": True}
    assert from_hf_config(cfg, "tiny-llama") == load_config_file(FIXTURES / "tiny-llama.json")


def test_catalog_loads_and_unknown_name_suggests() -> None:
    names = catalog_model_names()
    assert {"llama-3-8b", "llama-3-70b", "llama-3-405b", "mixtral-8x7b", "deepseek-v3", "gpt-175b"} <= set(names)
    for name in names:
        assert load_model(name).name == name
    with pytest.raises(InputError, match="llama-3-70b"):
        load_model("llama-3-70")


@given(
    hidden=st.integers(-4, 4096),
    layers=st.one_of(st.integers(-2, 200), st.text(max_size=3), st.none()),
    heads=st.integers(1, 64),
)
def test_parser_accepts_or_raises_input_error(hidden: int, layers: Any, heads: int) -> None:
    cfg: dict[str, Any] = {
        "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "intermediate_size": 64, "vocab_size": 100, "max_position_embeddings": 128,
    }  # fmt: skip
    try:
        arch = from_hf_config(cfg, "h")
    except InputError:
        return
    assert arch.hidden == hidden > 0 and arch.n_layers == layers and hidden % heads == 0


def test_load_model_from_path_and_folder(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text((FIXTURES / "tiny-llama.json").read_text())
    by_folder = load_model(str(folder))
    by_file = load_model(str(folder / "config.json"))
    assert by_folder == by_file and by_folder.name == "my-model"
    with pytest.raises(InputError, match="no such config file"):
        load_model(str(tmp_path / "missing.json"))


def test_gpt2_heads_must_divide_hidden() -> None:
    cfg = json.loads((FIXTURES / "gpt2.json").read_text())
    cfg["n_head"] = 7
    with pytest.raises(InputError, match="n_head"):
        from_hf_config(cfg, "gpt2")
