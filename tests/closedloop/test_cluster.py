"""The twin behind the port: samples, topology, setpoints, effect reads."""

from __future__ import annotations

import numpy as np

from twinloop.closedloop.cluster import TwinCluster
from twinloop.ops.detect.rules import CDU_SETPOINT, CDU_SUPPLY, PSU_STATE, TEMP
from twinloop.ops.ports import END, Cluster, Sample
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.twin.scenario import scenario_from_dict

SITE = {
    "name": "cluster-test",
    "site": "dc1",
    "duration_s": 60,
    "rows": [
        {"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0, "pump_power_w": 300}},
        {"racks": 1, "nodes_per_rack": 2, "cooling": "air"},
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16}],
}


def _cluster(**kw: float) -> TwinCluster:
    return TwinCluster(scenario_from_dict(SITE, "cluster-test.yaml"), **kw)  # type: ignore[arg-type]


def test_the_twin_is_a_cluster_with_its_layout() -> None:
    cluster = _cluster()
    assert isinstance(cluster, Cluster)
    topo = cluster.topology()
    assert len(topo.gpu_ids) == 48 and topo.gpu_ids[0] == "dc1/r01/k01/n01/g0" and topo.site == "dc1"
    assert topo.liquid_rows == ("dc1/r01",) and topo.cdu_approach_c is not None
    assert topo.air_rows == ("dc1/r02",)  # on the same facility water: the optimizer must keep it supplied
    assert topo.cdu_of_rack["dc1/r01/k02"] == "dc1/r01"
    assert topo.limits.tdp_w.shape == (48,)
    # Air-cooled GPUs run hotter per watt: their limits say so.
    r = topo.limits.thermal_resistance_c_per_w
    assert r[-1] > r[0]


def test_poll_steps_the_twin_and_ends_after_the_duration() -> None:
    cluster = _cluster(duration_s=10)
    samples = list(iter(cluster.poll, END))
    assert [s.ts for s in samples] == [float(t) for t in range(1, 11)] and cluster.poll() is END
    first, later = samples[0], samples[-1]
    assert isinstance(first, Sample) and first.gpu[TEMP].shape == (48,)
    assert first.job_index is not None and first.job_ids == ["dc1/jobs/train"]
    # Node and row fields broadcast to their GPUs; the site block is there.
    assert first.gpu[PSU_STATE].shape == (48,) and np.isfinite(first.gpu[CDU_SUPPLY][:32]).all()
    assert first.site_fields is not None and first.rack_heat is None
    # Every CDU's commanded setpoint is told once, then only when written again.
    assert set(first.commanded_setpoints) == {"dc1/r01", "dc1/r02"} and later.commanded_setpoints == {}
    assert first.commanded_setpoints["dc1/r01"] == later.gpu[CDU_SETPOINT][0]
    # The harness figure is the exact die temperature; telemetry reports it in whole degrees.
    assert abs(cluster.max_gpu_temp_c - max(float(s.gpu[TEMP].max()) for s in samples)) <= 0.5


def test_a_written_setpoint_is_told_and_reads_follow_the_twin() -> None:
    cluster = _cluster(duration_s=30)
    for _ in range(12):
        cluster.poll()
    reply = cluster.adapter.apply(ActionRequest(ActionKind.CDU_SETPOINT, "dc1/r01", 27.0))
    assert reply.status == "applied"
    sample = cluster.poll()
    assert isinstance(sample, Sample) and sample.commanded_setpoints == {"dc1/r01": 27.0}
    now = cluster.read(TEMP, "dc1/r01", "max")
    assert now is not None and abs(now - float(sample.gpu[TEMP][:32].max())) <= 0.5  # sensor: whole degrees
    assert cluster.read(TEMP, "dc1/r01", ago_s=5.0) is not None  # a snapshot from 10 s
    assert cluster.read(TEMP, "dc1/nowhere") is None and cluster.now_s() == 13.0
