"""The weight format a Hugging Face checkpoint ships in, from its ``config.json``'s ``quantization_config``.

DeepSeek-V3 and Kimi K2 are released in FP8 (``quant_method: fp8``, 128x128 blocks), Meta's Llama 3.1 405B/70B FP8
checkpoints in ``fbgemm_fp8``, Neural Magic's and NVIDIA's in ``compressed-tensors`` or ``modelopt`` FP8 (or NVFP4),
gpt-oss with MXFP4 experts. Serving such a checkpoint in BF16 would double (or quadruple) its weights: ``plan serve``
takes the format from here when ``--weight-dtype`` is not given. A quantization twinloop has no dtype for (GPTQ or
AWQ 4-bit integers, whose matmuls dequantize to BF16) is one :class:`~twinloop.errors.InputError` that names the
field and asks for ``--weight-dtype``, never a silent BF16 plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twinloop.errors import InputError


@dataclass(frozen=True)
class CheckpointFormat:
    """Weight dtypes of a checkpoint.

    Attributes:
        weight_dtype: the dtype of the quantized linear weights (``bf16`` when only the experts are quantized).
        expert_dtype: the MoE experts' dtype when it differs from ``weight_dtype`` (gpt-oss: ``mxfp4``).
        method: ``quantization_config.quant_method`` as written.
    """

    weight_dtype: str
    expert_dtype: str | None
    method: str


_ALLOWED = "fp8, fbgemm_fp8, mxfp4, compressed-tensors/modelopt FP8, NVFP4 or INT8, bitsandbytes/GPTQ/AWQ 8-bit"


def checkpoint_format(cfg: Mapping[str, Any], source: str) -> CheckpointFormat | None:
    """The checkpoint's weight format from ``cfg["quantization_config"]`` (``None`` when there is none).

    Raises:
        InputError: a ``quantization_config`` that is not an object, or a method/bit width with no twinloop dtype.
    """
    q = cfg.get("quantization_config")
    if q is None and isinstance(cfg.get("text_config"), Mapping):
        q = cfg["text_config"].get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, Mapping):
        raise InputError(source, "quantization_config", "must be a JSON object")
    method = str(q.get("quant_method", "")).lower()
    dtype = _dtype(method, q)
    if dtype is None:
        raise InputError(
            source, "quantization_config.quant_method",
            f"{method or 'missing'!r}{_bits(q)}: no weight dtype twinloop plans for it (read: {_ALLOWED}); "
            "give --weight-dtype (and --expert-dtype) to plan the checkpoint anyway",
        )  # fmt: skip
    if method == "mxfp4":  # gpt-oss: experts in MXFP4, attention, router and embeddings left in BF16
        return CheckpointFormat("bf16", "mxfp4", method)
    return CheckpointFormat(dtype, None, method)


def _bits(q: Mapping[str, Any]) -> str:
    bits = q.get("bits", q.get("w_bit"))
    return f" ({bits}-bit)" if isinstance(bits, int) else ""


def _dtype(method: str, q: Mapping[str, Any]) -> str | None:
    """The dtype of one quantization method's weights (``None``: none twinloop plans)."""
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        return {"FP8": "fp8", "NVFP4": "fp4", "INT8": "int8"}.get(algo)
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method == "bitsandbytes":
        return "int8" if q.get("load_in_8bit") is True else None
    if method in ("gptq", "awq") and q.get("bits", q.get("w_bit")) == 8:
        return "int8"
    return None


def _compressed_tensors(q: Mapping[str, Any]) -> str | None:
    """The weights' dtype of a ``compressed-tensors`` config: its one weight scheme (FP8, INT8 or NVFP4)."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping):
        return None
    kinds: set[tuple[Any, Any]] = set()
    for group in groups.values():
        w = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(w, Mapping):
            return None
        kinds.add((w.get("num_bits"), w.get("type")))
    table: dict[tuple[Any, Any], str] = {(8, "float"): "fp8", (8, "int"): "int8", (4, "float"): "fp4"}
    return table.get(next(iter(kinds))) if len(kinds) == 1 else None


def checkpoint_format_of(name_or_path: str, source: str = "--model") -> CheckpointFormat | None:
    """:func:`checkpoint_format` of the config a model name or path resolves to (as ``load_model`` resolves it).

    Raises:
        InputError: as :func:`checkpoint_format`, or an unreadable config file.
    """
    from twinloop.model.arch import config_path
    from twinloop.model.hf_fields import read_json_file

    path = config_path(name_or_path, source)
    cfg = read_json_file(path)
    return checkpoint_format(cfg, str(path)) if isinstance(cfg, Mapping) else None
