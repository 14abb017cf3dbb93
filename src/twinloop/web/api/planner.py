"""The planner over HTTP: ``POST /api/plan/train`` and ``POST /api/plan/serve`` call the planner library.

Only catalog names are accepted for models and GPUs (the library also reads config files from paths; a
request must never name a path), and every number is bounded. Planner input errors come back as 422 with
the planner's one-line message.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field

from twinloop.errors import InputError
from twinloop.hardware.gpu import gpu_catalog
from twinloop.model.arch import catalog_model_names
from twinloop.model.precision import DTYPES, PRECISION_POLICIES
from twinloop.plan.batching import BATCHING_STRATEGIES
from twinloop.plan.kv_offload import OFFLOAD_TIERS
from twinloop.plan.serve import GPU_MEMORY_UTILIZATION, build_request, plan_serve
from twinloop.plan.train_flow import plan_train_flow
from twinloop.web.auth import require_read
from twinloop.web.models import error_responses
from twinloop.web.params import invalid

router = APIRouter(
    prefix="/api/plan", tags=["planner"], dependencies=[Depends(require_read)], responses=error_responses(401, 403)
)

Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description="catalog name")]
Degree = Annotated[int | None, Field(default=None, ge=1, le=4096)]


class _Form(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class TrainForm(_Form):
    """The training planner's inputs (a subset of ``plan train``'s flags)."""

    model: Name = "llama-3-70b"
    gpu: Name = "h100-sxm"
    gpus: int = Field(1024, ge=1, le=131_072)
    precision: Name = "bf16"
    seq_len: int | None = Field(None, ge=128, le=1_048_576)
    global_batch: int | None = Field(None, ge=1, le=10_000_000)
    tp: Degree = None
    pp: Degree = None
    dp: Degree = None
    ep: Degree = None
    cp: Degree = None
    zero: int | None = Field(None, ge=0, le=3)
    recompute: Literal["none", "selective", "full"] | None = None
    micro_batch: int | None = Field(None, ge=1, le=4096)
    power_limit_w: float | None = Field(None, gt=0, le=5000)
    sweep_points: int = Field(21, ge=2, le=101)


class SweepPoint(BaseModel):
    """One power limit of the sweep."""

    power_limit_w: float | None
    step_time_s: float | None
    energy_per_step_j: float | None
    average_power_w: float | None
    compute_clock_mhz: float | None
    knee: bool


class TrainResult(BaseModel):
    """What the planner page shows for training."""

    model: str
    gpu: str
    gpus: int
    precision: str
    config: dict[str, int | str | bool]
    chosen_by: str
    memory_per_gpu_bytes: dict[str, float | None]
    hbm_bytes: float | None
    fits: bool
    step_time_s: float | None
    step_breakdown_s: dict[str, float | None]
    tokens_per_s: float | None
    mfu: float | None
    power_per_gpu_w: float | None
    peak_power_per_gpu_w: float | None
    energy_per_token_j: float | None
    train_days: float | None
    cost_usd: float | None
    knee_power_limit_w: float | None
    power_sweep: list[SweepPoint]


class ServeForm(_Form):
    """The serving planner's inputs (a subset of ``plan serve``'s flags; no files)."""

    model: Name = "llama-3-70b"
    gpu: Name = "h100-sxm"
    gpus: int = Field(8, ge=1, le=100_000)
    tp: int = Field(8, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=1024)
    ep: int = Field(1, ge=1, le=1024)
    weight_dtype: Name = "bf16"
    kv_dtype: Name = "bf16"
    batching: Name = "continuous"
    prompt_tokens: int = Field(1024, ge=1, le=1_000_000)
    output_tokens: int = Field(256, ge=1, le=1_000_000)
    rate_req_per_s: float | None = Field(None, gt=0, le=1e6)
    kv_offload: Literal["none", "dram", "cxl", "nvme"] = "none"
    kv_offload_gb: float = Field(0.0, ge=0, le=1e6)


class ServePhase(BaseModel):
    """One serving phase per GPU: iteration time split and power."""

    iteration_s: float | None
    compute_s: float | None
    memory_s: float | None
    comm_s: float | None
    bound: str
    clock_mhz: float | None
    power_w: float | None
    time_fraction: float | None


class ServeResult(BaseModel):
    """What the planner page shows for serving."""

    model: str
    gpu: str
    gpus: int
    replicas: int
    batching: str
    memory_per_gpu_bytes: dict[str, float | None]
    max_concurrent_sequences: int
    ttft_s: float | None
    tpot_s: float | None
    e2e_latency_s: float | None
    throughput_tokens_per_s: float | None
    capacity_req_per_s: float | None
    saturated: bool
    power_per_gpu_w: float | None
    energy_per_token_j: float | None
    cost_per_million_tokens_usd: float | None
    prefill: ServePhase
    decode: ServePhase
    warnings: list[str]


class PlanOptions(BaseModel):
    """Names the forms may use."""

    models: list[str]
    gpus: list[str]
    precisions: list[str]
    dtypes: list[str]
    batching: list[str]
    kv_offload: list[str]


def _check(name: str, known: list[str], what: str, field: str) -> None:
    if name not in known:
        raise invalid(("body", field), f"unknown {what} {name!r} (known: {', '.join(known)})")


def _planner_error(exc: Exception) -> RequestValidationError:
    field = exc.source.lstrip("-").replace("-", "_") if isinstance(exc, InputError) else ""
    return invalid(("body", field) if field and " " not in field else ("body",), str(exc))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def clean(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by ``None`` (JSON has no inf/NaN)."""
    if isinstance(obj, float):
        return _finite(obj)
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


