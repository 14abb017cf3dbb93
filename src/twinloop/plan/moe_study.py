"""The MoE routing study: routers × placements on one model and cluster, with the planner's step time.

For each (router, placement) the routing simulator (:mod:`twinloop.model.routing`) runs the same seeded
drifting stream; the per-step hottest-rank load factor (hottest rank's copies / the nominal ``tokens·K/ep``)
is then handed, one step per entry, to the training planner's vectorized :func:`~twinloop.plan.evaluate.evaluate`
as its MoE ``imbalance`` (which stretches the expert GEMMs and the EP all-to-all of the slowest rank). The
parallel configuration is the planner's own choice for the given GPUs and EP degree. The simulated batch
is one MoE layer's tokens per step; its load ratio, not its size, is what carries over to the planner's step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.model.arch import load_model
from twinloop.model.routing import AffinityStream, DriftSpec, make_router, router_names
from twinloop.model.routing import placement as pl
from twinloop.model.routing.simulator import StepMetrics, simulate, warmup_choices
from twinloop.plan.evaluate import evaluate
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train import _choose
from twinloop.plan.train_request import make_request, resolve


@dataclass(frozen=True)
class StudyRow:
    """One (router, placement): per-step metrics and their summary.

    Attributes:
        router / placement: names; metrics: per-step metrics; step_s: planner step time per step (s).
        summary: worst/mean imbalance, drop and redirect shares, bytes, worst/mean step, quality.
    """

    router: str
    placement: str
    metrics: StepMetrics
    step_s: np.ndarray
    summary: dict[str, float]


@dataclass(frozen=True)
class Study:
    """The whole study: inputs, the planner's configuration and one row per (router, placement)."""

    model: str
    gpu: str
    gpus: int
    ep: int
    steps: int
    tokens_per_step: int
    config: dict[str, Any]
    rows: list[StudyRow]
    ranks_per_node: int = 1


def _summary(m: StepMetrics, step_s: np.ndarray, copies: float) -> dict[str, float]:
    return {
        "imbalance_max": float(m.imbalance.max()),
        "imbalance_mean": float(m.imbalance.mean()),
        "load_factor_max": float(m.load_factor.max()),
        "dropped_share": float(m.dropped.sum() / copies),
        "redirected_share": float(m.redirected.sum() / copies),
        "a2a_intra_bytes_mean": float(m.a2a_intra_bytes.mean()),
        "a2a_inter_bytes_mean": float(m.a2a_inter_bytes.mean()),
        "step_s_max": float(step_s.max()),
        "step_s_mean": float(step_s.mean()),
        "step_s_burst_mean": float(step_s[m.burst].mean()) if m.burst.any() else float("nan"),
        "quality": float(m.quality.mean()),
        "quality_min": float(m.quality.min()),
        "served_true": float(m.served_true.mean()),
        "mean_k": float(m.mean_k.mean()),
    }


def run_study(
    model: str,
    gpus: int,
    ep: int,
    gpu: str = "h100-sxm",
    routers: list[str] | None = None,
    placements: list[str] | None = None,
    steps: int = 96,
    drift: DriftSpec | None = None,
    replica_slots_per_rank: int = 1,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> Study:
    """Run every (router, placement) on the same drifting stream and time each step with the planner.

    Args:
        model: catalog name or HF config path (must have MoE layers).
        gpus: GPUs of the training cluster.
        ep: expert-parallel group size.
        gpu: catalog GPU name.
        routers: router names (default: all registered routers).
        placements: placement names (default: both).
        steps: router steps.
        drift: the token stream (default :class:`DriftSpec`).
        replica_slots_per_rank: spare expert slots per rank for the affinity placement's replicas.
        seed: stream seed.
        on_step: progress callback (called once per simulated step).
    """
    arch = load_model(model)
    if not arch.is_moe:
        raise InputError("--model", "", f"{arch.name} has no MoE layers")
    routers = routers or router_names()
    placements = placements or list(pl.PLACEMENTS)
    for p in placements:
        if p not in pl.PLACEMENTS:
            raise InputError("--placement", "", f"unknown placement {p!r} (allowed: {', '.join(pl.PLACEMENTS)})")
    router_objs = {r: make_router(r) for r in routers}
    ctx = resolve(make_request("plan moe", model=model, gpu=gpu, gpus=gpus, ep=ep))
    configs, _ = _choose(ctx)
    per_node = int(np.gcd(ep, ctx.gpu.gpus_per_node))
    drift = drift or DriftSpec()
    stream = AffinityStream.create(drift, arch.n_routed_experts, seed)
    e, k = arch.n_routed_experts, arch.experts_per_token
    built: dict[str, pl.Placement] = {}
    for p in placements:
        if p == "contiguous":
            built[p] = pl.contiguous(e, ep, per_node)
        else:
            co, load = pl.coactivation(warmup_choices(stream, k), e)
            built[p] = pl.affinity(co, load, ep, per_node, replica_slots_per_rank)
    policy = ctx.policy
    bytes_copy = arch.hidden * (policy.bytes("moe_dispatch") + policy.bytes("moe_combine"))
    rows = []
    many = ConfigArrays.from_configs([configs.config(0)] * steps)
    for pname, placement in built.items():
        for rname, router in router_objs.items():
            m = simulate(router, stream, placement, k, steps, arch.node_limit, bytes_copy, on_step)
            w = ctx.workload
            a = evaluate(
                w, many, ctx.topology, ctx.power_model, ctx.global_batch, ctx.power_limit_w, ctx.prices,
                np.asarray(m.load_factor, dtype=np.float64),
            )  # fmt: skip
            step_s = np.asarray(a.time.step_s, dtype=np.float64)
            rows.append(StudyRow(rname, pname, m, step_s, _summary(m, step_s, drift.tokens_per_step * k * steps)))
    config = dataclasses.asdict(configs.config(0))
    return Study(arch.name, ctx.gpu.name, gpus, ep, steps, drift.tokens_per_step, config, rows, per_node)


def study_json(s: Study) -> dict[str, Any]:
    """The study as a JSON-able document (per-step series included; ``ranks`` holds the per-(step, rank)
    traffic ``plan serve --routing`` reads).
    """
    return {
        "model": s.model, "gpu": s.gpu, "gpus": s.gpus, "ep": s.ep, "steps": s.steps,
        "tokens_per_step": s.tokens_per_step, "ranks_per_node": s.ranks_per_node, "config": s.config,
        "rows": [
            {
                "router": r.router, "placement": r.placement, "summary": r.summary,
                "per_step": {
                    "imbalance": r.metrics.imbalance.tolist(), "load_factor": r.metrics.load_factor.tolist(),
                    "dropped": r.metrics.dropped.tolist(), "redirected": r.metrics.redirected.tolist(),
                    "a2a_intra_bytes": r.metrics.a2a_intra_bytes.tolist(),
                    "a2a_inter_bytes": r.metrics.a2a_inter_bytes.tolist(), "quality": r.metrics.quality.tolist(),
                    "step_s": r.step_s.tolist(), "burst": r.metrics.burst.tolist(),
                    "served_true": r.metrics.served_true.tolist(), "mean_k": r.metrics.mean_k.tolist(),
                },
                "ranks": {"rank_load": r.metrics.rank_load.tolist()} | {
                    f.name: getattr(r.metrics.ranks, f.name).tolist() for f in dataclasses.fields(r.metrics.ranks)
                },
            }
            for r in s.rows
        ],
    }  # fmt: skip
