"""What a CDU and the plant report about themselves: pump speed, flow, heat load, valve, facility water."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import SetCoolant, SetFacilityWater
from twinloop.twin.engine import Twin


def _row(twin: Twin, steps: int) -> dict[str, np.ndarray]:
    """Row 0's CDU fields and the site's facility-water fields over ``steps`` steps."""
    out: dict[str, list[float]] = {}
    for _ in range(steps):
        r = twin.step()
        assert r.facility is not None
        for name, v in r.facility["row"].items():
            out.setdefault(name, []).append(float(v[0]))
        for name in ("TWINLOOP_FI_FACILITY_WATER_TEMP", "TWINLOOP_FI_FACILITY_WATER_SETPOINT"):
            out.setdefault(name, []).append(float(r.facility["site"][name][0]))
    return {k: np.array(v) for k, v in out.items()}


def _with_fault(kind: str, **extra: Any) -> dict[str, np.ndarray]:
    fault = {"kind": kind, "target": "dc1/r01", "start_s": 60, "magnitude": 0.5, **extra}
    return _row(make(small(faults=[fault])), 100)


def test_capacity_loss_opens_the_valve_at_the_same_heat_and_speed() -> None:
    f = _with_fault("cdu_capacity_loss")
    before, after = slice(50, 59), slice(70, 99)
    per_w = f["TWINLOOP_FI_CDU_VALVE"] / f["TWINLOOP_FI_CDU_HEAT_LOAD"]
    assert per_w[after].mean() == pytest.approx(2.0 * per_w[before].mean(), rel=0.05)  # half the capacity
    assert np.ptp(f["TWINLOOP_FI_CDU_PUMP_SPEED"]) == 0.0
    assert f["TWINLOOP_FI_CDU_FLOW"][after].mean() == pytest.approx(f["TWINLOOP_FI_CDU_FLOW"][before].mean())
    assert ((f["TWINLOOP_FI_CDU_VALVE"] >= 0.0) & (f["TWINLOOP_FI_CDU_VALVE"] <= 1.0)).all()


def test_pump_degradation_lowers_flow_at_the_same_commanded_speed() -> None:
    f = _with_fault("cdu_pump_degradation")
    flow = f["TWINLOOP_FI_CDU_FLOW"]
    assert flow[70:].mean() == pytest.approx(0.5 * flow[:59].mean())
    assert np.ptp(f["TWINLOOP_FI_CDU_PUMP_SPEED"]) == 0.0


def test_commands_show_as_pump_speed_and_facility_water_setpoint() -> None:
    twin = make(small())
    _row(twin, 10)
    assert twin.apply(SetCoolant("dc1/r01", flow_fraction=1.2)).ok
    assert twin.apply(SetFacilityWater(20.0)).ok
    f = _row(twin, 5)
    assert f["TWINLOOP_FI_CDU_PUMP_SPEED"][-1] == pytest.approx(1.2)
    assert f["TWINLOOP_FI_FACILITY_WATER_SETPOINT"][-1] == 20.0
    # Flow per commanded speed is the pump's, whatever the speed (affinity law, healthy pump).
    per_speed = f["TWINLOOP_FI_CDU_FLOW"] / f["TWINLOOP_FI_CDU_PUMP_SPEED"]
    assert np.ptp(per_speed) == pytest.approx(0.0, abs=1e-6)
