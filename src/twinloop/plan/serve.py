"""The serving planner: model + GPUs + parallelism + batching + workload → memory, latency, throughput,
power, energy, money and warm-up (``twinloop plan serve``).

:func:`plan_serve` runs the stages of :mod:`~twinloop.plan.serve_stages` on a :class:`ServeRequest`: it
validates it and builds the replica roofline (:mod:`~twinloop.plan.serve_roofline`), sizes the paged KV cache
and its offload tier (:mod:`~twinloop.plan.kv_offload`), runs the batching strategy's queueing model
(:mod:`~twinloop.plan.batching`), optionally with speculative decoding (:mod:`~twinloop.plan.speculative`),
and prices the result (:mod:`~twinloop.plan.serve_power`, :mod:`~twinloop.plan.cost`,
:mod:`~twinloop.plan.warmup`). For an MoE model with expert parallelism, ``moe_imbalance`` is the static
hottest-rank factor the roofline times every iteration with; ``router`` (or ``routing_file``) adds the routed
slowest-rank steps beside it (:mod:`~twinloop.plan.serve_moe`, ``ServePlan.moe_routing``).

Memory per GPU: ``HBM × GPU_MEMORY_UTILIZATION − weights/(tp·pp) − activation workspace − runtime`` is
left for the KV cache. Throughput and energy count *output* tokens; ``throughput_total_tokens_per_s`` adds
prompt tokens.

The ``prefill`` and ``decode`` :class:`PhaseSummary` objects carry the per-phase activity the twin turns
into GPU power: ``tensor_active``, ``sm_active``, ``dram_active`` (0..1), ``clock_mhz``, ``power_w`` and
``time_fraction`` (share of GPU time in that phase; the rest idles at ``idle_power_w``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.hardware.gpu import GpuSpec
from twinloop.model.params import param_counts
from twinloop.plan.batching import BATCHING_STRATEGIES, BatchingResult
from twinloop.plan.serve_moe import routed_serving, validate_routing
from twinloop.plan.serve_request import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_SEQS, ServeRequest, build_request
from twinloop.plan.serve_roofline import PhaseRoofline
from twinloop.plan.serve_stages import (
    DETOKENIZE_S_PER_TOKEN,
    GPU_MEMORY_UTILIZATION,
    RUNTIME_BYTES,
    TOKENIZE_S_PER_TOKEN,
    Economics,
    MemorySizing,
    OperatingPhases,
    ServeSetup,
    activation_workspace_bytes,
    economics,
    operating_phases,
    run_batching,
    setup,
    size_memory,
    validate_parallel,
)
from twinloop.plan.speculative import expected_tokens_per_step
from twinloop.plan.warmup import WarmupPlan


@dataclass(frozen=True)
class PhaseSummary:
    """One phase at the operating point (per GPU).

    Attributes:
        iteration_s: one iteration (prefill: one prompt, or the batch for static/dynamic; decode: one round).
        tokens_per_iteration: new tokens the iteration processes (replica total).
        bound: ``compute``, ``memory`` or ``communication``.
        arithmetic_intensity_flops_per_byte / ridge_flops_per_byte: the iteration's FLOP/byte and the GPU's.
        compute_s / memory_s / comm_s: the iteration's parts.
        tensor_active / sm_active / dram_active: activity 0..1; clock_mhz after DVFS; power_w per GPU.
        time_fraction: share of GPU time spent in this phase.
    """

    iteration_s: float
    tokens_per_iteration: float
    bound: str
    arithmetic_intensity_flops_per_byte: float
    ridge_flops_per_byte: float
    compute_s: float
    memory_s: float
    comm_s: float
    tensor_active: float
    sm_active: float
    dram_active: float
    clock_mhz: float
    power_w: float
    time_fraction: float


@dataclass(frozen=True)
class ServePlan:
    """The serving plan; see the module docstring for conventions. Sequences and throughputs are totals over
    all replicas; per-GPU figures say so.
    """

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    ep: int
    replicas: int
    batching: str
    weight_dtype: str
    expert_dtype: str
    kv_dtype: str
    params_total: int
    params_active: int
    weight_bytes_total: float
    weight_bytes_per_gpu: float
    hbm_bytes_per_gpu: float
    kv_free_bytes_per_gpu: float
    kv_cache_bytes_per_token: float
    kv_cache_bytes_per_token_per_gpu: float
    block_size: int
    kv_fragmentation_fraction: float
    max_concurrent_sequences: int
    max_concurrent_sequences_hbm: int
    max_concurrent_sequences_offload: int
    decode_batch_per_replica: float
    prompt_tokens_mean: float
    output_tokens_mean: float
    rate_req_per_s: float | None
    ttft_s: float
    tpot_s: float
    queue_wait_s: float
    e2e_latency_s: float
    throughput_tokens_per_s: float
    throughput_total_tokens_per_s: float
    throughput_req_per_s: float
    capacity_req_per_s: float
    saturated: bool
    offline: bool
    prefill_replicas: int
    decode_replicas: int
    prefill: PhaseSummary
    decode: PhaseSummary
    idle_power_w: float
    idle_fraction: float
    power_per_gpu_w: float
    energy_per_token_j: float
    energy_per_request_j: float
    cost_per_million_tokens_usd: float
    cpu_tokenize_s_per_request: float
    cpu_detokenize_s_per_request: float
    warmup_s: float
    warmup: WarmupPlan
    kv_offload: dict[str, Any]
    speculative: dict[str, Any] | None
    workload: dict[str, Any]
    warnings: tuple[str, ...]
    moe_routing: dict[str, Any] | None = None


def _summary(phase: PhaseRoofline, gpu: GpuSpec, tokens: float, fraction: float, dtype_tflops: float) -> PhaseSummary:
    return PhaseSummary(
        iteration_s=float(np.mean(phase.time_s)),
        tokens_per_iteration=tokens,
        bound=phase.bound,
        arithmetic_intensity_flops_per_byte=phase.arithmetic_intensity,
        ridge_flops_per_byte=dtype_tflops * 1e12 / gpu.hbm_bandwidth_bytes_per_s,
        compute_s=float(np.mean(phase.compute_s)),
        memory_s=float(np.mean(phase.memory_s)),
        comm_s=float(np.mean(phase.comm_s)),
        tensor_active=float(np.mean(phase.tensor_active)),
        sm_active=float(np.mean(phase.sm_active)),
        dram_active=float(np.mean(phase.dram_active)),
        clock_mhz=float(np.mean(phase.clock_mhz)),
        power_w=float(np.mean(phase.power_w)),
        time_fraction=fraction,
    )


def plan_serve(request: ServeRequest) -> ServePlan:
    """Plan a serving deployment; see the module docstring (the stages are :mod:`~twinloop.plan.serve_stages`).

    Raises:
        InputError: unknown model/GPU/dtype/strategy/tier, parallelism that cannot shard the model, weights
            that do not fit the GPUs, a sequence whose KV does not fit, or routing options that do not apply.
    """
    req = request
    s = setup(req)
    if req.router is not None or req.routing_file is not None:
        validate_routing(req, s.arch)
    mem = size_memory(req, s)
    steps, result = run_batching(req, s, mem)
    phases = operating_phases(s, steps, result)
    econ = economics(req, s, phases, result)
    routing = None
    if req.router is not None or req.routing_file is not None:
        routing = routed_serving(req, s.arch, steps, result, s.wl, s.warnings)
    return _assemble(req, s, mem, result, phases, econ, routing)


def _assemble(
    req: ServeRequest,
    s: ServeSetup,
    mem: MemorySizing,
    result: BatchingResult,
    phases: OperatingPhases,
    econ: Economics,
    routing: dict[str, Any] | None,
) -> ServePlan:
    """The :class:`ServePlan` from the stages' results."""
    arch, gpu, roof, wl, spec, cap, energy = s.arch, s.gpu, s.roof, s.wl, s.spec, mem.cap, econ.energy
    cpu_tokenize = wl.prompt_mean * TOKENIZE_S_PER_TOKEN
    ttft = result.ttft_s + cpu_tokenize + DETOKENIZE_S_PER_TOKEN
    counts = param_counts(arch)
    tflops = gpu.tflops(roof.policy.dtype("dense_ffn" if arch.n_dense_layers else "expert_ffn"))
    return ServePlan(
        model=arch.name, gpu=gpu.name, gpus=req.gpus, tp=req.tp, pp=req.pp, ep=req.ep, replicas=s.replicas,
        batching=s.strategy.name, weight_dtype=req.weight_dtype, expert_dtype=req.expert_dtype or req.weight_dtype,
        kv_dtype=req.kv_dtype,
        params_total=counts.total, params_active=counts.active, weight_bytes_total=roof.weight_bytes,
        weight_bytes_per_gpu=mem.weights_per_gpu, hbm_bytes_per_gpu=gpu.hbm_bytes, kv_free_bytes_per_gpu=mem.free,
        kv_cache_bytes_per_token=roof.kv_bytes_per_token, kv_cache_bytes_per_token_per_gpu=mem.kv_per_gpu,
        block_size=req.block_size, kv_fragmentation_fraction=cap.fragmentation_fraction,
        max_concurrent_sequences=cap.max_sequences * s.replicas,
        max_concurrent_sequences_hbm=cap.hbm_sequences * s.replicas,
        max_concurrent_sequences_offload=cap.offload_sequences * s.replicas,
        decode_batch_per_replica=result.decode_batch, prompt_tokens_mean=wl.prompt_mean,
        output_tokens_mean=wl.output_mean, rate_req_per_s=wl.rate_req_per_s,
        ttft_s=ttft, tpot_s=result.tpot_s, queue_wait_s=result.queue_wait_s,
        e2e_latency_s=ttft + max(wl.output_mean - 1.0, 0.0) * result.tpot_s,
        throughput_tokens_per_s=result.output_tokens_per_s,
        throughput_total_tokens_per_s=result.output_tokens_per_s + result.prompt_tokens_per_s,
        throughput_req_per_s=result.throughput_req_per_s, capacity_req_per_s=result.capacity_req_per_s,
        saturated=result.saturated, offline=result.offline,
        prefill_replicas=result.prefill_replicas, decode_replicas=result.decode_replicas,
        prefill=_summary(phases.prefill, gpu, phases.prefill_tokens, result.prefill_fraction, tflops),
        decode=_summary(phases.decode, gpu, phases.decode_batch, result.decode_fraction, tflops),
        idle_power_w=econ.idle_w, idle_fraction=result.idle_fraction,
        power_per_gpu_w=energy.power_per_gpu_w, energy_per_token_j=energy.energy_per_token_j,
        energy_per_request_j=energy.energy_per_request_j, cost_per_million_tokens_usd=econ.cost_per_million_tokens_usd,
        cpu_tokenize_s_per_request=cpu_tokenize,
        cpu_detokenize_s_per_request=wl.output_mean * DETOKENIZE_S_PER_TOKEN,
        warmup_s=econ.warmup.warmup_s_with_gds if req.gds else econ.warmup.warmup_s_without_gds, warmup=econ.warmup,
        kv_offload={
            "tier": mem.path.tier, "capacity_bytes_per_replica": mem.path.capacity_bytes,
            "read_bytes_per_s_per_gpu": mem.path.read_bytes_per_s, "links": list(mem.path.links),
        },
        speculative=None if spec is None else {
            "draft_model": spec.draft.arch.name, "spec_tokens": spec.tokens, "acceptance": spec.acceptance,
            "tokens_per_step": expected_tokens_per_step(spec.tokens, spec.acceptance),
        },
        workload=s.info, warnings=tuple(s.warnings), moe_routing=routing,
    )  # fmt: skip


__all__ = [
    "BATCHING_STRATEGIES",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_MAX_SEQS",
    "GPU_MEMORY_UTILIZATION",
    "RUNTIME_BYTES",
    "PhaseSummary",
    "ServePlan",
    "ServeRequest",
    "activation_workspace_bytes",
    "build_request",
    "plan_serve",
    "validate_parallel",
]
