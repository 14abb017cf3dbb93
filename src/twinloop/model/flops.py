"""FLOPs per token by operation class, training FLOPs with recompute, and bytes of weights.

Matmul FLOPs are ``2 · in · out`` per linear layer (biases and element-wise work ignored, as in
Narayanan et al. 2021). Attention core FLOPs (QK^T and softmax·V) are ``2 · ctx · n_heads · (d_qk + d_v)``
per layer, where ``ctx`` is the number of keys each query attends to: the caller decides (a decode step
at position p: ``p``; causal training averages ``seq/2``; Narayanan's formula counts the full ``seq``).
The input embedding is a lookup (0 FLOPs). Results are split by op class so a planner can time each class
at its own dtype rate (:meth:`FlopBreakdown.by_dtype`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch
from twinloop.model.params import (
    attention_params_per_layer,
    expert_params,
    ffn_params,
    param_counts,
    shared_expert_params_per_layer,
)
from twinloop.model.precision import PrecisionPolicy

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


@dataclass(frozen=True)
class FlopBreakdown:
    """FLOPs per token by op class (names match :data:`~twinloop.model.precision.OP_CLASSES`).

    Attributes:
        attn_proj: Q/K/V/O (and MLA down/up) projections.
        attn_core: QK^T and softmax·V.
        dense_ffn: FFNs of dense layers.
        expert_ffn: routed experts (top-k, or all with ``active_only=False``) plus shared experts.
        router: MoE gate logits.
        lm_head: output projection.
    """

    attn_proj: float = 0.0
    attn_core: float = 0.0
    dense_ffn: float = 0.0
    expert_ffn: float = 0.0
    router: float = 0.0
    lm_head: float = 0.0

    @property
    def total(self) -> float:
        """All FLOPs per token."""
        return sum(self.by_op_class().values())

    def by_op_class(self) -> dict[str, float]:
        """``{op_class: FLOPs}``."""
        return {f.name: float(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def by_dtype(self, policy: PrecisionPolicy) -> dict[str, float]:
        """FLOPs summed per compute dtype of ``policy``; time = Σ flops / GpuSpec.tflops(dtype)."""
        out: dict[str, float] = {}
        for op_class, flops in self.by_op_class().items():
            dtype = policy.dtype(op_class)
            out[dtype] = out.get(dtype, 0.0) + flops
        return out

    def scaled(self, factor: float) -> FlopBreakdown:
        """Every class multiplied by ``factor`` (e.g. tokens per step)."""
        return FlopBreakdown(**{k: v * factor for k, v in self.by_op_class().items()})

    def __add__(self, other: FlopBreakdown) -> FlopBreakdown:
        a, b = self.by_op_class(), other.by_op_class()
        return FlopBreakdown(**{k: a[k] + b[k] for k in a})


def _no_bias(arch: ModelArch) -> ModelArch:
    return dataclasses.replace(arch, linear_bias=False, qkv_bias=False, o_bias=False, mlp_bias=False)


def _layer_flops(
    arch: ModelArch, context_len: float, n_dense: int, n_moe: int, active_only: bool, keys: float | None = None
) -> FlopBreakdown:
    """FLOPs of ``n_dense`` + ``n_moe`` blocks; ``keys`` is the attended keys summed over those blocks
    (default: every block attends to ``context_len``).
    """
    w = _no_bias(arch)
    n_layers = n_dense + n_moe
    experts = arch.experts_per_token if active_only else arch.n_routed_experts
    qk_dim = arch.head_dim  # MLA: nope + rope
    keys = n_layers * context_len if keys is None else keys
    return FlopBreakdown(
        attn_proj=2.0 * n_layers * attention_params_per_layer(w),
        attn_core=2.0 * keys * arch.n_heads * (qk_dim + arch.v_head_dim),
        dense_ffn=2.0 * n_dense * ffn_params(w, arch.ffn_hidden),
        expert_ffn=2.0 * n_moe * (experts * expert_params(w) + shared_expert_params_per_layer(w)),
        router=2.0 * n_moe * arch.hidden * arch.n_routed_experts if arch.is_moe else 0.0,
    )


def forward_flops_per_token(
    arch: ModelArch, context_len: float, active_only: bool = True, include_mtp: bool = False
) -> FlopBreakdown:
    """Forward FLOPs for one token attending to ``context_len`` keys.

    Args:
        arch: the model.
        context_len: keys per query (tokens), see the module docstring.
        active_only: MoE layers run the top-k routed experts (False: every expert, an upper bound).
        include_mtp: add the MTP modules (eh_proj, one block each and the shared LM head), as in training.
    """
    if context_len < 0:
        raise InputError("context_len", "", f"must be >= 0, got {context_len}")
    # sliding-window / chunked layers attend to at most ``sliding_window`` keys (Gemma 2/3, Llama 4)
    keys = arch.attended_keys(context_len)
    out = _layer_flops(arch, context_len, arch.n_dense_layers, arch.n_moe_layers, active_only, keys)
    out = out + FlopBreakdown(lm_head=2.0 * arch.vocab * arch.hidden)
    if include_mtp and arch.mtp_layers:
        moe = arch.is_moe
        block = _layer_flops(arch, context_len, 0 if moe else 1, 1 if moe else 0, active_only)
        eh_proj = FlopBreakdown(attn_proj=2.0 * 2 * arch.hidden * arch.hidden)  # the 2h→h merge projection
        out = out + (block + eh_proj + FlopBreakdown(lm_head=2.0 * arch.vocab * arch.hidden)).scaled(arch.mtp_layers)
    return out


def training_flops_per_token(
    arch: ModelArch,
    seq_len: int,
    recompute: Recompute = "none",
    causal: bool = True,
    include_mtp: bool = False,
) -> FlopBreakdown:
    """Hardware FLOPs per trained token: forward + backward (2× forward) + recomputation.

    ``full`` recompute runs the layers' forward once more (not the LM head); ``selective`` recomputes only
    the attention core (Korthikanti et al. 2022). ``causal`` averages the attention context to ``seq/2``
    (FlashAttention skips the masked half); ``causal=False`` counts ``seq`` keys as Narayanan et al. do.
    """
    if recompute not in RECOMPUTE_MODES:
        raise InputError("recompute", "", f"unknown mode {recompute!r} (allowed: {', '.join(RECOMPUTE_MODES)})")
    ctx = seq_len / 2 if causal else float(seq_len)
    fwd = forward_flops_per_token(arch, ctx, include_mtp=include_mtp)
    total = fwd.scaled(3.0)
    if recompute == "full":
        total = total + dataclasses.replace(fwd, lm_head=0.0)
    elif recompute == "selective":
        total = total + FlopBreakdown(attn_core=fwd.attn_core)
    return total


def model_flops_per_token(arch: ModelArch, seq_len: int, causal: bool = True) -> float:
    """Model FLOPs per trained token (3× forward, no recompute): the numerator of MFU."""
    return training_flops_per_token(arch, seq_len, "none", causal).total


_PARAM_GROUP_OP_CLASS = {
    "attention": "attn_proj",
    "dense_ffn": "dense_ffn",
    "moe_experts": "expert_ffn",
    "shared_experts": "expert_ffn",
    "router": "router",
    "embedding": "embedding",
    "position_embedding": "embedding",
    "lm_head": "lm_head",
    "norms": "norm",
}


def weight_bytes(arch: ModelArch, policy: PrecisionPolicy, include_mtp: bool = False) -> float:
    """Bytes of all weights, each group in its op class's dtype (FP8 experts, BF16 embedding, ...)."""
    counts = param_counts(arch)
    total = sum(getattr(counts, group) * policy.bytes(op) for group, op in _PARAM_GROUP_OP_CLASS.items())
    if include_mtp:
        total += counts.mtp * policy.bytes("expert_ffn" if arch.is_moe else "dense_ffn")
    return float(total)


