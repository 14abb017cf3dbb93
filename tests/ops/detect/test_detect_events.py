"""The event taxonomy and severity from impact."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from twinloop.ops.events import FAULT_CLASSES, EventClass, Impact, Severity, severity

TAXONOMY = {
    "thermal_throttle",
    "power_throttle",
    "cooling_degradation",
    "power_delivery_fault",
    "facility_power_excursion",
    "gpu_hardware_error",
    "straggler",
    "suspected_sdc",
    "job_hang",
    "benign_phase_change",
}


def test_taxonomy_has_every_class_of_the_issue() -> None:
    assert {c.value for c in EventClass} >= TAXONOMY
    assert EventClass.BENIGN_PHASE_CHANGE not in FAULT_CLASSES
    assert EventClass.UNCLASSIFIED not in FAULT_CLASSES
    assert EventClass.SUSPECTED_SDC in FAULT_CLASSES


def test_benign_is_info_whatever_the_impact() -> None:
    big = Impact(gpu_hours_at_risk=1e6, temp_margin_c=0.0, power_margin_w=-10.0, n_gpus=16384)
    assert severity(EventClass.BENIGN_PHASE_CHANGE, big) == Severity.INFO


def test_severity_steps() -> None:
    cls = EventClass.STRAGGLER
    assert severity(cls, Impact(gpu_hours_at_risk=8.0)) == Severity.MINOR
    assert severity(cls, Impact(gpu_hours_at_risk=128.0)) == Severity.MAJOR
    assert severity(cls, Impact(gpu_hours_at_risk=4096.0)) == Severity.CRITICAL
    assert severity(EventClass.COOLING_DEGRADATION, Impact(temp_margin_c=4.0)) == Severity.MAJOR
    assert severity(EventClass.COOLING_DEGRADATION, Impact(temp_margin_c=1.0)) == Severity.CRITICAL
    assert severity(EventClass.FACILITY_POWER_EXCURSION, Impact(power_margin_w=-5.0)) == Severity.CRITICAL


impacts = st.builds(
    Impact,
    gpu_hours_at_risk=st.floats(0, 1e6),
    temp_margin_c=st.floats(-20, 100) | st.just(math.inf),
    power_margin_w=st.floats(-1000, 1000) | st.just(math.inf),
)


@given(
    cls=st.sampled_from(sorted(FAULT_CLASSES)),
    impact=impacts,
    more_hours=st.floats(0, 1e6),
    less_margin=st.floats(0, 50),
)
def test_severity_is_monotone_in_impact(cls: EventClass, impact: Impact, more_hours: float, less_margin: float) -> None:
    worse = Impact(
        gpu_hours_at_risk=impact.gpu_hours_at_risk + more_hours,
        temp_margin_c=impact.temp_margin_c - less_margin,
        power_margin_w=impact.power_margin_w - less_margin,
    )
    assert severity(cls, worse) >= severity(cls, impact) >= Severity.MINOR
