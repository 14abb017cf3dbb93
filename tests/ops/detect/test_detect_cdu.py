"""CDU rules (setpoint against the commanded one, flow per pump speed, valve per watt) and the fixes around them:
each fires on its fault and stays quiet on load changes and on the loop's own commanded moves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.lab.detector_data import fleet_entities
from twinloop.ops.detect.cdu_rules import CduCapacityRule, CduPumpRule, CduSetpointRule
from twinloop.ops.detect.grouping import IncidentGrouper
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import (
    CDU_FLOW,
    CDU_HEAT_LOAD,
    CDU_PUMP_SPEED,
    CDU_SETPOINT,
    CDU_VALVE,
    XID,
    GpuLimits,
    RuleFrame,
)
from twinloop.ops.evaluate import Label, evaluate_detection
from twinloop.ops.events import EventClass, Impact, Incident, Severity

N = 4  # GPUs 0-1 on CDU A, 2-3 on CDU B
CDU = np.array([0, 0, 1, 1])


def _frame(t: float, **row: np.ndarray) -> RuleFrame:
    fields = {name: np.asarray(v, dtype=np.float64)[CDU] for name, v in row.items()}
    return RuleFrame(t, 1.0, fields, GpuLimits.default(N), np.full(N, -1, dtype=np.int64))


# --- setpoint ------------------------------------------------------------------------------------------------------


def _run_setpoint(reported: list[np.ndarray], commands: dict[int, tuple[int, float]] | None = None) -> np.ndarray:
    """Fired (steps x GPUs); ``commands`` maps a step to (CDU, setpoint) told to the rule at that step."""
    rule = CduSetpointRule()
    rule.commanded(np.array([0, 1, 2, 3]), 30.0)
    out = []
    for t, rep in enumerate(reported):
        if commands and t in commands:
            cdu, sp = commands[t]
            rule.commanded(np.flatnonzero(cdu == CDU), sp)
        fired, _ = rule.update(_frame(float(t), **{CDU_SETPOINT: rep}))
        out.append(fired)
    return np.array(out)


def test_setpoint_drift_fires_once_past_the_resolution() -> None:
    rate = 20.0 / 3600.0  # 20 C/h on CDU B from t = 100
    reported = [np.array([30.0, 30.0 + max(0.0, t - 100) * rate]) for t in range(200)]
    fired = _run_setpoint(reported)
    assert not fired[:, :2].any()  # CDU A never
    first = int(np.flatnonzero(fired[:, 2])[0])
    assert 100 + 0.1 / rate < first <= 100 + 0.1 / rate + 5  # past 0.1 C, then 3 s persistence
    assert fired[first:, 2:].all()  # holds while the drift lasts: one incident


def test_commanded_setpoint_moves_are_no_fault() -> None:
    # The loop writes 26 C to CDU A at t = 50; the CDU reports it one step later. No drift anywhere.
    reported = [np.array([30.0 if t <= 50 else 26.0, 30.0]) for t in range(120)]
    assert not _run_setpoint(reported, {50: (0, 26.0)}).any()
    # The same move not told to the rule is a setpoint the CDU runs that nobody commanded.
    assert _run_setpoint(reported)[-1, :2].all()


def test_scheduled_command_and_unknown_cdus() -> None:
    rule = CduSetpointRule()
    rule.commanded(np.array([0, 1]), 30.0)  # CDU B: no commanded setpoint known (e.g. its own PID)
    rule.commanded(np.array([0, 1]), 25.0, at_s=60.0)  # pre-cooling written now for t = 60
    fired_any = np.zeros(N, dtype=bool)
    for t in range(120):
        rep = np.array([30.0 if t < 60 else 25.0, 40.0 + t])
        fired, _ = rule.update(_frame(float(t), **{CDU_SETPOINT: rep}))
        fired_any |= fired
    assert not fired_any.any()


def test_pipeline_tells_the_cdus_gpus() -> None:
    ents = fleet_entities(1, 2)  # one row, two racks
    racks = sorted({e.rsplit("/", 2)[0] for e in ents})
    pipe = DetectionPipeline(ents, cdu_of_rack={racks[0]: "cdu-a", racks[1]: "cdu-b"})
    assert pipe.commanded_setpoint("cdu-a", 30.0) == len(ents) // 2
    assert pipe.commanded_setpoint("nowhere", 30.0) == 0
    plain = DetectionPipeline(ents)
    assert plain.commanded_setpoint(racks[1], 30.0) == len(ents) // 2  # by entity prefix


# --- pump ----------------------------------------------------------------------------------------------------------


def _pump_run(speed: np.ndarray, health: np.ndarray, nominal_l_per_min: float = 1500.0) -> np.ndarray:
    """Fired per step (any GPU of CDU A); flow follows the affinity law times the pump's health."""
    rule = CduPumpRule()
    out = []
    for t in range(speed.shape[0]):
        flow = nominal_l_per_min * speed[t] * health[t]
        fired, _ = rule.update(_frame(float(t), **{CDU_FLOW: [flow, 900.0], CDU_PUMP_SPEED: [speed[t], 0.6]}))
        assert not fired[2:].any()
        out.append(bool(fired[:2].any()))
    return np.array(out)


