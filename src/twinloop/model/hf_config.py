"""Hugging Face ``config.json`` → :class:`~twinloop.model.arch.ModelArch`, one parser per model family.

Each parser reads the fields the Hugging Face (``transformers``) implementation of that family reads, with
the same defaults where real configs rely on them (Gemma 3's and Llama 4's nested ``text_config`` lists
only the fields that differ from the config class defaults), and records the features that change
parameters, FLOPs or the KV cache: norms per block, biases, QK-norm width, sliding/chunked attention, shared
experts, MLA. Every field goes through :class:`~twinloop.model.hf_fields.ConfigReader`, so a wrong type,
NaN, a negative or absurd size is one :class:`~twinloop.errors.InputError` naming file, field and range.

State-space and hybrid models (Mamba, Jamba, ...) are refused with one line: their cost is not that of
attention layers, and twinloop does not model it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from twinloop.errors import InputError
from twinloop.model.architecture import SUPPORTED_MODEL_TYPES, ModelArch
from twinloop.model.hf_fields import (
    EXPERTS_MAX,
    HEADS_MAX,
    LAYERS_MAX,
    POSITIONS_MAX,
    TOP_K_MAX,
    VOCAB_MAX,
    ConfigReader,
)

TEXT_CONFIG_WRAPPERS = {  # multimodal model_type -> model_type of its text_config when that omits it
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "llava": "llama",
    "llava_next": "llama",
    "mistral3": "mistral",
    "paligemma": "gemma",
    "kimi_k25": "kimi_k2",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
}

# Wrappers whose top-level ``tie_word_embeddings`` is the model's (Qwen3-VL: the released configs carry it only at the
# top level, and transformers 5 re-saves a ``text_config`` with its class default ``true`` under a top-level
# ``false``; the checkpoints ship a separate ``lm_head``). The top level wins over the text_config's.
OUTER_TIE_WRAPPERS = frozenset({"qwen3_vl", "qwen3_vl_moe"})

# Vision-language models whose language model's fields sit at the top level next to ``vision_config`` (Qwen2-VL and
# Qwen2.5-VL as first released); re-saved by newer transformers they also nest them in ``text_config``.
FLAT_WRAPPERS = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2"}

# Older Hub revisions of Falcon name their type differently; transformers reads them as ``falcon`` (with
# ``RefinedWeb``, the 40B layout, implying the new decoder architecture). Kimi K2 is DeepSeek-V3's architecture
# (``DeepseekV3ForCausalLM``) under its own ``model_type`` so that engines can tell the two apart.
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "RefinedWebModel": ("falcon", {}),
    "RefinedWeb": ("falcon", {"new_decoder_architecture": True}),
    "kimi_k2": ("deepseek_v3", {}),
    "qwen2_vl_text": ("qwen2", {}),
    "qwen2_5_vl_text": ("qwen2", {}),
    # Qwen3-VL's language models are Qwen3's and Qwen3-MoE's (transformers' Qwen3VLTextModel and
    # Qwen3VLMoeTextModel: the same layers, with interleaved M-RoPE, which changes no parameter or FLOP).
    "qwen3_vl_text": ("qwen3", {}),
    "qwen3_vl_moe_text": ("qwen3_moe", {}),
}

STATE_SPACE_TYPES = frozenset(
    {
        "mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "bamba", "falcon_h1", "nemotron_h",
        "granitemoehybrid", "rwkv", "rwkv5", "rwkv6", "recurrent_gemma", "lfm2", "qwen3_next", "minimax",
    }
)  # fmt: skip

# Defaults of the transformers config classes for fields that real (sparse) configs omit.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131_072,
        "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True,
    },
    "llama4_text": {
        "vocab_size": 202_048, "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16_384,
        "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "max_position_embeddings": 131_072, "num_local_experts": 16, "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1, "attention_chunk_size": 8192, "tie_word_embeddings": False,
    },
    "gemma2": {"tie_word_embeddings": True, "head_dim": 256},
    "gemma": {"tie_word_embeddings": True, "head_dim": 256},
    "cohere": {"tie_word_embeddings": True},
    "falcon": {"tie_word_embeddings": True, "max_position_embeddings": 2048},
    "granite": {"tie_word_embeddings": True},
    # transformers' Glm4MoeConfig defaults (GLM-4.5-Air's MoE shape; GLM-4.5's configs give every field)
    "glm4_moe": {
        "partial_rotary_factor": 0.5, "n_routed_experts": 128, "n_shared_experts": 1, "moe_intermediate_size": 1408,
        "first_k_dense_replace": 1, "num_experts_per_tok": 8, "tie_word_embeddings": False,
    },
    # transformers' GptOssConfig defaults are gpt-oss-120b's (attention_bias True, 128 experts, window 128)
    "gpt_oss": {
        "vocab_size": 201_088, "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131_072,
        "num_local_experts": 128, "num_experts_per_tok": 4, "sliding_window": 128, "attention_bias": True,
        "tie_word_embeddings": False,
    },
}  # fmt: skip


def parse_hf_config(cfg: Mapping[str, Any], name: str, source: str = "config.json") -> ModelArch:
    """Build a :class:`ModelArch` from a Hugging Face ``config.json`` mapping.

    A multimodal wrapper (``gemma3``, ``llama4``, ``llava``, ...) is read through its ``text_config``; only
    the language model is counted (``ModelArch.text_only_of`` names the wrapper).

    Raises:
        InputError: unsupported or state-space ``model_type``, or a missing/invalid field.
    """
    if not isinstance(cfg, Mapping):
        raise InputError(source, "", "expected a JSON object (a Hugging Face config.json)")
    outer = cfg.get("model_type")
    text = cfg.get("text_config")
    wrapper = ""
    prefix = ""
    if isinstance(text, Mapping) and outer not in SUPPORTED_MODEL_TYPES:
        wrapper = outer if isinstance(outer, str) else "multimodal"
        inner = text.get("model_type")
        if inner is None and wrapper in TEXT_CONFIG_WRAPPERS:
            inner = TEXT_CONFIG_WRAPPERS[wrapper]
        if wrapper in OUTER_TIE_WRAPPERS and "tie_word_embeddings" in cfg:
            text = {**text, "tie_word_embeddings": cfg["tie_word_embeddings"]}
        cfg, prefix, outer = text, "text_config.", inner
    elif text is not None and not isinstance(text, Mapping):
        raise InputError(source, "text_config", "must be a JSON object (the language model's config)")
    elif isinstance(outer, str) and outer in FLAT_WRAPPERS:
        wrapper, outer = outer, FLAT_WRAPPERS[outer]
    model_type = outer
    if isinstance(model_type, str) and model_type in ALIASES:
        model_type, implied = ALIASES[model_type]
        cfg = {**cfg, **implied}
    if isinstance(model_type, str) and model_type in STATE_SPACE_TYPES:
        raise InputError(
            source,
            f"{prefix}model_type",
            f"{model_type!r} is a state-space/recurrent (hybrid) model; twinloop plans attention transformers "
            "only and refuses it rather than guess its cost",
        )
    if not isinstance(model_type, str) or model_type not in _PARSERS:
        shown = repr(model_type) if isinstance(model_type, (str, type(None))) else f"a {type(model_type).__name__}"
        raise InputError(
            source,
            f"{prefix}model_type",
            f"unsupported model_type {shown} (supported: {', '.join(SUPPORTED_MODEL_TYPES + tuple(ALIASES))}; "
            f"wrappers read through text_config: {', '.join(TEXT_CONFIG_WRAPPERS)}, {', '.join(FLAT_WRAPPERS)})",
        )
    defaults = _DEFAULTS.get(model_type, {})
    merged = {**defaults, **{k: v for k, v in cfg.items() if v is not None}} if defaults else cfg
    arch = _PARSERS[model_type](ConfigReader(merged, source, prefix), name, model_type)
    if wrapper:
        arch = _replace(arch, text_only_of=wrapper)
    return arch


def _replace(arch: ModelArch, **changes: Any) -> ModelArch:
    import dataclasses

    return dataclasses.replace(arch, **changes)


# --- shared pieces ---------------------------------------------------------------------------------------


def _attention(r: ConfigReader, hidden: int) -> dict[str, Any]:
    """Heads, KV heads and head dim of MHA/GQA (``num_key_value_heads`` must divide the heads)."""
    n_heads = r.integer("num_attention_heads", "n_head", hi=HEADS_MAX)
    n_kv = r.integer("num_key_value_heads", default=n_heads, hi=n_heads)
    if n_heads % n_kv:
        raise r.error("num_key_value_heads", f"must divide num_attention_heads {n_heads}, got {n_kv}")
    if not r.has("head_dim") and hidden % n_heads:
        raise r.error("num_attention_heads", f"must divide hidden_size {hidden} (or give head_dim), got {n_heads}")
    head_dim = r.integer("head_dim", default=hidden // n_heads)
    return dict(
        n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, v_head_dim=head_dim,
        attention="mha" if n_kv == n_heads else "gqa",
    )  # fmt: skip


def _core(
    r: ConfigReader, name: str, model_type: str, hidden_keys: tuple[str, ...] = ("hidden_size",)
) -> dict[str, Any]:
    hidden = r.integer(*hidden_keys)
    return dict(
        name=name, model_type=model_type, hidden=hidden,
        n_layers=r.integer("num_hidden_layers", "n_layer", hi=LAYERS_MAX),
        vocab=r.integer("vocab_size", hi=VOCAB_MAX),
        max_position=r.integer("max_position_embeddings", hi=POSITIONS_MAX),
        tied_embeddings=r.boolean("tie_word_embeddings", False),
        **_attention(r, hidden),
    )  # fmt: skip


def _rope_fraction(r: ConfigReader, key: str) -> float:
    return r.number(key, 1.0, lo=0.0, hi=1.0)


def _all_sliding(r: ConfigReader, n_layers: int) -> dict[str, int]:
    """Mistral/Phi-3 style: ``sliding_window`` applies to every layer when set."""
    window = r.integer("sliding_window", default=0, lo=0, hi=POSITIONS_MAX)
    return {"sliding_window": window, "n_sliding_layers": n_layers if window else 0}


def _dense(arch: dict[str, Any], ffn_hidden: int) -> ModelArch:
    return ModelArch(**arch, ffn_hidden=ffn_hidden, n_dense_layers=arch["n_layers"])


def _mlp_hidden(r: ConfigReader) -> int:
    return r.integer("intermediate_size")


# --- families --------------------------------------------------------------------------------------------


def _llama_like(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """llama, mistral, qwen2, qwen3, granite, phi3 (fused qkv/gate_up are the same weights), olmo2."""
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    a.update(
        mlp="gated", norm="rmsnorm", position="rope",
        qkv_bias=model_type == "qwen2" or attn_bias, o_bias=attn_bias and model_type != "qwen2",
        mlp_bias=r.boolean("mlp_bias", False), qk_norm=model_type in ("qwen3", "olmo2"),
        qk_norm_full=model_type == "olmo2", rotary_fraction=_rope_fraction(r, "partial_rotary_factor"),
    )  # fmt: skip
    if model_type == "olmo2":  # norms after attention and FFN only (no pre-norms)
        a["norms_per_layer"] = 2
    if model_type in ("qwen2", "qwen3"):
        a.update(_qwen_sliding(r, a["n_layers"]))
    else:
        a.update(_all_sliding(r, a["n_layers"]))
    return _dense(a, _mlp_hidden(r))


def _qwen_sliding(r: ConfigReader, n_layers: int) -> dict[str, int]:
    """Qwen2/3 use the sliding window only with ``use_sliding_window``, on layers ≥ ``max_window_layers``."""
    if not r.boolean("use_sliding_window", False):
        return {"sliding_window": 0, "n_sliding_layers": 0}
    window = r.integer("sliding_window", default=0, lo=0, hi=POSITIONS_MAX)
    first = r.integer("max_window_layers", default=n_layers, lo=0, hi=LAYERS_MAX)
    return {"sliding_window": window, "n_sliding_layers": max(0, n_layers - first) if window else 0}


def _gemma(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Gemma 1-3: tied embeddings, GeGLU, head_dim 256; Gemma 2/3 norm before and after attention and FFN
    (4 norms a block), Gemma 2 soft-caps logits (no parameters), Gemma 3 adds per-head QK-norm.
    """
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    a.update(mlp="gated", norm="rmsnorm", position="rope", qkv_bias=attn_bias, o_bias=attn_bias)
    n = a["n_layers"]
    if model_type == "gemma":
        return _dense(a, _mlp_hidden(r))
    a["norms_per_layer"] = 4
    window = r.integer("sliding_window", default=0, lo=0, hi=POSITIONS_MAX)
    if model_type == "gemma2":  # even layers slide (transformers: is_sliding = not layer_idx % 2)
        sliding = (n + 1) // 2
        a.update(
            attn_logit_softcap=r.number("attn_logit_softcapping", 0.0, hi=1e6),
            final_logit_softcap=r.number("final_logit_softcapping", 0.0, hi=1e6),
        )
    else:
        a["qk_norm"] = True
        types = r.str_list("layer_types", ("sliding_attention", "full_attention"), n)
        if types:
            sliding = types.count("sliding_attention")
        else:  # every pattern-th layer is global
            pattern = r.integer("sliding_window_pattern", default=6, hi=LAYERS_MAX)
            sliding = n - n // pattern
    a.update(sliding_window=window, n_sliding_layers=sliding if window else 0)
    return _dense(a, _mlp_hidden(r))


