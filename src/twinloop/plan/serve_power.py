"""Serving power: per-GPU power per phase (prefill, decode, idle) from activity, DVFS under the power limit,
and energy per token.

Power comes from the shared :class:`~twinloop.hardware.power.GpuPowerModel` (``P = P_static(T) +
P_clocked(activity, context)·g(f) + P_mem(dram)``, fitted on a real H100). A compute-bound prefill keeps the
tensor cores busy and runs near TDP (clocked down when it would exceed the limit); a memory-bound decode keeps
HBM busy with few tensor-core cycles and draws less (POLCA, Patel et al. ASPLOS'24: prompt phase reaches TDP,
token phase much lower; the H100 readings: decode at batch 1-32 draws 466-527 W, 67-75 % of TDP).

Energy per output token = Σ_phase (power_phase · time share_phase) · GPUs / output tokens per second, i.e.
average deployment power over output throughput; it is *GPU board* energy (no host, network or facility).
"""

from __future__ import annotations

from dataclasses import dataclass

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import GpuPowerModel

#: GUESS: die temperature of a GPU serving steadily (leakage term of the power model); inference GPUs
#: under load typically read 55-70 C.
SERVE_DIE_TEMP_C = 60.0
#: Die temperature while idle between requests (GUESS; the H100 idled at 34-42 C with a context).
IDLE_DIE_TEMP_C = 40.0


@dataclass(frozen=True)
class PhaseActivity:
    """DCGM-style activity of one phase, each 0..1 (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, _SM_ACTIVE, _DRAM_ACTIVE)."""

    tensor_active: float
    sm_active: float
    dram_active: float


def capped_clock_mhz(gpu: GpuSpec, activity: PhaseActivity, power_limit_w: float | None = None) -> float:
    """Highest SM clock whose power fits the limit (TDP by default) at this activity (DVFS), MHz."""
    model = GpuPowerModel(gpu)
    limit = gpu.tdp_w if power_limit_w is None else power_limit_w
    return float(
        model.max_clock_for_power(
            limit, activity.tensor_active, activity.sm_active, activity.dram_active, SERVE_DIE_TEMP_C
        )
    )


def phase_power_w(gpu: GpuSpec, activity: PhaseActivity, clock_mhz: float) -> float:
    """Board power of one GPU in a phase with this activity at ``clock_mhz`` (W)."""
    return float(
        GpuPowerModel(gpu).power_w(
            clock_mhz, activity.tensor_active, activity.sm_active, activity.dram_active, SERVE_DIE_TEMP_C
        )
    )


def idle_power_w(gpu: GpuSpec) -> float:
    """Board power of a serving GPU between requests (no activity, cool die), W.

    The serving engine holds a CUDA context, which keeps the clock at boost: an idle H100 draws 117-123 W so,
    not its 70 W cold idle (shared/data/h100).
    """
    model = GpuPowerModel(gpu)
    return float(model.power_w(gpu.sm_clock_max_mhz, 0.0, 0.0, 0.0, IDLE_DIE_TEMP_C))


@dataclass(frozen=True)
class ServeEnergy:
    """Average power and energy of a deployment.

    Attributes:
        power_per_gpu_w: time-weighted average board power per GPU over prefill, decode and idle (W).
        energy_per_token_j: GPU energy per output token, J (= power_per_gpu_w · gpus / output tokens/s).
        energy_per_request_j: GPU energy per request (J).
    """

    power_per_gpu_w: float
    energy_per_token_j: float
    energy_per_request_j: float


def serve_energy(
    prefill_power_w: float,
    decode_power_w: float,
    idle_w: float,
    prefill_fraction: float,
    decode_fraction: float,
    gpus: int,
    output_tokens_per_s: float,
    requests_per_s: float,
) -> ServeEnergy:
    """Average power per GPU and energy per output token from per-phase power and time shares.

    Args:
        prefill_power_w: per-GPU power while prefilling (W).
        decode_power_w: per-GPU power while decoding (W).
        idle_w: per-GPU power while idle (W).
        prefill_fraction: share of GPU time in prefill.
        decode_fraction: share of GPU time in decode (the rest idles).
        gpus: GPUs of the deployment.
        output_tokens_per_s: served output tokens per second (total).
        requests_per_s: served requests per second (total).
    """
    idle_fraction = max(0.0, 1.0 - prefill_fraction - decode_fraction)
    avg = prefill_power_w * prefill_fraction + decode_power_w * decode_fraction + idle_w * idle_fraction
    total_w = avg * gpus
    per_token = total_w / output_tokens_per_s if output_tokens_per_s > 0 else float("inf")
    per_request = total_w / requests_per_s if requests_per_s > 0 else float("inf")
    return ServeEnergy(power_per_gpu_w=avg, energy_per_token_j=per_token, energy_per_request_j=per_request)