def test_pump_losing_flow_at_the_same_speed_fires() -> None:
    t = np.arange(400)
    fired = _pump_run(np.ones(400), np.where(t >= 200, 0.5, 1.0))
    assert not fired[:200].any()
    assert fired[205:].all()  # 5 s persistence


@settings(max_examples=30, deadline=None)
@given(speeds=st.lists(st.floats(0.3, 1.5), min_size=1, max_size=8))
def test_pump_speed_moves_by_the_loop_are_no_fault(speeds: list[float]) -> None:
    speed = np.repeat(np.array(speeds), 60)  # a commanded step every minute
    assert not _pump_run(speed, np.ones(speed.shape[0])).any()


# --- capacity ------------------------------------------------------------------------------------------------------


def _capacity_run(heat_w: np.ndarray, speed: np.ndarray, health: np.ndarray, cap_w: float = 1.0e6) -> np.ndarray:
    """Fired per step on CDU A; the valve opens in proportion to duty on the capacity left (as the twin's)."""
    rule = CduCapacityRule()
    out = []
    for t in range(heat_w.shape[0]):
        available = cap_w * health[t] * min(1.0, speed[t])
        valve = min(1.0, heat_w[t] / available)
        fired, _ = rule.update(
            _frame(
                float(t),
                **{CDU_VALVE: [valve, 0.3], CDU_HEAT_LOAD: [heat_w[t], 3e5], CDU_PUMP_SPEED: [speed[t], 1.0]},
            )
        )
        assert not fired[2:].any()
        out.append(bool(fired[:2].any()))
    return np.array(out)


def test_capacity_loss_at_the_same_heat_fires() -> None:
    t = np.arange(600)
    heat = 3.0e5 + 5e4 * np.sin(t / 20.0)  # training phases swing the heat load
    fired = _capacity_run(heat, np.ones(600), np.where(t >= 300, 0.5, 1.0))
    assert not fired[:300].any()
    assert fired[306:].all()


def test_capacity_quiet_on_load_changes_and_commanded_flow() -> None:
    t = np.arange(900)
    heat = np.where(t < 300, 3.0e5, np.where(t < 600, 1.2e5, 4.5e5))  # job ends, a bigger one starts
    speed = np.where(t < 450, 1.0, np.where(t < 700, 0.6, 1.4))  # the loop slows, then speeds the pump
    assert not _capacity_run(heat, speed, np.ones(900)).any()
    idle = np.full(300, 1.0e4)  # an idle row: 1 % valve, too little to judge
    assert not _capacity_run(idle, np.ones(300), np.where(np.arange(300) > 100, 0.5, 1.0)).any()


# --- job rules, impact, evaluation -----------------------------------------------------------------------------------


def test_gpu_hardware_error_on_an_idle_gpu_is_not_info() -> None:
    ents = fleet_entities(1, 1)
    pipe = DetectionPipeline(ents, config=PipelineConfig(emit_info=False))
    n = len(ents)
    updates: list[Incident] = []
    job_index = np.zeros(n, dtype=np.int64)
    job_index[3] = -1  # its job already dropped it (the twin interrupts the job in the same step)
    for t in range(20):
        xid = np.zeros(n)
        xid[3] = 79.0 if t >= 10 else 0.0  # fell off the bus
        fields = {XID: xid, "DCGM_FI_DEV_GPU_TEMP": np.full(n, 35.0)}
        updates += pipe.step(float(t), fields, job_index=job_index, job_ids=["train"])
    hw = [u for u in updates if u.event_class == EventClass.GPU_HARDWARE_ERROR]
    assert hw and max(u.severity for u in hw) >= Severity.MINOR


