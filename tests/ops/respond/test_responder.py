from dataclasses import replace
from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest, Expectation
from twinloop.ops.respond.policy import default_policy, load_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter, make_incident


def reader(values: dict[str, float]):  # type: ignore[no-untyped-def]
    return lambda field, entity, aggregate="mean", ago_s=0.0: values.get(field)


def test_auto_applies_cooling_rule_and_verifies_effect(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    temps = {"DCGM_FI_DEV_GPU_TEMP": 80.0}
    out = r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, reader(temps))
    kinds = [(x.request.kind, x.status) for x in out]
    assert (ActionKind.CDU_FLOW, "applied") in kinds and (ActionKind.CDU_SETPOINT, "applied") in kinds
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1/cdu")] == pytest.approx(1.5)  # the pump's maximum
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == pytest.approx(26.0)
    temps["DCGM_FI_DEV_GPU_TEMP"] = 74.0
    assert r.verify(100.0, reader(temps)) == []  # not due yet
    verdicts = r.verify(300.0, reader(temps))
    assert {v.status for v in verdicts} == {"verified"}


def test_missing_effect_rolls_back_to_previous_setting(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    temps = {"DCGM_FI_DEV_GPU_TEMP": 80.0}
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, reader(temps))
    verdicts = r.verify(300.0, reader(temps))
    assert {v.status for v in verdicts} == {"rolled_back"}
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1/cdu")] == pytest.approx(1.0)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == pytest.approx(30.0)


def test_a_cooling_move_is_judged_on_the_mean_too_while_the_hottest_gpu_is_pinned_at_its_slowdown(
    adapter: MemoryAdapter,
) -> None:
    """mixed_hall seed 0: a colder facility water for the throttling A100 air row was rolled back 300 s later
    ("moved only +0.03"): the hottest GPU's own thermal control held its die at 87 C, so the max could not fall while
    every other GPU cooled; the optimizer set the water cold again 80 s after. Before: rolled back."""
    r = Responder(default_policy(), adapter, mode="auto")

    def temps(mean_c: float):  # type: ignore[no-untyped-def]
        return lambda field, entity, aggregate="mean", ago_s=0.0: 87.0 if aggregate == "max" else mean_c

    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, temps(70.0))
    verdicts = r.verify(300.0, temps(67.0))
    assert {v.status for v in verdicts} == {"verified"}
    assert all("mean DCGM_FI_DEV_GPU_TEMP +3.00 down" in v.detail for v in verdicts)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == pytest.approx(26.0)
    flat = Responder(default_policy(), MemoryAdapter(), mode="auto")
    flat.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, temps(70.0))
    assert {v.status for v in flat.verify(300.0, temps(70.0))} == {"rolled_back"}  # neither moved: no effect


def test_each_rule_fires_once_per_incident(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    inc = make_incident(EventClass.GPU_HARDWARE_ERROR, root="dc/r1/k2/n1/g3")
    first = r.handle([inc], 0.0, reader({}))
    assert [x.request.kind for x in first] == [ActionKind.CHECKPOINT, ActionKind.DRAIN]
    assert first[1].request.target == "dc/r1/k2/n1"
    assert r.handle([inc], 10.0, reader({})) == []


def test_observe_mode_only_recommends(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="observe")
    out = r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, reader({}))
    assert out and all(x.status == "recommended" for x in out)
    assert adapter.applied == []


def test_approve_mode_waits_for_a_person(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="approve")
    out = r.handle([make_incident(EventClass.GPU_HARDWARE_ERROR, root="dc/r1/k2/n1/g3")], 0.0, reader({}))
    assert all(x.status == "pending" for x in out) and adapter.applied == []
    ids = sorted(r.pending)
    assert r.approve(ids[0], 5.0, reader({})).status == "applied"
    assert r.reject(ids[1], 6.0).status == "rejected"
    assert len(adapter.applied) == 1 and ids[1] not in r.pending


def test_failed_action_is_reported_and_not_retried_blindly() -> None:
    adapter = MemoryAdapter(fail=True)
    r = Responder(default_policy(), adapter, mode="auto")
    first = r.handle([make_incident(EventClass.JOB_HANG, iid=1)], 0.0, reader({}))
    assert [x.status for x in first] == ["failed"] and first[0].detail == "boom"
    again = r.handle([make_incident(EventClass.JOB_HANG, iid=2)], 60.0, reader({}))
    assert [x.status for x in again] == ["refused"] and "backing off" in again[0].detail


