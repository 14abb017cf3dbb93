"""KV-cache size per token: MHA/GQA cache K and V per KV head; MLA caches one latent plus the RoPE key."""

from __future__ import annotations

from twinloop.model.arch import ModelArch
from twinloop.model.precision import bytes_per_element


def kv_cache_elements_per_token(arch: ModelArch, include_mtp: bool = False) -> int:
    """Cached elements per token over all layers.

    MHA/GQA: ``L · n_kv · (head_dim + v_head_dim)`` (= 2·L·n_kv·d_head). MLA: ``L · (kv_lora_rank +
    qk_rope_head_dim)`` (DeepSeek-V3: 61 · 576). ``include_mtp`` adds the MTP modules' attention (used when
    they serve as a speculative-decoding draft).
    """
    n_layers = arch.n_dense_layers + arch.n_moe_layers + (arch.mtp_layers if include_mtp else 0)
    if arch.attention == "mla":
        return n_layers * (arch.kv_lora_rank + arch.qk_rope_head_dim)
    return n_layers * arch.n_kv_heads * (arch.head_dim + arch.v_head_dim)


def kv_cache_bytes_per_token(arch: ModelArch, kv_dtype: str = "bf16", include_mtp: bool = False) -> float:
    """KV-cache bytes per token (all layers) in ``kv_dtype`` (fp32/bf16/fp16/fp8/int8/fp4)."""
    return kv_cache_elements_per_token(arch, include_mtp) * bytes_per_element(kv_dtype, "kv_dtype")


def kv_cache_bytes(arch: ModelArch, tokens: float, kv_dtype: str = "bf16", include_mtp: bool = False) -> float:
    """KV-cache bytes for ``tokens`` cached tokens (summed over all sequences)."""
    return tokens * kv_cache_bytes_per_token(arch, kv_dtype, include_mtp)
