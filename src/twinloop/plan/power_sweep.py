"""Step time and energy per step across per-GPU power limits, and the knee of the curve.

For one configuration, every power limit in the GPU's allowed range is evaluated at once (the config is
repeated along an array of limits). The *knee* is where more power stops buying much speed, found with
the Kneedle rule (Satopää et al. 2011): normalize throughput (1/step time) and power limit to [0, 1] over
the sweep; the knee is the limit that maximizes ``throughput_norm − limit_norm``, i.e. the point farthest
above the straight line from the lowest to the highest limit. Above it, each extra watt buys less speed
than the sweep's average.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.plan.evaluate import evaluate, routing_imbalance
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train_request import TrainContext

F64 = NDArray[np.float64]

DEFAULT_POINTS = 21


@dataclass(frozen=True)
class PowerSweep:
    """A sweep over power limits (arrays aligned by limit, ascending).

    Attributes:
        power_limit_w: the per-GPU limits.
        step_time_s: step time at each limit.
        energy_per_step_j: energy of all GPUs per step.
        average_power_w: average power per GPU; compute_clock_mhz: compute-phase clock.
        knee_index: index of the knee (see the module docstring).
    """

    power_limit_w: F64
    step_time_s: F64
    energy_per_step_j: F64
    average_power_w: F64
    compute_clock_mhz: F64
    knee_index: int

    @property
    def knee_power_limit_w(self) -> float:
        """The power limit at the knee."""
        return float(self.power_limit_w[self.knee_index])

    def rows(self) -> list[dict[str, float | bool]]:
        """One dict per limit, with ``knee`` marking the knee."""
        return [
            {
                "power_limit_w": float(self.power_limit_w[i]),
                "step_time_s": float(self.step_time_s[i]),
                "energy_per_step_j": float(self.energy_per_step_j[i]),
                "average_power_w": float(self.average_power_w[i]),
                "compute_clock_mhz": float(self.compute_clock_mhz[i]),
                "knee": i == self.knee_index,
            }
            for i in range(self.power_limit_w.size)
        ]


def knee_index(power_limit_w: F64, step_time_s: F64) -> int:
    """Kneedle knee of throughput vs power limit (0 when throughput does not change over the sweep)."""
    throughput = 1.0 / step_time_s
    span_t = throughput.max() - throughput.min()
    span_p = power_limit_w.max() - power_limit_w.min()
    if span_t <= 1e-12 * throughput.max() or span_p <= 0:
        return 0
    y = (throughput - throughput.min()) / span_t
    x = (power_limit_w - power_limit_w.min()) / span_p
    return int(np.argmax(y - x))


def power_sweep(ctx: TrainContext, config: ConfigArrays, points: int = DEFAULT_POINTS) -> PowerSweep:
    """Sweep ``points`` power limits from the GPU's minimum to its maximum for the first config of ``config``."""
    if points < 2:
        raise InputError("--power-sweep", "points", f"need at least 2 points, got {points}")
    gpu = ctx.gpu
    limits = np.linspace(gpu.power_limit_min_w, gpu.power_limit_max_w, points)
    repeated = config.select(np.zeros(points, dtype=np.int64))
    imbalance = routing_imbalance(ctx.arch, repeated.ep, gpu.gpus_per_node, ctx.request.moe_zipf_s, ctx.request.seed)
    a = evaluate(
        ctx.workload,
        repeated,
        ctx.topology,
        ctx.power_model,
        ctx.global_batch,
        limits,
        ctx.prices,
        imbalance,
        ctx.efficiency,  # the request's framework profile, as the plan itself (was the megatron-2022 defaults)
    )
    gpus = float(ctx.request.gpus)
    step = a.time.step_s
    return PowerSweep(
        power_limit_w=limits,
        step_time_s=step,
        energy_per_step_j=a.power.energy_per_step_j * gpus,
        average_power_w=a.power.average_power_w,
        compute_clock_mhz=a.power.compute_clock_mhz,
        knee_index=knee_index(limits, step),
    )