def test_unresolvable_target_is_refused_with_reason(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    out = r.handle([make_incident(EventClass.JOB_HANG, root="dc/r9/k1")], 0.0, reader({}))
    assert out[0].status == "refused" and "cannot resolve target" in out[0].detail
    # the audit line says which rule and incident asked (was empty: slow-checkpoint hall, a GPU off the bus with
    # no job left on it, `gpu-hardware-error`'s checkpoint)
    assert out[0].request.reason == "job-hang on incident 1 (job_hang at dc/r9/k1)"


def test_bad_policy_files_name_file_and_field(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: x\nrules: [{name: r, when: [melting], actions: [{kind: drain}]}]\n")
    with pytest.raises(InputError, match=r"p\.yaml: rules\.0\.when\.0"):
        load_policy(p)
    p.write_text("name: x\nrules: [{name: r, when: [job_hang], actions: [{kind: power_cap, value: 1, scale: 2}]}]\n")
    with pytest.raises(InputError, match="at most one of value, change, scale"):
        load_policy(p)
    p.write_text("name: [")
    with pytest.raises(InputError, match="malformed YAML"):
        load_policy(p)


def _die_reader(temp_c: dict[float, float], power_w: dict[float, float], supply_c: float | None = 35.0):  # type: ignore[no-untyped-def]
    """Die temperature and power (every aggregate alike) by seconds ago (0: now); the CDU's supply now."""

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP":
            return supply_c if ago_s <= 0 else None
        return {"DCGM_FI_DEV_GPU_TEMP": temp_c, "DCGM_FI_DEV_POWER_USAGE": power_w}.get(field, {}).get(ago_s)

    return read


_STEADY_W = {0.0: 500.0, 30.0: 500.0, 60.0: 500.0, 150.0: 500.0}
_RISING = {0.0: 80.0, 30.0: 78.5, 60.0: 77.0}  # 0.05 C/s over the minute before an action


def test_trend_expectation_credits_a_slower_rise(adapter: MemoryAdapter) -> None:
    # A capacity-limited loop: rising 0.05 C/s at a steady power before the action, only 0.005 C/s in the second half
    # after it.
    r = Responder(default_policy(), adapter, mode="auto")
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, _die_reader(_RISING, _STEADY_W))
    verdicts = r.verify(300.0, _die_reader({0.0: 81.5, 150.0: 80.75}, _STEADY_W))
    assert {v.status for v in verdicts} == {"verified"}
    assert all("+13.50 down against its pre-action trend (+0.050/s)" in v.detail for v in verdicts)
    # The same rise as before the action: no effect, rolled back.
    r2 = Responder(default_policy(), MemoryAdapter(), mode="auto")
    r2.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, _die_reader(_RISING, _STEADY_W))
    assert {v.status for v in r2.verify(300.0, _die_reader({0.0: 95.0, 150.0: 87.5}, _STEADY_W))} == {"rolled_back"}


def test_the_end_of_a_power_ramp_is_not_credited_to_a_cooling_move(adapter: MemoryAdapter) -> None:
    """hot-afternoon seed 2: the dies climbing back with their jobs' power in the minute before a CDU step were
    extrapolated 300 s on; the die level at the power reached read "+44.91 down against its pre-action trend". A die
    follows its power within seconds: a rise of R times its power's rise ends with the ramp. Before: verified."""
    r = Responder(default_policy(), adapter, mode="auto")
    ramp = _die_reader({0.0: 60.0, 30.0: 52.5, 60.0: 45.0}, {0.0: 500.0, 30.0: 350.0, 60.0: 200.0})  # R 0.05 C/W
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, ramp)
    verdicts = r.verify(300.0, _die_reader({0.0: 60.0, 150.0: 60.0}, _STEADY_W))  # the die holds where it got to
    assert {v.status for v in verdicts} == {"rolled_back"}
    assert all("moved only +0.00" in v.detail or "moved only -0.00" in v.detail for v in verdicts)
    # A ramp on top of a warming coolant: only the coolant's part is extrapolated (+0.6 C of 15.6 C over the minute).
    r2 = Responder(default_policy(), MemoryAdapter(), mode="auto")
    warming = _die_reader({0.0: 60.6, 30.0: 52.8, 60.0: 45.0}, {0.0: 500.0, 30.0: 350.0, 60.0: 200.0}, supply_c=35.6)
    r2.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, warming)
    verdicts = r2.verify(300.0, _die_reader({0.0: 60.6, 150.0: 60.6}, _STEADY_W))
    assert {v.status for v in verdicts} == {"verified"}
    assert all("+3.00 down against its pre-action trend (+0.010/s)" in v.detail for v in verdicts)


