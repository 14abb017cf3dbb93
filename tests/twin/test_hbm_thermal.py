"""HBM temperature: its own RC, driven by the die and by memory power, integrated exactly (twin/thermal.py)."""

from __future__ import annotations

import numpy as np

from twinloop.hardware.thermal import HBM_DEFAULT, hbm_steady_c
from twinloop.twin.thermal import hbm_step, rc_analytic

F32 = np.float32


def _run(mem_w: float, steps: int, dt_s: float = 1.0) -> float:
    hbm = np.array([30.0], dtype=F32)
    die = np.array([60.0], dtype=F32)
    cool = np.array([30.0], dtype=F32)
    alpha = F32(np.exp(-dt_s / HBM_DEFAULT.tau_s))
    buf = np.zeros(1, dtype=F32)
    for _ in range(steps):
        mem = np.array([mem_w], dtype=F32)  # hbm_step overwrites its memory-power buffer
        hbm_step(hbm, die, cool, mem, F32(HBM_DEFAULT.coupling), F32(HBM_DEFAULT.r_c_per_w), alpha, buf)
    return float(hbm[0])


def test_hbm_step_is_exact_exponential_integration() -> None:
    steady = float(hbm_steady_c(30.0, 60.0, 200.0, HBM_DEFAULT))
    expected = rc_analytic(30.0, steady, HBM_DEFAULT.tau_s, 10.0)
    assert abs(_run(200.0, 10) - expected) < 1e-3
    assert abs(_run(200.0, 1, dt_s=10.0) - expected) < 1e-3  # one 10 s step lands on the same value


def test_memory_activity_heats_hbm_at_the_same_die_temperature() -> None:
    assert _run(280.0, 200) > _run(0.0, 200) + 20.0  # a full memory stream: ~+25 °C over the die-coupled rise
