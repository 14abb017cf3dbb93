"""Hostile model files (issue 19): every bad field is one InputError naming file, field and range; the
planner never sees a negative, non-finite, mistyped or absurd size; random JSON never escapes as anything
but InputError."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.arch import from_hf_config, load_config_file
from twinloop.model.flops import forward_flops_per_token
from twinloop.model.kv_cache import kv_cache_elements_per_token
from twinloop.model.params import param_counts

FIXTURES = Path(__file__).parent / "fixtures"
HF = Path(__file__).parents[1] / "fixtures" / "hf_configs"
BASES = {
    "llama": FIXTURES / "llama-2-7b.json",
    "gpt2": FIXTURES / "gpt2.json",
    "deepseek_v2": FIXTURES / "deepseek-v2-lite.json",
    "deepseek_v3": FIXTURES / "tiny-deepseek-v3.json",
    "qwen3_moe": FIXTURES / "qwen3-30b-a3b.json",
    "gemma3": HF / "gemma-3-4b-it.json",
    "falcon": HF / "falcon-40b.json",
    "phimoe": HF / "phi-3.5-moe-instruct.json",
    "llama4": HF / "llama-4-maverick-17b-128e.json",
    "gpt_oss": HF / "gpt-oss-20b.json",
}


def base(kind: str) -> dict[str, Any]:
    return dict(json.loads(BASES[kind].read_text()))


def one_line_error(cfg: Any, source: str = "bad.json") -> str:
    with pytest.raises(InputError) as exc:
        from_hf_config(cfg, "bad", source)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(source)
    return text


@pytest.mark.parametrize(
    ("kind", "field"),
    [("qwen3_moe", "moe_intermediate_size"), ("gpt2", "n_inner"), ("deepseek_v3", "q_lora_rank"),
     ("deepseek_v2", "moe_intermediate_size"), ("llama", "intermediate_size"), ("falcon", "ffn_hidden_size")],
)  # fmt: skip
def test_negative_sizes_are_refused(kind: str, field: str) -> None:
    cfg = base(kind)
    cfg[field] = -(10**12)
    text = one_line_error(cfg)
    assert field in text and "[" in text  # names the allowed range


@pytest.mark.parametrize("field", ["tie_word_embeddings", "attention_bias"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1])
def test_booleans_must_be_json_booleans(field: str, value: Any) -> None:
    cfg = base("llama")
    cfg[field] = value
    assert field in one_line_error(cfg)


@pytest.mark.parametrize("value", ["abc", float("nan"), float("inf"), [8], {"n": 8}, True, 2.5, -8, 0])
def test_mistyped_integers_are_refused(value: Any) -> None:
    cfg = base("llama")
    cfg["num_key_value_heads"] = value
    assert "num_key_value_heads" in one_line_error(cfg)


def test_integral_float_is_accepted() -> None:
    cfg = base("llama")
    cfg["hidden_size"] = 4096.0
    assert from_hf_config(cfg, "x").hidden == 4096


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [("llama", "num_hidden_layers", 10**18), ("qwen3_moe", "num_experts", 2**80), ("llama", "vocab_size", 10**15),
     ("llama", "max_position_embeddings", 10**40), ("deepseek_v3", "n_routed_experts", 2**80),
     ("phimoe", "num_local_experts", 10**9), ("llama4", "interleave_moe_layer_step", 10**18),
     ("qwen3_moe", "num_experts", 1025), ("qwen3_moe", "num_experts_per_tok", 65)],
)  # fmt: skip
def test_absurd_sizes_are_refused_fast(kind: str, field: str, value: int) -> None:
    cfg = base(kind)
    target = cfg.get("text_config", cfg)
    target[field] = value
    start = time.perf_counter()
    text = one_line_error(cfg)
    assert field in text and time.perf_counter() - start < 0.5


def test_top_k_above_experts_is_refused() -> None:
    cfg = base("qwen3_moe")
    cfg["num_experts_per_tok"] = cfg["num_experts"] + 1
    assert "num_experts_per_tok" in one_line_error(cfg)


def test_mlp_only_layers_validated() -> None:
    cfg = base("qwen3_moe")
    cfg["mlp_only_layers"] = [0, "x"]
    assert "mlp_only_layers[1]" in one_line_error(cfg)
    cfg["mlp_only_layers"] = [10**6]
    assert "mlp_only_layers[0]" in one_line_error(cfg)


def test_nested_field_is_named_with_its_path() -> None:
    cfg = base("gemma3")
    cfg["text_config"]["num_hidden_layers"] = -1
    assert "text_config.num_hidden_layers" in one_line_error(cfg)


# --- files --------------------------------------------------------------------------------------------


def _load_error(path: Path) -> str:
    with pytest.raises(InputError) as exc:
        load_config_file(path)
    text = str(exc.value)
    assert "\n" not in text and str(path) in text
    return text


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"model_type": "llama", "name": "caf\xe9"}'.encode("latin-1"))
    assert "UTF-8" in _load_error(path)


def test_deeply_nested_json(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert "nested" in _load_error(path)


def test_five_thousand_digit_integer(tmp_path: Path) -> None:
    path = tmp_path / "digits.json"
    path.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}")
    assert "invalid JSON value" in _load_error(path)


def test_directory_and_device_paths(tmp_path: Path) -> None:
    assert "cannot read" in _load_error(tmp_path)
    if Path("/dev/zero").exists():
        start = time.perf_counter()
        _load_error(Path("/dev/zero"))  # size-capped read, then refused
        assert time.perf_counter() - start < 5


def test_plan_exits_2_with_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    cfg = base("qwen3_moe")
    cfg["moe_intermediate_size"] = -(10**12)
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(cfg))
    result = cli("plan", "train", "--model", str(path), "--gpu", "h100-sxm", "--gpus", "8", "--json")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "moe_intermediate_size" in lines[0] and "neg.json" in lines[0]
    assert result.stdout.strip() == ""


def test_plan_refuses_absurd_layers_quickly(cli: Callable[..., Any], tmp_path: Path) -> None:
    cfg = base("llama")
    cfg["num_hidden_layers"] = 10**18
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(cfg))
    start = time.perf_counter()
    result = cli("plan", "train", "--model", str(path), "--gpu", "h100-sxm", "--gpus", "8")
    assert result.exit_code == 2 and time.perf_counter() - start < 5


# --- fuzz ----------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
FIELDS = sorted({k for p in BASES.values() for k in json.loads(p.read_text())} | {"text_config", "model_type"})


def _check_loaded_or_input_error(cfg: Any) -> None:
    try:
        arch = from_hf_config(cfg, "fuzz", "fuzz.json")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    p = param_counts(arch)
    assert p.total > 0 and 0 < p.active <= p.total
    assert kv_cache_elements_per_token(arch) > 0 and forward_flops_per_token(arch, 128.0).total > 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=json_values)
def test_fuzz_random_json(cfg: Any) -> None:
    _check_loaded_or_input_error(cfg)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(BASES)),
    edits=st.dictionaries(st.sampled_from(FIELDS), json_values, min_size=1, max_size=3),
    nested=st.booleans(),
)
def test_fuzz_real_configs_with_random_fields(kind: str, edits: dict[str, Any], nested: bool) -> None:
    cfg = base(kind)
    target = cfg["text_config"] if nested and isinstance(cfg.get("text_config"), dict) else cfg
    target.update(edits)
    _check_loaded_or_input_error(cfg)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200))
def test_fuzz_file_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "config.json"
    path.write_bytes(data)
    with contextlib.suppress(InputError):  # anything else escapes and fails the test
        load_config_file(path)
