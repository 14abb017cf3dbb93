"""Issue 14 on the twin, loop on: one replica of a serving fleet hangs (one tensor-parallel group's collective stuck).
The loop finds that replica (its GPUs spin while the fleet serves) and restarts it alone, never requeueing the fleet;
a hang of the whole fleet (it serves nothing) still requeues the fleet."""

from __future__ import annotations

from typing import Any

import pytest

from twinloop.closedloop.passes import run_pass
from twinloop.twin.scenario import scenario_from_dict

HUNG_GPU = "dc9/r01/k01/n02/g5"  # replica 1 of the 4-replica TP-8 fleet


def _run(target: str) -> Any:
    """A 48-GPU liquid-cooled site (2 racks x 3 nodes), one demand-bound 4-replica TP-8 fleet; a hang at ``target``
    at 60 s (its watchdog at 600 s: past the 6 min run)."""
    fleet = {"name": "chat", "kind": "serving", "gpus": 32, "gpus_per_replica": 8,
             "trace": "package:azure_conv_sample.csv", "trace_rate_scale": 2.0, "restart_overhead_s": 20}  # fmt: skip
    site = {"racks": 2, "nodes_per_rack": 3, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}
    fault = {"kind": "job_hang", "target": target, "start_s": 60}
    raw = {"name": "serving-hang", "site": "dc9", "seed": 1, "duration_s": "6m", "step_s": "1s"}
    raw |= {"rows": [site], "jobs": [fleet], "faults": [fault], "failures": "off"}
    return run_pass(scenario_from_dict(raw, "test", "."), True, optimize_cooling=False)


def _applied(r: Any, kind: str) -> list[str]:
    return [a.request.target for a in r.actions if a.status == "applied" and str(a.request.kind) == kind]


@pytest.mark.slow
def test_a_hung_replica_is_restarted_alone() -> None:
    # Before: job_hang took no GPU target (one replica could not hang), and the loop's only hang answer was a requeue.
    r = _run(HUNG_GPU)
    assert [t.rsplit("/", 1)[0] for t in _applied(r, "restart_replica")] == [HUNG_GPU.rsplit("/", 1)[0]], r.actions
    assert _applied(r, "requeue") == [], r.actions
    chat = next(j for j in r.summary["jobs"] if j["name"] == "chat")
    assert chat["interruptions"] == 0
    assert chat["ettr"] > 0.97  # the hung quarter's requests lost for ~20 s, then its reload; the others serve
    assert r.detection.false_alarms == ()


@pytest.mark.slow
def test_a_hung_fleet_is_still_requeued() -> None:
    r = _run("chat")
    assert _applied(r, "requeue") == ["dc9/jobs/chat"], r.actions
    assert _applied(r, "restart_replica") == [], r.actions
