"""The cooling optimizer's referee: a relaxing move is made only when its cooling saving exceeds the GPUs' cost."""

from collections.abc import Callable

import numpy as np
import pytest

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import REF_GEMM_ACTIVITY, GpuPowerModel, relative_speed
from twinloop.ops.detect.rules import CDU_FLOW, CDU_HEAT_LOAD, CDU_VALVE, GpuLimits, static_w_per_c
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.relax_value import CDU_PUMP_POWER, COOLING_POWER, FACILITY_WATER_TEMP, RelaxValue
from twinloop.ops.respond.responder import Responder

from .conftest import MemoryAdapter

ROWS = ("dc/r1", "dc/r2")
N_PER_ROW = 16
HEAT_W = 5e5  # per row
PUMP_W = 4000.0  # at nominal flow
FLOW_L_MIN = 1500.0  # 25 kg/s at nominal flow


def _plant_w_per_w(fw_c: float) -> float:
    """A plant whose chiller carries a share that falls 1 % per °C of facility water up to 27 °C, then nothing: the
    towers' 2 % of the heat stays.
    """
    return 0.02 + 0.01 * max(27.0 - fw_c, 0.0)


def _setup(value: bool) -> tuple[MemoryAdapter, CoolingOptimizer, Callable[[], None]]:
    ids = tuple(f"{row}/k1/n{i // 8}/g{i % 8}" for row in ROWS for i in range(N_PER_ROW))
    limits = GpuLimits.from_spec(get_gpu("h100-sxm"), len(ids))
    adapter = MemoryAdapter()
    referee = RelaxValue(ids, limits) if value else None
    opt = CoolingOptimizer(
        Responder(default_policy(), adapter, mode="auto"),
        "dc",
        ROWS,
        CoolingOptimizerConfig(warmup_s=0.0, approach_c=3.0, referee=value),
        value=referee,
    )

    def observe() -> None:  # the site's telemetry for the adapter's current settings
        flow = np.repeat([adapter.current(ActionKind.CDU_FLOW, r) or 1.0 for r in ROWS], N_PER_ROW)
        fw = adapter.current(ActionKind.FACILITY_WATER, "dc") or 25.0
        pumps = PUMP_W * flow**3
        gpu = {CDU_PUMP_POWER: pumps, CDU_HEAT_LOAD: np.full(flow.size, HEAT_W), CDU_FLOW: FLOW_L_MIN * flow}
        cooling = 2 * HEAT_W * _plant_w_per_w(fw) + PUMP_W * float((flow[::N_PER_ROW] ** 3).sum())
        opt.observe(gpu, {COOLING_POWER: np.array([cooling]), FACILITY_WATER_TEMP: np.array([fw])})

    return adapter, opt, observe


def _run(value: bool, hottest_c: dict[str, float], periods: int) -> MemoryAdapter:
    adapter, opt, observe = _setup(value)

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float:
        if field == "TWINLOOP_FI_CDU_SUPPLY_TEMP":
            return adapter.current(ActionKind.CDU_SETPOINT, entity) or 30.0
        return hottest_c[entity]

    for k in range(periods):
        observe()
        opt.step(60.0 * k, read)
    return adapter


def test_a_row_above_the_coldest_setpoint_is_not_warmed_for_nothing() -> None:
    # r1 (the training row) sits in the band and holds the coldest setpoint, so it holds the facility water; r2 has
    # margin. Without the referee (as before) r2 warms to the supply limit: its GPUs leak more and the plant saves
    # nothing, the facility water being held by r1.
    hottest = {"dc/r1": 73.0, "dc/r2": 60.0}
    before = _run(False, hottest, 10)
    assert before.settings[(ActionKind.CDU_SETPOINT, "dc/r2")] == 38.0
    assert before.current(ActionKind.FACILITY_WATER, "dc") == 27.0  # min(30, 38) - 3: the same as with r2 at 30
    leak_w = 8.0 * N_PER_ROW * static_w_per_c(get_gpu("h100-sxm"))
    assert leak_w > 60.0  # the IT cost of those 8 degrees, for no cooling saving at all
    after = _run(True, hottest, 10)
    assert after.current(ActionKind.CDU_SETPOINT, "dc/r2") == 30.0
    assert after.current(ActionKind.FACILITY_WATER, "dc") == 27.0
    # Its pump saves more than the half-rise of warmer coolant costs the GPUs: the relaxation goes to the flow.
    assert after.settings[(ActionKind.CDU_FLOW, "dc/r2")] == pytest.approx(0.6)


def test_warming_stops_once_a_warmer_facility_water_saves_nothing() -> None:
    # Both rows with margin. The chiller stops carrying anything at 27 C: without the referee both rows warm to the
    # supply limit and the facility water to 35 C, 8 degrees of leakage on every GPU for nothing past 27 C.
    hottest = {"dc/r1": 60.0, "dc/r2": 60.0}
    before = _run(False, hottest, 12)
    assert before.settings[(ActionKind.CDU_SETPOINT, "dc/r1")] == 38.0
    after = _run(True, hottest, 12)
    sp = after.current(ActionKind.CDU_SETPOINT, "dc/r1")
    fw = after.current(ActionKind.FACILITY_WATER, "dc")
    assert sp is not None and fw is not None
    # Warmed while the facility water saved (its first rise measured the chiller's slope), stopped at the first rise
    # that saved nothing (27 -> 29 C), and the pumps relaxed instead.
    assert sp == after.current(ActionKind.CDU_SETPOINT, "dc/r2") == 32.0
    assert fw == 29.0
    assert after.settings[(ActionKind.CDU_FLOW, "dc/r1")] == pytest.approx(0.6)


