"""Pole models of the die temperature: exact stepping, steady start, and the SciPy fit recovering known poles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.lab.soak import load_soak, settle_s
from twinloop.lab.thermal_poles import Poles, anchored, fit_poles, simulate

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
STEPS = ((0.0, 100.0), (10.0, 700.0), (70.0, 300.0), (130.0, 100.0))  # (from s, W)


def _trace() -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(0.0, 200.0, 0.1)
    p = np.zeros_like(t)
    for start, w in STEPS:
        p[t >= start - 1e-9] = w
    return t, p


def _closed_form(t: np.ndarray, poles: Poles) -> np.ndarray:
    """Sum of exponential step responses, from steady at the first power."""
    out = np.full_like(t, poles.coolant_c + poles.total_r_c_per_w * STEPS[0][1])
    for (start, w), (_, prev) in zip(STEPS[1:], STEPS[:-1], strict=True):
        for r, tau in zip(poles.r_c_per_w, poles.tau_s, strict=True):
            dt = np.maximum(t - start, 0.0)
            out += r * (w - prev) * (1.0 - np.exp(-dt / tau)) * (t >= start)
    return out


TRUE = Poles(30.0, (0.03, 0.01), (1.5, 40.0))


def test_simulate_is_exact_for_held_power() -> None:
    t, p = _trace()
    grid, temp = simulate(t, p, TRUE, lead_s=0.0)
    expected = _closed_form(grid, TRUE)  # a reading at t holds until the next one
    assert np.max(np.abs(temp - expected)) < 1e-6


def test_fit_recovers_known_poles() -> None:
    t, p = _trace()
    temp = _closed_form(t, TRUE)
    fit = fit_poles(t, p, temp, [(0.0, 200.0)], 2, lead_s=0.0)
    assert fit.r_c_per_w == pytest.approx(TRUE.r_c_per_w, rel=0.02)
    assert fit.tau_s == pytest.approx(TRUE.tau_s, rel=0.05)
    assert fit.coolant_c == pytest.approx(30.0, abs=0.2)
    one = fit_poles(t, p, temp, [(0.0, 200.0)], 1, lead_s=0.0)
    assert 0.6 * TRUE.total_r_c_per_w < one.total_r_c_per_w < TRUE.total_r_c_per_w  # misses the slow tail
    assert one.rms_c > fit.rms_c


def test_the_lead_undoes_a_one_second_average() -> None:
    t, p = _trace()
    true = Poles(30.0, (0.04,), (3.0,))
    temp = simulate(t, p, true, lead_s=0.0)[1]
    grid = np.arange(t[0], t[-1], 0.1)
    reading = np.convolve(p, np.ones(10) / 10, mode="full")[: p.size]  # NVML: mean of the last 1 s
    naive = fit_poles(grid, reading[: grid.size], temp, [(0.0, 200.0)], 1, lead_s=0.0)
    led = fit_poles(grid, reading[: grid.size], temp, [(0.0, 200.0)], 1)
    assert abs(led.tau_s[0] - 3.0) < abs(naive.tau_s[0] - 3.0)
    assert led.tau_s[0] == pytest.approx(3.0, rel=0.1)


def test_anchored_coolant_makes_the_start_steady() -> None:
    t, p = _trace()
    poles = anchored(t, p, np.full_like(t, 45.0), [0.05], [4.5])
    assert poles.coolant_c == pytest.approx(45.0 - 0.05 * 100.0)
    assert simulate(t, p, poles)[1][0] == pytest.approx(45.0)


def test_load_soak_reads_the_h200_device_check() -> None:
    r = load_soak(FIX)
    assert r.phase_start_s["heat_soak"] == 0.0 and r.phase_start_s["cooldown"] == pytest.approx(180.0, abs=0.1)
    assert r.cap.cap_w == 450.0 and r.cap.default_limit_w == 700.0
    assert 20.0 < r.cap.set_s < r.cap.restore_s < 60.0
    p, _temp, clock = r.window(r.cap.set_s + 5.0, r.cap.restore_s)
    assert 440.0 < p < 455.0 and clock < 1200.0
    assert 0.0 < r.mem_util(100.0, 180.0) < 1.0
    with pytest.raises(InputError):
        r.window(1e6, 1e6 + 1)
    with pytest.raises(InputError):
        load_soak(FIX / "missing")


def test_settle_needs_the_reading_to_stay_in_band() -> None:
    t = np.arange(0.0, 5.0, 0.1)
    p = np.where(t < 1.0, 700.0, 450.0)
    p[(t > 1.45) & (t < 1.55)] = 600.0  # one excursion out of band after first entering it
    assert settle_s(t, p, 0.5, 450.0, 0.05) == pytest.approx(1.1, abs=1e-9)
    assert np.isnan(settle_s(t, p, 0.5, 200.0, 0.05))
