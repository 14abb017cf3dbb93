"""The per-model numbers the training formulas need, computed once per (model, precision, sequence length).

:class:`TrainWorkload` turns a :class:`~twinloop.model.arch.ModelArch`, a precision policy and a GPU into
plain scalars: parameter groups (from :func:`twinloop.model.params.param_counts`), bytes per element of each
stored or communicated tensor, forward FLOPs per token per op class (from
:func:`twinloop.model.flops.forward_flops_per_token`) converted into seconds per token at the GPU's peak,
and the activation bytes one layer stores per token. The vectorized memory and time formulas
(:mod:`twinloop.plan.memory`, :mod:`twinloop.plan.train_time`) then work on arrays of configurations.

Activation accounting follows Korthikanti et al. 2022 (§4.1, GPT: ``sbh(34 + 5as/h)`` bytes per layer
with 16-bit activations, attention dropout and an unfused attention core) and generalizes it term by term:

* replicated across the TP group unless sequence parallelism shards them: the two norm inputs
  (``2·d·h``), the QKV input (``d·h``), the MLP input (``d·h``), the two dropout masks (``h`` bytes each,
  only with dropout);
* sharded by TP: Q and K (``d·(a + kv)·hd``), V (``d·kv·hd``), the attention-output projection input
  (``d·a·hd_v``), the MLP intermediates (plain GELU ``2·d·f``; gated SwiGLU ``3·d·f``: gate, up and their
  product), and for MoE layers ``k`` copies of the dispatched token plus ``3·d·f_e`` per routed expert
  and the shared experts' ``3·d·f_s``; MLA adds its latent inputs (``d·(q_lora + kv_lora + rope)``, replicated);
* the attention core: unfused it stores ``(2d + 1)`` bytes per head per (query, key) pair with dropout
  (softmax output, mask, dropout output; ``d`` without dropout): Korthikanti's ``5as²b``; fused (flash)
  attention stores only the softmax log-sum-exp, 4 bytes per head per token.

With ``d = 2``, MHA, plain 4h MLP, dropout and an unfused core this reproduces ``34sbh + 5as²b`` exactly
(tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from twinloop.hardware.gpu import GpuSpec
from twinloop.model.arch import ModelArch
from twinloop.model.flops import FlopBreakdown, forward_flops_per_token
from twinloop.model.params import param_counts, shared_expert_params_per_layer
from twinloop.model.precision import PrecisionPolicy
from twinloop.plan.fp8_casts import Fp8CastElems
from twinloop.plan.gemm import curve_name
from twinloop.plan.recompute import DeepSeekActivations, deepseek_activations

AttentionKernel = Literal["flash", "unfused"]


@dataclass(frozen=True)
class TrainWorkload:
    """Model-side scalars of a training job (per token unless said otherwise).

    Attributes:
        n_layers, hidden, n_heads, n_kv_heads, head_dim, vocab, seq_len, experts_per_token: shape.
        params_total / params_active: parameter counts (elements).
        params_layers: non-expert parameters of all transformer layers (+ final norm), sharded by TP and PP.
        params_experts: routed-expert parameters of all layers, sharded by EP, TP and PP.
        params_embedding_stage: embedding-type parameters on the heaviest pipeline stage when ``pp > 1``
            (input embedding + positions on the first stage, or the LM head / tied copy on the last).
        params_embedding_all: all embedding-type parameters (input, positions, LM head) for ``pp == 1``.
        bytes_*: bytes per element of the tensors the policy names.
        act_repl_bytes / act_shard_bytes: activation bytes one average layer stores per token, replicated
            across TP (unless sequence parallel) / sharded by TP.
        act_score_bytes: bytes stored per head per (query, key) pair by an unfused attention core (0 for flash).
        act_input_bytes: bytes of one layer's input per token (what full recompute keeps).
        fwd_layers_s / fwd_experts_s / fwd_attn_s / fwd_head_s: forward compute seconds per token on one GPU
            at the policy dtype's *peak* scaled to f_max (efficiency is applied by the time model): non-expert
            layer GEMMs (shared experts and router included), routed experts, attention core, LM head.
        attention_kernel: ``flash`` or ``unfused``.
        fwd_model_flops: forward FLOPs per token of the whole model at the context the attention kernel
            computes (flash: causal, ``seq/2`` keys on average; unfused: all ``seq``), for MFU.
        fwd_param_flops: forward FLOPs per token without the attention core (``≈ 2·N_active``), the
            ``6·N·D`` convention of published training-compute figures.
        fwd_attn_flops / fwd_head_flops: forward FLOPs per token of the attention core / LM head.
        hbm_bytes_per_s / hbm_capacity_bytes: the GPU's datasheet HBM bandwidth and capacity.
        peak_bf16_flops_per_s: the GPU's dense BF16 peak (the MFU denominator).
        dropout: the model trains with dropout (masks are stored).
        fwd_attn_proj_s / fwd_dense_ffn_s / fwd_shared_s: the parts of ``fwd_layers_s`` (QKV + output
            projections; dense FFN + router; shared experts), so each can take its own GEMM shape efficiency.
        q_dim / kv_dim / o_dim: QKV and output projection widths (``a·hd``, ``kv·(hd + hd_v)``, ``a·hd_v``).
        ffn_hidden / moe_ffn_hidden / shared_ffn_hidden / gated: FFN widths and whether the MLP is gated.
        dtype_proj / dtype_ffn / dtype_experts / dtype_head: GEMM dtype of each op class.
        fp8: the tensors FP8 training quantises per token of an average layer (inputs forward, output
            gradients backward), split by TE fusion and TP sharding, and the FP8 share of the weights
            (:mod:`twinloop.plan.fp8_casts`); all zero for a policy without FP8 GEMMs.
        node_limit: a token's routed experts span at most this many nodes (0 = no limit).
        ds: what an average layer stores and recomputes per token under DeepSeek-V3's selective scheme
            (:mod:`twinloop.plan.recompute`); fwd_ds_recompute_s: forward seconds per token at peak of the
            GEMMs that scheme recomputes (MLA up-projections, whole model).
    """

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    seq_len: int
    is_moe: bool
    n_moe_layers: int
    experts_per_token: int
    n_routed_experts: int
    params_total: float
    params_active: float
    params_layers: float
    params_experts: float
    params_embedding_stage: float
    params_embedding_all: float
    bytes_weights: float
    bytes_grads: float
    bytes_master: float
    bytes_opt_state: float
    bytes_act: float
    bytes_tp_comm: float
    bytes_dp_comm: float
    bytes_dispatch: float
    bytes_combine: float
    act_repl_bytes: float
    act_shard_bytes: float
    act_score_bytes: float
    act_input_bytes: float
    fwd_layers_s: float
    fwd_experts_s: float
    fwd_attn_s: float
    fwd_head_s: float
    fwd_model_flops: float
    fwd_param_flops: float
    fwd_attn_flops: float
    fwd_head_flops: float
    hbm_bytes_per_s: float
    hbm_capacity_bytes: float
    peak_bf16_flops_per_s: float
    attention_kernel: AttentionKernel
    dropout: bool
    fwd_attn_proj_s: float = 0.0
    fwd_dense_ffn_s: float = 0.0
    fwd_shared_s: float = 0.0
    q_dim: int = 0
    kv_dim: int = 0
    o_dim: int = 0
    ffn_hidden: int = 0
    moe_ffn_hidden: int = 0
    shared_ffn_hidden: int = 0
    gated: bool = True
    dtype_proj: str = "bf16"
    dtype_ffn: str = "bf16"
    dtype_experts: str = "bf16"
    dtype_head: str = "bf16"
    fp8: Fp8CastElems = field(default_factory=Fp8CastElems)
    node_limit: int = 0
    ds: DeepSeekActivations = field(default_factory=DeepSeekActivations)
    fwd_ds_recompute_s: float = 0.0


def _activation_terms(arch: ModelArch, d: float, dropout: bool, kernel: AttentionKernel) -> tuple[float, float, float]:
    """(replicated, TP-sharded, per-(query,key)-per-head) activation bytes of an average layer per token."""
    h = arch.hidden
    mask = 1.0 if dropout else 0.0
    repl = 2 * d * h + d * h + mask * h  # norm inputs, QKV input, attention-output dropout mask
    kv_heads = arch.n_kv_heads
    shard = d * (arch.n_heads + kv_heads) * arch.head_dim + d * kv_heads * arch.v_head_dim
    shard += d * arch.n_heads * arch.v_head_dim  # output-projection input
    if arch.attention == "mla":
        repl += d * (arch.q_lora_rank + arch.kv_lora_rank + arch.qk_rope_head_dim)
    if kernel == "unfused":
        score = d + (1.0 + d) * mask  # softmax output (+ dropout mask and dropout output)
    else:
        score = 0.0
        shard += 4.0 * arch.n_heads  # log-sum-exp per head, FP32
    repl += d * h + mask * h  # MLP input, MLP dropout mask
    n_up = 3 if arch.mlp == "gated" else 2
    dense_mlp = n_up * d * arch.ffn_hidden
    moe_mlp = 0.0
    if arch.is_moe:
        k = arch.experts_per_token
        moe_mlp = k * (2 * d * h + n_up * d * arch.moe_ffn_hidden) + n_up * d * arch.shared_ffn_hidden
    n_layers = arch.n_dense_layers + arch.n_moe_layers
    shard += (arch.n_dense_layers * dense_mlp + arch.n_moe_layers * moe_mlp) / n_layers
    return repl, shard, score


class _ParamGroups(TypedDict):
    params_total: float
    params_active: float
    params_layers: float
    params_experts: float
    params_embedding_stage: float
    params_embedding_all: float


class _ElementBytes(TypedDict):
    bytes_weights: float
    bytes_grads: float
    bytes_master: float
    bytes_opt_state: float
    bytes_act: float
    bytes_tp_comm: float
    bytes_dp_comm: float
    bytes_dispatch: float
    bytes_combine: float


class _ForwardSeconds(TypedDict):
    fwd_layers_s: float
    fwd_experts_s: float
    fwd_attn_s: float
    fwd_head_s: float
    fwd_attn_proj_s: float
    fwd_dense_ffn_s: float
    fwd_shared_s: float
    fwd_ds_recompute_s: float


class _GemmShapes(TypedDict):
    q_dim: int
    kv_dim: int
    o_dim: int
    ffn_hidden: int
    moe_ffn_hidden: int
    shared_ffn_hidden: int
    gated: bool
    dtype_proj: str
    dtype_ffn: str
    dtype_experts: str
    dtype_head: str


def build_workload(
    arch: ModelArch,
    policy: PrecisionPolicy,
    gpu: GpuSpec,
    seq_len: int,
    attention_kernel: AttentionKernel = "flash",
    dropout: bool = False,
) -> TrainWorkload:
    """Compute the :class:`TrainWorkload` of ``arch`` trained with ``policy`` on ``gpu`` at ``seq_len``.

    Args:
        arch: the model architecture.
        policy: the precision policy (dtype per op class).
        gpu: the GPU (compute rate per dtype, HBM bandwidth and capacity).
        seq_len: tokens per sequence.
        attention_kernel: ``flash`` (fused, no stored score matrix, causal half computed) or ``unfused``
            (Megatron-LM 2022: the full score matrix computed, stored and streamed through HBM).
        dropout: whether dropout masks are stored (GPT-3-style training; Llama-style training has none).
    """
    # Flash attention skips the masked half of a causal score matrix; the unfused core computes all of it.
    fl = forward_flops_per_token(arch, seq_len / 2 if attention_kernel == "flash" else float(seq_len))
    shared_flops = 2.0 * arch.n_moe_layers * shared_expert_params_per_layer(arch)
    d = policy.bytes("activations_stored")
    repl, shard, score = _activation_terms(arch, d, dropout, attention_kernel)
    ds = deepseek_activations(arch, policy, dropout)
    return TrainWorkload(
        name=arch.name,
        n_layers=arch.n_layers,
        hidden=arch.hidden,
        n_heads=arch.n_heads,
        n_kv_heads=arch.n_kv_heads,
        head_dim=arch.head_dim,
        vocab=arch.vocab,
        seq_len=seq_len,
        is_moe=arch.is_moe,
        n_moe_layers=arch.n_moe_layers,
        experts_per_token=arch.experts_per_token,
        n_routed_experts=arch.n_routed_experts,
        **_param_groups(arch),
        **_element_bytes(policy),
        act_repl_bytes=repl,
        act_shard_bytes=shard,
        act_score_bytes=score,
        act_input_bytes=d * arch.hidden,
        **_forward_seconds(fl, shared_flops, policy, gpu, ds.recompute_gemm_flops),
        fwd_model_flops=float(fl.total),
        fwd_param_flops=float(fl.total - fl.attn_core),
        fwd_attn_flops=float(fl.attn_core),
        fwd_head_flops=float(fl.lm_head),
        hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
        hbm_capacity_bytes=gpu.hbm_bytes,
        peak_bf16_flops_per_s=gpu.tflops("bf16") * 1e12,
        attention_kernel=attention_kernel,
        dropout=dropout,
        **_gemm_shapes(arch, policy),
        fp8=_fp8_cast_elems(arch, policy, fl.attn_proj, fl.dense_ffn + fl.router, shared_flops),
        node_limit=arch.node_limit,
        ds=ds,
    )


def _param_groups(arch: ModelArch) -> _ParamGroups:
    """Parameter counts by where they live: all, active per token, layers, routed experts, embedding stages."""
    pc = param_counts(arch)
    embedding_all = pc.embedding + pc.position_embedding + pc.lm_head
    return {
        "params_total": float(pc.total),
        "params_active": float(pc.active),
        "params_layers": float(pc.total - embedding_all - pc.moe_experts),
        "params_experts": float(pc.moe_experts),
        "params_embedding_stage": float(max(pc.embedding + pc.position_embedding, pc.lm_head or pc.embedding)),
        "params_embedding_all": float(embedding_all),
    }


def _element_bytes(policy: PrecisionPolicy) -> _ElementBytes:
    """Bytes per element of each stored or communicated tensor under ``policy``."""
    return {
        "bytes_weights": policy.bytes("weights_stored"),
        "bytes_grads": policy.bytes("gradients"),
        "bytes_master": policy.bytes("master_weights"),
        "bytes_opt_state": policy.bytes("optimizer_states"),
        "bytes_act": policy.bytes("activations_stored"),
        "bytes_tp_comm": policy.bytes("tp_comm"),
        "bytes_dp_comm": policy.bytes("dp_grad_comm"),
        "bytes_dispatch": policy.bytes("moe_dispatch"),
        "bytes_combine": policy.bytes("moe_combine"),
    }


def _forward_seconds(
    fl: FlopBreakdown, shared_flops: float, policy: PrecisionPolicy, gpu: GpuSpec, ds_recompute_flops: float
) -> _ForwardSeconds:
    """Forward seconds per token of each op class at the GPU's dtype peak and full clock."""
    # The datasheet TFLOP/s hold at ``peak_clock_mhz``; the time model's full clock is f_max, from which DVFS
    # slows compute-bound work (plan/gemm.py: efficiencies are clock-normalised, DVFS applies once).
    clock_x = gpu.sm_clock_max_mhz / gpu.peak_clock_mhz

    def rate(op_class: str) -> float:
        return gpu.tflops(policy.dtype(op_class)) * 1e12 * clock_x

    attn_proj_s = fl.attn_proj / rate("attn_proj")
    dense_ffn_s = fl.dense_ffn / rate("dense_ffn") + fl.router / rate("router")
    shared_s = shared_flops / rate("expert_ffn")
    return {
        "fwd_layers_s": attn_proj_s + dense_ffn_s + shared_s,
        "fwd_experts_s": (fl.expert_ffn - shared_flops) / rate("expert_ffn"),
        "fwd_attn_s": fl.attn_core / rate("attn_core"),
        "fwd_head_s": fl.lm_head / rate("lm_head"),
        "fwd_attn_proj_s": attn_proj_s,
        "fwd_dense_ffn_s": dense_ffn_s,
        "fwd_shared_s": shared_s,
        "fwd_ds_recompute_s": ds_recompute_flops / rate("attn_proj"),
    }


