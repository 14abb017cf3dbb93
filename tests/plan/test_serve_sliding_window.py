"""Serving plans see sliding-window / chunked attention: those layers hold at most their window per sequence."""

from __future__ import annotations

from twinloop.model.arch import load_model
from twinloop.model.kv_cache import kv_cache_bytes_per_token
from twinloop.plan.serve import build_request, plan_serve


def test_gemma2_kv_per_token_falls_with_long_prompts() -> None:
    short = plan_serve(build_request(model="gemma-2-9b", gpu="h100-sxm", prompt_tokens=1024, output_tokens=256))
    full = plan_serve(build_request(model="gemma-2-9b", gpu="h100-sxm", prompt_tokens=7936, output_tokens=256))
    arch = load_model("gemma-2-9b")
    assert short.kv_cache_bytes_per_token == kv_cache_bytes_per_token(arch)  # below the 4,096 window
    # at its 8,192-token context: 21 global layers + 21 sliding layers keeping 4,096 of 8,192 tokens;
    # 8 KV heads x (256 + 256) x 2 bytes
    assert full.kv_cache_bytes_per_token == (21 + 21 * 0.5) * 8 * 512 * 2
    assert full.max_concurrent_sequences_hbm > 0 and not full.warnings


def test_models_without_a_window_are_unchanged() -> None:
    p = plan_serve(build_request(model="llama-3-70b", gpus=8, tp=8, prompt_tokens=32512, output_tokens=256))
    assert p.kv_cache_bytes_per_token == 2 * 80 * 8 * 128 * 2
