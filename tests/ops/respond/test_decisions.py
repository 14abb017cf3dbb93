"""Issue 14 decisions at the responder: each test reproduces a decision an operator would have vetoed."""

from __future__ import annotations

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import JobTiming
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter, make_incident


class CheckpointAdapter(MemoryAdapter):
    """Memory adapter whose job reports its checkpoint done at ``done_at_s`` (None: it cannot tell)."""

    def __init__(self, done_at_s: float | None, supply_w: float | None = 450.0) -> None:
        super().__init__(supply_w=supply_w)
        self.done_at_s = done_at_s
        self.now = 0.0

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        if self.done_at_s is None:
            return None
        return self.now >= self.done_at_s and self.done_at_s >= since_ts


def _reader(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
    return None


def _gpu_incident(cls: EventClass) -> Incident:
    root = "dc/r1/k2/n1/g3"
    return Incident(1, cls, root, (root,), 0.0, 0.0, Severity.MAJOR)


def _drive(r: Responder, adapter: CheckpointAdapter, incident: Incident, until_s: float) -> list[tuple[float, str]]:
    """Step the responder every 5 s; (time, status) of each requeue."""
    out = []
    for t in range(0, int(until_s) + 1, 5):
        adapter.now = float(t)
        for res in r.handle([incident], float(t), _reader):
            if res.request.kind == ActionKind.REQUEUE:
                out.append((float(t), res.status))
    return out


def test_straggler_requeue_waits_for_a_slow_checkpoint() -> None:
    """Today the requeue followed the checkpoint request after a fixed 30 s and threw a 30 s+ write away."""
    adapter = CheckpointAdapter(done_at_s=42.0)
    r = Responder(default_policy(), adapter, mode="auto")
    requeues = _drive(r, adapter, _gpu_incident(EventClass.STRAGGLER), 120)
    assert requeues == [(45.0, "applied")]
    requeue = next(x for x in r.log if x.request.kind == ActionKind.REQUEUE)
    assert "checkpoint of dc/jobs/train confirmed" in requeue.request.reason


def test_unconfirmed_checkpoint_escalates_to_a_person() -> None:
    adapter = CheckpointAdapter(done_at_s=None)
    r = Responder(default_policy(), adapter, mode="auto")
    requeues = _drive(r, adapter, _gpu_incident(EventClass.STRAGGLER), 400)
    assert requeues == [(300.0, "pending")]  # the default 300 s timeout, then a person decides
    assert any("escalated to a person" in req.reason for req in r.pending.values())


def test_lost_redundancy_the_supplies_carry_drains_at_the_next_checkpoint() -> None:
    """Supplies carrying the GPUs' full 700 W: no cap, no forced checkpoint, drain now, requeue at the job's own
    next checkpoint."""
    adapter = CheckpointAdapter(done_at_s=600.0, supply_w=900.0)
    r = Responder(default_policy(), adapter, mode="auto")
    incident = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    requeues = _drive(r, adapter, incident, 900)
    kinds = [x.request.kind for x in r.log if x.status == "applied"]
    assert ActionKind.POWER_CAP not in kinds and ActionKind.CHECKPOINT not in kinds
    assert kinds[0] == ActionKind.DRAIN
    assert requeues == [(600.0, "applied")]


def test_short_supplies_still_cap_checkpoint_and_move() -> None:
    adapter = CheckpointAdapter(done_at_s=25.0, supply_w=450.0)
    r = Responder(default_policy(), adapter, mode="auto")
    incident = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    requeues = _drive(r, adapter, incident, 100)
    kinds = [x.request.kind for x in r.log if x.status == "applied"]
    assert kinds[:3] == [ActionKind.POWER_CAP, ActionKind.CHECKPOINT, ActionKind.DRAIN]
    assert requeues == [(25.0, "applied")]  # when the checkpoint is confirmed


def test_a_setting_already_at_its_value_is_no_action() -> None:
    """A computed cap equal to the GPU's maximum (the current limit) is not an action."""
    adapter = CheckpointAdapter(done_at_s=0.0)
    r = Responder(default_policy(), adapter, mode="auto")
    res = r.submit(ActionRequest(ActionKind.POWER_CAP, "dc/r1/k2/n1", 700.0), 0.0, _reader)
    assert res.status == "refused" and res.detail.startswith("no action")
    assert adapter.applied == []


def test_every_action_says_why_what_it_expects_and_what_judged_it() -> None:
    from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig

    adapter = CheckpointAdapter(done_at_s=0.0)
    r = Responder(default_policy(), adapter, mode="auto")

    def hot(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        return 80.0

    applied = r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, hot)
    flow = next(x for x in applied if x.request.kind == ActionKind.CDU_FLOW)
    assert flow.source == "incident" and "cooling-degradation on incident 1" in flow.audit_detail
    assert "expects: max DCGM_FI_DEV_GPU_TEMP down" in flow.audit_detail
    judged = r.verify(300.0, hot)  # flat: no effect, rolled back
    back = next(x for x in judged if x.request.kind == ActionKind.CDU_FLOW)
    assert back.status == "rolled_back" and back.source == "rollback"
    assert f"judges action {flow.action_id}" in back.audit_detail
    opt = CoolingOptimizer(r, "dc", ["dc/r1"], CoolingOptimizerConfig(warmup_s=0.0))
    moves = opt.step(400.0, lambda f, e, a="mean", ago_s=0.0: 60.0)
    assert moves and all(m.source == "optimizer" for m in moves)


def test_live_checkpoint_confirmation_from_a_job_heartbeat_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from twinloop.ops.respond.adapters.commands import SlurmAdapter
    from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats

    bare = SlurmAdapter()
    assert bare.checkpoint_done("dc/jobs/123", 0.0) is None  # cannot tell: the requeue will go to a person
    a = SlurmAdapter(heartbeats=JobHeartbeats(tmp_path))  # the older touch-file convention
    assert a.checkpoint_done("dc/jobs/123", 1000.0) is False  # no heartbeat yet
    beat = tmp_path / "123.checkpoint"
    beat.touch()
    os.utime(beat, (999.0, 999.0))
    assert a.checkpoint_done("dc/jobs/123", 1000.0) is False  # an older checkpoint
    os.utime(beat, (1005.0, 1005.0))
    assert a.checkpoint_done("dc/jobs/123", 1000.0) is True


class ServingAdapter(CheckpointAdapter):
    def is_serving(self, job: str) -> bool | None:
        return True


def test_one_bad_gpu_in_a_serving_fleet_takes_out_its_replica_not_the_fleet() -> None:
    adapter = ServingAdapter(done_at_s=0.0)
    r = Responder(default_policy(), adapter, mode="auto")
    requeues = _drive(r, adapter, _gpu_incident(EventClass.STRAGGLER), 120)
    # drain only (rule straggler-kept): no checkpoint or fleet requeue asked for and refused
    assert requeues == []
    assert {x.request.kind for x in r.log} == {ActionKind.DRAIN}
    assert [a.target for a in adapter.applied if a.kind == ActionKind.DRAIN] == ["dc/r1/k2/n1"]


class TimedAdapter(CheckpointAdapter):
    """A job whose checkpoint write, restart and next checkpoint the cluster can tell."""

    def __init__(self, done_at_s: float, supply_w: float, next_checkpoint_in_s: float) -> None:
        super().__init__(done_at_s=done_at_s, supply_w=supply_w)
        self.timing = JobTiming(checkpoint_write_s=20.0, restart_s=120.0, next_checkpoint_in_s=next_checkpoint_in_s)

    def job_timing(self, job: str) -> JobTiming | None:
        return self.timing


def test_a_slight_shortfall_moves_the_job_at_its_own_checkpoint() -> None:
    """Supplies carrying 665 of the GPUs' 700 W: the cap costs the job at most 5 %, so running capped until its own
    checkpoint 300 s away (<= 15 s of its progress) costs less than a forced 20 s write. Today: forced checkpoint."""
    adapter = TimedAdapter(done_at_s=300.0, supply_w=665.0, next_checkpoint_in_s=300.0)
    r = Responder(default_policy(), adapter, mode="auto")
    incident = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    requeues = _drive(r, adapter, incident, 400)
    kinds = [x.request.kind for x in r.log if x.status == "applied"]
    assert ActionKind.CHECKPOINT not in kinds
    assert kinds[:2] == [ActionKind.POWER_CAP, ActionKind.DRAIN]
    assert requeues == [(300.0, "applied")]
    cap = next(x for x in r.log if x.request.kind == ActionKind.POWER_CAP)
    assert "restart at its own checkpoint" in cap.request.reason and "at most 5.0%" in cap.request.reason


def test_a_deep_shortfall_still_checkpoints_and_moves_at_once() -> None:
    """Supplies carrying 450 of 700 W: up to 36 % slower for 300 s (~107 s) costs more than a 20 s write."""
    adapter = TimedAdapter(done_at_s=25.0, supply_w=450.0, next_checkpoint_in_s=300.0)
    r = Responder(default_policy(), adapter, mode="auto")
    incident = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    requeues = _drive(r, adapter, incident, 100)
    kinds = [x.request.kind for x in r.log if x.status == "applied"]
    assert kinds[:3] == [ActionKind.POWER_CAP, ActionKind.CHECKPOINT, ActionKind.DRAIN]
    assert requeues == [(25.0, "applied")]


def test_supplies_below_the_floor_move_the_job_at_once() -> None:
    """Supplies that cannot carry the GPUs' 200 W floor: the node trips whatever the cap, so no waiting, even for
    a checkpoint 30 s away."""
    adapter = TimedAdapter(done_at_s=25.0, supply_w=150.0, next_checkpoint_in_s=30.0)
    r = Responder(default_policy(), adapter, mode="auto")
    incident = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    _drive(r, adapter, incident, 100)
    kinds = [x.request.kind for x in r.log if x.status == "applied"]
    assert ActionKind.CHECKPOINT in kinds


def test_a_serving_fleet_is_never_asked_to_checkpoint() -> None:
    """sweeps/new-user/serving-fleet.yaml: a thermal-interface fault on a serving GPU fired `gpu-cooling-fault`,
    whose checkpoint went to the cluster (the twin refused it: not a training job) and started the guard's back-off on
    the fleet. A serving replica keeps no training state: the checkpoint is no action, recorded before the adapter."""
    adapter = ServingAdapter(done_at_s=0.0)
    r = Responder(default_policy(), adapter, mode="auto")
    _drive(r, adapter, _gpu_incident(EventClass.COOLING_DEGRADATION), 120)
    assert ActionKind.CHECKPOINT not in [a.kind for a in adapter.applied]
    checkpoint = next(x for x in r.log if x.request.kind == ActionKind.CHECKPOINT)
    assert checkpoint.status == "refused" and "keeps no training state" in checkpoint.detail
    assert [a.target for a in adapter.applied if a.kind == ActionKind.DRAIN] == ["dc/r1/k2/n1"]
