"""Issue 14, one budget fairly shared: incident responses before the optimizer's routine moves, refused incident
actions retried, and no relaxing while a heat-wave or cooling incident is open."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.guards import GuardConfig, GuardRails
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter, make_incident


def _reader(hottest_c: float):  # type: ignore[no-untyped-def]
    return lambda field, entity, aggregate="mean", ago_s=0.0: (
        30.0 if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP" else hottest_c
    )


def test_an_optimizer_move_does_not_block_an_incident_rule() -> None:
    """Today a rule's facility-water move was refused because the optimizer had moved 10 s earlier."""
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    routine = ActionRequest(ActionKind.FACILITY_WATER, "dc", 26.0, reason="cooling optimizer: follow")
    assert r.submit(routine, 0.0, _reader(70.0)).status == "applied"
    out = r.handle([make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")], 10.0, _reader(80.0))
    fw = [x for x in out if x.request.kind == ActionKind.FACILITY_WATER]
    assert [x.status for x in fw] == ["applied"]


def test_a_rate_limited_incident_action_is_retried_when_the_budget_frees() -> None:
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, guards=GuardRails(GuardConfig(min_interval_s=30.0)), mode="auto")
    # The first incident's steps go in with no reading to judge them by (no verdict pending: a pending one holds a
    # second step on the same setting until it is judged, tests/ops/respond/test_one_step_at_a_time.py).
    r.handle([make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1", iid=1)], 0.0, lambda *a, **k: None)
    second = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1/k3", iid=2)  # same CDU, 10 s later
    out = r.handle([second], 10.0, _reader(80.0))
    assert {x.status for x in out if x.request.kind == ActionKind.CDU_SETPOINT} == {"refused"}
    assert r.handle([], 20.0, _reader(80.0)) == []
    retried = r.handle([], 30.0, _reader(80.0))
    assert (ActionKind.CDU_SETPOINT, "applied") in [(x.request.kind, x.status) for x in retried]
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == 22.0  # 30 - 4, then - 4 again


def test_a_retry_is_dropped_when_its_incident_closes() -> None:
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, guards=GuardRails(GuardConfig(min_interval_s=30.0)), mode="auto")
    r.handle([make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1", iid=1)], 0.0, _reader(80.0))
    second = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1/k3", iid=2)
    r.handle([second], 10.0, _reader(80.0))
    r.handle([replace(second, status="closed")], 20.0, _reader(80.0))
    assert [x for x in r.handle([], 40.0, _reader(80.0)) if x.request.incident_id == 2] == []


def test_routine_moves_leave_a_reserve_of_the_window_to_incidents() -> None:
    g = GuardRails(GuardConfig(min_interval_s=0.0, max_actions_per_window=5, incident_reserve=2))
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, guards=g, mode="auto")
    statuses = [
        r.submit(ActionRequest(ActionKind.CDU_FLOW, f"dc/r{i}/cdu", 1.1), float(i), _reader(70.0)).status
        for i in range(4)
    ]
    assert statuses == ["applied", "applied", "applied", "refused"]
    urgent = ActionRequest(ActionKind.CDU_FLOW, "dc/r9/cdu", 1.2, incident_id=7)
    assert r.submit(urgent, 5.0, _reader(80.0)).status == "applied"


def test_the_optimizer_does_not_relax_while_a_cooling_incident_holds_the_row() -> None:
    adapter = MemoryAdapter()
    responder = Responder(default_policy(), adapter, mode="auto")
    why = {"dc/r1": "incident 3 (cooling_degradation at dc) open"}
    opt = CoolingOptimizer(
        responder, "dc", ["dc/r1"], CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0), hold=why.get
    )
    assert opt.step(0.0, _reader(60.0)) == []  # cool GPUs, but the heat wave is still on
    assert adapter.settings == {}
    why.clear()
    assert adapter.settings == {} and opt.step(60.0, _reader(60.0))  # closed: relaxing resumes


def test_runner_holds_rows_under_a_site_or_row_cooling_incident_but_not_a_gpu_one() -> None:
    from twinloop.ops.runner import LoopRunner

    class _Pipeline:
        open_incidents: ClassVar[list[Incident]] = []

    runner = LoopRunner.__new__(LoopRunner)
    runner._pipeline = _Pipeline()  # type: ignore[assignment]

    def inc(root: str, cls: EventClass = EventClass.COOLING_DEGRADATION) -> Incident:
        return Incident(1, cls, root, (root,), 0.0, 0.0, Severity.MAJOR)

    _Pipeline.open_incidents = [inc("dc1")]
    assert runner._cooling_hold("dc1/r01") is not None
    _Pipeline.open_incidents = [inc("dc1/r02/k01")]
    assert runner._cooling_hold("dc1/r02") is not None and runner._cooling_hold("dc1/r01") is None
    _Pipeline.open_incidents = [inc("dc1/r01/k01/n01/g3", EventClass.THERMAL_THROTTLE)]
    assert runner._cooling_hold("dc1/r01") is None
    assert runner._local_thermal_fault("dc1/r01") is not None and runner._local_thermal_fault("dc1/r02") is None


def test_no_rollback_cuts_coolant_while_the_gpu_keeps_heating() -> None:
    """Today a rollback cut coolant flow while the GPU was 12.5 C above its trend."""
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, _reader(80.0))
    verdicts = r.verify(300.0, _reader(92.5))  # 12.5 C above its flat trend: the extra flow stays
    assert {v.status for v in verdicts} == {"failed"}
    assert all("kept" in v.detail for v in verdicts)
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1/cdu")] == 1.5


def test_one_hot_gpu_with_its_own_fault_does_not_chill_the_row() -> None:
    """Today one GPU at 87 C drove a CDU to 18 C and facility water to 15 C for 50 min."""

    def one_hot(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP":
            return 30.0
        return 87.0 if aggregate == "max" else 62.0

    adapter = MemoryAdapter()
    responder = Responder(default_policy(), adapter, mode="auto")
    local = {"dc/r1": "incident 4 (thermal_throttle at dc/r1/k2/n1/g3) open"}
    opt = CoolingOptimizer(
        responder, "dc", ["dc/r1"], CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0), local=local.get
    )
    opt.step(0.0, one_hot)
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in adapter.settings
    assert (ActionKind.CDU_FLOW, "dc/r1") not in adapter.settings
    local.clear()  # no fault of its own: the hottest GPU is the row's, so the row tightens
    opt.step(60.0, one_hot)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0
