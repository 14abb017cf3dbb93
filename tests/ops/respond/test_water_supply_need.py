"""The `cooling-degradation` rule's facility water goes only as cold as its CDU's new setpoint needs."""

import pytest
from pydantic import ValidationError

from twinloop.hardware.gpu import get_gpu
from twinloop.ops.events import EventClass
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import AdapterReply
from twinloop.ops.respond.policy import ActionTemplate

from .conftest import MemoryAdapter, make_incident
from .test_hand_over import _reader, _responder

SLOWDOWN_C = get_gpu("h100-sxm").slowdown_temp_c
WATER = (ActionKind.FACILITY_WATER, "dc")


class PidOwnsSetpoints(MemoryAdapter):
    """A CDU whose own controller owns its setpoint (the twin's `reactive` cooling): setpoint writes refused."""

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.kind == ActionKind.CDU_SETPOINT:
            return AdapterReply("refused", "cooling control is 'reactive' (the PID owns setpoints)")
        return super()._apply(request)


def _fire(adapter: MemoryAdapter, optimizer: bool = True) -> list[str]:
    """The rule near slowdown on row dc/r1 (the full response); the facility-water results' details."""
    incident = make_incident(EventClass.THERMAL_THROTTLE, root="dc/r1")
    out = _responder(adapter, optimizer).handle([incident], 0.0, _reader(SLOWDOWN_C - 3.0))
    return [r.detail for r in out if r.request.kind == ActionKind.FACILITY_WATER]


def test_water_already_cold_enough_for_the_new_setpoint_is_not_lowered() -> None:
    adapter = MemoryAdapter()
    adapter.settings[WATER] = 20.0  # CDU 30 -> 26 C needs at most 23 C: 20 C already is
    details = _fire(adapter)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == 26.0
    assert adapter.settings[WATER] == 20.0
    assert details == ["no action: facility_water of dc is already 20"]
    assert _water_reason(adapter) is None  # nothing applied to the water


def _water_reason(adapter: MemoryAdapter) -> str | None:
    applied = [r for r in adapter.applied if r.kind == ActionKind.FACILITY_WATER]
    return applied[-1].reason if applied else None


def test_water_goes_only_as_far_as_the_new_setpoint_needs() -> None:
    adapter = MemoryAdapter()
    adapter.settings[WATER] = 24.0  # needs 23 C: one degree, not the guard's full 2 C step
    _fire(adapter)
    assert adapter.settings[WATER] == 23.0
    reason = _water_reason(adapter) or ""
    assert "supply setpoint 26.0 C needs facility water at most 23.0 C (3.0 C approach)" in reason


def test_a_cdu_whose_pid_refuses_the_setpoint_counts_at_the_setpoint_it_has() -> None:
    adapter = PidOwnsSetpoints()
    adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] = 25.0  # the PID's: needs water at most 22 C
    adapter.settings[WATER] = 23.0
    _fire(adapter)
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == 25.0
    assert adapter.settings[WATER] == 22.0


def test_the_step_is_still_bounded_by_the_change_and_the_guard() -> None:
    adapter = MemoryAdapter()
    adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] = 20.0  # -> 16 C needs 13 C; water at 25 C
    _fire(adapter)
    assert adapter.settings[WATER] == 23.0  # the guard's 2 C a step


def test_without_an_optimizer_the_approach_is_unknown_and_the_step_is_the_change() -> None:
    adapter = MemoryAdapter()
    adapter.settings[WATER] = 20.0
    _fire(adapter, optimizer=False)
    assert adapter.settings[WATER] == 18.0  # -4 C, clamped to the guard's 2 C


def test_supply_need_is_only_for_facility_water() -> None:
    with pytest.raises(ValidationError, match="only for kind facility_water"):
        ActionTemplate(kind=ActionKind.CDU_SETPOINT, value_from="supply_need")
    with pytest.raises(ValidationError, match="needs change"):
        ActionTemplate(kind=ActionKind.FACILITY_WATER, value_from="supply_need")
    with pytest.raises(ValidationError, match="needs change"):
        ActionTemplate(kind=ActionKind.FACILITY_WATER, value_from="supply_need", change=2.0)
    with pytest.raises(ValidationError, match="at most one"):
        ActionTemplate(kind=ActionKind.FACILITY_WATER, value_from="supply_need", value=20.0)
    assert ActionTemplate(kind=ActionKind.FACILITY_WATER, value_from="supply_need", change=-4.0).change == -4.0


def test_a_rule_left_to_the_optimizer_records_the_water_it_would_have_asked_for() -> None:
    adapter = MemoryAdapter()
    adapter.settings[WATER] = 20.0
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    out = _responder(adapter).handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0))  # margin: no action
    water = [r for r in out if r.request.kind == ActionKind.FACILITY_WATER]
    assert [r.request.value for r in water] == [20.0]  # not the flat step's 16 C
    assert adapter.applied == []
