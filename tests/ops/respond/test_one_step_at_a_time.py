"""No second relative step on a setting before the first is judged (sweeps/new-user/b200-hall.yaml, round 2).

Before: the `cooling-degradation` rule stepped a row's CDU setpoint and facility water by -4 C on every incident
the row opened. A capacity loss on a B200 row opened and closed five incidents in 11 min loop on (one loop off: the
rule's own setpoint move started the coolant rule's hold-off, the incident went quiet and closed, and came back),
so the CDU went 30 -> 18 C and facility water 26 -> 12 C, each step before the one before it was judged.
"""

from __future__ import annotations

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter


def _hot(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
    return 80.0  # a row that neither warms nor cools: each step is judged "no effect" at its window's end


def _row_incident(iid: int, status: str = "open") -> Incident:
    return Incident(iid, EventClass.COOLING_DEGRADATION, "dc/r1", ("dc/r1",), 0.0, 0.0, Severity.MAJOR, status=status)


def _setpoints(adapter: MemoryAdapter, kind: ActionKind) -> list[float]:
    return [a.value for a in adapter.applied if a.kind == kind and a.value is not None]


def _poll(r: Responder, incidents: list[Incident], t: float) -> None:
    r.verify(t, _hot)
    r.handle(incidents, t, _hot)


def test_a_reopened_row_incident_waits_for_the_first_step_to_be_judged() -> None:
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    _poll(r, [_row_incident(1)], 0.0)
    assert _setpoints(adapter, ActionKind.CDU_SETPOINT) == [26.0]
    _poll(r, [_row_incident(1, status="closed")], 10.0)
    for t in range(60, 300, 10):  # the row's next incident, inside the first step's 300 s window
        _poll(r, [_row_incident(2)], float(t))
    assert _setpoints(adapter, ActionKind.CDU_SETPOINT) == [26.0]
    assert len(_setpoints(adapter, ActionKind.FACILITY_WATER)) == 1
    waiting = [x for x in r.log if x.request.incident_id == 2 and x.status == "refused"]
    assert waiting and all("no second step before the first is judged" in x.detail for x in waiting)
    for t in range(300, 350, 10):  # judged (no effect: rolled back); the row's incident still open: it steps now
        _poll(r, [_row_incident(2)], float(t))
    second = [x for x in r.log if x.request.incident_id == 2 and x.request.kind == ActionKind.CDU_SETPOINT]
    assert second[-1].status == "applied" and second[-1].ts >= 300.0


def test_another_rows_incident_takes_its_own_steps_but_not_the_shared_one_again() -> None:
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    _poll(r, [_row_incident(1)], 0.0)
    other = Incident(2, EventClass.COOLING_DEGRADATION, "dc/r2", ("dc/r2",), 0.0, 0.0, Severity.MAJOR)
    _poll(r, [_row_incident(1), other], 60.0)
    assert [a.target for a in adapter.applied if a.kind == ActionKind.CDU_SETPOINT] == ["dc/r1/cdu", "dc/r2/cdu"]
    assert len(_setpoints(adapter, ActionKind.FACILITY_WATER)) == 1  # the site water: stepped once
