from twinloop.ops.respond.actions import ActionKind
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


def test_tightens_when_hot_but_not_the_setpoint_of_a_cdu_that_cannot_hold_it() -> None:
    adapter = MemoryAdapter()
    _optimizer(adapter).step(0.0, _reader(80.0))
    assert adapter.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.1
    assert adapter.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 29.0
    losing = MemoryAdapter()
    _optimizer(losing).step(0.0, _reader(80.0, supply_c=36.0))  # supply 6 C above its setpoint: capacity-limited
    assert (ActionKind.CDU_SETPOINT, "dc/r1") not in losing.settings
    assert losing.settings[(ActionKind.CDU_FLOW, "dc/r1")] == 1.1


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