def _incident(root: str, members: tuple[str, ...], start_s: float) -> Incident:
    return Incident(1, EventClass.COOLING_DEGRADATION, root, members, start_s, start_s, Severity.MAJOR,
                    Impact(100.0, 10.0, 100.0, len(members)))  # fmt: skip


def test_site_incident_matches_the_site_fault_not_a_gpu_fault_it_touches() -> None:
    gpu = "dc1/r01/k05/n06/g2"
    faults = [Label("gpu_thermal_interface", gpu, 900.0, 3600.0), Label("heat_wave", "dc1", 2400.0, 3300.0)]
    rep = evaluate_detection([_incident("dc1", (gpu, "dc1/r02/k01/n01/g0"), 2415.0)], faults)
    by = {q.fault: q for q in rep.per_fault}
    assert by["heat_wave"].n_detected == 1 and by["gpu_thermal_interface"].n_detected == 0


def _cdu_incidents(second_cdu_start_s: int) -> set[tuple[str, float]]:
    """(root, start) of the cooling incidents when CDU r00 fails at 100 s and CDU r01 at ``second_cdu_start_s``."""
    ents = fleet_entities(2, 2)  # two rows (one CDU each) of two racks
    cdu_of_rack = {e.rsplit("/", 2)[0]: e.split("/")[1] for e in ents}
    g = IncidentGrouper(ents, cdu_of_rack)
    rows = np.array([e.split("/")[1] for e in ents])
    first_row = rows == rows[0]
    out: set[tuple[str, float]] = set()
    for t in range(second_cdu_start_s + 300):  # both incidents grow old while both CDUs keep firing
        firing = first_row & (t >= 100) | ~first_row & (t >= second_cdu_start_s)
        if firing.any():
            g.observe(float(t), EventClass.COOLING_DEGRADATION, np.flatnonzero(firing))
        updates = g.step(float(t))
        assert second_cdu_start_s < 200 or all(u.status != "merged" for u in updates)
        out |= {(u.root, u.start_ts) for u in updates if u.status != "merged"}
    return out


def test_a_second_cdu_failing_much_later_is_a_second_incident() -> None:
    later = _cdu_incidents(1300)
    assert len({root for root, _ in later}) == 2 and {start for _, start in later} == {100.0, 1300.0}
    together = _cdu_incidents(110)  # both CDUs within seconds: one cause (e.g. facility water), one incident
    assert {start for _, start in together} == {100.0}


# --- coolant supply from a cold start (issue 14, a100-air-hall) ------------------------------------------------------


def _run_coolant(supply_c: list[float], setpoint_c: float = 22.0) -> np.ndarray:
    """Fired per step of the coolant rule on one CDU (GPUs 0-1) whose supply follows ``supply_c`` (one per s)."""
    from twinloop.ops.detect.rules import CDU_SUPPLY, CoolantRule

    rule = CoolantRule()
    fired = []
    for t, s in enumerate(supply_c):
        f, _ = rule.update(_frame(float(t), **{CDU_SUPPLY: [s, np.nan], CDU_SETPOINT: [setpoint_c, np.nan]}))
        fired.append(bool(f[0]))
    return np.array(fired)


def test_a_supply_settling_from_a_cold_start_is_no_cooling_fault() -> None:
    # a100-air-hall seeds 2 and 3: the air handlers' setpoint (22 °C) lies under facility water + approach (24 °C),
    # so from the start each supply warms 22 -> 24 °C in its first 5 s and stays there. Before: the coolant rule
    # read that climb as a CDU losing capacity on both rows, a site-level cooling_degradation at t = 6 s.
    start = [min(22.0 + 0.45 * t, 24.0) for t in range(600)]
    assert not _run_coolant(start).any()
    # A CDU that loses capacity later (the supply climbing 0.05 °C/s from 24 °C at t = 300 s) still fires,
    # within its smoothing and persistence.
    lost = [s if t < 300 else s + 0.05 * (t - 300) for t, s in enumerate(start)]
    fired = _run_coolant(lost)
    assert not fired[:300].any()
    assert fired[300:330].any()
