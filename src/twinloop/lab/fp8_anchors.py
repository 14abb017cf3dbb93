"""Published FP8 training throughput on H100 (``catalog/fp8_training.yaml``) and what the planner predicts.

Each absolute point is evaluated at its *published* layout (tp/pp/cp/interleave/ZeRO, micro-batch, global batch,
sequence length) with the profile standing for its software (delayed scaling: ``megatron-core-2024``, current
scaling: ``megatron-bridge-2025``); the comparison is tokens/s per GPU. Ratio points (FP8/BF16 on another H100
system) are evaluated as the planner's FP8/BF16 tokens/s ratio at the stated setting. The role split (fitted /
predicted) is the catalog's, written before any error was looked at. For ``benchmarks/plan_fp8_h100.py`` and
``tests/plan/test_fp8_casts.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from twinloop.catalog import CATALOG_DIR
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train import TrainPlan, evaluate_one, plan_train
from twinloop.plan.train_request import TrainRequest, make_request, resolve


class Fp8Point(BaseModel):
    """One published FP8 training throughput at its published layout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    role: Literal["fitted", "predicted"]
    model: str
    gpus: int = Field(ge=1)
    precision: str
    framework: str
    global_batch: int = Field(ge=1)
    micro_batch: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    layout: dict[str, int]
    tokens_per_s_gpu: float = Field(gt=0)
    model_tflops_gpu: float = Field(gt=0)
    source: str


class Fp8Ratio(BaseModel):
    """One published FP8/BF16 throughput pair on an H100 system (compared as a ratio)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    role: Literal["fitted", "predicted"]
    model: str
    gpus: int = Field(ge=1)
    bf16_tokens_per_s_gpu: float = Field(gt=0)
    fp8_tokens_per_s_gpu: float = Field(gt=0)
    source: str
    setting: dict[str, Any]


@cache
def _raw() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CATALOG_DIR / "fp8_training.yaml").read_text())
    return data


def points() -> tuple[Fp8Point, ...]:
    """Every absolute point of ``catalog/fp8_training.yaml`` (validated)."""
    return tuple(Fp8Point(**p) for p in _raw()["points"])


def ratios() -> tuple[Fp8Ratio, ...]:
    """Every FP8/BF16 ratio point of ``catalog/fp8_training.yaml`` (validated)."""
    return tuple(Fp8Ratio(**p) for p in _raw()["ratios"])


def point_request(p: Fp8Point, precision: str | None = None) -> TrainRequest:
    """The planning request of ``p``'s published layout (``precision`` overrides the point's, e.g. ``bf16``)."""
    lay = p.layout
    dp = p.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    return make_request(
        model=p.model, gpu="h100-sxm", gpus=p.gpus, precision=precision or p.precision, framework=p.framework,
        seq_len=p.seq_len, global_batch=p.global_batch, micro_batch=p.micro_batch, tp=lay["tp"], pp=lay["pp"],
        cp=lay["cp"], dp=dp, ep=1, zero=lay["zero"], interleave=lay["interleave"], recompute="none",
        sequence_parallel=lay["tp"] > 1,
    )  # fmt: skip


def plan_point(p: Fp8Point, precision: str | None = None) -> TrainPlan:
    """The planner at ``p``'s published layout (``precision`` overrides the point's, e.g. ``bf16``)."""
    return plan_train(point_request(p, precision))


def fit_step_stretch(p: Fp8Point, low: float = 1.0, high: float = 2.0, tol: float = 1e-4) -> float:
    """The FP8 step stretch (``TrainEfficiency.fp8_step_stretch``) at which the planner meets ``p`` exactly.

    Bisection on the point's tokens/s per GPU, which falls monotonically as the stretch grows; ``low`` if the
    planner is already slower than published there.
    """
    ctx = resolve(point_request(p))
    config = ctx.parallel_config()
    if config is None:
        raise ValueError(f"{p.id}: its layout does not fix every parallelism field")
    cfgs = ConfigArrays.from_configs([config])

    def rate(stretch: float) -> float:
        eff = dataclasses.replace(ctx.efficiency, fp8_step_stretch=stretch)
        return float(evaluate_one(dataclasses.replace(ctx, efficiency=eff), cfgs).tokens_per_s[0]) / p.gpus

    if rate(low) <= p.tokens_per_s_gpu:
        return low
    while high - low > tol:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if rate(mid) > p.tokens_per_s_gpu else (low, mid)
    return 0.5 * (low + high)


@dataclass(frozen=True)
class Comparison:
    """A published figure and the planner's value of the same quantity."""

    id: str
    role: str
    published: float
    predicted: float

    @property
    def error(self) -> float:
        """Relative error ``predicted / published - 1``."""
        return self.predicted / self.published - 1


def compare_point(p: Fp8Point) -> Comparison:
    """Tokens/s per GPU: published vs the planner at the published layout."""
    return Comparison(p.id, p.role, p.tokens_per_s_gpu, plan_point(p).tokens_per_s / p.gpus)


def compare_ratio(r: Fp8Ratio) -> Comparison:
    """FP8/BF16 tokens/s ratio: published vs the planner at the stated setting (search picks tp/pp/cp)."""
    s = dict(r.setting)
    rates = {}
    for precision in ("bf16", "fp8-mixed"):
        req = make_request(model=r.model, gpu="h100-sxm", gpus=r.gpus, precision=precision, **s)
        rates[precision] = plan_train(req).tokens_per_s
    return Comparison(
        r.id, r.role, r.fp8_tokens_per_s_gpu / r.bf16_tokens_per_s_gpu, rates["fp8-mixed"] / rates["bf16"]
    )
