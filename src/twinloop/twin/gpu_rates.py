"""Each GPU model's work rate relative to the GPU a job's profile was made for.

A job's profile (:mod:`twinloop.twin.workload`) gives its step at full clock on one GPU model, the *reference*: the
``plan.gpu`` it was planned for, else the hall's first row's. On a GPU of another model the same step runs at that
model's own rates, as the planner's roofline has it: the compute-bound share of the compute phase at the model's
dense BF16 rate at its clock, the memory-bound share at its HBM bandwidth. With ``x`` the GPU's clock relative to
its own ``f_max``, ``c`` its dense BF16 FLOP/s at ``f_max`` over the reference's at the reference's ``f_max``, ``m``
its HBM bandwidth over the reference's and ``cf`` the compute-bound share:

    work_rate = 1 / (cf / (x·c) + (1 − cf) / m)

which is :func:`twinloop.hardware.power.relative_speed` for the reference itself (``c = m = 1``). An A100 SXM
against an H100 SXM: ``c`` = 312 / (989 · 1,980 / 1,830) = 0.29, ``m`` = 2.039 / 3.35 = 0.61 (catalog figures).

Dense BF16 is the rate compared because a profile names no dtype and BF16 is the one every catalog GPU states;
a job planned in FP8 would lose more on a GPU without FP8 (not modelled). The exposed communication phase runs at
the same rate on every model (the network between nodes, not the GPU, sets it; not modelled per model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import relative_speed


@dataclass(frozen=True)
class KindRates:
    """Per GPU kind of a hall, its rates at full clock relative to a reference GPU (dimensionless).

    Attributes:
        compute: dense BF16 FLOP/s at the kind's ``f_max`` over the reference's at its ``f_max``.
        memory: HBM bandwidth over the reference's.
    """

    compute: NDArray[np.float64]
    memory: NDArray[np.float64]

    @property
    def uniform(self) -> bool:
        """Every kind runs at the reference's rates (a hall of the reference GPU only)."""
        return bool((self.compute == 1.0).all() and (self.memory == 1.0).all())


def _bf16_at_fmax(gpu: GpuSpec) -> float:
    """Dense BF16 TFLOP/s at ``f_max`` (the datasheet figure holds at ``peak_clock_mhz``; it scales with the clock)."""
    return gpu.tflops("bf16") * gpu.sm_clock_max_mhz / gpu.peak_clock_mhz


def kind_rates(kinds: Sequence[GpuSpec], reference: GpuSpec) -> KindRates:
    """The rates of each of ``kinds`` (a topology's, in its order) relative to ``reference``."""
    ref_flops = _bf16_at_fmax(reference)
    compute = np.array([1.0 if k.name == reference.name else _bf16_at_fmax(k) / ref_flops for k in kinds])
    memory = np.array(
        [
            1.0 if k.name == reference.name else k.hbm_bandwidth_bytes_per_s / reference.hbm_bandwidth_bytes_per_s
            for k in kinds
        ]
    )
    return KindRates(compute=compute, memory=memory)


def work_rate(
    clock_x: NDArray[np.float64],
    compute_fraction: float | NDArray[np.float64],
    compute_rate: NDArray[np.float64],
    memory_rate: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Work rate of GPUs at relative clock ``clock_x`` against the reference at full clock (see module docstring)."""
    x = np.maximum(clock_x, 1e-6)
    cf = np.asarray(compute_fraction, dtype=np.float64)
    return np.asarray(1.0 / (cf / (x * compute_rate) + (1.0 - cf) / memory_rate), dtype=np.float64)


def gpu_work_rates(
    clock_x: NDArray[np.float64],
    compute_fraction: float | NDArray[np.float64],
    kind: NDArray[np.integer],
    rates: KindRates | None,
) -> NDArray[np.float64]:
    """Each GPU's work rate at its relative clock, at its own model's rates (``rates`` None: every GPU is the
    job's reference model, :func:`twinloop.hardware.power.relative_speed`).
    """
    if rates is None:
        cf = np.asarray(compute_fraction, dtype=np.float64)
        return np.asarray(relative_speed(clock_x, 1.0, cf), dtype=np.float64)
    return work_rate(clock_x, compute_fraction, rates.compute[kind], rates.memory[kind])


def slot_rates(
    clock_x: NDArray[np.float64],
    kind: NDArray[np.integer],
    rates: KindRates,
    compute_fraction: NDArray[np.float64],
    n_slots: int,
) -> NDArray[np.float64]:
    """Each activity slot's work rate: its slowest GPU's, with every GPU at its own model's rates.

    Args:
        clock_x: relative clock of the job's GPUs, slot by slot (``n_slots`` equal runs).
        kind: the kind index of each of those GPUs (into ``rates``).
        rates: the hall's kinds against the job's reference GPU.
        compute_fraction: compute-bound share per slot.
        n_slots: activity slots of the job (training 1, serving one per replica).

    Returns:
        ``(n_slots,)`` work rates (1 = the reference at full clock).
    """
    cf = np.repeat(np.asarray(compute_fraction, dtype=np.float64), clock_x.size // n_slots)
    per_gpu = work_rate(clock_x, cf, rates.compute[kind], rates.memory[kind])
    return np.asarray(per_gpu.reshape(n_slots, -1).min(axis=1), dtype=np.float64)
