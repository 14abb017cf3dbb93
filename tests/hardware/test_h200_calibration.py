"""The power, DVFS and thermal models against the real H200 readings (``benchmarks/calibrate_h200.py``).

Each band is the one docs/sections/calibration-power.md ("Real H200") states, with margin over today's error:
a change of the power model, the planner's DVFS, the twin's cap response or the catalog's H200 entry that moves
a prediction out of it fails here.
"""

from __future__ import annotations

import pytest
from tests import benchmark_scripts

CAL = benchmark_scripts.load("calibrate_h200")


@pytest.fixture(scope="module")
def fig() -> dict[tuple[str, str], object]:
    return {(f.section, f.name): f for f in CAL.figures()}


def _get(fig: dict, section: str, name: str):  # type: ignore[no-untyped-def]
    return fig[(section, name)]


OLD, NEW = "thermal: H100 fit scaled (before)", "thermal: catalog h200-sxm"
FITS = "thermal: fits on the soak and cool-down"


def test_the_h100_scaling_overpredicted_the_h200_die(fig: dict) -> None:
    # The prediction before the H200 fit: 7.6 °C too hot at the soak's end, rise per watt 0.050 vs 0.039.
    assert 5.0 <= _get(fig, OLD, "die at end of soak (700 W)").error <= 10.0
    assert 0.2 <= _get(fig, OLD, "steady rise per watt (4 steady windows)").rel_error <= 0.4
    assert _get(fig, OLD, "share of the cool-down drop done 1 s after the load").model < 0.3
    assert _get(fig, OLD, "share of the cool-down drop done 1 s after the load").measured > 0.7


def test_the_catalog_h200_rc_is_the_fit_and_predicts_the_held_out_sweep(fig: dict) -> None:
    assert abs(_get(fig, FITS, "one pole: R (model: catalog)").error) <= 0.0005
    assert abs(_get(fig, FITS, "one pole: τ (model: catalog R·C)").error) <= 0.05
    for name in ("die at end of soak (700 W)", "die at end of 450 W cap", "die at end of cool-down"):
        assert abs(_get(fig, NEW, name).error) <= 1.5, name
    assert abs(_get(fig, NEW, "steady rise per watt (4 steady windows)").rel_error) <= 0.10
    assert _get(fig, NEW, "RMS error over the soak + cool-down").model <= 1.0
    held_out = _get(fig, NEW, "RMS error over the GEMM sweep")
    assert held_out.how == "held out" and held_out.model <= 2.5


def test_the_die_has_a_fast_pole_and_a_small_slow_one(fig: dict) -> None:
    fast, slow = _get(fig, FITS, "two poles: fast R").measured, _get(fig, FITS, "two poles: slow R").measured
    assert _get(fig, FITS, "two poles: fast τ (not resolved below ~0.5 s)").measured < 1.0
    assert 10.0 <= _get(fig, FITS, "two poles: slow τ").measured <= 300.0
    assert slow < 0.2 * (fast + slow)


@pytest.mark.parametrize(
    ("name", "band"),
    [
        # The planner feeds the model the H100's measured GEMM activity (tensor 0.89, DRAM 0.33 at 1,369 MHz; the
        # H100 ran 1,367), while this H200 does its 667 TFLOP/s at 0.83 of its tensor peak per clock: -6.0 % (was
        # -3.4 % with the guessed 0.85 / 0.25, which also put the H100's own GEMM at 1,434 MHz).
        ("SM clock, dense GEMM at 700 W: planner", 0.07),
        ("SM clock, dense GEMM at 700 W: model, measured activities", 0.05),
        ("SM clock, dense GEMM under the 450 W cap: planner", 0.05),
        ("SM clock under the 450 W cap: model, measured activities", 0.05),
        ("clock ratio 450 W / 700 W: planner", 0.09),
        ("clock ratio 450 W / 700 W: model, measured activities", 0.09),
        ("GEMM power at the 700 W limit", 0.02),
        ("GEMM power under the 450 W cap", 0.02),
    ],
)
def test_dense_gemm_clock_and_power_under_the_limits(fig: dict, name: str, band: float) -> None:
    f = _get(fig, "power", name)
    assert f.how == "predicted"
    assert abs(f.rel_error) <= band, (name, f.measured, f.model)


def test_hbm_steady_temperatures(fig: dict) -> None:
    # The H100's HBM model over-predicts the H200's loaded HBM by 4-6 °C (documented miss); idle within 1.5 °C.
    assert 0.0 <= _get(fig, "hbm", "HBM at 700 W GEMM").error <= 8.0
    assert 0.0 <= _get(fig, "hbm", "HBM at 450 W cap").error <= 5.5
    assert abs(_get(fig, "hbm", "HBM at end of cool-down").error) <= 1.5


def test_idle_power_and_memory_activity(fig: dict) -> None:
    assert abs(_get(fig, "power", "idle with a CUDA context, end of cool-down (1,980 MHz)").error) <= 8.0
    assert abs(_get(fig, "power", "cold idle, no context (first reading, 345 MHz)").error) <= 4.0
    assert abs(_get(fig, "power", "memory utilisation under the cap (model: 700 W value × clock ratio)").error) <= 0.02
    # predicted from the H100's HBM bytes per FLOP (plan/efficiency.py GEMM_HBM_BYTES_PER_FLOP): 0.230 vs 0.249
    name = "memory utilisation of the GEMM at 700 W (model: the H100's HBM bytes per FLOP)"
    assert abs(_get(fig, "power", name).error) <= 0.04
    assert _get(fig, "power", "share of 700 W samples with the SW power-cap reason (model: power-bound)").error == 0


def test_the_cap_shows_within_the_twins_one_step(fig: dict) -> None:
    f = _get(fig, "cap", "set → power within 5 % of the cap (model: the twin)")
    assert f.model == 1.0  # the twin's DVFS obeys a new limit in the next 1 s step
    assert 0.0 < f.measured <= f.model
    assert _get(fig, "cap", "restore → power within 5 % of the pre-cap power").measured <= 1.0


def test_the_catalog_entry_matches_nvidia_smi(fig: dict) -> None:
    for name in ("power_limit_min_w", "power_limit_max_w", "tdp_w", "sm_clock_max_mhz",
                 "slowdown_temp_c (T.Limit − slowdown offset)"):  # fmt: skip
        assert _get(fig, "catalog", name).error == 0, name
