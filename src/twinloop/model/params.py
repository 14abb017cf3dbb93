"""Exact parameter counts from a :class:`~twinloop.model.arch.ModelArch`.

Every weight and bias the Hugging Face implementation allocates is counted: Q/K/V/O projections (and
MLA's down/up projections, gpt-oss's per-head attention sinks), FFN projections, routers (DeepSeek-V3's
``e_score_correction_bias``, gpt-oss's router bias, Qwen2-MoE's shared-expert gate), every norm (RMSNorm:
weight; LayerNorm: weight + bias), embeddings (learned positions for gpt2) and the LM head when it is not tied.

Conventions:
    * ``total``: the main model, the multi-token-prediction (MTP) module excluded (reported in ``mtp``).
    * ``active``: the weights a token touches: everything except the routed experts it is not sent to
      (top-k routed + shared experts + router + attention + dense FFN + norms + embedding + LM head).
      This is Mistral's convention (Mixtral 8x7B: 12.9B active).
    * ``active_no_embedding``: ``active`` without the input embedding lookup (and learned positions),
      i.e. the weights that enter a matmul; with tied embeddings the shared table still counts once as
      the LM head. This is the figure DeepSeek's "37B activated" rounds to.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinloop.model.arch import ModelArch


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def norm_params(arch: ModelArch, width: int) -> int:
    """Parameters of one norm over ``width`` features (RMSNorm, bias-free LayerNorm: weight; LayerNorm:
    weight + bias).
    """
    return 2 * width if arch.norm == "layernorm" else width


def attention_params_per_layer(arch: ModelArch) -> int:
    """Attention projections (with biases) and sink logits of one layer; MLA latent norms and qk-norm are in
    norms.
    """
    h, bias = arch.hidden, arch.linear_bias
    if arch.attention == "mla":
        q_out = arch.n_heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
        if arch.q_lora_rank:
            q = _linear(h, arch.q_lora_rank, bias) + _linear(arch.q_lora_rank, q_out, bias)
        else:
            q = _linear(h, q_out, bias)
        kv = _linear(h, arch.kv_lora_rank + arch.qk_rope_head_dim, bias) + _linear(
            arch.kv_lora_rank, arch.n_heads * (arch.qk_nope_head_dim + arch.v_head_dim), bias
        )
        return q + kv + _linear(arch.n_heads * arch.v_head_dim, h, bias)
    qkv_bias = bias or arch.qkv_bias
    q = _linear(h, arch.n_heads * arch.head_dim, qkv_bias)
    kv = 2 * _linear(h, arch.n_kv_heads * arch.head_dim, qkv_bias)
    sinks = arch.n_heads if arch.attention_sinks else 0
    return q + kv + _linear(arch.n_heads * arch.v_head_dim, h, bias or arch.o_bias) + sinks


def attention_norm_params_per_layer(arch: ModelArch) -> int:
    """Norms inside attention: MLA ``q_a_layernorm`` + ``kv_a_layernorm``; QK-norm ``q_norm`` + ``k_norm``
    (one ``head_dim`` vector each for Qwen3/Gemma 3; all heads' width for OLMo 2 and Command R+).
    """
    n = 0
    if arch.attention == "mla":
        n += norm_params(arch, arch.kv_lora_rank)
        if arch.q_lora_rank:
            n += norm_params(arch, arch.q_lora_rank)
    if arch.qk_norm and arch.qk_norm_full:
        n += norm_params(arch, arch.n_heads * arch.head_dim) + norm_params(arch, arch.n_kv_heads * arch.head_dim)
    elif arch.qk_norm:
        n += 2 * norm_params(arch, arch.head_dim)
    return n


def ffn_params(arch: ModelArch, ffn_hidden: int) -> int:
    """One FFN (gated SwiGLU: gate, up, down; plain: up, down) of intermediate size ``ffn_hidden``."""
    h, bias = arch.hidden, arch.linear_bias or arch.mlp_bias
    n_up = 2 if arch.mlp == "gated" else 1
    return n_up * _linear(h, ffn_hidden, bias) + _linear(ffn_hidden, h, bias)


def expert_params(arch: ModelArch) -> int:
    """One routed expert (0 for dense models)."""
    return ffn_params(arch, arch.moe_ffn_hidden) if arch.is_moe else 0


def shared_expert_params_per_layer(arch: ModelArch) -> int:
    """All shared experts of one MoE layer (DeepSeek: n_shared · moe_ffn; Qwen2-MoE: one wide expert)."""
    return ffn_params(arch, arch.shared_ffn_hidden) if arch.is_moe and arch.shared_ffn_hidden else 0


def router_params_per_layer(arch: ModelArch) -> int:
    """Router weight (+ its bias: DeepSeek-V3's score correction, gpt-oss's logit bias) + Qwen2-MoE shared-expert
    gate (h → 1).
    """
    if not arch.is_moe:
        return 0
    n = arch.hidden * arch.n_routed_experts
    if arch.router_bias:
        n += arch.n_routed_experts
    if arch.shared_expert_gate:
        n += arch.hidden
    return n


def layer_params(arch: ModelArch, moe: bool) -> int:
    """One full transformer block (attention, FFN or MoE, all norms inside it)."""
    n = (
        attention_params_per_layer(arch)
        + attention_norm_params_per_layer(arch)
        + arch.norms_per_layer * norm_params(arch, arch.hidden)
    )
    if moe:
        n += (
            arch.n_routed_experts * expert_params(arch)
            + shared_expert_params_per_layer(arch)
            + router_params_per_layer(arch)
        )
    else:
        n += ffn_params(arch, arch.ffn_hidden)
    return n


def mtp_module_params(arch: ModelArch) -> int:
    """One DeepSeek-V3 MTP module without the shared embedding/head: enorm, hnorm, eh_proj (2h→h), a
    transformer block (MoE when the model has MoE layers) and its final norm.
    """
    h = arch.hidden
    return 3 * norm_params(arch, h) + 2 * h * h + layer_params(arch, moe=arch.is_moe)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts in elements (see the module docstring for the conventions).

    Attributes:
        total: main model, MTP excluded. ``total_with_mtp`` adds ``mtp``.
        active / active_no_embedding: per-token counts (MTP excluded).
        embedding: token embedding table; position_embedding: learned positions (gpt2), else 0.
        lm_head: output projection (with its bias, Phi-3.5-MoE), 0 when tied to the embedding.
        attention: all attention projections; dense_ffn: FFNs of dense layers.
        moe_experts: all routed experts; moe_experts_active: the top-k a token uses, over all MoE layers.
        shared_experts, router: over all MoE layers (router includes score bias and shared-expert gate).
        norms: every norm of the main model (per-layer, MLA latent, qk-norm, final).
        mtp: MTP modules without the shared embedding/head; mtp_stored adds the copies of embedding and
            head a checkpoint stores per MTP module (DeepSeek-V3's "14B MTP" counts those).
        per_layer_dense / per_layer_moe: one dense / MoE transformer block (0 when the model has none).
        expert: one routed expert.
    """

    total: int
    active: int
    active_no_embedding: int
    embedding: int
    position_embedding: int
    lm_head: int
    attention: int
    dense_ffn: int
    moe_experts: int
    moe_experts_active: int
    shared_experts: int
    router: int
    norms: int
    mtp: int
    mtp_stored: int
    per_layer_dense: int
    per_layer_moe: int
    expert: int

    @property
    def total_with_mtp(self) -> int:
        """Main model plus MTP modules (shared embedding/head counted once)."""
        return self.total + self.mtp


def param_counts(arch: ModelArch) -> ParamCounts:
    """Count every parameter of ``arch``; see :class:`ParamCounts`."""
    h = arch.hidden
    embedding = arch.vocab * h
    position = arch.max_position * h if arch.position == "learned" else 0
    lm_head = (0 if arch.tied_embeddings else arch.vocab * h) + (arch.vocab if arch.lm_head_bias else 0)
    n_layers = arch.n_dense_layers + arch.n_moe_layers
    attention = n_layers * attention_params_per_layer(arch)
    dense_ffn = arch.n_dense_layers * ffn_params(arch, arch.ffn_hidden)
    expert = expert_params(arch)
    moe_experts = arch.n_moe_layers * arch.n_routed_experts * expert
    moe_active = arch.n_moe_layers * arch.experts_per_token * expert
    shared = arch.n_moe_layers * shared_expert_params_per_layer(arch)
    router = arch.n_moe_layers * router_params_per_layer(arch)
    per_layer_norms = attention_norm_params_per_layer(arch) + arch.norms_per_layer * norm_params(arch, h)
    norms = n_layers * per_layer_norms + norm_params(arch, h)
    total = embedding + position + lm_head + attention + dense_ffn + moe_experts + shared + router + norms
    active = total - moe_experts + moe_active
    active_no_embedding = active - embedding - position + (embedding if arch.tied_embeddings else 0)
    mtp = arch.mtp_layers * mtp_module_params(arch)
    mtp_stored = mtp + arch.mtp_layers * (embedding + (embedding if arch.tied_embeddings else lm_head))
    return ParamCounts(
        total=total,
        active=active,
        active_no_embedding=active_no_embedding,
        embedding=embedding,
        position_embedding=position,
        lm_head=lm_head,
        attention=attention,
        dense_ffn=dense_ffn,
        moe_experts=moe_experts,
        moe_experts_active=moe_active,
        shared_experts=shared,
        router=router,
        norms=norms,
        mtp=mtp,
        mtp_stored=mtp_stored,
        per_layer_dense=layer_params(arch, moe=False) if arch.n_dense_layers else 0,
        per_layer_moe=layer_params(arch, moe=True) if arch.n_moe_layers else 0,
        expert=expert,
    )
