"""A normalized, typed description of a decoder-only transformer, built from Hugging Face config.json.

Every model kind twinloop supports (:data:`SUPPORTED_MODEL_TYPES`: Llama 2-4, Mistral/Mixtral, Qwen 2/3 and
their MoEs, DeepSeek V2/V3, Gemma 1-3, Phi-3/3.5 and Phi-3.5-MoE, gpt-oss, GLM-4.5, Falcon, OLMo 2, Granite,
Cohere, GPT-2, GPT-NeoX; multimodal wrappers through their ``text_config``) is read into the same :class:`ModelArch`, so
parameter, FLOP, memory and KV-cache formulas are written once. The parsing itself lives in
:mod:`twinloop.model.hf_config`; where a model comes from (catalog, file, folder, Hugging Face cache) in
:func:`twinloop.model.arch.load_model`. The parsers import this module and :mod:`~twinloop.model.arch` imports
the parsers, so neither imports the other back (no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gpt2",
    "gpt_neox",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "phimoe",
    "llama4_text",
    "falcon",
    "olmo2",
    "granite",
    "cohere",
    "gpt_oss",
    "glm4_moe",
)
"""``model_type`` values read directly; wrappers (``gemma3``, ``llama4``, ``llava``, ...) are read through their
``text_config`` (:data:`twinloop.model.hf_config.TEXT_CONFIG_WRAPPERS`)."""


@dataclass(frozen=True)
class ModelArch:
    """Decoder-only transformer architecture (all sizes in elements, not bytes).

    Attributes:
        attention: ``mha`` (n_kv_heads == n_heads), ``gqa`` (fewer KV heads) or ``mla`` (DeepSeek latent).
        head_dim: per-head query/key dim for MHA/GQA (for MLA: qk_nope_head_dim + qk_rope_head_dim).
        v_head_dim: per-head value dim.
        mlp: ``gated`` (SwiGLU/GeGLU: gate, up, down) or ``plain`` (GELU: up, down).
        ffn_hidden: intermediate size of dense FFN layers.
        norm: ``rmsnorm`` (weight), ``layernorm`` (weight + bias) or ``layernorm_nobias`` (Cohere: weight).
        norms_per_layer: hidden-width norms per block (2 pre-norms; Gemma 2/3: 4, pre and post; Falcon-7B
            and Cohere's parallel blocks: 1).
        n_dense_layers / n_moe_layers: how many layers have a dense FFN vs an MoE block.
        moe_ffn_hidden: intermediate size of one routed expert; shared_ffn_hidden: of all shared experts together.
        linear_bias: every linear layer has a bias (gpt2, gpt_neox); qkv_bias: Q, K, V do (qwen2);
            o_bias / mlp_bias: the attention output / the FFN projections do (``attention_bias``/``mlp_bias``);
            lm_head_bias: the LM head does (Phi-3.5-MoE).
        attention_sinks: each attention head has a learned sink logit (gpt-oss: one parameter per head and
            layer; the softmax gets one more column, no key or value is cached for it).
        qk_norm: Q and K are normalized with learned weights; qk_norm_full: over all heads' width
            (OLMo 2, Command R+) rather than one ``head_dim`` vector shared by the heads (Qwen3, Gemma 3).
        sliding_window / n_sliding_layers: ``n_sliding_layers`` layers attend to (and cache) at most
            ``sliding_window`` recent tokens (Gemma 2: every other layer; Gemma 3: 5 of 6; Llama 4's chunked
            layers: 3 of 4; Mistral 7B: all). 0 = every layer attends to the whole context.
        parallel_block: attention and FFN read the same input (Falcon, GPT-NeoX, Cohere); no parameters,
            recorded for planners that overlap the two.
        rotary_fraction: fraction of each head's dims rotated by RoPE (GPT-NeoX/Pythia: 0.25); no parameters.
        attn_logit_softcap / final_logit_softcap: Gemma 2's tanh soft-capping (0 = none); no parameters.
        text_only_of: the multimodal wrapper (``gemma3``, ``llama4``, ...) whose ``text_config`` this is;
            its vision tower and projector are not counted.
        node_limit: a token's routed experts live on at most this many nodes (DeepSeek-V3: 4); 0 = no limit.
        mtp_layers: multi-token-prediction modules (DeepSeek-V3: 1), counted separately from the main model.
    """

    name: str
    model_type: str
    n_layers: int
    hidden: int
    vocab: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    v_head_dim: int
    attention: Literal["mha", "gqa", "mla"]
    mlp: Literal["gated", "plain"]
    ffn_hidden: int
    norm: Literal["rmsnorm", "layernorm", "layernorm_nobias"]
    position: Literal["rope", "learned", "alibi"]
    max_position: int
    tied_embeddings: bool
    linear_bias: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    attention_sinks: bool = False
    qk_norm: bool = False
    qk_norm_full: bool = False
    norms_per_layer: int = 2
    sliding_window: int = 0
    n_sliding_layers: int = 0
    parallel_block: bool = False
    rotary_fraction: float = 1.0
    attn_logit_softcap: float = 0.0
    final_logit_softcap: float = 0.0
    text_only_of: str = ""
    # MLA (DeepSeek-V2/V3); q_lora_rank 0 means queries are projected directly.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    # MoE
    n_dense_layers: int = 0
    n_moe_layers: int = 0
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    experts_per_token: int = 0
    moe_ffn_hidden: int = 0
    shared_ffn_hidden: int = 0
    shared_expert_gate: bool = False
    router_bias: bool = False
    node_limit: int = 0
    mtp_layers: int = 0

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.n_moe_layers > 0 and self.n_routed_experts > 0

    @property
    def n_global_layers(self) -> int:
        """Layers that attend to the whole context (all of them without a sliding window)."""
        return self.n_layers - (self.n_sliding_layers if self.sliding_window else 0)

    def attended_keys(self, context_len: float) -> float:
        """Keys one query attends to, summed over layers: global layers see ``context_len``, sliding ones
        at most ``sliding_window``.
        """
        local = min(context_len, float(self.sliding_window)) if self.sliding_window else context_len
        return self.n_global_layers * context_len + (self.n_layers - self.n_global_layers) * local
