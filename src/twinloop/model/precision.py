"""Numeric formats: bytes per element and precision policies (op class → dtype).

A :class:`PrecisionPolicy` says which dtype each class of operation runs in or is stored in. The planners
read it three ways: compute rate (``GpuSpec.tflops(policy.dtype("expert_ffn"))``), memory
(``policy.bytes("weights_stored")``, ``policy.bytes("activations_stored")``, ...) and communication bytes
(``policy.bytes("moe_dispatch")``, ``policy.bytes("tp_comm")``, ``policy.bytes("dp_grad_comm")``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from twinloop.errors import InputError, unknown_name

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,  # stored as 32-bit; only the tensor-core math is reduced
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    # OCP Microscaling MXFP4 (MX spec v1.0): 32 FP4 (E2M1) elements share one 8-bit (E8M0) scale, 17 bytes per
    # 32; gpt-oss ships its expert weights so (the model card's 60.8 GiB checkpoint of 116.8B parameters)
    "mxfp4": 17 / 32,
}
DTYPES = tuple(BYTES_PER_ELEMENT)

OP_CLASSES: tuple[str, ...] = (
    "attn_proj",  # Q/K/V/O projections (MLA down/up projections included)
    "dense_ffn",  # FFN of dense layers
    "expert_ffn",  # routed and shared experts
    "router",  # MoE gate (kept in high precision by DeepSeek-V3)
    "attn_core",  # QK^T and softmax·V
    "lm_head",
    "embedding",
    "norm",
    "accumulate",  # GEMM accumulation
    "master_weights",  # optimizer's copy of the weights
    "optimizer_states",  # per state (Adam has two)
    "gradients",
    "weights_stored",  # the compute copy of the weights kept in memory during training
    "activations_stored",  # activations saved for the backward pass
    "moe_dispatch",  # all-to-all sending tokens to experts
    "moe_combine",  # all-to-all returning expert outputs
    "tp_comm",  # tensor/sequence-parallel all-reduce, all-gather, reduce-scatter
    "dp_grad_comm",  # data-parallel gradient reduction
)


def bytes_per_element(dtype: str, source: str = "dtype") -> float:
    """Bytes of one element of ``dtype`` (fp32/tf32 4, bf16/fp16 2, fp8/int8 1, fp4 0.5, mxfp4 0.53125).

    Raises:
        InputError: unknown dtype (listing the known ones).
    """
    if dtype not in BYTES_PER_ELEMENT:
        raise unknown_name(source, "", "dtype", dtype, DTYPES)
    return BYTES_PER_ELEMENT[dtype]


@dataclass(frozen=True)
class PrecisionPolicy:
    """A named table op class → dtype (every class of :data:`OP_CLASSES` present, every dtype known).

    Attributes:
        name: registry name (``bf16``, ``fp8-mixed``, ...).
        table: ``(op_class, dtype)`` pairs; a tuple so the policy is hashable and picklable.
        description: where the choices come from.
    """

    name: str
    table: tuple[tuple[str, str], ...]
    description: str = ""

    def __post_init__(self) -> None:
        classes = [c for c, _ in self.table]
        missing = [c for c in OP_CLASSES if c not in classes]
        if missing:
            raise InputError(f"precision policy {self.name!r}", missing[0], "op class missing from the table")
        for op_class, dtype in self.table:
            if op_class not in OP_CLASSES:
                raise unknown_name(f"precision policy {self.name!r}", op_class, "op class", op_class, OP_CLASSES)
            if dtype not in BYTES_PER_ELEMENT:
                raise unknown_name(f"precision policy {self.name!r}", op_class, "dtype", dtype, DTYPES)

    def as_dict(self) -> dict[str, str]:
        """The table as a plain dict."""
        return dict(self.table)

    def dtype(self, op_class: str) -> str:
        """The dtype of ``op_class`` (e.g. ``"fp8"``)."""
        for c, d in self.table:
            if c == op_class:
                return d
        raise unknown_name(f"precision policy {self.name!r}", "op_class", "op class", op_class, OP_CLASSES)

    def bytes(self, op_class: str) -> float:
        """Bytes per element of ``op_class``'s dtype."""
        return BYTES_PER_ELEMENT[self.dtype(op_class)]

    def with_overrides(self, overrides: Mapping[str, str], name: str | None = None) -> PrecisionPolicy:
        """A copy with some op classes set to other dtypes (validated)."""
        table = dict(self.table)
        for op_class, dtype in overrides.items():
            if op_class not in OP_CLASSES:
                raise unknown_name(f"precision policy {self.name!r}", op_class, "op class", op_class, OP_CLASSES)
            table[op_class] = dtype
        return PrecisionPolicy(name or f"{self.name}+custom", tuple(table.items()), self.description)


def _uniform(name: str, compute: str, description: str) -> PrecisionPolicy:
    """Classic mixed precision (Micikevicius 2018; the 16 bytes/param of the ZeRO paper): 16-bit compute,
    weights, activations, gradients and communication; FP32 accumulation, norms, master weights, Adam states.
    """
    table = {c: compute for c in OP_CLASSES}
    table.update(accumulate="fp32", norm="fp32", master_weights="fp32", optimizer_states="fp32")
    return PrecisionPolicy(name, tuple(table.items()), description)


def _fp8_mixed(name: str, optimizer_states: str, gradients: str, description: str) -> PrecisionPolicy:
    table = {c: "bf16" for c in OP_CLASSES}
    table.update(
        attn_proj="fp8",
        dense_ffn="fp8",
        expert_ffn="fp8",
        moe_dispatch="fp8",
        accumulate="fp32",
        norm="fp32",
        master_weights="fp32",
        optimizer_states=optimizer_states,
        gradients=gradients,
    )
    return PrecisionPolicy(name, tuple(table.items()), description)


PRECISION_POLICIES: dict[str, PrecisionPolicy] = {
    "bf16": _uniform("bf16", "bf16", "BF16 mixed precision: BF16 compute/storage/comm, FP32 master, Adam, norms"),
    "fp16": _uniform("fp16", "fp16", "FP16 mixed precision: FP16 compute/storage/comm, FP32 master, Adam, norms"),
    "fp8-mixed": _fp8_mixed(
        "fp8-mixed",
        optimizer_states="fp32",
        gradients="bf16",
        description=(
            "DeepSeek-V3-style FP8 GEMMs (attention projections, dense and expert FFN) with FP32 accumulation;"
            " attention core, LM head, embedding, router and MoE combine in BF16; dispatch in FP8; norms,"
            " master weights and Adam states FP32; BF16 gradients, weight copy and activations (so memory"
            " matches the bf16 policy apart from FP8 weights when serving)"
        ),
    ),
    "deepseek-v3-fp8": _fp8_mixed(
        "deepseek-v3-fp8",
        optimizer_states="bf16",
        gradients="fp32",
        description=(
            "As fp8-mixed, but exactly as the DeepSeek-V3 report: Adam moments in BF16, gradients accumulated in FP32"
        ),
    ),
}


def get_policy(name: str, source: str = "--precision") -> PrecisionPolicy:
    """A registered precision policy by name.

    Raises:
        InputError: unknown name (with the closest known names).
    """
    if name not in PRECISION_POLICIES:
        raise unknown_name(source, "", "precision policy", name, PRECISION_POLICIES)
    return PRECISION_POLICIES[name]
