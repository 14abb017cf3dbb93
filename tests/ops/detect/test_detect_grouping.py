"""Topology grouping: one fault, one incident."""

from __future__ import annotations

import numpy as np

from twinloop.lab.detector_data import fleet_entities
from twinloop.ops.detect.grouping import IncidentGrouper, TopologyTree
from twinloop.ops.events import Detection, EventClass, Incident

ENTITIES = fleet_entities(n_rows=2, racks_per_row=4)  # 2 rows x 4 racks x 8 nodes x 8 GPUs = 512


def rack_gpus(row: int, rack: int) -> np.ndarray:
    return np.array([i for i, e in enumerate(ENTITIES) if e.startswith(f"dc/r{row:02d}/k{rack:02d}/")])


def drive(grouper: IncidentGrouper, cls: EventClass, firing: list[np.ndarray], t_end: float) -> list[Incident]:
    """``firing[t]`` fires at second t (the last entry repeats until ``t_end``... then silence)."""
    out: list[Incident] = []
    for t in range(int(t_end)):
        idx = firing[min(t, len(firing) - 1)] if t < len(firing) else np.zeros(0, dtype=np.int64)
        if idx.size:
            grouper.observe(float(t), cls, idx)
        out += grouper.step(float(t))
    return out


def surviving(updates: list[Incident]) -> set[int]:
    merged = {u.incident_id for u in updates if u.status == "merged"}
    return {u.incident_id for u in updates} - merged


def test_64_gpus_of_one_rack_are_one_rack_incident() -> None:
    g = IncidentGrouper(ENTITIES)
    rack = rack_gpus(0, 2)
    # They cross the threshold a few seconds apart, as real GPUs do.
    ramp = [rack[: 8 * (k + 1)] for k in range(8)]
    updates = drive(g, EventClass.COOLING_DEGRADATION, ramp, 40)
    assert len(surviving(updates)) == 1
    last = updates[-1]
    assert last.root == "dc/r00/k02"
    assert set(last.members) == {ENTITIES[i] for i in rack}


def test_two_unrelated_gpus_in_different_racks_are_two_incidents() -> None:
    g = IncidentGrouper(ENTITIES)
    a, b = rack_gpus(0, 0)[3], rack_gpus(1, 3)[17]
    updates = drive(g, EventClass.STRAGGLER, [np.array([a, b])], 20)
    roots = {u.root for u in updates}
    assert roots == {ENTITIES[a], ENTITIES[b]}
    assert len(surviving(updates)) == 2


def test_most_racks_of_a_row_are_one_row_incident_and_the_other_row_stays_out() -> None:
    g = IncidentGrouper(ENTITIES)
    idx = np.concatenate([rack_gpus(1, k) for k in range(3)])  # 3 of 4 racks of row 1
    updates = drive(g, EventClass.POWER_THROTTLE, [idx], 20)
    assert len(surviving(updates)) == 1
    assert updates[-1].root == "dc/r01"


def test_cdu_map_groups_racks_of_one_cdu_across_rows_for_cooling() -> None:
    cdu = {f"dc/r00/k{k:02d}": "dc/cdu-a" for k in (2, 3)} | {f"dc/r01/k{k:02d}": "dc/cdu-a" for k in (2, 3)}
    cdu |= {f"dc/r00/k{k:02d}": "dc/cdu-b" for k in (0, 1)} | {f"dc/r01/k{k:02d}": "dc/cdu-b" for k in (0, 1)}
    idx = np.concatenate([rack_gpus(0, 2), rack_gpus(0, 3), rack_gpus(1, 2), rack_gpus(1, 3)])
    cooling = drive(IncidentGrouper(ENTITIES, cdu_of_rack=cdu), EventClass.COOLING_DEGRADATION, [idx], 20)
    assert {u.root for u in cooling} == {"dc/cdu-a"}
    # The same GPUs under a power class group by the physical rows: half of each row, so half the site.
    power = drive(IncidentGrouper(ENTITIES, cdu_of_rack=cdu), EventClass.POWER_THROTTLE, [idx], 20)
    assert {u.root for u in power} == {"dc"}
    one_row = drive(IncidentGrouper(ENTITIES, cdu_of_rack=cdu), EventClass.POWER_THROTTLE, [idx[:128]], 20)
    assert {u.root for u in one_row} == {"dc/r00"}


def test_site_wide_power_delivery_is_a_facility_excursion() -> None:
    updates = drive(IncidentGrouper(ENTITIES), EventClass.POWER_DELIVERY_FAULT, [np.arange(len(ENTITIES))], 20)
    assert updates[-1].event_class == EventClass.FACILITY_POWER_EXCURSION
    assert updates[-1].root == "dc"


def test_incident_closes_after_the_quiet_period_and_a_later_fault_is_new() -> None:
    g = IncidentGrouper(ENTITIES, quiet_s=30.0)
    gpu = np.array([5])
    firing = [gpu] * 10
    updates = drive(g, EventClass.GPU_HARDWARE_ERROR, firing, 60)
    assert [u.status for u in updates] == ["open", "closed"]
    assert updates[-1].end_ts == 9.0
    later = []
    for t in range(100, 120):
        g.observe(float(t), EventClass.GPU_HARDWARE_ERROR, gpu)
        later += g.step(float(t))
    assert later and later[0].incident_id != updates[0].incident_id


def test_separate_incidents_merge_when_one_group_covers_them() -> None:
    g = IncidentGrouper(ENTITIES, settle_s=0.0)
    rack = rack_gpus(0, 1)
    updates = drive(g, EventClass.COOLING_DEGRADATION, [rack[[0]], rack[[0, 20]], rack[[0, 20]], rack], 10)
    merged = [u for u in updates if u.status == "merged"]
    assert len(merged) == 1 and merged[0].merged_into is not None
    assert len(surviving(updates)) == 1
    assert updates[-1].root == "dc/r00/k01"


def test_evidence_is_capped_and_named_job_incidents_have_the_job_as_root() -> None:
    g = IncidentGrouper(ENTITIES, max_evidence=4, settle_s=0.0)
    rack = rack_gpus(0, 0)
    onsets = [(int(i), Detection(0.0, ENTITIES[i], "rule:x", 1.0, "anomaly", EventClass.POWER_THROTTLE)) for i in rack]
    g.observe(0.0, EventClass.POWER_THROTTLE, rack, onsets)
    g.observe_named(0.0, EventClass.JOB_HANG, "dc/jobs/j1", None, rack[:8])
    updates = g.step(0.0)
    by_class = {u.event_class: u for u in updates}
    assert len(by_class[EventClass.POWER_THROTTLE].evidence) == 4
    assert by_class[EventClass.JOB_HANG].root == "dc/jobs/j1"
    assert by_class[EventClass.JOB_HANG].impact.n_gpus == 8


def test_tree_cover_handles_mixed_depths() -> None:
    tree = TopologyTree.from_entities(["a/x/1", "a/x/2", "a/y", "b"])
    top = tree.cover(np.array([True, True, False, True]))
    names = [tree.names[t] if t >= 0 else None for t in top]
    assert names == ["a/x", "a/x", None, "b"]
