"""Power sweep: monotone step time, energy bookkeeping, the knee rule."""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.power_sweep import knee_index, power_sweep
from twinloop.plan.train_request import make_request, resolve


def test_knee_rule_on_a_synthetic_curve() -> None:
    limits = np.linspace(100, 700, 7)
    # Speed saturates at 400 W: throughput 1, 2, 3, 4, 4.1, 4.15, 4.2.
    step = 1.0 / np.array([1, 2, 3, 4, 4.1, 4.15, 4.2])
    assert knee_index(limits, step) == 3
    assert knee_index(limits, np.ones(7)) == 0


def test_sweep_on_a_real_plan() -> None:
    ctx = resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=8, seq_len=4096, global_batch=16))
    cfg = ConfigArrays.from_configs([ParallelConfig(tp=2, dp=4, zero=1, sequence_parallel=True)])
    sweep = power_sweep(ctx, cfg, points=9)
    assert sweep.power_limit_w[0] == ctx.gpu.power_limit_min_w
    assert sweep.power_limit_w[-1] == ctx.gpu.power_limit_max_w
    assert np.all(np.diff(sweep.step_time_s) <= 1e-12)
    assert np.all(np.diff(sweep.compute_clock_mhz) >= 0)
    # Within the limit, except where the compute phase is already at the lowest clock (the hardware cannot go lower):
    # at 200 W its memory-bound kernels keep HBM busy (~0.28 kW at full DRAM activity) and it draws 201 W.
    at_floor = sweep.compute_clock_mhz <= ctx.gpu.sm_clock_min_mhz + 1e-6
    assert np.all((sweep.average_power_w <= sweep.power_limit_w + 1e-6) | at_floor)
    assert np.all(sweep.average_power_w <= 1.02 * sweep.power_limit_w)
    np.testing.assert_allclose(sweep.energy_per_step_j, sweep.average_power_w * sweep.step_time_s * 8, rtol=1e-12)
    rows = sweep.rows()
    assert sum(bool(r["knee"]) for r in rows) == 1
    assert 0 < sweep.knee_index < 8
    assert sweep.knee_power_limit_w == rows[sweep.knee_index]["power_limit_w"]


def test_sweep_needs_two_points() -> None:
    from twinloop.errors import InputError

    ctx = resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=1, seq_len=1024, global_batch=1))
    with pytest.raises(InputError, match="at least 2"):
        power_sweep(ctx, ConfigArrays.from_configs([ParallelConfig()]), points=1)
