"""A normalized, typed description of a decoder-only transformer, built from Hugging Face config.json.

Every model kind twinloop supports (llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe,
deepseek_v2, deepseek_v3, gpt2, gpt_neox) is read into the same :class:`ModelArch`, so parameter, FLOP,
memory and KV-cache formulas are written once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from twinloop.catalog import CATALOG_DIR
from twinloop.errors import InputError, unknown_name

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
)

MODELS_DIR = CATALOG_DIR / "models"


@dataclass(frozen=True)
class ModelArch:
    """Decoder-only transformer architecture (all sizes in elements, not bytes).

    Attributes:
        attention: ``mha`` (n_kv_heads == n_heads), ``gqa`` (fewer KV heads) or ``mla`` (DeepSeek latent).
        head_dim: per-head query/key dim for MHA/GQA (for MLA: qk_nope_head_dim + qk_rope_head_dim).
        v_head_dim: per-head value dim.
        mlp: ``gated`` (SwiGLU: gate, up, down) or ``plain`` (GELU: up, down).
        ffn_hidden: intermediate size of dense FFN layers.
        n_dense_layers / n_moe_layers: how many layers have a dense FFN vs an MoE block.
        moe_ffn_hidden: intermediate size of one routed expert; shared_ffn_hidden: of all shared experts together.
        linear_bias: every linear layer has a bias (gpt2, gpt_neox); qkv_bias: only Q, K, V do (qwen2).
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
    norm: Literal["rmsnorm", "layernorm"]
    position: Literal["rope", "learned"]
    max_position: int
    tied_embeddings: bool
    linear_bias: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
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


def _get(cfg: Mapping[str, Any], source: str, key: str, default: Any = None, *, required: bool = True) -> Any:
    value = cfg.get(key, default)
    if value is None and required:
        raise InputError(source, key, "required field missing")
    return value


