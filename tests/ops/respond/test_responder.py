from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.ops.events import EventClass
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import default_policy, load_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter, make_incident


def reader(values: dict[str, float]):  # type: ignore[no-untyped-def]
    return lambda field, entity: values.get(field)


def test_auto_applies_cooling_rule_and_verifies_effect(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    temps = {"DCGM_FI_DEV_GPU_TEMP": 80.0}
    out = r.handle([make_incident(EventClass.COOLING_DEGRADATION)], 0.0, reader(temps))
    kinds = [(x.request.kind, x.status) for x in out]
    assert (ActionKind.CDU_FLOW, "applied") in kinds and (ActionKind.CDU_SETPOINT, "applied") in kinds
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1/cdu")] == pytest.approx(1.3)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == pytest.approx(27.0)
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


def test_each_rule_fires_once_per_incident(adapter: MemoryAdapter) -> None:
    r = Responder(default_policy(), adapter, mode="auto")
    inc = make_incident(EventClass.GPU_HARDWARE_ERROR, root="dc/r1/k2/n1/g3")
    first = r.handle([inc], 0.0, reader({}))
    assert [x.request.kind for x in first] == [ActionKind.CHECKPOINT, ActionKind.DRAIN, ActionKind.REQUEUE]
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