def expected_experts_touched(arch: ModelArch, batch_tokens: float) -> float:
    """Expected distinct routed experts per MoE layer hit by ``batch_tokens`` tokens under uniform routing:
    ``E · (1 − (1 − k/E)^B)`` (a guess for real, skewed routers, which touch fewer).
    """
    if not arch.is_moe:
        return 0.0
    e, k = arch.n_routed_experts, arch.experts_per_token
    return float(e * (1.0 - (1.0 - k / e) ** max(batch_tokens, 0.0)))


def decode_weight_bytes(arch: ModelArch, policy: PrecisionPolicy, batch_tokens: float = 1.0) -> float:
    """Weight bytes read from HBM for one decode step of ``batch_tokens`` tokens (one per sequence).

    Dense parts are read once; each MoE layer reads the experts the batch touches
    (:func:`expected_experts_touched`) plus shared experts and router. The input embedding reads only
    ``batch_tokens`` rows. With ``batch_tokens=1`` this is the active weights of one token.
    """
    counts = param_counts(arch)
    touched = expected_experts_touched(arch, batch_tokens)
    experts = arch.n_moe_layers * touched * counts.expert
    embedding_rows = min(batch_tokens, arch.vocab) * arch.hidden
    total = (
        counts.attention * policy.bytes("attn_proj")
        + counts.dense_ffn * policy.bytes("dense_ffn")
        + (experts + counts.shared_experts) * policy.bytes("expert_ffn")
        + counts.router * policy.bytes("router")
        + embedding_rows * policy.bytes("embedding")
        + (counts.lm_head or counts.embedding) * policy.bytes("lm_head")
        + counts.norms * policy.bytes("norm")
    )
    return float(total)