@router.get("/options", response_model=PlanOptions, summary="Catalog names for the planner forms")
def options() -> PlanOptions:
    """Models, GPUs, precision policies, dtypes, batching strategies and KV offload tiers."""
    return PlanOptions(
        models=catalog_model_names(),
        gpus=sorted(gpu_catalog()),
        precisions=sorted(PRECISION_POLICIES),
        dtypes=list(DTYPES),
        batching=sorted(BATCHING_STRATEGIES),
        kv_offload=list(OFFLOAD_TIERS),
    )


@router.post(
    "/train",
    response_model=TrainResult,
    responses=error_responses(400),
    summary="Plan training: memory, step time, power sweep",
)
def train(form: TrainForm) -> TrainResult:
    """Run ``plan train`` and a power sweep of the chosen configuration."""
    _check(form.model, catalog_model_names(), "model", "model")
    _check(form.gpu, sorted(gpu_catalog()), "GPU", "gpu")
    _check(form.precision, sorted(PRECISION_POLICIES), "precision policy", "precision")
    fields = form.model_dump(exclude={"sweep_points"})
    try:
        outcome = plan_train_flow(fields, sweep=True, sweep_points=form.sweep_points)
    except (InputError, ValueError) as exc:
        raise _planner_error(exc) from None
    sweep = outcome.sweep
    assert sweep is not None  # asked for
    doc = clean(dataclasses.asdict(outcome.plan))
    keep = set(TrainResult.model_fields) - {"knee_power_limit_w", "power_sweep"}
    return TrainResult(
        **{k: doc[k] for k in keep},
        knee_power_limit_w=_finite(sweep.knee_power_limit_w),
        power_sweep=[SweepPoint.model_validate(clean(r)) for r in sweep.rows()],
    )


@router.post(
    "/serve",
    response_model=ServeResult,
    responses=error_responses(400),
    summary="Plan serving: memory, latency, throughput, power",
)
def serve(form: ServeForm) -> ServeResult:
    """Run ``plan serve`` (no trace file: prompt and output lengths come from the form)."""
    _check(form.model, catalog_model_names(), "model", "model")
    _check(form.gpu, sorted(gpu_catalog()), "GPU", "gpu")
    _check(form.weight_dtype, list(DTYPES), "weight dtype", "weight_dtype")
    _check(form.kv_dtype, list(DTYPES), "KV dtype", "kv_dtype")
    _check(form.batching, sorted(BATCHING_STRATEGIES), "batching strategy", "batching")
    try:
        p = plan_serve(build_request(**form.model_dump()))
    except (InputError, ValueError) as exc:
        raise _planner_error(exc) from None
    usable = p.hbm_bytes_per_gpu * GPU_MEMORY_UTILIZATION
    other = max(0.0, usable - p.weight_bytes_per_gpu - p.kv_free_bytes_per_gpu)
    memory = {
        "weights": p.weight_bytes_per_gpu,
        "kv_cache": p.kv_free_bytes_per_gpu,
        "activations_runtime": other,
        "reserved": p.hbm_bytes_per_gpu - usable,
    }

    def phase(ph: object) -> dict[str, Any]:
        return {k: getattr(ph, k) for k in ServePhase.model_fields}

    doc = {
        "model": p.model,
        "gpu": p.gpu,
        "gpus": p.gpus,
        "replicas": p.replicas,
        "batching": p.batching,
        "memory_per_gpu_bytes": memory,
        "max_concurrent_sequences": p.max_concurrent_sequences,
        "ttft_s": p.ttft_s,
        "tpot_s": p.tpot_s,
        "e2e_latency_s": p.e2e_latency_s,
        "throughput_tokens_per_s": p.throughput_tokens_per_s,
        "capacity_req_per_s": p.capacity_req_per_s,
        "saturated": p.saturated,
        "power_per_gpu_w": p.power_per_gpu_w,
        "energy_per_token_j": p.energy_per_token_j,
        "cost_per_million_tokens_usd": p.cost_per_million_tokens_usd,
        "prefill": phase(p.prefill),
        "decode": phase(p.decode),
        "warnings": list(p.warnings),
    }
    return ServeResult.model_validate(clean(doc))