class _Taker:
    """A cooling optimizer that steers the row and says whether its CDU is losing ground."""

    margin_c = 5.0
    approach_c = 3.0

    def __init__(self, losing: bool) -> None:
        self.losing = losing

    def slowdown_c(self, entity: str) -> float | None:
        return 89.0

    def losing_ground(self, entity: str, read: object) -> bool:
        return self.losing


@pytest.mark.parametrize("losing", [False, True])
def test_a_cdu_holding_its_setpoint_has_no_trend_to_beat(losing: bool) -> None:
    """hot-afternoon seed 0: a minute of the optimizer relaxing the setpoint (its CDU holding it) lifted the hottest
    die 0.14 C/s; a CDU step on it was credited "+41.48 down against its pre-action trend". A CDU holding its
    setpoint does not keep warming: the move is judged on the level (a flat die: rolled back); a capacity-limited
    one (losing ground) does, and a die that stops rising there is a move that worked. Before: verified both."""
    r = Responder(default_policy(), MemoryAdapter(), mode="auto")
    r.cooling = _Taker(losing)
    expect = Expectation("DCGM_FI_DEV_GPU_TEMP", "down", 300.0, 0.5, "max", "trend")
    step = ActionRequest(ActionKind.CDU_SETPOINT, "dc/r1/cdu", 26.0, expect=expect)
    assert r.submit(step, 0.0, _die_reader(_RISING, _STEADY_W)).status == "applied"
    verdicts = r.verify(300.0, _die_reader({0.0: 80.0, 150.0: 80.0}, _STEADY_W))
    assert [v.status for v in verdicts] == (["verified"] if losing else ["rolled_back"])
    # Credited only up to its slowdown, 89 C: its own clock control holds a die there whatever its trend (+15 before).
    assert all("+9.00 down" in v.detail for v in verdicts if v.status == "verified")


def test_a_step_is_not_a_trend(adapter: MemoryAdapter) -> None:
    """default seed 1: a pump losing flow lifted its row's dies 4.2 C in one reading just before the CDU step, and the
    step was extrapolated at 0.07 C/s: "+15.30 down against its pre-action trend" while the dies kept warming. A trend
    is what held over the whole minute (both halves): a step holds in one. Before: verified."""
    r = Responder(default_policy(), adapter, mode="auto")
    step = _die_reader({0.0: 71.9, 30.0: 67.7, 60.0: 67.7}, _STEADY_W)
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, step)
    verdicts = r.verify(300.0, _die_reader({0.0: 73.0, 150.0: 72.5}, _STEADY_W))  # still warming, slowly
    assert "verified" not in {v.status for v in verdicts}
    assert all("moved only -1.00" in v.detail and "kept" in v.detail for v in verdicts)  # a cooling move stays


def test_no_power_reading_no_trend(adapter: MemoryAdapter) -> None:
    """Without the power the die's rise cannot be split into its coolant's and its power's: judged on the level."""
    r = Responder(default_policy(), adapter, mode="auto")
    r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, _die_reader(_RISING, {}))
    assert {v.status for v in r.verify(300.0, _die_reader({0.0: 80.0, 150.0: 80.0}, {}))} == {"rolled_back"}


