"""KV-cache size per token: MHA/GQA cache K and V per KV head; MLA caches one latent plus the RoPE key.

Sliding-window and chunked-attention layers (Gemma 2/3, Llama 4, Mistral 7B) keep at most
``sliding_window`` tokens per sequence. Without a ``context_len`` the functions count every layer as
global: an upper bound that stays linear in tokens, which is what a planner sizing for the longest
sequence needs. With ``context_len`` (the length of each cached sequence) they give the exact average
per cached token.
"""

from __future__ import annotations

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch
from twinloop.model.precision import bytes_per_element


def _per_layer_elements(arch: ModelArch) -> int:
    if arch.attention == "mla":
        return arch.kv_lora_rank + arch.qk_rope_head_dim
    return arch.n_kv_heads * (arch.head_dim + arch.v_head_dim)


def kv_cache_elements_per_token(arch: ModelArch, include_mtp: bool = False, context_len: float | None = None) -> float:
    """Cached elements per token over all layers.

    MHA/GQA: ``L · n_kv · (head_dim + v_head_dim)`` (= 2·L·n_kv·d_head). MLA: ``L · (kv_lora_rank +
    qk_rope_head_dim)`` (DeepSeek-V3: 61 · 576). ``include_mtp`` adds the MTP modules' attention (used when
    they serve as a speculative-decoding draft). ``context_len``: tokens per sequence; sliding layers then
    hold ``min(context_len, window)`` of them, i.e. a fraction ``min(1, window / context_len)`` per token.
    """
    per_layer = _per_layer_elements(arch)
    mtp = arch.mtp_layers if include_mtp else 0
    if context_len is None or not arch.sliding_window or not arch.n_sliding_layers:
        return (arch.n_layers + mtp) * per_layer
    if not context_len > 0:
        raise InputError("context_len", "", f"must be > 0 tokens, got {context_len}")
    kept = min(1.0, arch.sliding_window / context_len)
    layers = arch.n_global_layers + mtp + (arch.n_layers - arch.n_global_layers) * kept
    return layers * per_layer


def kv_cache_bytes_per_token(
    arch: ModelArch, kv_dtype: str = "bf16", include_mtp: bool = False, context_len: float | None = None
) -> float:
    """KV-cache bytes per token (all layers) in ``kv_dtype`` (fp32/bf16/fp16/fp8/int8/fp4)."""
    return kv_cache_elements_per_token(arch, include_mtp, context_len) * bytes_per_element(kv_dtype, "kv_dtype")


def kv_cache_bytes(
    arch: ModelArch, tokens: float, kv_dtype: str = "bf16", include_mtp: bool = False, context_len: float | None = None
) -> float:
    """KV-cache bytes for ``tokens`` cached tokens (summed over all sequences of ``context_len`` tokens)."""
    return tokens * kv_cache_bytes_per_token(arch, kv_dtype, include_mtp, context_len)
