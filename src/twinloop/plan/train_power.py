"""Power per GPU over a training step, with DVFS at the power limit (vectorized over configurations).

A step has three phases, each with DCGM-style activities (0..1) that drive
:class:`twinloop.hardware.power.GpuPowerModel`, computed by the rules the model was fitted with
(:mod:`twinloop.plan.activity`):

* compute (GEMMs, attention, element-wise kernels, optimizer): tensor activity = the step's tensor-core FLOPs at
  their dtype's peak over the phase's time (both at its clock); SM activity 1; DRAM activity = the memory's busy
  time (the GEMMs' measured HBM bytes per FLOP over the usable bandwidth, plus the memory-bound kernels and the
  optimizer) over the phase's time;
* communication (exposed TP/CP/EP/PP/DP collectives): NCCL's CTAs on a few SMs and its HBM traffic per bus byte
  (:func:`twinloop.plan.activity.comm_activity`), no tensor cores;
* bubble (pipeline fill/drain): idle with a live CUDA context (static + the context's clocked power).

Under the power limit the compute phase runs at the highest clock whose power fits
(:meth:`GpuPowerModel.max_clock_for_power`, iterated with the activities that clock implies) and slows by
``1/relative_speed`` for its compute-bound share;
communication and bubbles are clock-insensitive. Average power is time-weighted; peak is the compute phase.
Where each activity constant comes from: :mod:`twinloop.plan.efficiency`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import GpuPowerModel, relative_speed
from twinloop.plan import efficiency as effc
from twinloop.plan.activity import ComputeWork, comm_activity, compute_activity, gemm_hbm_s
from twinloop.plan.collectives import Topology
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY, TrainEfficiency
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train_time import TimeArrays, step_time
from twinloop.plan.workload import TrainWorkload

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class PowerArrays:
    """Per-GPU power and phase activity, one entry per configuration.

    Attributes:
        compute_clock_mhz: SM clock in the compute phase (DVFS at the power limit).
        slowdown: compute stretch from that clock (≥ 1).
        compute_power_w / comm_power_w / bubble_power_w: board power in each phase.
        average_power_w: time-weighted over the step; peak_power_w: the compute phase.
        compute_s / comm_s / bubble_s: phase durations per step (sum = step time).
        tensor_active / sm_active / dram_active: compute-phase activities (0..1).
        comm_sm_active / comm_dram_active: communication-phase activities (0..1; no tensor cores).
        energy_per_step_j: energy of one GPU per step.
    """

    compute_clock_mhz: F64
    slowdown: F64
    compute_power_w: F64
    comm_power_w: F64
    bubble_power_w: F64
    average_power_w: F64
    peak_power_w: F64
    compute_s: F64
    comm_s: F64
    bubble_s: F64
    tensor_active: F64
    sm_active: F64
    dram_active: F64
    comm_sm_active: F64
    comm_dram_active: F64
    energy_per_step_j: F64


def fp8_tensor_share(w: TrainWorkload, clock_x: float = 1.0) -> float:
    """Share of the GEMMs' tensor-core time spent in FP8 (0 for BF16): from the GEMMs' rate over the BF16 peak.

    A share ``φ`` of the FLOPs at twice the BF16 rate gives a rate ``r = 1/(1 − φ/2)`` times BF16, and FP8 then
    takes ``r − 1`` of the GEMM time. ``clock_x`` = f_max / the clock the peak is stated at (the workload's
    rates are at f_max).
    """
    gemm_s = w.fwd_layers_s + w.fwd_experts_s + w.fwd_head_s
    if gemm_s <= 0 or w.peak_bf16_flops_per_s <= 0:
        return 0.0
    rate = w.fwd_param_flops / gemm_s / (w.peak_bf16_flops_per_s * clock_x)
    return float(np.clip(rate - 1.0, 0.0, 1.0))


#: Fixed-point iterations of clock → activities → clock (converges to < 0.1 MHz in 3-4 on the H100 fit).
DVFS_ITERATIONS = 6


def compute_clock_mhz(
    model: GpuPowerModel,
    work: ComputeWork,
    power_limit_w: F64 | float,
    tensor_weight: F64 | float = 1.0,
) -> F64:
    """SM clock of the compute phase under ``power_limit_w`` (DVFS), at the planner's die temperature.

    The activities depend on the clock (:func:`twinloop.plan.activity.compute_activity`) and the clock on them: a
    short fixed-point iteration. :func:`twinloop.plan.activity.gemm_work` is a dense GEMM alone (checked against
    real GPUs by ``benchmarks/calibrate_h200.py``).
    """
    shape = np.shape(work.gemm_s)
    temp = np.full(shape, effc.TRAIN_DIE_TEMP_C)
    limit: F64 = np.broadcast_to(np.asarray(power_limit_w, dtype=np.float64), shape)
    weight: F64 = np.broadcast_to(np.asarray(tensor_weight, dtype=np.float64), shape)
    x: F64 = np.ones(shape)
    clock = x * model.gpu.sm_clock_max_mhz
    for _ in range(DVFS_ITERATIONS):
        tensor, sm, dram = compute_activity(work, x)
        clock = np.asarray(model.max_clock_for_power(limit, tensor * weight, sm, dram, temp), dtype=np.float64)
        x = clock / model.gpu.sm_clock_max_mhz
    return clock


def compute_work(
    w: TrainWorkload, t: TimeArrays, gpu: GpuSpec, eff: TrainEfficiency = DEFAULT_EFFICIENCY
) -> ComputeWork:
    """The compute phase of a step timed at full clock (``t`` from :func:`step_time` with no slowdown).

    The optimizer runs in the compute phase and is memory-bound like the element-wise kernels.
    """
    gemm = t.compute_s * t.gemm_share
    memory = t.compute_s - gemm + t.optimizer_s
    peak_bf16 = w.peak_bf16_flops_per_s * gpu.sm_clock_max_mhz / gpu.peak_clock_mhz
    hbm = gemm_hbm_s(t.tensor_ideal_s, peak_bf16, eff.hbm * w.hbm_bytes_per_s)
    return ComputeWork(gemm, memory, t.tensor_ideal_s, hbm)


def time_and_power(
    w: TrainWorkload,
    c: ConfigArrays,
    topo: Topology,
    model: GpuPowerModel,
    global_batch: int,
    power_limit_w: F64 | float,
    imbalance: F64 | float = 1.0,
    eff: TrainEfficiency = DEFAULT_EFFICIENCY,
) -> tuple[TimeArrays, PowerArrays]:
    """Step time at the clock the power limit allows, and the power of each phase.

    The compute phase's activities depend on its clock (see :func:`twinloop.plan.activity.compute_activity`) and
    its clock on its power, so the DVFS clock is a short fixed-point iteration, vectorized over configurations. FP8
    GEMMs weigh their tensor activity by :meth:`GpuPowerModel.tensor_weight` (FP8 draws a little more per busy
    cycle).

    Args:
        w: model-side scalars of the training job.
        c: configurations (one per array element).
        topo: link tiers the collectives run over.
        model: power model of the GPU (its ``gpu`` sets the clock range).
        global_batch: sequences per step.
        power_limit_w: per-GPU power limit (scalar or one per configuration), within the GPU's range.
        imbalance: MoE routing imbalance (hottest EP rank / mean; scalar or per configuration, 1 for dense models).
        eff: efficiency factors of the step-time model.
    """
    full_clock = step_time(w, c, topo, global_batch, imbalance, 1.0, eff)
    share = full_clock.gemm_share
    work = compute_work(w, full_clock, model.gpu, eff)
    weight = model.tensor_weight(fp8_tensor_share(w, model.gpu.sm_clock_max_mhz / model.gpu.peak_clock_mhz))
    temp = np.full(share.shape, effc.TRAIN_DIE_TEMP_C)
    limit = np.broadcast_to(np.asarray(power_limit_w, dtype=np.float64), share.shape).copy()
    f_max = model.gpu.sm_clock_max_mhz
    clock = compute_clock_mhz(model, work, limit, weight)
    tensor, sm, dram = compute_activity(work, clock / f_max)
    speed = np.asarray(relative_speed(clock, f_max, share), dtype=np.float64)
    slowdown = 1.0 / speed
    t = step_time(w, c, topo, global_batch, imbalance, slowdown, eff)

    compute_p = np.asarray(model.power_w(clock, tensor * weight, sm, dram, temp), dtype=np.float64)
    # The fixed point approaches from above by < 0.01 W: above the lowest clock, power is the limit at most.
    compute_p = np.where(clock > model.gpu.sm_clock_min_mhz, np.minimum(compute_p, limit), compute_p)
    zeros = np.zeros_like(share)
    comm_sm_f, comm_dram_f = comm_activity(model.gpu)
    comm_sm, comm_dram = zeros + comm_sm_f, zeros + comm_dram_f
    comm_clock = np.asarray(model.max_clock_for_power(limit, zeros, comm_sm, comm_dram, temp))
    comm_p = np.asarray(model.power_w(comm_clock, zeros, comm_sm, comm_dram, temp))
    bubble_p = np.asarray(model.power_w(zeros + f_max, zeros, zeros, zeros, temp), dtype=np.float64)
    compute_s = t.compute_s + t.optimizer_s
    comm_s = t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_p2p_s + t.dp_exposed_s
    bubble_s = t.bubble_s
    energy = compute_p * compute_s + comm_p * comm_s + bubble_p * bubble_s
    power = PowerArrays(
        compute_clock_mhz=clock,
        slowdown=slowdown,
        compute_power_w=compute_p,
        comm_power_w=comm_p,
        bubble_power_w=bubble_p,
        average_power_w=energy / t.step_s,
        peak_power_w=np.maximum(compute_p, comm_p),
        compute_s=compute_s,
        comm_s=comm_s,
        bubble_s=bubble_s,
        tensor_active=tensor,
        sm_active=sm,
        dram_active=dram,
        comm_sm_active=comm_sm,
        comm_dram_active=comm_dram,
        energy_per_step_j=energy,
    )
    return t, power