def test_until_closed_restores_settings_and_lifts_the_drain(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    inc = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    first = r.handle([inc], 0.0, reader({}))
    assert [(x.request.kind, x.status) for x in first] == [(ActionKind.POWER_CAP, "applied"),
                                                           (ActionKind.CHECKPOINT, "applied"),
                                                           (ActionKind.DRAIN, "applied")]  # fmt: skip
    assert adapter.settings[(ActionKind.POWER_CAP, "dc/r1/k2/n1")] == 450.0  # what the working PSUs carry
    later = r.handle([], 1.0, reader({}))  # the requeue waits for the checkpoint (this adapter confirms at once)
    assert [x.request.kind for x in later] == [ActionKind.REQUEUE]
    closed = r.handle([replace(inc, status="closed")], 400.0, reader({}))
    assert [(x.request.kind, x.status) for x in closed] == [(ActionKind.UNDRAIN, "restored"),
                                                            (ActionKind.POWER_CAP, "restored")]  # fmt: skip
    assert adapter.settings[(ActionKind.POWER_CAP, "dc/r1/k2/n1")] == 700.0


def test_a_setting_changed_since_is_not_restored(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    inc = make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    r.handle([inc], 0.0, reader({}))
    adapter.settings[(ActionKind.POWER_CAP, "dc/r1/k2/n1")] = 380.0  # a person moved it meanwhile
    closed = r.handle([replace(inc, status="closed")], 10.0, reader({}))
    assert [(x.request.kind, x.status) for x in closed] == [(ActionKind.UNDRAIN, "restored"),
                                                            (ActionKind.POWER_CAP, "superseded")]  # fmt: skip
    assert adapter.settings[(ActionKind.POWER_CAP, "dc/r1/k2/n1")] == 380.0


def test_rule_level_filter_and_stricter_rule_mode(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    # A job-wide straggler names no culprit node: no action. An SDC requeue waits for a person.
    assert r.handle([make_incident(EventClass.STRAGGLER, root="dc/jobs/train")], 0.0, reader({})) == []
    out = r.handle([make_incident(EventClass.SUSPECTED_SDC, iid=2)], 0.0, reader({}))
    assert [(x.request.kind, x.status) for x in out] == [(ActionKind.REQUEUE, "pending")]
    assert adapter.applied == []


def test_a_value_the_adapter_cannot_tell_is_refused_not_guessed() -> None:
    blind = MemoryAdapter(supply_w=None)
    r = Responder(default_policy(), blind, mode="auto")
    first = r.handle([make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")], 0.0, reader({}))
    assert [(x.request.kind, x.status) for x in first] == [(ActionKind.POWER_CAP, "refused"),
                                                           (ActionKind.CHECKPOINT, "applied"),
                                                           (ActionKind.DRAIN, "applied")]  # fmt: skip
    assert (ActionKind.POWER_CAP, "dc/r1/k2/n1") not in blind.settings
    low = MemoryAdapter(supply_w=50.0)  # fewer watts than the GPUs' lowest limit: clamped up to it
    Responder(default_policy(), low, mode="auto").handle(
        [make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")], 0.0, reader({})
    )
    assert low.settings[(ActionKind.POWER_CAP, "dc/r1/k2/n1")] == 200.0


class FleetAdapter(MemoryAdapter):
    """Its job is a serving fleet."""

    def is_serving(self, job: str) -> bool | None:
        return True


def test_a_hung_replica_is_restarted_alone_and_a_hung_job_requeued() -> None:
    # A job-hang incident at a node (one serving replica spinning while its fleet serves) restarts that replica;
    # one at the job (the whole job or fleet hung) requeues it. Before: every hang requeued the job (a node's was
    # refused for a serving fleet, leaving the hung replica hung until its watchdog).
    adapter = FleetAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    members = tuple(f"dc/r1/k2/n1/g{i}" for i in range(4))  # a TP-4 replica: half its node
    node = Incident(1, EventClass.JOB_HANG, "dc/r1/k2/n1", members, 0.0, 0.0, Severity.MAJOR)
    out = r.handle([node], 0.0, reader({}))
    assert [(x.request.kind, x.request.target, x.status) for x in out] == [
        (ActionKind.RESTART_REPLICA, "dc/r1/k2/n1/g0", "applied")
    ]
    job = replace(make_incident(EventClass.JOB_HANG, iid=2), root="dc/jobs/train")
    out = r.handle([job], 10.0, reader({}))
    assert [(x.request.kind, x.request.target, x.status) for x in out] == [
        (ActionKind.REQUEUE, "dc/jobs/train", "applied")
    ]
    # A training job's rank hung at a GPU stops the whole job: requeued, no replica to restart.
    rank = replace(node, incident_id=3)
    out = Responder(default_policy(), MemoryAdapter(), mode="auto").handle([rank], 20.0, reader({}))
    assert [(x.request.kind, x.status) for x in out] == [(ActionKind.REQUEUE, "applied")]
