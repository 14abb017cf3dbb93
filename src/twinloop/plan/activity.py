"""Phase activities the planners give the power model, by the rules the power model was fitted with.

:mod:`twinloop.hardware.power` was fitted on readings whose activity inputs follow fixed rules
(:mod:`twinloop.hardware.readings`): ``tensor`` = achieved dense FLOP/s over the peak at the current clock; ``sm`` =
1 for every kernel that fills the GPU; ``dram`` = NVML memory utilisation, the share of time the memory is busy (a
stream at the usable bandwidth reads 1). The planners compute the same quantities from what they plan:

* compute phase: ``tensor`` = the tensor-core FLOPs of the phase at the dtype's peak over the phase's time, both
  at the phase's clock (so the plan's own achieved GEMM/attention efficiency, diluted by its memory-bound time);
  ``sm`` = :data:`~twinloop.plan.efficiency.COMPUTE_SM_ACTIVE` (1); ``dram`` = (the GEMMs' HBM traffic /
  usable bandwidth + the memory-bound time) / the phase's time, with the GEMMs' traffic per FLOP measured
  (:data:`~twinloop.plan.efficiency.GEMM_HBM_BYTES_PER_FLOP`);
* communication phase: NCCL's CTAs over the SMs, and its HBM traffic per bus byte × the NCCL bus bandwidth over
  the usable HBM bandwidth (:func:`comm_activity`).

``benchmarks/validate_activity_h100.py`` compares the result with a real H100's training run (not fitted on it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.plan import efficiency as effc

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class ComputeWork:
    """The compute phase of a step at full clock (f_max), per GPU; one entry per configuration.

    Attributes:
        gemm_s: compute-bound (tensor-core) time; stretches by ``1/x`` at relative clock ``x``.
        memory_s: memory-bound time (element-wise kernels, optimizer): clock-insensitive, memory busy all of it.
        tensor_ideal_s: the tensor-core FLOPs at 100 % of their dtype's peak at f_max (≤ ``gemm_s``).
        gemm_hbm_s: time the GEMMs keep the memory busy: their HBM bytes / the usable bandwidth (per step, so
            independent of the clock: a slower GEMM moves the same bytes over a longer time).
    """

    gemm_s: F64
    memory_s: F64
    tensor_ideal_s: F64
    gemm_hbm_s: F64


def gemm_hbm_s(tensor_ideal_s: F64, peak_bf16_flops_per_s: float, usable_hbm_bytes_per_s: float) -> F64:
    """HBM busy time of the GEMM operand traffic: :data:`~twinloop.plan.efficiency.GEMM_HBM_BYTES_PER_FLOP` per
    BF16-equivalent FLOP (``tensor_ideal_s`` at the BF16 peak at f_max; an FP8 FLOP takes half that time and moves
    half the bytes) over the usable HBM bandwidth.
    """
    flops = np.asarray(tensor_ideal_s, dtype=np.float64) * peak_bf16_flops_per_s
    return np.asarray(flops * effc.GEMM_HBM_BYTES_PER_FLOP / usable_hbm_bytes_per_s, dtype=np.float64)


def compute_activity(work: ComputeWork, clock_x: F64 | float = 1.0) -> tuple[F64, F64, F64]:
    """(tensor, sm, dram) activity of the compute phase at relative clock ``clock_x`` = f / f_max.

    The GEMMs stretch by ``1/x``, the memory-bound work does not. Tensor activity counts cycles: the ideal
    tensor time at f_max takes ``1/x`` as long at clock ``x``, over the phase's time at that clock. DRAM activity is
    the memory's busy time (GEMM traffic + memory-bound kernels) over the phase's time.
    """
    x = np.maximum(np.asarray(clock_x, dtype=np.float64), 1e-6)
    total = np.maximum(work.gemm_s / x + work.memory_s, 1e-30)
    tensor = np.clip(work.tensor_ideal_s / x / total, 0.0, 1.0)
    sm = np.full_like(total, effc.COMPUTE_SM_ACTIVE)
    dram = np.clip((work.gemm_hbm_s + work.memory_s) / total, 0.0, 1.0)
    return tensor, sm, dram


def gemm_work(gpu: GpuSpec, n: int, efficiency: float = effc.H100_GEMM_EFFICIENCY) -> ComputeWork:
    """``n`` compute phases that are one large BF16 GEMM alone, at clock-normalised ``efficiency`` (unit time)."""
    ones = np.ones(n)
    peak = gpu.tflops("bf16") * 1e12 * gpu.sm_clock_max_mhz / gpu.peak_clock_mhz
    ideal = ones * efficiency
    return ComputeWork(
        ones, 0.0 * ones, ideal, gemm_hbm_s(ideal, peak, effc.HBM_EFFICIENCY * gpu.hbm_bandwidth_bytes_per_s)
    )


def comm_activity(gpu: GpuSpec) -> tuple[float, float]:
    """(sm, dram) activity while only NCCL communication runs on ``gpu`` (no tensor cores).

    SM: NCCL's CTAs over the H100's SMs (:data:`~twinloop.plan.efficiency.COMM_SM_ACTIVE`; the catalog has no SM
    count per GPU, and the power fit gives SM activity no weight). DRAM: the HBM bytes per bus byte of a ring
    collective × the NCCL bus bandwidth over NVLink (per direction, ``NCCL_NVLINK_BUS_EFFICIENCY``) / the usable HBM
    bandwidth, at most 1. An upper bound for collectives that cross nodes (a 400 Gb/s NIC moves ~8× fewer bytes
    per second than NVLink) or that are latency-bound (small messages).
    """
    bus = effc.NCCL_NVLINK_BUS_EFFICIENCY * gpu.scaleup_bandwidth_per_direction_bytes_per_s
    usable = effc.HBM_EFFICIENCY * gpu.hbm_bandwidth_bytes_per_s
    return effc.COMM_SM_ACTIVE, min(1.0, effc.COMM_HBM_BYTES_PER_BUS_BYTE * bus / usable)
