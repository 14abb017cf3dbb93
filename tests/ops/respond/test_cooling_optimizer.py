import numpy as np
import pytest

from twinloop.hardware.gpu import get_gpu
from twinloop.ops.detect.rules import POWER, POWER_LIMIT, TEMP, GpuLimits
from twinloop.ops.learn.precool import ArrivalTemperature
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter


def _reader(hottest_c: float, supply_c: float = 30.0):  # type: ignore[no-untyped-def]
    return lambda field, entity, aggregate="mean", ago_s=0.0: (
        supply_c if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP" else hottest_c
    )


def _optimizer(adapter: MemoryAdapter) -> CoolingOptimizer:
    responder = Responder(default_policy(), adapter, mode="auto")
    return CoolingOptimizer(responder, "dc", ["dc/r1"], CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0))


def test_relaxes_with_margin_and_facility_water_follows_the_coldest_setpoint() -> None:
    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    opt.step(0.0, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 31.0
    assert adapter.settings[(ActionKind.FACILITY_WATER, "dc")] == 27.0  # 25 + the guard's 2 C step, under 31 - 3
    assert opt.step(30.0, _reader(60.0)) == []  # one move per period


def test_facility_water_keeps_an_air_row_on_the_same_water_at_its_supply_setpoint() -> None:
    """sweeps/new-user/mixed-shifted.yaml: the facility water followed the (relaxed) CDU setpoints alone, up to 32 C,
    over an air row whose air handlers supply 22 C; its A100s throttled. Before: up toward 31 - 3 = 28 C here."""
    adapter = MemoryAdapter()
    adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r2")] = 22.0  # the air row's supply setpoint
    responder = Responder(default_policy(), adapter, mode="auto")
    config = CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0)
    opt = CoolingOptimizer(responder, "dc", ["dc/r1"], config, shared=["dc/r2"])
    opt.step(0.0, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 31.0  # the liquid row still relaxes
    assert adapter.settings[(ActionKind.FACILITY_WATER, "dc")] == 23.0  # 25 - the guard's 2 C step toward 22 - 3
    moved = [a for a in opt.responder.log if a.request.kind == ActionKind.FACILITY_WATER]
    assert "follow the coldest supply setpoint 22.0 C minus 3.0 C approach" in moved[-1].request.reason


def test_facility_water_is_not_warmed_while_an_air_row_on_it_has_its_cooling_incident_open() -> None:
    """mixed_hall seed 0: the cooling-degradation rule set the facility water 11 C for the A100 air row's throttling
    (incident open); 65 s later the optimizer warmed it to 13 C, following the air handler's setpoint, because only
    the liquid rows' incidents held the follow. Before: 11 -> 13 C here."""
    adapter = MemoryAdapter()
    adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] = 22.0  # the liquid row
    adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r2")] = 16.0  # the air row's handlers
    adapter.settings[(ActionKind.FACILITY_WATER, "dc")] = 11.0  # the rule's move for the air row
    responder = Responder(default_policy(), adapter, mode="auto")
    config = CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0)

    def hold(row: str) -> str | None:
        return "incident 29 (thermal_throttle at dc/r2) open" if row == "dc/r2" else None

    opt = CoolingOptimizer(responder, "dc", ["dc/r1"], config, hold=hold, shared=["dc/r2"])
    opt.step(0.0, _reader(74.0, supply_c=22.0))
    assert adapter.settings[(ActionKind.FACILITY_WATER, "dc")] == 11.0
    closed = CoolingOptimizer(
        Responder(default_policy(), adapter, mode="auto"), "dc", ["dc/r1"], config, shared=["dc/r2"]
    )
    closed.step(0.0, _reader(74.0, supply_c=22.0))  # the incident closed: the follow goes on
    assert adapter.settings[(ActionKind.FACILITY_WATER, "dc")] == 13.0