def _positive_int(cfg: Mapping[str, Any], source: str, key: str, default: Any = None) -> int:
    value = _get(cfg, source, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(source, key, f"must be a positive integer, got {value!r}")
    return value


def _moe_layer_split(cfg: Mapping[str, Any], source: str, n_layers: int, sparse_key: str) -> tuple[int, int]:
    """(dense, moe) layer counts for qwen-style MoE (decoder_sparse_step + mlp_only_layers)."""
    step = int(cfg.get(sparse_key, 1) or 1)
    mlp_only = set(cfg.get("mlp_only_layers", []) or [])
    n_moe = sum(1 for i in range(n_layers) if i not in mlp_only and (i + 1) % step == 0)
    return n_layers - n_moe, n_moe


def from_hf_config(cfg: Mapping[str, Any], name: str, source: str = "config.json") -> ModelArch:
    """Build a :class:`ModelArch` from a Hugging Face ``config.json`` mapping.

    Raises:
        InputError: unsupported ``model_type`` (listing the supported ones) or a missing/invalid field.
    """
    if not isinstance(cfg, Mapping):
        raise InputError(source, "", "expected a JSON object")
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise InputError(
            source,
            "model_type",
            f"unsupported model_type {model_type!r} (supported: {', '.join(SUPPORTED_MODEL_TYPES)})",
        )

    if model_type == "gpt2":
        hidden = _positive_int(cfg, source, "n_embd")
        n_heads = _positive_int(cfg, source, "n_head")
        inner = cfg.get("n_inner") or 4 * hidden
        n_layers = _positive_int(cfg, source, "n_layer")
        if hidden % n_heads:
            raise InputError(source, "n_head", f"must divide n_embd {hidden}, got {n_heads}")
        return ModelArch(
            name=name, model_type=model_type, n_layers=n_layers, hidden=hidden,
            vocab=_positive_int(cfg, source, "vocab_size"), n_heads=n_heads, n_kv_heads=n_heads,
            head_dim=hidden // n_heads, v_head_dim=hidden // n_heads, attention="mha", mlp="plain",
            ffn_hidden=int(inner), norm="layernorm", position="learned",
            max_position=_positive_int(cfg, source, "n_positions", cfg.get("n_ctx")),
            tied_embeddings=bool(cfg.get("tie_word_embeddings", True)), linear_bias=True,
            n_dense_layers=n_layers,
        )  # fmt: skip

    hidden = _positive_int(cfg, source, "hidden_size")
    n_layers = _positive_int(cfg, source, "num_hidden_layers")
    n_heads = _positive_int(cfg, source, "num_attention_heads")
    vocab = _positive_int(cfg, source, "vocab_size")
    max_position = _positive_int(cfg, source, "max_position_embeddings")
    if hidden % n_heads and "head_dim" not in cfg and model_type not in ("deepseek_v2", "deepseek_v3"):
        raise InputError(source, "num_attention_heads", f"must divide hidden_size {hidden}")

    if model_type == "gpt_neox":
        return ModelArch(
            name=name, model_type=model_type, n_layers=n_layers, hidden=hidden, vocab=vocab,
            n_heads=n_heads, n_kv_heads=n_heads, head_dim=hidden // n_heads, v_head_dim=hidden // n_heads,
            attention="mha", mlp="plain", ffn_hidden=_positive_int(cfg, source, "intermediate_size"),
            norm="layernorm", position="rope", max_position=max_position,
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), linear_bias=True,
            n_dense_layers=n_layers,
        )  # fmt: skip

    tied = bool(cfg.get("tie_word_embeddings", False))
    if model_type in ("deepseek_v2", "deepseek_v3"):
        n_routed = int(cfg.get("n_routed_experts") or 0)
        first_dense = int(cfg.get("first_k_dense_replace", 0) or 0)
        freq = int(cfg.get("moe_layer_freq", 1) or 1)
        n_moe = sum(1 for i in range(n_layers) if n_routed and i >= first_dense and i % freq == 0)
        moe_hidden = int(cfg.get("moe_intermediate_size") or 0)
        n_shared = int(cfg.get("n_shared_experts") or 0)
        nope = _positive_int(cfg, source, "qk_nope_head_dim")
        rope = _positive_int(cfg, source, "qk_rope_head_dim")
        n_group = int(cfg.get("n_group") or 0)
        topk_group = int(cfg.get("topk_group") or 0)
        return ModelArch(
            name=name, model_type=model_type, n_layers=n_layers, hidden=hidden, vocab=vocab,
            n_heads=n_heads, n_kv_heads=n_heads, head_dim=nope + rope,
            v_head_dim=_positive_int(cfg, source, "v_head_dim"), attention="mla", mlp="gated",
            ffn_hidden=_positive_int(cfg, source, "intermediate_size"), norm="rmsnorm", position="rope",
            max_position=max_position, tied_embeddings=tied,
            q_lora_rank=int(cfg.get("q_lora_rank") or 0), kv_lora_rank=_positive_int(cfg, source, "kv_lora_rank"),
            qk_nope_head_dim=nope, qk_rope_head_dim=rope,
            n_dense_layers=n_layers - n_moe, n_moe_layers=n_moe, n_routed_experts=n_routed,
            n_shared_experts=n_shared, experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
            moe_ffn_hidden=moe_hidden, shared_ffn_hidden=n_shared * moe_hidden,
            router_bias=model_type == "deepseek_v3" and cfg.get("topk_method", "noaux_tc") == "noaux_tc",
            node_limit=topk_group if n_group > 1 and topk_group < n_group else 0,
            mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        )  # fmt: skip

    n_kv = int(cfg.get("num_key_value_heads") or n_heads)
    if n_kv <= 0 or n_heads % n_kv:
        raise InputError(source, "num_key_value_heads", f"must divide num_attention_heads {n_heads}, got {n_kv}")
    head_dim = int(cfg.get("head_dim") or hidden // n_heads)
    common: dict[str, Any] = dict(
        name=name, model_type=model_type, n_layers=n_layers, hidden=hidden, vocab=vocab, n_heads=n_heads,
        n_kv_heads=n_kv, head_dim=head_dim, v_head_dim=head_dim, attention="mha" if n_kv == n_heads else "gqa",
        mlp="gated", norm="rmsnorm", position="rope", max_position=max_position, tied_embeddings=tied,
        qkv_bias=model_type in ("qwen2", "qwen2_moe") or bool(cfg.get("attention_bias", False)),
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
    )  # fmt: skip
    if model_type == "mixtral":
        return ModelArch(
            **common, ffn_hidden=_positive_int(cfg, source, "intermediate_size"), n_moe_layers=n_layers,
            n_routed_experts=_positive_int(cfg, source, "num_local_experts"),
            experts_per_token=_positive_int(cfg, source, "num_experts_per_tok"),
            moe_ffn_hidden=_positive_int(cfg, source, "intermediate_size"),
        )  # fmt: skip
    if model_type in ("qwen2_moe", "qwen3_moe"):
        n_dense, n_moe = _moe_layer_split(cfg, source, n_layers, "decoder_sparse_step")
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        return ModelArch(
            **common, ffn_hidden=int(cfg.get("intermediate_size") or 0), n_dense_layers=n_dense,
            n_moe_layers=n_moe, n_routed_experts=_positive_int(cfg, source, "num_experts"),
            n_shared_experts=1 if shared else 0, experts_per_token=_positive_int(cfg, source, "num_experts_per_tok"),
            moe_ffn_hidden=_positive_int(cfg, source, "moe_intermediate_size"), shared_ffn_hidden=shared,
            shared_expert_gate=bool(shared),
        )  # fmt: skip
    return ModelArch(**common, ffn_hidden=_positive_int(cfg, source, "intermediate_size"), n_dense_layers=n_layers)


def catalog_model_names() -> list[str]:
    """Names of the packaged model configs (``catalog/models/<name>.json``)."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def load_config_file(path: Path) -> ModelArch:
    """Read a Hugging Face config.json file into a :class:`ModelArch` (name = file's parent or stem)."""
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read file: {exc.strerror}") from None
    name = path.stem if path.stem != "config" else path.resolve().parent.name
    return from_hf_config(cfg, name=name, source=str(path))


@cache
def _catalog_model(name: str) -> ModelArch:
    return load_config_file(MODELS_DIR / f"{name}.json")


def load_model(name_or_path: str, source: str = "--model") -> ModelArch:
    """A catalog model name (``llama-3-70b``), a path to a Hugging Face config.json, or a folder holding one."""
    if name_or_path in catalog_model_names():
        return _catalog_model(name_or_path)
    path = Path(name_or_path)
    if path.is_dir():  # a downloaded model folder: read its config.json
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise InputError(source, "", f"{name_or_path}: no such config file")
        return load_config_file(path)
    raise unknown_name(source, "", "model", name_or_path, catalog_model_names())