def _cohere(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Command R / R+: one bias-free LayerNorm per parallel block, tied embeddings, optional QK-norm with
    per-head weights (R+: ``use_qk_norm``).
    """
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    qk = r.boolean("use_qk_norm", False)
    a.update(
        mlp="gated", norm="layernorm_nobias", position="rope", norms_per_layer=1, parallel_block=True,
        qkv_bias=attn_bias, o_bias=attn_bias, qk_norm=qk, qk_norm_full=qk,
    )  # fmt: skip
    return _dense(a, _mlp_hidden(r))


def _falcon(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Falcon 7B (multi-query, one LayerNorm per parallel block) and 40B/180B (``new_decoder_architecture``:
    grouped KV heads, two LayerNorms per block); ``bias`` applies to every linear layer.
    """
    hidden = r.integer("hidden_size", "n_embd")
    n_layers = r.integer("num_hidden_layers", "n_layer", hi=LAYERS_MAX)
    n_heads = r.integer("num_attention_heads", "n_head", hi=HEADS_MAX)
    if hidden % n_heads:
        raise r.error("num_attention_heads", f"must divide hidden_size {hidden}, got {n_heads}")
    new_arch = r.boolean("new_decoder_architecture", False)
    parallel = r.boolean("parallel_attn", True)
    if new_arch:
        n_kv = r.integer("num_kv_heads", "n_head_kv", default=n_heads, hi=n_heads)
    else:
        n_kv = 1 if r.boolean("multi_query", True) else n_heads
    if n_heads % n_kv:
        raise r.error("num_kv_heads", f"must divide num_attention_heads {n_heads}, got {n_kv}")
    # new architecture: ln_attn + ln_mlp (num_ln_in_parallel_attn); 7B: one norm shared by the parallel block
    norms = r.integer("num_ln_in_parallel_attn", default=2, hi=2) if new_arch else (1 if parallel else 2)
    head_dim = hidden // n_heads
    bias = r.boolean("bias", False)
    alibi = r.boolean("alibi", False)
    return ModelArch(
        name=name, model_type=model_type, n_layers=n_layers, hidden=hidden,
        vocab=r.integer("vocab_size", hi=VOCAB_MAX), n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
        v_head_dim=head_dim, attention="mha" if n_kv == n_heads else "gqa", mlp="plain",
        ffn_hidden=r.integer("ffn_hidden_size", default=4 * hidden), norm="layernorm",
        position="alibi" if alibi else "rope",
        max_position=r.integer("max_position_embeddings", hi=POSITIONS_MAX),
        tied_embeddings=r.boolean("tie_word_embeddings", True), linear_bias=bias, norms_per_layer=norms,
        parallel_block=parallel, n_dense_layers=n_layers,
    )  # fmt: skip


def _gpt2(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    hidden = r.integer("n_embd")
    n_heads = r.integer("n_head", hi=HEADS_MAX)
    n_layers = r.integer("n_layer", hi=LAYERS_MAX)
    if hidden % n_heads:
        raise r.error("n_head", f"must divide n_embd {hidden}, got {n_heads}")
    return ModelArch(
        name=name, model_type=model_type, n_layers=n_layers, hidden=hidden,
        vocab=r.integer("vocab_size", hi=VOCAB_MAX), n_heads=n_heads, n_kv_heads=n_heads,
        head_dim=hidden // n_heads, v_head_dim=hidden // n_heads, attention="mha", mlp="plain",
        ffn_hidden=r.integer("n_inner", default=4 * hidden), norm="layernorm", position="learned",
        max_position=r.integer("n_positions", "n_ctx", hi=POSITIONS_MAX),
        tied_embeddings=r.boolean("tie_word_embeddings", True), linear_bias=True, n_dense_layers=n_layers,
    )  # fmt: skip


def _gpt_neox(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """GPT-NeoX / Pythia: biases everywhere, two LayerNorms per (parallel-residual) block, partial RoPE."""
    a = _core(r, name, model_type)
    a.update(
        n_kv_heads=a["n_heads"], attention="mha", mlp="plain", norm="layernorm", position="rope",
        linear_bias=True, parallel_block=r.boolean("use_parallel_residual", True),
        rotary_fraction=_rope_fraction(r, "rotary_pct"),
    )  # fmt: skip
    return _dense(a, _mlp_hidden(r))


def _mixtral(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    a = _core(r, name, model_type)
    a.update(mlp="gated", norm="rmsnorm", position="rope", **_all_sliding(r, a["n_layers"]))
    return _moe(
        r, a, ffn_hidden=0, n_moe=a["n_layers"], experts_key="num_local_experts", moe_hidden_key="intermediate_size"
    )


def _phimoe(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Phi-3.5-MoE: Mixtral-like experts, LayerNorm with bias, biased attention and LM head."""
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    a.update(
        mlp="gated", norm="layernorm", position="rope", qkv_bias=attn_bias, o_bias=attn_bias,
        lm_head_bias=r.boolean("lm_head_bias", False), **_all_sliding(r, a["n_layers"]),
    )  # fmt: skip
    return _moe(
        r, a, ffn_hidden=0, n_moe=a["n_layers"], experts_key="num_local_experts", moe_hidden_key="intermediate_size"
    )


def _moe(
    r: ConfigReader, a: dict[str, Any], ffn_hidden: int, n_moe: int, experts_key: str, moe_hidden_key: str,
    **extra: Any,
) -> ModelArch:  # fmt: skip
    n_experts = r.integer(experts_key, hi=EXPERTS_MAX)
    top_k = r.integer("num_experts_per_tok", hi=min(n_experts, TOP_K_MAX))
    return ModelArch(
        **a, ffn_hidden=ffn_hidden, n_dense_layers=a["n_layers"] - n_moe, n_moe_layers=n_moe,
        n_routed_experts=n_experts, experts_per_token=top_k, moe_ffn_hidden=r.integer(moe_hidden_key), **extra,
    )  # fmt: skip


def _gpt_oss(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """gpt-oss: every layer MoE (no shared expert) with biased experts and a biased router, biased Q/K/V/O, a
    learned sink logit per head; ``layer_types`` (by default even layers) attend to a 128-token window.
    """
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", True)
    n = a["n_layers"]
    types = r.str_list("layer_types", ("sliding_attention", "full_attention"), n)
    sliding = types.count("sliding_attention") if types else (n + 1) // 2  # transformers: (i + 1) % 2 slides
    window = r.integer("sliding_window", default=0, lo=0, hi=POSITIONS_MAX)
    a.update(
        mlp="gated", norm="rmsnorm", position="rope", qkv_bias=attn_bias, o_bias=attn_bias, mlp_bias=True,
        attention_sinks=True, sliding_window=window, n_sliding_layers=sliding if window else 0,
    )  # fmt: skip
    return _moe(
        r, a, ffn_hidden=0, n_moe=n, experts_key="num_local_experts", moe_hidden_key="intermediate_size",
        router_bias=True,
    )  # fmt: skip


def _glm4_moe(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """GLM-4.5/4.6/4.7 (``Glm4MoeForCausalLM``): GQA with biased Q/K/V (``attention_bias``) and an unbiased output,
    optional per-head QK-norm (``use_qk_norm``), RoPE on half of each head; ``first_k_dense_replace`` dense layers,
    then MoE layers with one shared expert and DeepSeek-V3's router (score-correction bias); one MTP module
    (``num_nextn_predict_layers``) shaped like DeepSeek-V3's, counted apart from the main model.
    """
    a = _core(r, name, model_type)
    a.update(
        mlp="gated", norm="rmsnorm", position="rope", qkv_bias=r.boolean("attention_bias", False),
        qk_norm=r.boolean("use_qk_norm", False), rotary_fraction=_rope_fraction(r, "partial_rotary_factor"),
    )  # fmt: skip
    n = a["n_layers"]
    first_dense = r.integer("first_k_dense_replace", lo=0, hi=n)
    n_shared = r.integer("n_shared_experts", lo=0, hi=EXPERTS_MAX)
    moe_hidden = r.integer("moe_intermediate_size")
    return _moe(
        r, a, ffn_hidden=r.integer("intermediate_size") if first_dense else 0, n_moe=n - first_dense,
        experts_key="n_routed_experts", moe_hidden_key="moe_intermediate_size", n_shared_experts=n_shared,
        shared_ffn_hidden=n_shared * moe_hidden, router_bias=True,
        mtp_layers=r.integer("num_nextn_predict_layers", default=0, lo=0, hi=LAYERS_MAX),
    )  # fmt: skip


def _count_every(n_layers: int, step: int, skip: list[int]) -> int:
    """Layers i with (i + 1) % step == 0 and i not in ``skip`` (arithmetic, no loop over layers)."""
    return n_layers // step - sum(1 for i in set(skip) if (i + 1) % step == 0)


def _qwen_moe(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Qwen2-MoE (one gated shared expert) and Qwen3-MoE (QK-norm, no shared expert)."""
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    a.update(
        mlp="gated", norm="rmsnorm", position="rope", qkv_bias=model_type == "qwen2_moe" or attn_bias,
        o_bias=attn_bias and model_type != "qwen2_moe", qk_norm=model_type == "qwen3_moe",
        **_qwen_sliding(r, a["n_layers"]),
    )  # fmt: skip
    n = a["n_layers"]
    step = r.integer("decoder_sparse_step", default=1, hi=LAYERS_MAX)
    n_moe = _count_every(n, step, r.int_list("mlp_only_layers", 0, n - 1))
    shared = r.integer("shared_expert_intermediate_size", default=0, lo=0)
    # dense layers (mlp_only_layers, decoder_sparse_step > 1) need intermediate_size; all-MoE models may omit it
    ffn_hidden = r.integer("intermediate_size") if n_moe < n else r.integer("intermediate_size", default=0, lo=0)
    return _moe(
        r, a, ffn_hidden=ffn_hidden,
        n_moe=n_moe, experts_key="num_experts", moe_hidden_key="moe_intermediate_size",
        n_shared_experts=1 if shared else 0, shared_ffn_hidden=shared, shared_expert_gate=bool(shared),
    )  # fmt: skip


def _llama4(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """Llama 4 text model: MoE every ``interleave_moe_layer_step``-th layer (Scout: all, Maverick: every
    other) with one shared expert; dense layers use ``intermediate_size_mlp``; QK-norm is a weightless L2
    norm (no parameters); RoPE layers (3 of 4) use chunked attention, which bounds their KV cache.
    """
    a = _core(r, name, model_type)
    attn_bias = r.boolean("attention_bias", False)
    a.update(mlp="gated", norm="rmsnorm", position="rope", qkv_bias=attn_bias, o_bias=attn_bias)
    n = a["n_layers"]
    moe_layers = r.int_list("moe_layers", 0, n - 1)
    n_moe = (
        len(set(moe_layers))
        if moe_layers
        else _count_every(n, r.integer("interleave_moe_layer_step", hi=LAYERS_MAX), [])
    )
    rope_layers = r.int_list("no_rope_layers", 0, 1)
    n_chunked = sum(rope_layers) if rope_layers else n - n // 4
    chunk = r.integer("attention_chunk_size", default=0, lo=0, hi=POSITIONS_MAX)
    a.update(sliding_window=chunk, n_sliding_layers=n_chunked if chunk else 0)
    moe_hidden = r.integer("intermediate_size")
    return _moe(
        r, a, ffn_hidden=r.integer("intermediate_size_mlp") if n_moe < n else 0, n_moe=n_moe,
        experts_key="num_local_experts", moe_hidden_key="intermediate_size",
        n_shared_experts=1, shared_ffn_hidden=moe_hidden,
    )  # fmt: skip


def _deepseek(r: ConfigReader, name: str, model_type: str) -> ModelArch:
    """DeepSeek V2/V3 (and Kimi K2): MLA attention, ``first_k_dense_replace`` dense layers, then MoE every
    ``moe_layer_freq``-th layer with shared experts; V3's router has a score-correction bias.
    """
    hidden = r.integer("hidden_size")
    n_layers = r.integer("num_hidden_layers", hi=LAYERS_MAX)
    n_heads = r.integer("num_attention_heads", hi=HEADS_MAX)
    n_routed = r.integer("n_routed_experts", default=0, lo=0, hi=EXPERTS_MAX)
    first_dense = r.integer("first_k_dense_replace", default=0, lo=0, hi=n_layers)
    freq = r.integer("moe_layer_freq", default=1, hi=LAYERS_MAX)
    # MoE layers: i in [first_dense, n_layers) with i % freq == 0 (multiples of freq in a half-open range)
    n_moe = (n_layers + freq - 1) // freq - (first_dense + freq - 1) // freq if n_routed else 0
    moe_hidden = r.integer("moe_intermediate_size", default=0, lo=0 if not n_routed else 1)
    n_shared = r.integer("n_shared_experts", default=0, lo=0, hi=EXPERTS_MAX)
    nope = r.integer("qk_nope_head_dim")
    rope = r.integer("qk_rope_head_dim")
    n_group = r.integer("n_group", default=0, lo=0, hi=EXPERTS_MAX)
    topk_group = r.integer("topk_group", default=0, lo=0, hi=EXPERTS_MAX)
    top_k = r.integer("num_experts_per_tok", default=0, lo=0 if not n_routed else 1, hi=min(n_routed, TOP_K_MAX))
    topk_method = r.string("topk_method", "noaux_tc")
    return ModelArch(
        name=name, model_type=model_type, n_layers=n_layers, hidden=hidden,
        vocab=r.integer("vocab_size", hi=VOCAB_MAX), n_heads=n_heads, n_kv_heads=n_heads, head_dim=nope + rope,
        v_head_dim=r.integer("v_head_dim"), attention="mla", mlp="gated",
        ffn_hidden=r.integer("intermediate_size"), norm="rmsnorm", position="rope",
        max_position=r.integer("max_position_embeddings", hi=POSITIONS_MAX),
        tied_embeddings=r.boolean("tie_word_embeddings", False),
        q_lora_rank=r.integer("q_lora_rank", default=0, lo=0), kv_lora_rank=r.integer("kv_lora_rank"),
        qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        n_dense_layers=n_layers - n_moe, n_moe_layers=n_moe, n_routed_experts=n_routed,
        n_shared_experts=n_shared, experts_per_token=top_k, moe_ffn_hidden=moe_hidden,
        shared_ffn_hidden=n_shared * moe_hidden,
        router_bias=model_type == "deepseek_v3" and topk_method == "noaux_tc",
        node_limit=topk_group if n_group > 1 and topk_group < n_group else 0,
        mtp_layers=r.integer("num_nextn_predict_layers", default=0, lo=0, hi=LAYERS_MAX),
    )  # fmt: skip


_PARSERS: dict[str, Callable[[ConfigReader, str, str], ModelArch]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "granite": _llama_like,
    "phi3": _llama_like,
    "olmo2": _llama_like,
    "mixtral": _mixtral,
    "phimoe": _phimoe,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "llama4_text": _llama4,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gemma": _gemma,
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "cohere": _cohere,
    "falcon": _falcon,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "gpt_oss": _gpt_oss,
    "glm4_moe": _glm4_moe,
}
assert set(_PARSERS) == set(SUPPORTED_MODEL_TYPES), "every supported model_type has exactly one parser"
