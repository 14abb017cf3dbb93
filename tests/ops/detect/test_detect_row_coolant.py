"""A row's coolant seen by its GPUs (issue 14, large-hall): the cooling rule on a row whose pump lost flow is the
row's incident, not one per warm GPU; a GPU whose own thermal path failed in that row still gets its own."""

from __future__ import annotations

import numpy as np

from twinloop.lab.detector_data import fleet_entities
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import CDU_FLOW, CDU_PUMP_SPEED, POWER, TEMP, GpuLimits
from twinloop.ops.events import EventClass, Incident

ENTITIES = fleet_entities(n_rows=2, racks_per_row=4)  # 2 rows x 4 racks x 8 nodes x 8 GPUs (H100)
PUMP_FAULT_S, TIM_S = 300, 600


def _run(tim: bool) -> list[Incident]:
    """Row 1's pump loses 65 % of its flow at 300 s (the CDU pump rule: a row incident); the coolant its racks
    see warms by ~3.5 °C over a minute, and one GPU in each of six nodes over four racks (the row's warmest: more
    power, more R) by 5 °C, past the cooling rule's 4 °C. With ``tim``, one GPU's thermal interface fails too
    (R x 2) at 600 s. Readings in whole °C, as NVML gives them.
    """
    n = len(ENTITIES)
    lim = GpuLimits.default(n)
    pipe = DetectionPipeline(ENTITIES, limits=lim, config=PipelineConfig(emit_info=False))
    rng = np.random.default_rng(7)
    row1 = np.array([e.startswith("dc/r01/") for e in ENTITIES])
    power = np.full(n, 690.0) + 5.0 * rng.standard_normal(n)
    r = lim.thermal_resistance_c_per_w * (1.0 + 0.02 * rng.standard_normal(n))
    warm = np.flatnonzero(row1)[[3, 77, 141, 150, 203, 250]]
    tim_gpu = int(np.flatnonzero(row1)[100])
    coolant = 30.0 + 0.3 * rng.random(n)
    updates: list[Incident] = []
    for t in range(900):
        ramp = float(np.clip((t - PUMP_FAULT_S - 5) / 60.0, 0.0, 1.0))
        rise = np.where(row1, 3.5 * ramp, 0.0)
        rise[warm] = 5.0 * ramp
        r_now = r.copy()
        if tim and t >= TIM_S:
            r_now[tim_gpu] *= 2.0
        temp = coolant + rise + r_now * power + 0.1 * rng.standard_normal(n)
        flow = np.where(row1 & (t >= PUMP_FAULT_S), 0.35, 1.0) * 50.0
        fields = {TEMP: np.round(temp), POWER: power, CDU_FLOW: flow, CDU_PUMP_SPEED: np.ones(n)}
        updates += pipe.step(float(t), fields)
    return updates


def _opened(updates: list[Incident]) -> dict[int, Incident]:
    merged = {u.incident_id for u in updates if u.status == "merged"}
    return {u.incident_id: u for u in updates if u.status == "open" and u.incident_id not in merged}


def test_warm_gpus_of_a_row_whose_pump_lost_flow_are_the_rows_incident() -> None:
    # Before: each of the six warm GPUs was a thermal-path fault of its own (the cooling rule's firings all
    # signed "thermal_path"), six GPU-rooted cooling_degradation incidents beside the row's (large-hall: 15-20,
    # 8 s after the row's own incident). Now they are no warmer for their power than their row's GPUs by
    # local_excess_c: they grow the row's incident.
    opened = _opened(_run(tim=False))
    roots = {i.root for i in opened.values() if i.event_class == EventClass.COOLING_DEGRADATION}
    assert roots == {"dc/r01"}, sorted(roots)


def test_a_failed_thermal_interface_inside_that_row_keeps_its_own_incident() -> None:
    updates = _run(tim=True)
    opened = _opened(updates)
    tim_gpu = ENTITIES[int(np.flatnonzero([e.startswith("dc/r01/") for e in ENTITIES])[100])]
    roots = {i.root for i in opened.values() if i.event_class == EventClass.COOLING_DEGRADATION}
    assert roots == {"dc/r01", tim_gpu}, sorted(roots)
    own = [i for i in opened.values() if i.root == tim_gpu]
    assert min(i.start_ts for i in own) >= TIM_S