def test_tightens_the_setpoint_first_and_flow_only_when_the_setpoint_no_longer_helps() -> None:
    adapter = MemoryAdapter()
    _optimizer(adapter).step(0.0, _reader(80.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0
    assert (ActionKind.CDU_FLOW, "dc/r1") not in adapter.settings  # flow above its design point costs flow cubed
    losing = MemoryAdapter()
    _optimizer(losing).step(0.0, _reader(80.0, supply_c=36.0))  # supply 6 C above its setpoint: capacity-limited
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in losing.settings
    assert losing.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.1
    floored = MemoryAdapter()
    floored.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] = 15.0  # at its lower limit
    _optimizer(floored).step(0.0, _reader(80.0, supply_c=15.0))
    assert floored.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.1


def test_flow_above_the_design_point_comes_back_first_once_no_gpu_is_over_the_target() -> None:
    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    opt.step(0.0, _reader(73.0))  # in the band: nothing to do; design point (30 C, flow 1.0) noted
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in adapter.settings and (ActionKind.CDU_FLOW, "dc/r1") not in (
        adapter.settings
    )
    adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] = 1.3  # an incident rule pushed the flow up, and closed
    opt.step(60.0, _reader(80.0))  # still over the target: a colder setpoint, the flow stays (not lowered while hot)
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.3
    for k in range(2, 6):  # under the target (even inside the band), holding its setpoint: back to 1.0, then stop
        opt.step(60.0 * k, _reader(73.0, supply_c=29.0))
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.0
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0  # in the band: no warmer setpoint


