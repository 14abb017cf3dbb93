"""Issue 14, on halls nobody tuned on (`sweeps/new-user/large-hall.yaml`): a CDU pump fault on one row opened the
row's cooling incident and, 8 s later, 15-18 cooling incidents at the row's hottest GPUs. The rule for one GPU
whose own thermal path fails (cap it, drain its node for good, requeue the job) fired on each: 16 nodes drained
for the rest of the run and the 1,024-GPU job restarted, for a fault of the row's coolant. A GPU incident of the
same class under an open incident of its row, rack or node is that incident's; one of another class (a GPU's
thermal throttle inside its row's cooling incident) and one under a site-wide incident (a heat wave) still act.
"""

from __future__ import annotations

import pytest

from twinloop.ops.events import EventClass, Impact, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .test_decisions import CheckpointAdapter

GPU = "dc/r1/k2/n1/g3"


def _incident(iid: int, cls: EventClass, root: str) -> Incident:
    impact = Impact(gpu_hours_at_risk=10.0, n_gpus=1)
    return Incident(iid, cls, root, (root,), 0.0, 0.0, Severity.MAJOR, impact)


def _run(first: Incident, then: Incident, until_s: float = 120.0) -> Responder:
    adapter = CheckpointAdapter(done_at_s=30.0)
    r = Responder(default_policy(), adapter, mode="auto")
    r.handle([first], 0.0, lambda *a, **k: None)
    for t in range(5, int(until_s) + 1, 5):
        adapter.now = float(t)
        r.handle([then] if t == 5 else [], float(t), lambda *a, **k: None)
    return r


def _applied(r: Responder, incident: int) -> list[str]:
    return [str(a.request.kind) for a in r.log if a.status == "applied" and a.request.incident_id == incident]


def test_a_gpu_cooling_incident_inside_its_rows_cooling_incident_moves_nothing() -> None:
    row = _incident(1, EventClass.COOLING_DEGRADATION, "dc/r1")
    r = _run(row, _incident(2, EventClass.COOLING_DEGRADATION, GPU))
    assert _applied(r, 2) == []  # before: drain, checkpoint, requeue (and a cap after 60 s)
    skipped = [a for a in r.log if a.request.incident_id == 2]
    assert {a.request.kind for a in skipped} >= {ActionKind.DRAIN, ActionKind.CHECKPOINT, ActionKind.REQUEUE}
    assert all(a.status == "refused" and "incident 1 (cooling_degradation at dc/r1)" in a.detail for a in skipped)


@pytest.mark.parametrize(
    ("first", "cls"),
    [
        (_incident(1, EventClass.COOLING_DEGRADATION, "dc/r1"), EventClass.THERMAL_THROTTLE),  # another signature
        (_incident(1, EventClass.COOLING_DEGRADATION, "dc"), EventClass.COOLING_DEGRADATION),  # site-wide: heat wave
        (_incident(1, EventClass.COOLING_DEGRADATION, "dc/r2"), EventClass.COOLING_DEGRADATION),  # another row
    ],
)
def test_a_gpu_fault_not_explained_by_an_open_incident_still_acts(first: Incident, cls: EventClass) -> None:
    r = _run(first, _incident(2, cls, GPU))
    assert {"drain", "checkpoint", "requeue"} <= set(_applied(r, 2))


def test_the_gpu_rule_acts_once_its_rows_incident_has_closed() -> None:
    adapter = CheckpointAdapter(done_at_s=30.0)
    r = Responder(default_policy(), adapter, mode="auto")
    row = _incident(1, EventClass.COOLING_DEGRADATION, "dc/r1")
    gpu = _incident(2, EventClass.COOLING_DEGRADATION, GPU)
    r.handle([row], 0.0, lambda *a, **k: None)
    r.handle([gpu], 5.0, lambda *a, **k: None)
    closed = Incident(1, row.event_class, row.root, row.members, 0.0, 10.0, row.severity, row.impact, status="closed")
    r.handle([closed, gpu], 10.0, lambda *a, **k: None)
    for t in range(15, 121, 5):
        adapter.now = float(t)
        r.handle([], float(t), lambda *a, **k: None)
    assert {"drain", "checkpoint", "requeue"} <= set(_applied(r, 2))
