"""Issue 14 on the twin, loop on: a GPU of a serving fleet falls off the bus. Its node goes down and takes out that
node's replica only (the twin: tests/twin/test_serving_replicas.py); the loop drains the node (the replica already out)
and never requeues the fleet, whose other replicas serve on."""

from __future__ import annotations

import pytest

from twinloop.closedloop.passes import run_pass
from twinloop.twin.scenario import scenario_from_dict

LOST_GPU = "dc9/r01/k01/n02/g5"


#: A 48-GPU liquid-cooled site (2 racks x 3 nodes) with one 4-replica TP-8 fleet, demand-bound: 2 nodes free.
FLEET = {
    "name": "chat",
    "kind": "serving",
    "gpus": 32,
    "gpus_per_replica": 8,
    "trace": "package:azure_conv_sample.csv",
    "trace_rate_scale": 2.0,
    "restart_overhead_s": 20,
}


def _spec() -> object:
    site = {"racks": 2, "nodes_per_rack": 3, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}
    fault = {"kind": "gpu_fall_off_bus", "target": LOST_GPU, "start_s": 60}
    raw = {"name": "serving-gpu-off-bus", "site": "dc9", "seed": 1, "duration_s": "6m", "step_s": "1s"}
    raw |= {"rows": [site], "jobs": [FLEET], "faults": [fault], "failures": "off"}
    return scenario_from_dict(raw, "test", ".")


@pytest.mark.slow
def test_a_gpu_off_the_bus_drains_its_node_and_never_requeues_the_fleet() -> None:
    r = run_pass(_spec(), True, optimize_cooling=False)  # type: ignore[arg-type]
    applied = [a for a in r.actions if a.status == "applied"]
    node = LOST_GPU.rsplit("/", 1)[0]
    assert any(str(a.request.kind) == "drain" and a.request.target == node for a in applied), r.actions
    assert not any(str(a.request.kind) == "requeue" for a in applied), r.actions
    chat = next(j for j in r.summary["jobs"] if j["name"] == "chat")
    assert chat["interruptions"] == 0
    assert chat["ettr"] > 0.99  # demand-bound: the three live replicas, then the rescheduled one, carry its requests
