"""The planner showcase: dense/GQA vs MoE/MLA, H100 vs H200, BF16 vs FP8, for training and serving.

Each case is planned twice with the real planners: training on a fixed cluster with the parallelism chosen by
the search, and serving on the smallest 8-GPU-multiple deployment (TP 8, more pipeline stages as needed) that
holds the weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from twinloop.errors import InputError
from twinloop.plan.serve import ServeRequest, plan_serve
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request

DEFAULT_CASES: tuple[tuple[str, str, str], ...] = tuple(
    (model, gpu, precision)
    for model in ("llama-3-70b", "deepseek-v3")
    for gpu in ("h100-sxm", "h200-sxm")
    for precision in ("bf16", "fp8-mixed")
)

_SERVE_WEIGHT_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8-mixed": "fp8"}


@dataclass(frozen=True)
class ShowcaseRow:
    """One (model, GPU, precision) case: training and serving figures side by side."""

    model: str
    gpu: str
    precision: str
    params_total: int
    params_active: int
    kv_cache_bytes_per_token: float
    train: dict[str, Any]
    serve: dict[str, Any]


def _serve(model: str, gpu: str, precision: str) -> Any:
    weight_dtype = _SERVE_WEIGHT_DTYPE.get(precision, "bf16")
    last: InputError | None = None
    for stages in (1, 2, 4, 8):
        try:
            return plan_serve(ServeRequest(model=model, gpu=gpu, gpus=8 * stages, tp=8, pp=stages,
                                           weight_dtype=weight_dtype, kv_dtype="bf16"))  # fmt: skip
        except InputError as exc:
            last = exc
    assert last is not None
    raise last


def showcase(
    cases: Sequence[tuple[str, str, str]] = DEFAULT_CASES,
    train_gpus: int = 2048,
    on_case: Callable[[int], None] | None = None,
) -> list[ShowcaseRow]:
    """Plan every case; ``on_case(i)`` is called after each (for a progress bar)."""
    rows = []
    for i, (model, gpu, precision) in enumerate(cases):
        t = plan_train(make_request(model=model, gpu=gpu, gpus=train_gpus, precision=precision))
        s = _serve(model, gpu, precision)
        rows.append(
            ShowcaseRow(
                model=model,
                gpu=gpu,
                precision=precision,
                params_total=t.params_total,
                params_active=t.params_active,
                kv_cache_bytes_per_token=s.kv_cache_bytes_per_token,
                train={
                    "gpus": t.gpus,
                    "config": asdict(t.config),
                    "memory_per_gpu_bytes": t.memory_per_gpu_bytes["total"],
                    "step_time_s": t.step_time_s,
                    "mfu": t.mfu,
                    "tokens_per_s": t.tokens_per_s,
                    "power_per_gpu_w": t.power_per_gpu_w,
                    "energy_per_token_j": t.energy_per_token_j,
                },
                serve={
                    "gpus": s.gpus,
                    "tp": s.tp,
                    "pp": s.pp,
                    "weight_dtype": s.weight_dtype,
                    "max_concurrent_sequences": s.max_concurrent_sequences,
                    "ttft_s": s.ttft_s,
                    "tpot_s": s.tpot_s,
                    "throughput_tokens_per_s": s.throughput_tokens_per_s,
                    "power_per_gpu_w": s.power_per_gpu_w,
                    "energy_per_token_j": s.energy_per_token_j,
                    "cost_per_million_tokens_usd": s.cost_per_million_tokens_usd,
                },
            )
        )
        if on_case:
            on_case(i)
    return rows
