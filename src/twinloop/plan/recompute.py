"""DeepSeek-V3's activation scheme: what one layer stores, in which precision, and what it recomputes.

The training planner's ``selective`` recompute mode means what the framework profile says
(:attr:`twinloop.plan.frameworks.FrameworkProfile.selective_recompute`):

* ``megatron`` (Korthikanti et al. 2022, §4.2): everything of :mod:`twinloop.plan.workload`'s accounting is
  stored in the ``activations_stored`` dtype except the attention core's score/softmax/dropout tensors,
  whose forward is recomputed in backward.
* ``deepseek-v3`` (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report"), built here term by term:

  - §3.2.3 "Recomputation of RMSNorm and MLA Up-Projection": every RMSNorm output and the MLA
    up-projections (queries from ``c_Q``, keys/values from ``c_KV``) are recomputed in backward, so only
    the norm *inputs* (the residual stream before attention and before the FFN, ``2·h`` per token) and the
    MLA latents (``c_Q``, ``c_KV`` and the shared RoPE key, ``q_lora + kv_lora + rope``) are stored, in
    BF16 (the latents' storage dtype is not stated: GUESS, they are GEMM outputs). A model without MLA has
    no up-projection to recompute and stores Q, K and V (BF16), as every stack does.
  - §3.3.2 "Low-Precision Activation": the inputs of FP8 Linear layers are cached in FP8 for their weight
    gradient, with 1×128 tile scales (§3.3.1; one FP32 scale per 128 elements, the scale dtype a GUESS);
    the input of the Linear after attention (the attention output ``O``, also used by attention's backward)
    in the custom E5M6 format (12 bits: 1.5 bytes per element, the packing a GUESS).
  - §3.3.2 (2): "we cache the inputs of the SwiGLU operator and recompute its output in the backward
    pass", in FP8 with the fine-grained quantization: per routed copy the dispatched token (the up/gate
    input, FP8 as dispatched, §3.3.2 "Low-Precision Communication") and the gate and up outputs (``2·f_e``);
    the same for the shared expert (``2·f_s``; its input is the recomputed norm output). The SwiGLU output
    (the down-projection input) is recomputed.
  - Dense FFN layers (3 of DeepSeek-V3's 61): the report states the SwiGLU caching for MoE only, so here
    the SwiGLU inputs stay BF16 and the down-projection input is cached as an FP8 Linear input (GUESS: the
    general rule of §3.3.2 applied to what is not said).
  - The attention core is FlashAttention-like: its output ``O`` (above) and the FP32 log-sum-exp per head
    are kept; with an unfused core the score matrix is recomputed, as in Megatron's selective mode.
  - Not stored: the MoE combine's expert outputs (the gate gradient ``⟨e_i, dy⟩`` equals the recomputed
    SwiGLU output against the down-projection's data gradient: GUESS that DeepSeek does it this way; storing
    them would add ``2·k·h`` bytes per token) and the router's top-k scores (``k`` FP32 values, < 0.1 %).

  Recompute cost: the up-projection GEMMs' forward (``2·(q_lora·a·(d_nope + d_rope) + kv_lora·a·(d_nope +
  d_v))`` FLOPs per token per layer, about 9 % of DeepSeek-V3's forward layer GEMMs) and the forward
  element-wise work of the recomputed tensors (norm outputs incl. the latent norms, SwiGLU outputs), charged
  as the time model charges all element-wise work (``ELEMENTWISE_HBM_PASSES``, its forward third).

Not modelled: DeepSeek-V3's MTP module, the EMA held in CPU memory (§3.2.3, no GPU memory anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from twinloop.model.architecture import ModelArch
from twinloop.model.precision import PrecisionPolicy
from twinloop.plan.gemm import curve_name

RecomputeScheme = Literal["megatron", "deepseek-v3"]
RECOMPUTE_SCHEMES: tuple[RecomputeScheme, ...] = ("megatron", "deepseek-v3")

#: Bytes per element of an FP8 activation cached with 1×128 tile scaling (DeepSeek-V3 §3.3.1): one byte plus
#: one FP32 scale per 128 elements (the scale dtype is a GUESS; the tile is published).
FP8_TILE_BYTES = 1.0 + 4.0 / 128.0

#: Bytes per element of the E5M6 format DeepSeek-V3 caches the attention output in (§3.3.2: 1 sign + 5
#: exponent + 6 mantissa bits = 12 bits; packed, a GUESS), plus its 1×128 tile scale.
E5M6_TILE_BYTES = 1.5 + 4.0 / 128.0

#: FP32 log-sum-exp per head and token that a fused attention kernel keeps for its backward.
LSE_BYTES = 4.0


@dataclass(frozen=True)
class DeepSeekActivations:
    """Per token, for an average layer (dense and MoE layers weighted by their counts), under DeepSeek-V3's
    scheme (see the module docstring for each term and its source).

    Attributes:
        stored_repl_bytes / stored_shard_bytes: bytes stored, replicated across TP unless sequence parallel /
            sharded by TP (Megatron's split, as in :mod:`twinloop.plan.workload`).
        recompute_repl_bytes / recompute_shard_bytes: bytes of the tensors recomputed element-wise in backward
            (norm outputs / SwiGLU outputs), whose forward element-wise work is done twice.
        recompute_gemm_flops: forward GEMM FLOPs recomputed per token over the *whole model* (MLA up-projections).
    """

    stored_repl_bytes: float = 0.0
    stored_shard_bytes: float = 0.0
    recompute_repl_bytes: float = 0.0
    recompute_shard_bytes: float = 0.0
    recompute_gemm_flops: float = 0.0


def mla_up_projection_flops(arch: ModelArch) -> float:
    """Forward FLOPs per token of one layer's MLA up-projections (0 without MLA; queries only with q-LoRA)."""
    if arch.attention != "mla":
        return 0.0
    a = arch.n_heads
    q = arch.q_lora_rank * a * (arch.qk_nope_head_dim + arch.qk_rope_head_dim) if arch.q_lora_rank else 0
    kv = arch.kv_lora_rank * a * (arch.qk_nope_head_dim + arch.v_head_dim)
    return 2.0 * (q + kv)


def deepseek_activations(arch: ModelArch, policy: PrecisionPolicy, dropout: bool) -> DeepSeekActivations:
    """The :class:`DeepSeekActivations` of ``arch`` trained with ``policy``.

    FP8 caching applies where the policy runs that Linear in FP8 (``attn_proj``, ``dense_ffn``,
    ``expert_ffn``); otherwise the input is cached in the ``activations_stored`` dtype.
    """
    d = policy.bytes("activations_stored")
    h, a = arch.hidden, arch.n_heads

    def linear_in(op_class: str, fp8_bytes: float = FP8_TILE_BYTES) -> float:
        return fp8_bytes if curve_name(policy.dtype(op_class)) == "fp8" else d

    mask = 1.0 if dropout else 0.0
    repl = 2 * d * h + 2 * mask * h  # the two norm inputs (residual stream), dropout masks if any
    recompute_repl = 2 * d * h  # the two norm outputs
    shard = a * arch.v_head_dim * linear_in("attn_proj", E5M6_TILE_BYTES) + LSE_BYTES * a  # O, log-sum-exp
    if arch.attention == "mla":
        repl += d * (arch.q_lora_rank + arch.kv_lora_rank + arch.qk_rope_head_dim)  # latents (pre-norm)
        recompute_repl += d * (arch.q_lora_rank + arch.kv_lora_rank)  # the latent norms' outputs
        # keys and values come from the up-projection of c_KV: recomputed, not stored
        if not arch.q_lora_rank:
            shard += d * a * arch.head_dim  # queries projected directly from the norm output: stored
    else:
        shard += d * (a + arch.n_kv_heads) * arch.head_dim + d * arch.n_kv_heads * arch.v_head_dim  # Q, K, V
    n_in = 2 if arch.mlp == "gated" else 1  # SwiGLU's gate and up (GELU: its one input)
    dense_store = n_in * d * arch.ffn_hidden + linear_in("dense_ffn") * arch.ffn_hidden
    moe_store = moe_recompute = 0.0
    if arch.is_moe:
        fp8_e = linear_in("expert_ffn")
        k = arch.experts_per_token
        moe_store = k * fp8_e * (h + n_in * arch.moe_ffn_hidden) + fp8_e * n_in * arch.shared_ffn_hidden
        moe_recompute = d * (k * arch.moe_ffn_hidden + arch.shared_ffn_hidden)  # SwiGLU outputs
    n_layers = arch.n_dense_layers + arch.n_moe_layers  # as workload._activation_terms weighs them
    shard += (arch.n_dense_layers * dense_store + arch.n_moe_layers * moe_store) / n_layers
    recompute_shard = arch.n_moe_layers * moe_recompute / n_layers  # dense FFNs keep their SwiGLU output
    return DeepSeekActivations(
        stored_repl_bytes=repl,
        stored_shard_bytes=shard,
        recompute_repl_bytes=recompute_repl,
        recompute_shard_bytes=recompute_shard,
        recompute_gemm_flops=arch.n_layers * mla_up_projection_flops(arch),
    )
