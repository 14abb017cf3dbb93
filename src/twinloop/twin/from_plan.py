"""Jobs from the planner: a scenario job with a ``plan:`` mapping gets its per-phase activity, step time, memory
and ramp-up load from :func:`twinloop.plan.train.plan_train` or :func:`twinloop.plan.serve.plan_serve` instead of
the per-kind defaults; any ``profile:`` fields still override on top.

Training: the plan's compute phase becomes the compute phase, its communication and pipeline-bubble phases become
the (duration-weighted) communication phase; the step's compute-bound share becomes the compute fraction.
Serving: the plan's prefill phase becomes the compute phase and its decode phase the decode phase; prefill and
decode token rates per replica come from the plan's iterations at full clock.

A plan's phase activities hold at the clock the plan found for it; the twin's profiles hold at the kind's reference
clock (:func:`twinloop.hardware.power.reference_gemm_clock_x`), so each phase's DRAM activity is moved there by its
GEMM traffic, which follows the clock (``k·tensor·Δx``, :func:`twinloop.twin.dvfs.gemm_dram_per_tensor`).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import reference_gemm_clock_x, relative_speed
from twinloop.twin.dvfs import gemm_dram_per_tensor
from twinloop.twin.workload import PhaseActivity, WorkloadProfile


def at_reference_clock(gpu: GpuSpec, tensor: float, sm: float, dram: float, clock_mhz: float) -> PhaseActivity:
    """A planned phase's activities (at ``clock_mhz``) as the twin takes them: at the kind's reference clock."""
    shift = gemm_dram_per_tensor(gpu) * tensor * (reference_gemm_clock_x(gpu) - clock_mhz / gpu.sm_clock_max_mhz)
    return PhaseActivity(tensor, sm, min(1.0, max(0.0, dram + shift)))


def _train_profile(model: str, gpu: str, gpus: int, fields: tuple[tuple[str, Any], ...]) -> WorkloadProfile:
    from twinloop.plan.train import plan_train
    from twinloop.plan.train_request import make_request

    plan = plan_train(make_request(source="plan", model=model, gpu=gpu, gpus=gpus, **dict(fields)))
    compute, comm, bubble = plan.phases.phases
    wait_s = comm.duration_s + bubble.duration_s

    def mix(attr: str) -> float:
        if wait_s <= 0:
            return float(getattr(comm, attr))
        return float(getattr(comm, attr) * comm.duration_s + getattr(bubble, attr) * bubble.duration_s) / wait_s

    base = WorkloadProfile.for_kind("training")
    cf = min(1.0, plan.phases.compute_bound_fraction * plan.step_time_s / compute.duration_s)
    # The plan's compute phase ran at its power-capped clock; the twin applies its own DVFS slowdown to the
    # full-clock duration, so undo the plan's (hardware.power.relative_speed) to avoid counting it twice.
    full_clock_s = compute.duration_s * float(relative_speed(compute.clock_mhz, get_gpu(gpu).sm_clock_max_mhz, cf))
    return dataclasses.replace(
        base,
        compute_s=full_clock_s,
        comm_s=wait_s,
        compute=at_reference_clock(
            get_gpu(gpu), compute.tensor_active, compute.sm_active, compute.dram_active, compute.clock_mhz
        ),
        comm=PhaseActivity(mix("tensor_active"), mix("sm_active"), mix("dram_active")),
        compute_fraction=cf,
        tokens_per_step=float(plan.tokens_per_step),
        hbm_bytes_used=plan.memory_per_gpu_bytes["total"],
        load_bytes_per_gpu=plan.memory_per_gpu_bytes["weights"],
        requested_tdp_fraction=plan.phases.requested_tdp_w / get_gpu(gpu).tdp_w,
    )


def _serve_profile(model: str, gpu: str, gpus: int, fields: tuple[tuple[str, Any], ...]) -> WorkloadProfile:
    from twinloop.plan.serve import build_request, plan_serve

    plan = plan_serve(build_request(model=model, gpu=gpu, gpus=gpus, tp=gpus, **dict(fields)))
    pre, dec = plan.prefill, plan.decode
    spec = get_gpu(gpu)
    base = WorkloadProfile.for_kind("serving")
    load = plan.weight_bytes_per_gpu
    return dataclasses.replace(
        base,
        compute=at_reference_clock(spec, pre.tensor_active, pre.sm_active, pre.dram_active, pre.clock_mhz),
        comm=at_reference_clock(spec, dec.tensor_active, dec.sm_active, dec.dram_active, dec.clock_mhz),
        compute_fraction=min(1.0, pre.compute_s / pre.iteration_s) if pre.iteration_s > 0 else 1.0,
        tokens_per_step=pre.tokens_per_iteration / pre.iteration_s,
        decode_tokens_per_s=dec.tokens_per_iteration / dec.iteration_s,
        hbm_bytes_used=plan.weight_bytes_per_gpu + plan.kv_free_bytes_per_gpu,
        load_bytes_per_gpu=load,
        load_bandwidth_bytes_per_s=load / plan.warmup_s if plan.warmup_s > 0 else base.load_bandwidth_bytes_per_s,
        requested_tdp_fraction=min(1.5, pre.power_w / get_gpu(gpu).tdp_w),
    )


@cache
def _planned(kind: str, model: str, gpu: str, gpus: int, fields: tuple[tuple[str, Any], ...]) -> WorkloadProfile:
    make = _train_profile if kind == "training" else _serve_profile
    return make(model, gpu, gpus, fields)


def planned_profile(kind: str, plan: dict[str, Any], gpus: int, default_gpu: str) -> WorkloadProfile:
    """The profile the planner gives a ``kind`` job on ``gpus`` GPUs (one replica's GPUs for serving).

    ``plan`` holds the planner's request fields (``model`` required; ``gpu`` defaults to the site's GPU kind).
    Raises the planner's :class:`~twinloop.errors.InputError` for bad fields.
    """
    fields = dict(plan)
    model = fields.pop("model", None)
    if not isinstance(model, str):
        raise ValueError("plan needs a 'model' (a catalog model name or a config.json path)")
    gpu = str(fields.pop("gpu", default_gpu))
    return _planned(kind, model, gpu, gpus, tuple(sorted(fields.items())))


def job_profile(
    kind: str, gpus: int, profile: dict[str, float], plan: dict[str, Any] | None, gpu: str
) -> WorkloadProfile:
    """A job's profile: from the planner when ``plan`` is given, else the defaults; ``profile`` overrides either."""
    base = planned_profile(kind, plan, gpus, gpu) if plan else None
    return WorkloadProfile.for_kind(kind, base=base, **profile)
