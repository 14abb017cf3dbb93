"""The twin's DCGM ``DRAM_ACTIVE`` follows the clock for the GEMM traffic, as its HBM power does (twin/dvfs.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.twin.twin_helpers import make, small

from twinloop.hardware.gpu import get_gpu
from twinloop.telemetry.fields import DCGM_FI_DEV_SM_CLOCK, DCGM_FI_PROF_DRAM_ACTIVE
from twinloop.twin.actions import SetPowerLimit
from twinloop.twin.dvfs import dram_activity_at_clock, hbm_split_w, kind_constants

H100 = get_gpu("h100-sxm")


@settings(max_examples=80, deadline=None)
@given(tensor=st.floats(0.0, 1.0), dram=st.floats(0.0, 1.0), x=st.floats(0.15, 1.0))
def test_dram_activity_is_the_hbm_power_split_over_the_power_per_activity(tensor: float, dram: float, x: float) -> None:
    """The reported activity is ``M(x)/mem``: the same split the twin's HBM power uses, so the two never disagree."""
    kc = kind_constants((H100,))
    m0, mx = hbm_split_w(np.array([[tensor, 1.0, dram]]), kc)
    power_w = float(m0[0, 0] + mx[0, 0] * x)
    got = float(dram_activity_at_clock(np.array([[tensor, 1.0, dram]]), np.array([0]), np.array([x]), kc)[0])
    assert abs(got - np.clip(power_w / float(kc.mem_per_activity_w[0]), 0.0, 1.0)) < 1e-6
    x_ref = float(kc.ref_clock_x[0])
    assert (got <= dram + 1e-9) if x <= x_ref else (got >= dram - 1e-9)  # monotone in the clock, equal at x_ref


def _dram_and_clock(cap_w: float | None) -> tuple[float, float]:
    """Mean DRAM activity and SM clock of the training job's first node after 60 s, capped at ``cap_w`` or not."""
    twin = make(small(telemetry={"gpu_every_s": 1, "facility_every_s": 1}))
    if cap_w is not None:
        assert twin.apply(SetPowerLimit("dc1/r01/k01/n01", cap_w)).ok
    block = None
    for _ in range(60):
        twin.step()
        block = twin.telemetry.gpu_block()
    assert block is not None
    return float(block[DCGM_FI_PROF_DRAM_ACTIVE][:8].mean()), float(block[DCGM_FI_DEV_SM_CLOCK][:8].mean())


def test_a_gpu_capped_at_the_floor_reports_less_dram_activity() -> None:
    # Before, DRAM_ACTIVE was the profile's value at the reference clock whatever the GPU ran at: a GEMM phase
    # capped at 200 W (~360 MHz) read the same memory traffic as at 700 W.
    free_dram, free_clock = _dram_and_clock(None)
    capped_dram, capped_clock = _dram_and_clock(200.0)
    assert capped_clock < 0.5 * free_clock  # the case this test is about happened
    assert capped_dram < 0.7 * free_dram
    assert capped_dram > 0.0
