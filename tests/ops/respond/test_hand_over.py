"""A coolant rule with `hand_over` acts only near slowdown; elsewhere the row stays with the cooling optimizer."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.ops.detect.rules import GpuLimits
from twinloop.ops.events import EventClass
from twinloop.ops.learn.precool import ArrivalTemperature
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.policy import default_policy, load_policy
from twinloop.ops.respond.responder import Reader, Responder

from .conftest import MemoryAdapter, make_incident

SLOWDOWN_C = get_gpu("h100-sxm").slowdown_temp_c
COOLANT = (ActionKind.CDU_FLOW, ActionKind.CDU_SETPOINT, ActionKind.FACILITY_WATER)


def _row_gpus() -> ArrivalTemperature:
    ids = tuple(f"dc/r1/k1/n{i // 8}/g{i % 8}" for i in range(16))
    return ArrivalTemperature(ids, GpuLimits.from_kinds([get_gpu("h100-sxm")], np.zeros(16, dtype=np.int64)))


def _responder(adapter: MemoryAdapter, optimizer: bool = True) -> Responder:
    responder = Responder(default_policy(), adapter, mode="auto")
    if optimizer:
        responder.cooling = CoolingOptimizer(
            responder, "dc", ["dc/r1"], CoolingOptimizerConfig(warmup_s=0.0), arrival=_row_gpus()
        )
    return responder


def _reader(hottest_c: float, rise_c_per_min: float = 0.0, step_c: float = 0.0, supply_c: float = 30.0) -> Reader:
    """The row's hottest GPU at ``hottest_c`` now, rising ``rise_c_per_min`` steadily, or by ``step_c`` in the last
    20 s and flat before; its CDU supplying ``supply_c`` (the adapter's setpoint: 30 C).
    """

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == "DCGM_FI_DEV_GPU_TEMP":
            return hottest_c - rise_c_per_min * ago_s / 60.0 - (step_c if ago_s >= 20.0 else 0.0)
        return supply_c

    return read


def _coolant_moves(adapter: MemoryAdapter) -> list[ActionKind]:
    return [r.kind for r in adapter.applied if r.kind in COOLANT]


def test_ample_margin_takes_no_coolant_action_and_says_why() -> None:
    adapter = MemoryAdapter()
    responder = _responder(adapter)
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    out = responder.handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0))
    assert _coolant_moves(adapter) == []
    assert [r.status for r in out] == ["refused"] * 3
    assert all(r.detail.startswith("no action: margin 14.0 C") for r in out)
    assert responder.handle([], 10.0, _reader(SLOWDOWN_C - 13.0)) == []  # said once, asked again quietly


def test_the_rule_acts_in_full_once_the_margin_shrinks_while_the_incident_is_open() -> None:
    adapter = MemoryAdapter()
    responder = _responder(adapter)
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    responder.handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0))
    out = responder.handle([], 60.0, _reader(SLOWDOWN_C - 4.0))  # no update of the incident: asked again anyway
    assert _coolant_moves(adapter) == list(COOLANT)
    assert all("margin 4.0 C" in r.request.reason for r in out)


def test_near_slowdown_gets_the_full_response_at_once() -> None:
    adapter = MemoryAdapter()
    responder = _responder(adapter)
    responder.handle([make_incident(EventClass.THERMAL_THROTTLE, root="dc/r1")], 0.0, _reader(SLOWDOWN_C - 3.0))
    assert _coolant_moves(adapter) == list(COOLANT)
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1/cdu")] == 1.5  # the pump's maximum
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1/cdu")] == 26.0  # 30 - 4


def test_a_gpu_rising_toward_slowdown_within_the_verify_window_gets_the_full_response() -> None:
    adapter = MemoryAdapter()
    # 12 C of margin, rising 2 C/min: 2 C left at the end of the 300 s verify window.
    _responder(adapter).handle(
        [make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1/k1")], 0.0, _reader(SLOWDOWN_C - 12.0, 2.0)
    )
    assert _coolant_moves(adapter) == list(COOLANT)


def test_a_step_that_settled_is_not_taken_for_a_ramp() -> None:
    adapter = MemoryAdapter()
    # 14 C of margin after a 2 C step in the last 20 s (a die settling on a warmer coolant): 12 C left in 300 s.
    out = _responder(adapter).handle(
        [make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")], 0.0, _reader(SLOWDOWN_C - 14.0, step_c=2.0)
    )
    assert _coolant_moves(adapter) == []
    assert "12.0 C in 300 s" in out[0].detail


def test_the_same_step_on_a_cdu_that_cannot_hold_its_setpoint_is_a_ramp() -> None:
    adapter = MemoryAdapter()
    # Its supply 3 C above its setpoint: capacity-limited, the coolant keeps warming; 2 C in the last minute is
    # 10 C in 300 s, 4 C of margin left.
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    out = _responder(adapter).handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0, step_c=2.0, supply_c=33.0))
    assert _coolant_moves(adapter) == list(COOLANT)
    assert "its CDU cannot hold its setpoint" in out[0].request.reason


def test_without_an_optimizer_to_take_the_row_the_rule_acts_as_before() -> None:
    adapter = MemoryAdapter()
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    _responder(adapter, optimizer=False).handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0))
    assert _coolant_moves(adapter) == list(COOLANT)


def test_a_closed_incident_is_no_longer_asked() -> None:
    adapter = MemoryAdapter()
    responder = _responder(adapter)
    incident = make_incident(EventClass.COOLING_DEGRADATION, root="dc/r1")
    responder.handle([incident], 0.0, _reader(SLOWDOWN_C - 14.0))
    responder.handle([replace(incident, status="closed")], 30.0, _reader(SLOWDOWN_C - 14.0))
    responder.handle([], 60.0, _reader(SLOWDOWN_C - 2.0))
    assert _coolant_moves(adapter) == []


_RULE = """
name: p
rules:
  - name: r
    when: [cooling_degradation]
    at: {at}
    hand_over: {hand_over}
    actions: [{{kind: cdu_setpoint, target: cdu, change: -4.0}}]
    expect: {{field: DCGM_FI_DEV_GPU_TEMP, direction: down, within_s: 300}}
"""


def _load(tmp_path: Path, hand_over: str, at: str = "[row]") -> None:
    p = tmp_path / "p.yaml"
    p.write_text(_RULE.format(at=at, hand_over=hand_over))
    load_policy(p)


def test_hand_over_is_validated_at_load(tmp_path: Path) -> None:
    _load(tmp_path, "{to: cooling_optimizer, margin_c: 3.0}")
    with pytest.raises(InputError, match=r"p\.yaml: rules\.0\.hand_over\.margin_c.*greater than 0"):
        _load(tmp_path, "{to: cooling_optimizer, margin_c: -1.0}")
    with pytest.raises(InputError, match=r"rules\.0\.hand_over\.margin_c"):
        _load(tmp_path, "{to: cooling_optimizer, margin_c: .nan}")
    with pytest.raises(InputError, match=r"rules\.0\.hand_over\.to"):
        _load(tmp_path, "{to: facility}")
    with pytest.raises(InputError, match="hand_over: only for a rule limited to row, rack or node"):
        _load(tmp_path, "{to: cooling_optimizer}", at="[gpu]")
    assert default_policy().rules[0].hand_over is not None
