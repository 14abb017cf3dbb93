"""The training planner's entry point: ``plan_train(request) -> TrainPlan``.

Given a model, a GPU kind and count and any subset of parallelism choices, it picks the rest (highest
throughput that fits in memory), then reports memory per GPU, step time and its parts, throughput and
MFU, power and energy, time, GPU-hours and cost to train, and the per-phase activity the twin consumes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.plan import dualpipe
from twinloop.plan.cost import cost_usd, facility_energy_kwh
from twinloop.plan.evaluate import TrainArrays, evaluate, routing_imbalance
from twinloop.plan.failures import job_reliability
from twinloop.plan.parallel import ConfigArrays, ParallelConfig, validate_config
from twinloop.plan.search import search
from twinloop.plan.train_request import TrainContext, TrainRequest, resolve
from twinloop.plan.train_time import TimeArrays, collective_summary


@dataclass(frozen=True)
class Phase:
    """One phase of a training step as the twin sees it (per GPU).

    Attributes:
        name: ``compute`` (GEMMs, attention, element-wise, optimizer), ``communication`` (exposed
            collectives and pipeline sends) or ``bubble`` (pipeline fill/drain, idle).
        duration_s: seconds per step.
        tensor_active / sm_active / dram_active: DCGM-style activities (0..1).
        clock_mhz: SM clock in the phase; power_w: board power in the phase.
    """

    name: str
    duration_s: float
    tensor_active: float
    sm_active: float
    dram_active: float
    clock_mhz: float
    power_w: float


@dataclass(frozen=True)
class TrainPhases:
    """The per-step activity profile a twin replays.

    Attributes:
        phases: compute, communication and bubble phases in step order (their durations sum to the step).
        compute_bound_fraction: share of the step spent in compute-bound (tensor-core) work.
        requested_tdp_w: the per-GPU power limit the job asks for (its pre-run TDP request).
        step_time_s: the step the phases make up.
    """

    phases: tuple[Phase, ...]
    compute_bound_fraction: float
    requested_tdp_w: float
    step_time_s: float


@dataclass(frozen=True)
class TrainPlan:
    """Everything ``twinloop plan train`` reports (bytes, seconds, watts, joules, USD).

    Attributes:
        config: the parallelism used; chosen_by: ``user`` (every field given) or ``search``.
        memory_per_gpu_bytes: weights, gradients, optimizer, activations, comm_buffers, total.
        step_breakdown_s: compute, tp_comm, cp_comm, ep_comm, pp_p2p, bubble, dp_sync_exposed, optimizer
            (these sum to ``step_time_s``), plus dp_sync_total and overlapped (hidden communication).
        tflops_per_gpu: model TFLOP/s per GPU; mfu / hfu: model / hardware FLOP utilization vs BF16 peak.
        power_per_gpu_w: time-weighted average; peak_power_per_gpu_w: compute phase.
        energy_per_token_j: GPU energy per token; train_energy_mwh: facility energy (× PUE) for the run.
        train_flops / train_param_flops: model FLOPs for ``train_tokens`` with attention, and the
            ``6·N·D`` parameter-only convention.
        phases: the per-phase activity for the twin.
        efficiency: the efficiency factors used (name → value).
        reliability: job_mttf_h, interruptions_per_day, rate_by_component_per_h, checkpoint_write_s,
            checkpoint_interval_h (Young/Daly) and expected_ettr for the job's GPU count
            (:mod:`twinloop.plan.failures`).
        collectives: the collective model and, for the TP all-reduce and the data-parallel gradient
            collective, bytes, ranks, time and the algorithm/protocol the NCCL-like model picks.
    """

    model: str
    gpu: str
    gpus: int
    precision: str
    seq_len: int
    global_batch: int
    tokens_per_step: int
    micro_batches: int
    params_total: int
    params_active: int
    config: ParallelConfig
    chosen_by: str
    memory_per_gpu_bytes: dict[str, float]
    hbm_bytes: float
    headroom_bytes: float
    fits: bool
    step_time_s: float
    step_breakdown_s: dict[str, float]
    exposed_comm_s: float
    tflops_per_gpu: float
    mfu: float
    hfu: float
    tokens_per_s: float
    train_tokens: float
    train_steps: float
    train_time_s: float
    train_days: float
    gpu_hours: float
    train_flops: float
    train_param_flops: float
    power_limit_w: float
    compute_clock_mhz: float
    power_per_gpu_w: float
    peak_power_per_gpu_w: float
    energy_per_step_j: float
    energy_per_token_j: float
    train_energy_mwh: float
    cost_usd: float
    cost_breakdown_usd: dict[str, float]
    prices: dict[str, float]
    moe_imbalance: float
    phases: TrainPhases
    efficiency: dict[str, Any] = field(default_factory=dict)
    reliability: dict[str, Any] = field(default_factory=dict)
    collectives: dict[str, Any] = field(default_factory=dict)


def _user_config(ctx: TrainContext) -> ParallelConfig | None:
    cfg = ctx.parallel_config()
    if cfg is not None:
        validate_config(cfg, ctx.arch, ctx.gpu.gpus_per_node, ctx.request.gpus, ctx.global_batch, ctx.seq_len)
        if ctx.efficiency.pipeline_schedule == "dualpipe":
            why = dualpipe.infeasible_reason(ConfigArrays.from_configs([cfg]), ctx.global_batch)
            if why is not None:
                raise InputError("parallel config", why[0], f"{why[1]} (framework {ctx.request.framework})")
    return cfg


def _choose(ctx: TrainContext) -> tuple[ConfigArrays, str]:
    cfg = _user_config(ctx)
    if cfg is not None:
        return ConfigArrays.from_configs([cfg]), "user"
    fixed = ctx.request.fixed_parallelism()
    _check_fixed(ctx, fixed)
    result = search(ctx, "throughput")
    if result.fitting == 0:
        raise InputError(
            "plan train",
            "memory",
            f"no configuration of {ctx.arch.name} on {ctx.request.gpus} {ctx.gpu.name} fits: the smallest needs "
            f"{result.smallest_memory_bytes / 1e9:.1f} GB per GPU of {ctx.gpu.hbm_bytes / 1e9:.0f} GB "
            "(add GPUs, raise ZeRO/recompute, or lower the micro-batch)",
        )
    return result.ranked.configs.select(np.arange(1)), "search"


def _check_fixed(ctx: TrainContext, fixed: dict[str, Any]) -> None:
    """Name the reason a partial choice cannot work before searching (clearer than 'no configuration')."""
    src, arch, gpus = "parallel config", ctx.arch, ctx.request.gpus
    tp = fixed.get("tp")
    if tp is not None:
        if tp > ctx.gpu.gpus_per_node:
            raise InputError(src, "tp", f"tp={tp} exceeds gpus_per_node {ctx.gpu.gpus_per_node}")
        if arch.n_heads % tp:
            raise InputError(src, "tp", f"heads {arch.n_heads} not divisible by tp {tp}")
    cp = fixed.get("cp")
    if cp is not None and ctx.seq_len % (2 * cp):  # each rank holds two chunks (causal load balance)
        raise InputError(src, "cp", f"sequence length {ctx.seq_len} not divisible by 2·cp = {2 * cp}")
    if fixed.get("pp") is not None and fixed["pp"] > arch.n_layers:
        raise InputError(src, "pp", f"pp={fixed['pp']} exceeds the {arch.n_layers} layers")
    ep = int(fixed.get("ep", 1))
    if ep > 1 and not arch.is_moe:
        raise InputError(src, "ep", f"ep={ep} but {arch.name} has no experts")
    if arch.is_moe and arch.n_routed_experts % ep:
        raise InputError(src, "ep", f"ep={ep} does not divide {arch.name}'s {arch.n_routed_experts} routed experts")
    if gpus % ep:  # ep divides dp·cp, which divides the GPUs
        raise InputError(src, "gpus", f"{gpus} GPUs not divisible by ep {ep} (expert groups are made of whole GPUs)")
    product = 1
    for name in ("tp", "pp", "dp", "cp"):
        product *= int(fixed.get(name, 1))
    if gpus % product:
        raise InputError(src, "gpus", f"{gpus} GPUs not divisible by the fixed degrees' product {product}")


def _phases(a: TrainArrays, limit_w: float) -> TrainPhases:
    p, t = a.power, a.time
    phases = (
        Phase(
            "compute",
            float(p.compute_s[0]),
            float(p.tensor_active[0]),
            float(p.sm_active[0]),
            float(p.dram_active[0]),
            float(p.compute_clock_mhz[0]),
            float(p.compute_power_w[0]),
        ),
        Phase(
            "communication",
            float(p.comm_s[0]),
            0.0,
            float(p.comm_sm_active[0]),
            float(p.comm_dram_active[0]),
            float(p.compute_clock_mhz[0]),
            float(p.comm_power_w[0]),
        ),
        Phase("bubble", float(p.bubble_s[0]), 0.0, 0.0, 0.0, float(p.compute_clock_mhz[0]), float(p.bubble_power_w[0])),
    )
    step = float(t.step_s[0])
    bound = float(t.compute_s[0] * t.gemm_share[0]) / step
    return TrainPhases(phases, bound, limit_w, step)


def evaluate_one(ctx: TrainContext, configs: ConfigArrays) -> TrainArrays:
    """Evaluate one (or a few) configurations in the context, with the routing imbalance of each."""
    req = ctx.request
    imbalance = routing_imbalance(
        ctx.arch, configs.ep, ctx.gpu.gpus_per_node, req.moe_zipf_s, req.seed, req.moe_imbalance
    )
    w = ctx.workload
    return evaluate(
        w,
        configs,
        ctx.topology,
        ctx.power_model,
        ctx.global_batch,
        ctx.power_limit_w,
        ctx.prices,
        imbalance,
        ctx.efficiency,
    )


_MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "comm_buffers", "total")


def _breakdown(t: TimeArrays) -> dict[str, float]:
    """The first configuration's step-time parts (the first eight sum to the step) plus the DP sync and the
    communication hidden behind compute.
    """
    return {
        "compute": float(t.compute_s[0]),
        "tp_comm": float(t.tp_comm_s[0]),
        "cp_comm": float(t.cp_comm_s[0]),
        "ep_comm": float(t.ep_comm_s[0]),
        "pp_p2p": float(t.pp_p2p_s[0]),
        "bubble": float(t.bubble_s[0]),
        "dp_sync_exposed": float(t.dp_exposed_s[0]),
        "optimizer": float(t.optimizer_s[0]),
        "dp_sync_total": float(t.dp_sync_s[0]),
        "overlapped": float(t.overlapped_s[0]),
    }


def plan_train(request: TrainRequest) -> TrainPlan:
    """Plan a training job: choose missing parallelism, then report memory, time, power, energy and cost.

    Raises:
        InputError: unknown model/GPU/precision, an impossible configuration (naming why), or none fits.
    """
    ctx = resolve(request)
    configs, chosen_by = _choose(ctx)
    a = evaluate_one(ctx, configs)
    cfg = configs.config(0)
    w = ctx.workload
    t, p, m = a.time, a.power, a.memory
    step = float(t.step_s[0])
    tokens_step = ctx.global_batch * ctx.seq_len
    steps = ctx.train_tokens / tokens_step
    train_s = steps * step
    gpu_hours = train_s * request.gpus / 3600.0
    energy_step = float(p.energy_per_step_j[0]) * request.gpus
    train_energy_j = energy_step * steps
    cost_gpu = gpu_hours * ctx.prices.per_gpu_hour_usd
    total_cost = float(cost_usd(gpu_hours, train_energy_j, ctx.prices))
    breakdown = _breakdown(t)
    exposed = sum(breakdown[k] for k in ("tp_comm", "cp_comm", "ep_comm", "pp_p2p", "dp_sync_exposed"))
    memory = {k: float(getattr(m, k)[0]) for k in _MEMORY_PARTS}
    return TrainPlan(
        model=ctx.arch.name,
        gpu=ctx.gpu.name,
        gpus=request.gpus,
        precision=ctx.policy.name,
        seq_len=ctx.seq_len,
        global_batch=ctx.global_batch,
        tokens_per_step=tokens_step,
        micro_batches=ctx.global_batch // (cfg.dp * cfg.micro_batch),
        params_total=int(w.params_total),
        params_active=int(w.params_active),
        config=cfg,
        chosen_by=chosen_by,
        memory_per_gpu_bytes=memory,
        hbm_bytes=ctx.gpu.hbm_bytes,
        headroom_bytes=float(a.headroom_bytes[0]),
        fits=bool(a.fits[0]),
        step_time_s=step,
        step_breakdown_s=breakdown,
        exposed_comm_s=exposed,
        tflops_per_gpu=float(a.tflops_per_gpu[0]),
        mfu=float(a.mfu[0]),
        hfu=float(a.hfu[0]),
        tokens_per_s=float(a.tokens_per_s[0]),
        train_tokens=ctx.train_tokens,
        train_steps=steps,
        train_time_s=train_s,
        train_days=train_s / 86400.0,
        gpu_hours=gpu_hours,
        train_flops=ctx.train_tokens * 3 * w.fwd_model_flops,
        train_param_flops=ctx.train_tokens * 3 * w.fwd_param_flops,
        power_limit_w=ctx.power_limit_w,
        compute_clock_mhz=float(p.compute_clock_mhz[0]),
        power_per_gpu_w=float(p.average_power_w[0]),
        peak_power_per_gpu_w=float(p.peak_power_w[0]),
        energy_per_step_j=energy_step,
        energy_per_token_j=float(a.energy_per_token_j[0]),
        train_energy_mwh=float(facility_energy_kwh(train_energy_j, ctx.prices.pue)) / 1000.0,
        cost_usd=total_cost,
        cost_breakdown_usd={"gpu_hours": cost_gpu, "energy": total_cost - cost_gpu},
        prices={
            "per_gpu_hour_usd": ctx.prices.per_gpu_hour_usd,
            "per_kwh_usd": ctx.prices.per_kwh_usd,
            "pue": ctx.prices.pue,
        },
        moe_imbalance=float(a.imbalance[0]),
        phases=_phases(a, ctx.power_limit_w),
        efficiency={"framework": request.framework, **dataclasses.asdict(ctx.efficiency)},
        reliability=dataclasses.asdict(job_reliability(request.gpus, float(w.params_total), ctx.gpu.gpus_per_node)),
        collectives=collective_summary(w, configs, ctx.topology, ctx.efficiency),
    )