def test_a_forecast_rise_precools_back_to_the_design_point_but_no_further() -> None:
    adapter = MemoryAdapter()
    responder = Responder(default_policy(), adapter, mode="auto")
    rise = {"w": 0.0}
    opt = CoolingOptimizer(
        responder,
        "dc",
        ["dc/r1"],
        CoolingOptimizerConfig(warmup_s=0.0),
        forecast=lambda r: rise["w"],
        load=lambda r: 4e5,
    )
    design = adapter.current(ActionKind.CDU_SETPOINT, "dc/r1")
    assert design is not None
    for k in range(3):  # margin and no heat coming: relax three notches
        opt.step(60.0 * k, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == design + 3
    rise["w"] = 1e4  # a rise under precool_fraction of the load is noise: keep relaxing
    opt.step(180.0, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == design + 4
    rise["w"] = 1e5  # a job is coming: back to the design point, one notch a period, then hold there
    for k in range(4, 10):
        opt.step(60.0 * k, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == design
    assert adapter.current(ActionKind.CDU_FLOW, "dc/r1") == 1.0  # never moved above the design flow
    opt.step(600.0, _reader(80.0))  # GPUs hot now: colder than the design point is allowed
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == design - 1


def _arrival(gpu_c: float, power_w: float = 70.0, resistance: float = 1.0) -> ArrivalTemperature:
    """16 H100s of row dc/r1 (catalog: R 0.05 C/W times ``resistance``, slowdown 89 C, TDP 700 W) at ``gpu_c``
    drawing ``power_w``."""
    ids = tuple(f"dc/r1/k1/n{i // 8}/g{i % 8}" for i in range(16))
    limits = GpuLimits.from_kinds([get_gpu("h100-sxm")], np.zeros(16, dtype=np.int64), np.full(16, resistance))
    arrival = ArrivalTemperature(ids, limits)
    arrival.observe({TEMP: np.full(16, gpu_c), POWER: np.full(16, power_w), POWER_LIMIT: np.full(16, 700.0)})
    return arrival


def _precool_moves(resistance: float) -> list[str]:
    """Precool moves of an optimizer on a row relaxed 3 C above its design point (supply 33 C), whose idle GPUs
    (70 W, R 0.05 C/W times ``resistance``) sit at the supply plus R * 70 W, once 100 kW is forecast to arrive."""
    gpu_c = 33.0 + 0.05 * resistance * 70.0
    adapter = MemoryAdapter()
    rise = {"w": 0.0}
    opt = CoolingOptimizer(
        Responder(default_policy(), adapter, mode="auto"),
        "dc",
        ["dc/r1"],
        CoolingOptimizerConfig(warmup_s=0.0),
        forecast=lambda r: rise["w"],
        load=lambda r: 4e5,
        arrival=_arrival(gpu_c, resistance=resistance),
    )
    for k in range(3):
        opt.step(60.0 * k, _reader(gpu_c, 30.0 + k))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 33.0
    rise["w"] = 1e5
    out = opt.step(180.0, _reader(gpu_c, 33.0))
    return [a.request.reason for a in out if "forecast to arrive" in a.request.reason]


def test_precool_only_when_the_arriving_heat_would_bring_gpus_near_slowdown() -> None:
    # H100s idle at 36.5 C on 33 C water: at 700 W they would run 36.5 + 0.05 * 630 = 68 C, far under 89 - 5 C:
    # precooling buys nothing (before the arrival model this precooled).
    assert _precool_moves(1.0) == []
    # The same GPUs with 1.8 times the resistance (an air-like path): 39.3 + 0.09 * 630 = 96 C >= 84 C: precool.
    moves = _precool_moves(1.8)
    assert moves and all("predicted 96.0 C >= 84.0 C (slowdown 89 C" in m for m in moves)


def test_the_arrival_prediction_adds_each_gpus_own_rise_and_the_coolants_warming() -> None:
    arrival = _arrival(40.0, power_w=200.0)  # coolant side 40 - 0.05 * 200 = 30 C
    assert arrival.slowdown_c("dc/r1") == 89.0 and arrival.slowdown_c("dc/r2") is None
    assert arrival.predict_c("dc/r1", 0.0, 1e4, 30.0) == pytest.approx(40.0 + 0.05 * 500)
    # Coolant 2 C above a 28 C supply at 10 kW: 20 kW more warms it 4 C more.
    assert arrival.predict_c("dc/r1", 2e4, 1e4, 28.0) == pytest.approx(65.0 + 4.0)
    assert arrival.predict_c("dc/r2", 2e4, 1e4, 28.0) is None
    capped = _arrival(40.0, power_w=200.0)
    capped.observe({TEMP: np.full(16, 40.0), POWER: np.full(16, 200.0), POWER_LIMIT: np.full(16, 300.0)})
    assert capped.predict_c("dc/r1", 0.0, 1e4, None) == pytest.approx(45.0)  # a capped GPU gains only to its cap
    with pytest.raises(ValueError, match="precool_margin_c"):
        CoolingOptimizerConfig(precool_margin_c=-1.0)


def _history_reader(temp_at, now: float, supply_c: float = 30.0):  # type: ignore[no-untyped-def]
    """A reader whose hottest GPU read ``ago_s`` back is ``temp_at(now - ago_s)`` (a reader with history)."""
    return lambda field, entity, aggregate="mean", ago_s=0.0: (
        supply_c if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP" else temp_at(now - ago_s)
    )


def test_a_row_whose_job_pauses_is_not_relaxed_on_the_dip_but_a_row_cool_over_the_hold_is() -> None:
    # The job computes with its hottest GPU at 73 C (inside the band: nothing to relax) and pauses for a 30 s
    # checkpoint write from 30 s to 60 s, its GPUs falling to 55 C. Judged on the reading now the optimizer
    # relaxed the row at 60 s (default seed 4 with saves at iteration counts); at its working heat it does not.
    def paused(t: float) -> float:
        return 55.0 if 30.0 <= t <= 60.0 else 73.0

    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    for t in (0.0, 60.0, 120.0):
        opt.step(t, _history_reader(paused, t))
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in adapter.settings
    assert adapter.settings[(ActionKind.FACILITY_WATER, "dc")] == 27.0  # the unmoved setpoint less the approach

    # The job ends at 200 s: once its row has stayed cool over the whole hold (120 s) it is relaxed.
    def ended(t: float) -> float:
        return 55.0 if t >= 200.0 else 73.0

    for t, relaxed in ((240.0, False), (300.0, False), (360.0, True)):
        opt.step(t, _history_reader(ended, t))
        assert ((ActionKind.CDU_SETPOINT, "dc/r1") in adapter.settings) is relaxed, t
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 31.0


def test_tightening_reacts_to_the_reading_now_and_flow_comes_back_only_once_the_row_stayed_under_the_target() -> None:
    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    opt.step(0.0, _history_reader(lambda t: 73.0, 0.0))  # design point noted
    adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] = 1.3  # an incident rule pushed the flow up, and closed

    def spike(t: float) -> float:
        return 80.0 if 100.0 <= t <= 120.0 else 73.0

    opt.step(120.0, _history_reader(spike, 120.0))  # hot now: tighten at once
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0
    opt.step(180.0, _history_reader(spike, 180.0, 29.0))  # under the target now, 80 C within the hold: flow stays
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.3
    opt.step(300.0, _history_reader(spike, 300.0, 29.0))  # under it over the whole hold: the flow comes back a notch
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] == pytest.approx(1.2)
    with pytest.raises(ValueError, match="relax_hold_s"):
        CoolingOptimizerConfig(relax_hold_s=-1.0)


def test_an_incident_rules_colder_setpoint_is_given_back_up_to_where_it_was_while_the_row_keeps_under_the_target() -> (
    None
):
    # The row rests at its design setpoint (30 C) with its hottest GPU in the band (72 C). An incident rule steps it
    # to 26 C, the incident closes, and its GPUs sit at 72 C again: inside the band, so before this the optimizer
    # never gave the 4 C back.
    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    warm = _history_reader(lambda t: 72.0, 0.0, 30.0)
    opt.step(0.0, warm)
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in adapter.settings  # in the band: no move
    push = ActionRequest(
        ActionKind.CDU_SETPOINT, "dc/r1", 26.0, reason="cooling-degradation on incident 7", incident_id=7
    )
    assert opt.responder.submit(push, 10.0, warm).status == "applied"
    for k, want in ((1, 27.0), (2, 28.0), (3, 29.0), (4, 30.0), (5, 30.0), (6, 30.0)):
        now = 60.0 * k
        opt.step(now, _history_reader(lambda t: 72.0, now, adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")]))
        assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == want, now  # back to 30 C, never past it


def test_a_pushed_setpoint_is_not_given_back_while_the_step_would_bring_the_hottest_gpu_over_the_target() -> None:
    adapter = MemoryAdapter()
    opt = _optimizer(adapter)
    opt.step(0.0, _reader(72.0))
    push = ActionRequest(
        ActionKind.CDU_SETPOINT, "dc/r1", 26.0, reason="cooling-degradation on incident 7", incident_id=7
    )
    opt.responder.submit(push, 10.0, _reader(72.0))
    opt.step(60.0, _reader(74.5, supply_c=26.0))  # 74.5 + 1 C > 75 C: no give-back
    opt.step(120.0, _reader(73.0, supply_c=29.0))  # the CDU cannot hold 26 C (supply 3 C above it): none either
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 26.0
    own = MemoryAdapter()  # the optimizer's own tightening is not a push: the band rule alone relaxes it
    mine = _optimizer(own)
    mine.step(0.0, _reader(80.0))
    mine.step(60.0, _reader(72.0, supply_c=29.0))
    assert own.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0


def _faulted_row(slows: bool) -> tuple[MemoryAdapter, CoolingOptimizer]:
    """Row dc/r1 relaxed 30 -> 33 C by the optimizer; then one GPU's thermal interface fails: its die held at 87 C by
    its own thermal control, the row's other GPUs cool (its mean far under the band), and its incident slows its job
    (``slows``) or not.
    """
    adapter = MemoryAdapter()
    responder = Responder(default_policy(), adapter, mode="auto")
    config = CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0)
    fault = "incident 7 (thermal_throttle at dc/r1/k1/n1/g3) open"
    cost = "incident 7 (thermal_throttle at dc/r1/k1/n1/g3) costs its job 6.5%"
    faulted = {"on": False}
    opt = CoolingOptimizer(
        responder,
        "dc",
        ["dc/r1"],
        config,
        local=lambda row: fault if faulted["on"] else None,
        pace=lambda row: cost if faulted["on"] and slows else None,
    )
    for t in (0.0, 60.0, 120.0):
        opt.step(t, _reader(60.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 33.0
    faulted["on"] = True
    return adapter, opt


def _mean_and_max(adapter: MemoryAdapter, hottest_c: float, mean_c: float):  # type: ignore[no-untyped-def]
    """The row's hottest and mean GPU; its CDU holding its setpoint."""

    def read(field, entity, aggregate="mean", ago_s=0.0):  # type: ignore[no-untyped-def]
        if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP":
            return adapter.current(ActionKind.CDU_SETPOINT, "dc/r1")
        return hottest_c if aggregate == "max" else mean_c

    return read


def test_a_row_relaxed_before_a_thermal_fault_that_slows_its_job_goes_back_to_its_design_point() -> None:
    """sweeps/new-user/thermal-move.yaml seed 0: r02 relaxed 30 -> 37 C at 660 s; a thermal-interface fault then set
    the H200 job's pace, its clock following its coolant (0.683 at 30 C, 0.637 at 37 C); the row stayed at 37 C."""
    adapter, opt = _faulted_row(slows=True)
    for t in (180.0, 240.0, 300.0, 360.0, 420.0):
        opt.step(t, _mean_and_max(adapter, 87.0, 55.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 30.0  # back to the design point, no further
    moves = [a for a in opt.responder.log if a.request.kind == ActionKind.CDU_SETPOINT]
    assert "costs its job 6.5%: its GPU's clock follows its coolant" in moves[-1].request.reason


def test_a_thermal_fault_that_does_not_slow_its_job_leaves_the_row_relaxed() -> None:
    adapter, opt = _faulted_row(slows=False)
    for t in (180.0, 240.0, 300.0):
        opt.step(t, _mean_and_max(adapter, 87.0, 55.0))
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 33.0  # one hot GPU never drives a row's coolant