def _gemm_shapes(arch: ModelArch, policy: PrecisionPolicy) -> _GemmShapes:
    """The GEMM widths and dtypes the shape-dependent efficiency (:mod:`twinloop.plan.gemm`) needs."""
    return {
        "q_dim": arch.n_heads * arch.head_dim,
        "kv_dim": arch.n_kv_heads * (arch.head_dim + arch.v_head_dim),
        "o_dim": arch.n_heads * arch.v_head_dim,
        "ffn_hidden": arch.ffn_hidden,
        "moe_ffn_hidden": arch.moe_ffn_hidden,
        "shared_ffn_hidden": arch.shared_ffn_hidden,
        "gated": arch.mlp == "gated",
        "dtype_proj": policy.dtype("attn_proj"),
        "dtype_ffn": policy.dtype("dense_ffn"),
        "dtype_experts": policy.dtype("expert_ffn"),
        "dtype_head": policy.dtype("lm_head"),
    }


def _fp8_cast_elems(
    arch: ModelArch, policy: PrecisionPolicy, attn_flops: float, dense_flops: float, shared_flops: float
) -> Fp8CastElems:
    """The tensors FP8 training quantises per token of an average layer (see :mod:`twinloop.plan.fp8_casts`).

    Forward inputs and backward output gradients of each FP8 GEMM: QKV (input fused into LayerNorm, ``dY``
    of width ``q + kv`` from the attention backward, unfused), output projection (input from the attention
    kernel, unfused; ``dY`` residual-stream, unfused), FFN up/gate (input fused into LayerNorm; ``dY`` of
    width ``2f`` fused into dSwiGLU), FFN down (input fused into SwiGLU; ``dY`` residual-stream, unfused).
    Routed experts: the dispatched input is not a LayerNorm output (unfused), per routed copy. MLA's
    down/up projections are counted at the MHA-equivalent widths (``q``, ``k + v``, output): an approximation.
    """
    fp8 = {c: curve_name(policy.dtype(c)) == "fp8" for c in ("attn_proj", "dense_ffn", "expert_ffn")}
    f_repl = f_shard = u_repl = u_shard = 0.0
    h, up = float(arch.hidden), 2.0 if arch.mlp == "gated" else 1.0
    if fp8["attn_proj"]:
        q = arch.n_heads * arch.head_dim
        kv = arch.n_kv_heads * (arch.head_dim + arch.v_head_dim)
        f_repl += h  # QKV input (LayerNormLinear)
        u_shard += arch.n_heads * arch.v_head_dim + q + kv  # output-projection input; QKV dY
        u_repl += h  # output-projection dY
    n_layers = arch.n_dense_layers + arch.n_moe_layers
    dense, moe = arch.n_dense_layers / n_layers, arch.n_moe_layers / n_layers

    def ffn(f: float, share: float, input_fused: bool) -> tuple[float, float, float, float]:
        """(fused repl, fused shard, unfused repl, unfused shard) of one FFN, ``share`` per layer."""
        input_f, input_u = (h, 0.0) if input_fused else (0.0, h)
        down_dy = h  # residual-stream gradient: its own cast-transpose
        return input_f * share, (1 + up) * f * share, (input_u + down_dy) * share, 0.0

    parts: list[tuple[float, float, float, float]] = []
    if fp8["dense_ffn"]:
        parts.append(ffn(float(arch.ffn_hidden), dense, True))
    if fp8["expert_ffn"] and arch.is_moe:
        parts.append(ffn(float(arch.moe_ffn_hidden), arch.experts_per_token * moe, False))
        if arch.shared_ffn_hidden:
            parts.append(ffn(float(arch.shared_ffn_hidden), moe, True))
    for a, b, c, d in parts:
        f_repl, f_shard, u_repl, u_shard = f_repl + a, f_shard + b, u_repl + c, u_shard + d
    total = attn_flops + dense_flops + shared_flops
    fp8_flops = attn_flops * fp8["attn_proj"] + dense_flops * fp8["dense_ffn"] + shared_flops * fp8["expert_ffn"]
    return Fp8CastElems(
        fused_repl=f_repl,
        fused_shard=f_shard,
        unfused_repl=u_repl,
        unfused_shard=u_shard,
        layer_param_share=fp8_flops / total if total > 0 else 0.0,
        expert_param_share=1.0 if fp8["expert_ffn"] and arch.is_moe else 0.0,
    )