def test_the_facility_waters_saving_is_measured_again_when_the_chiller_comes_back() -> None:
    ids = tuple(f"dc/r1/k1/n{i // 8}/g{i % 8}" for i in range(N_PER_ROW))
    value = RelaxValue(ids, GpuLimits.from_spec(get_gpu("h100-sxm"), N_PER_ROW))
    gpu = {CDU_PUMP_POWER: np.full(N_PER_ROW, PUMP_W), CDU_HEAT_LOAD: np.full(N_PER_ROW, HEAT_W)}

    def site(fw: float, ratio: float) -> dict[str, np.ndarray]:
        return {COOLING_POWER: np.array([HEAT_W * ratio + PUMP_W]), FACILITY_WATER_TEMP: np.array([fw])}

    value.observe(gpu, site(27.0, 0.02))
    value.facility_water_rise()
    value.observe(gpu, site(28.0, 0.02))
    value.period()
    assert value.plant_slope == 0.0 and not value.warmer_setpoint(("dc/r1",), 1.0).pays
    value.observe(gpu, site(28.0, 0.03))  # the afternoon: the chiller carries heat again
    value.period()
    assert value.plant_slope is None and value.warmer_setpoint(("dc/r1",), 1.0).pays  # measured again


def _clock_cost_w(limit_w: float, temp_c: float) -> float:
    """Work a compute-bound dense GEMM on the fitted H100 at ``limit_w`` loses per °C warmer die, in watts of its
    power (the share of its clock lost at the same watts, times the watts)."""
    spec = get_gpu("h100-sxm")
    model = GpuPowerModel(spec)
    tensor, sm, dram = REF_GEMM_ACTIVITY
    f0 = float(model.max_clock_for_power(limit_w, tensor, sm, dram, temp_c))
    f1 = float(model.max_clock_for_power(limit_w, tensor, sm, dram, temp_c + 1.0))
    assert f1 < f0 < spec.sm_clock_max_mhz  # power-bound: warmer costs clock
    return (1.0 - float(relative_speed(f1, f0, 1.0))) * limit_w


@pytest.mark.parametrize("limit_w", [500.0, 600.0, 700.0])
@pytest.mark.parametrize("temp_c", [45.0, 65.0, 80.0])
def test_the_clock_a_power_bound_gpu_loses_is_worth_less_than_the_leakage_watts(limit_w: float, temp_c: float) -> None:
    # Why the referee prices a power-bound GPU's warmer coolant at its leakage watts: at its power limit the same
    # watts buy less clock, and above the voltage floor (~1.1 GHz) that clock's work is worth less energy than the
    # watts themselves, since there dynamic power grows faster than the clock (f V^2): 0.27-0.34 W against 0.53 W.
    assert 0.0 < _clock_cost_w(limit_w, temp_c) < static_w_per_c(get_gpu("h100-sxm"))


@pytest.mark.parametrize("limit_w", [300.0, 400.0, 450.0])
def test_under_a_deep_cap_the_clock_costs_more_than_the_leakage_watts(limit_w: float) -> None:
    # The referee's known limit: below the voltage floor only the frequency falls, so a GPU capped that deep loses
    # 0.84-1.41 W of work per degree, up to 2.7x the 0.53 W it prices (docs/calibration.md, feedback section).
    cost = _clock_cost_w(limit_w, 65.0)
    assert static_w_per_c(get_gpu("h100-sxm")) < cost < 3.0 * static_w_per_c(get_gpu("h100-sxm"))


def test_a_flow_cut_keeps_the_exchanger_able_to_carry_the_row_on_half_its_flow() -> None:
    ids = tuple(f"dc/r1/k1/n{i // 8}/g{i % 8}" for i in range(N_PER_ROW))
    value = RelaxValue(ids, GpuLimits.from_spec(get_gpu("h100-sxm"), N_PER_ROW))

    def cut(valve: float) -> bool:
        gpu = {
            CDU_PUMP_POWER: np.full(N_PER_ROW, PUMP_W),
            CDU_HEAT_LOAD: np.full(N_PER_ROW, HEAT_W * valve),
            CDU_FLOW: np.full(N_PER_ROW, FLOW_L_MIN),
            CDU_VALVE: np.full(N_PER_ROW, valve),
        }
        value.observe(gpu, None)
        return value.less_flow("dc/r1", 1.0, 0.1).pays

    assert cut(0.2)  # a lightly loaded row: 22 % of the exchanger after the cut
    assert not cut(0.46)  # 51 % after the cut: a pump failing to half its flow would leave the row short
