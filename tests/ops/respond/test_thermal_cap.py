"""Issue 14: a GPU with a failing thermal path is capped at the power its own path carries below its slowdown
temperature (ops/respond/thermal_cap.py), not at a fixed 0.7 of its limit (mixed_hall: the fixed cap held the
faulty H100, and with it the synchronous 192-GPU job, below what its path carried: -5.5 to -8.0 % goodput).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import ThermalPath
from twinloop.ops.respond.policy import ActionTemplate, default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.ops.respond.thermal_cap import (
    BURSTY_WINDOW_S,
    MARGIN_C,
    ThermalPathCap,
    followed_cap_w,
    own_resistance_c_per_w,
    path_cap_w,
    thermal_path_cap,
)
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE

from .conftest import MemoryAdapter

LIMITS = (200.0, 700.0)
GPU = "dc/r1/k2/n1/g3"

resistance = st.floats(0.01, 1.0)
coolant = st.floats(5.0, 60.0)
slowdown = st.floats(70.0, 110.0)


@given(resistance, coolant, slowdown, st.floats(0.0, 10.0))
def test_the_cap_stays_in_the_power_limit_range(r: float, tc: float, ts: float, margin: float) -> None:
    cap, _ = path_cap_w(r, tc, ts, LIMITS, margin)
    assert LIMITS[0] <= cap <= LIMITS[1]


@given(resistance, coolant, coolant, slowdown)
def test_a_warmer_coolant_never_gives_a_higher_cap(r: float, tc1: float, tc2: float, ts: float) -> None:
    lo, hi = sorted((tc1, tc2))
    assert path_cap_w(r, hi, ts, LIMITS, MARGIN_C)[0] <= path_cap_w(r, lo, ts, LIMITS, MARGIN_C)[0]


@given(resistance, resistance, coolant, slowdown)
def test_a_worse_path_never_gives_a_higher_cap(r1: float, r2: float, tc: float, ts: float) -> None:
    lo, hi = sorted((r1, r2))
    assert path_cap_w(hi, tc, ts, LIMITS, MARGIN_C)[0] <= path_cap_w(lo, tc, ts, LIMITS, MARGIN_C)[0]


@given(resistance, coolant, st.floats(50.0, 700.0))
def test_the_own_resistance_is_read_back_from_steady_readings(r: float, tc: float, p: float) -> None:
    """A die at steady state sits R·P above its coolant: its readings give back R, and at the cap's power the die
    would sit exactly ``margin`` below slowdown (where the cap is not clamped).
    """
    got = own_resistance_c_per_w(tc + r * p, p, tc)
    assert got == pytest.approx(r, rel=1e-9)
    _, raw = path_cap_w(got, tc, 89.0, LIMITS, MARGIN_C)
    assert tc + r * raw == pytest.approx(89.0 - MARGIN_C, abs=1e-6)


@pytest.mark.parametrize(("temp_c", "power_w"), [(30.0, 400.0), (35.0, 400.0), (80.0, 0.0)])
def test_readings_that_show_no_path_give_no_resistance(temp_c: float, power_w: float) -> None:
    assert own_resistance_c_per_w(temp_c, power_w, 35.0) is None


def _steady_reader(temp_c: float, power_w: float, swing_w: float = 0.0, hottest_c: float | None = None):  # type: ignore[no-untyped-def]
    """GPU readings every 10 s: ``power_w`` ± ``swing_w`` alternating (a job's iterations), temperature steady (its
    hottest moment in each reading ``hottest_c``: 89 C is an H100's slowdown threshold, reached).
    """

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if entity != GPU:
            return None
        if field == DCGM_FI_DEV_GPU_TEMP:
            return hottest_c if aggregate == "max" and hottest_c is not None else temp_c
        if field == DCGM_FI_DEV_POWER_USAGE:
            return power_w + (swing_w if int(ago_s / 10) % 2 else -swing_w)
        return None

    return read


def _cooling_off_reader(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
    """An idle GPU whose job just left: 81 W, its die still cooling from 80 C (1 C per second)."""
    if field == DCGM_FI_DEV_GPU_TEMP:
        return 50.0 + ago_s
    return 81.0 if field == DCGM_FI_DEV_POWER_USAGE else None


def test_a_die_still_heating_or_cooling_is_not_read() -> None:
    """The time-mean relation T - T_coolant = R·P holds only once the die has settled: from a die cooling off, R
    comes out far too high (here 0.35 C/W) and the cap far too low.
    """
    found = thermal_path_cap(_cooling_off_reader, GPU, 30.5, 89.0, LIMITS)
    assert found == f"{GPU} not settled: its die moved 30.0 C over the last 30 s, 34.5 C above coolant"


def test_the_cap_is_read_off_the_gpus_own_window() -> None:
    # A die at 86.6 C at 480 W mean over a 35 C coolant: R = 0.1075 C/W (2x an H100's catalog 0.05).
    found = thermal_path_cap(_steady_reader(86.6, 480.0, swing_w=100.0), GPU, 35.0, 89.0, LIMITS)
    assert isinstance(found, ThermalPathCap)
    assert found.resistance_c_per_w == pytest.approx((86.6 - 35.0) / 480.0)
    assert found.cap_w == pytest.approx((89.0 - MARGIN_C - 35.0) / found.resistance_c_per_w)
    assert "(89 slowdown - 3 margin - 35.0 coolant) C / 0.1075 C/W" in found.why()
    assert "86.6 C at 480 W" in found.why()


def _bursty_reader(heating_c_per_s: float = 0.0, hottest_c: float | None = None):  # type: ignore[no-untyped-def]
    """A serving GPU's readings every 10 s: prefill bursts swing it 170-670 W and its die 67-83 C from one reading to
    the next around a settled mean (75 C at 420 W), or a mean still rising ``heating_c_per_s``; the hottest moment of
    each reading ``hottest_c`` where given.
    """

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        burst = 1.0 if int(ago_s / 10) % 2 == 0 else -1.0
        if field == DCGM_FI_DEV_GPU_TEMP and aggregate == "max" and hottest_c is not None:
            return hottest_c
        if field == DCGM_FI_DEV_GPU_TEMP:
            return 75.0 + 8.0 * burst - heating_c_per_s * ago_s
        return 420.0 + 250.0 * burst if field == DCGM_FI_DEV_POWER_USAGE else None

    return read


def test_a_bursty_die_whose_mean_has_settled_is_read_over_the_longer_window() -> None:
    """serving-fleet (round 2 of the new user's halls): the thermal-interface GPU of a serving fleet was never capped,
    its 30 s window never within 5 % of its rise. Before: not settled, every minute, for the whole fault."""
    found = thermal_path_cap(_bursty_reader(), GPU, 30.0, 89.0, LIMITS)
    assert isinstance(found, ThermalPathCap), found
    # The means of its 13 readings (7 bursts up, 6 down): R within 4 % of the path's 45 C / 420 W.
    assert found.resistance_c_per_w == pytest.approx((45.0 + 8.0 / 13) / (420.0 + 250.0 / 13))
    assert found.resistance_c_per_w == pytest.approx(45.0 / 420.0, rel=0.04)
    assert found.window_s == BURSTY_WINDOW_S and "over the last 120 s" in found.why()


def test_a_bursty_die_still_heating_is_not_read() -> None:
    # The same bursts on a mean still rising 0.1 C/s: the halves' means are 6 C apart, more than 5 % of its 45 C rise.
    found = thermal_path_cap(_bursty_reader(heating_c_per_s=0.1), GPU, 30.0, 89.0, LIMITS)
    assert isinstance(found, str) and "not settled" in found


def test_a_gpu_without_readings_gives_a_reason_not_a_cap() -> None:
    found = thermal_path_cap(lambda *a, **k: None, GPU, 35.0, 89.0, LIMITS)
    assert found == f"no temperature and power readings of {GPU}"


# ------------------------------------------------------------------ in the responder


class PathAdapter(MemoryAdapter):
    """Memory adapter that reports a GPU's slowdown threshold and its coolant (None: a cluster without a coolant
    sensor); no job to requeue.
    """

    def __init__(self, path: ThermalPath | None) -> None:
        super().__init__()
        self.path = path

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        return self.path

    def job_of(self, entity: str) -> str | None:
        return None


def _cap(adapter: PathAdapter, read, until_s: float = 90.0):  # type: ignore[no-untyped-def]
    """Drive the default policy on a GPU cooling incident; the applied power cap."""
    incident = Incident(1, EventClass.COOLING_DEGRADATION, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, int(until_s) + 1, 5):
        r.handle([incident], float(t), read)
    (cap,) = [a for a in r.log if a.request.kind == ActionKind.POWER_CAP]
    return cap


def test_the_responder_caps_at_what_the_gpus_own_path_carries() -> None:
    cap = _cap(PathAdapter(ThermalPath(89.0, 35.0)), _steady_reader(86.6, 480.0, swing_w=100.0, hottest_c=89.0))
    assert cap.status == "applied"
    assert cap.request.value == pytest.approx((89.0 - MARGIN_C - 35.0) / ((86.6 - 35.0) / 480.0))
    assert cap.request.value != pytest.approx(0.7 * 700.0)
    assert cap.ts == 60.0  # once the die's readings have settled after the fault
    assert "gpu-cooling-fault" in cap.request.reason
    assert "thermal-path cap 474 W = (89 slowdown - 3 margin - 35.0 coolant)" in cap.request.reason


def test_a_die_its_own_thermal_control_holds_under_its_slowdown_is_not_capped_until_it_reaches_it() -> None:
    """mixed_hall: the faulty H100 of a 192-GPU job that cannot move, held by its own thermal control at 87 C (89 C
    slowdown), was capped to hold it at 84 C: the job ran 0.2-0.8 % slower (target: up), while the GPU's own control
    never let the die reach its slowdown. Before: capped at 60 s."""
    adapter = PathAdapter(ThermalPath(89.0, 35.0))
    incident = Incident(1, EventClass.THERMAL_THROTTLE, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, 200, 5):
        r.handle([incident], float(t), _steady_reader(87.0, 480.0, swing_w=100.0, hottest_c=88.0))
    (cap,) = [a for a in r.log if a.request.kind == ActionKind.POWER_CAP]
    assert cap.status == "refused" and adapter.current(ActionKind.POWER_CAP, GPU) == 700.0
    assert "no cap: its own thermal control holds the die under its 89 C slowdown (at most 88 C" in cap.request.reason
    # The die reaches its slowdown (its own control no longer holds it): the watch caps it at the next look.
    for t in range(200, 300, 5):
        r.handle([incident], float(t), _steady_reader(87.0, 480.0, swing_w=100.0, hottest_c=89.0))
    (capped,) = [a for a in r.log if a.request.kind == ActionKind.POWER_CAP and a.status == "applied"]
    assert capped.request.value == pytest.approx((89.0 - MARGIN_C - 35.0) / ((87.0 - 35.0) / 480.0))


def test_without_a_coolant_reading_a_held_die_is_not_capped_and_one_that_reaches_its_slowdown_gets_the_factor() -> None:
    """`twinloop watch --actuator nvml`: NVML names the GPU (so its slowdown threshold) but no coolant. Before, the
    rule's 0.7 factor capped a die its own thermal control held under its slowdown, at 60 s."""
    adapter = PathAdapter(ThermalPath(89.0, None))
    incident = Incident(1, EventClass.THERMAL_THROTTLE, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, 200, 5):
        r.handle([incident], float(t), _steady_reader(87.0, 480.0, hottest_c=88.0))
    assert adapter.current(ActionKind.POWER_CAP, GPU) == 700.0
    for t in range(200, 400, 5):
        r.handle([incident], float(t), _steady_reader(87.0, 480.0, hottest_c=89.0))
    (capped,) = [a for a in r.log if a.request.kind == ActionKind.POWER_CAP and a.status == "applied"]
    assert capped.request.value == pytest.approx(0.7 * 700.0) and 200.0 <= capped.ts <= 260.0
    assert f"its die reached its 89 C slowdown: no coolant reading for {GPU}: fell back to 0.7 x" in (
        capped.request.reason
    )
    assert adapter.current(ActionKind.POWER_CAP, GPU) == pytest.approx(490.0)  # once: the factor does not compound


@pytest.mark.parametrize(
    ("path", "read", "why"),
    [
        (None, _steady_reader(86.6, 480.0), f"no slowdown threshold or coolant reading for {GPU}"),
        (ThermalPath(89.0, 35.0), lambda *a, **k: None, f"no temperature and power readings of {GPU}"),
    ],
)
def test_without_a_coolant_reading_or_readings_the_cap_falls_back_to_the_rules_factor(path, read, why) -> None:  # type: ignore[no-untyped-def]
    cap = _cap(PathAdapter(path), read)
    assert cap.status == "applied"
    assert cap.request.value == pytest.approx(0.7 * 700.0)
    assert f"{why}" in cap.request.reason
    assert cap.request.reason.endswith(": fell back to 0.7 x the present limit")


def test_a_path_that_carries_the_present_limit_is_not_capped() -> None:
    adapter = PathAdapter(ThermalPath(89.0, 30.0))
    adapter.settings[(ActionKind.POWER_CAP, GPU)] = 500.0  # an operator's limit: a cooling fault never raises it
    cap = _cap(adapter, _steady_reader(50.0, 450.0, hottest_c=89.0))  # R 0.044: carries 1300 W, clamped to 700
    assert cap.status == "refused"
    assert cap.detail == f"no action: power_cap of {GPU} is already 500"
    assert "cap 700 W (clamped to 200-700 W)" in cap.request.reason
    assert cap.request.reason.endswith("above the present 500 W limit, which stays")


def test_thermal_path_is_a_power_limit_only() -> None:
    with pytest.raises(ValueError, match="only for kind power_cap"):
        ActionTemplate(kind=ActionKind.CDU_SETPOINT, value_from="thermal_path")
    with pytest.raises(ValueError, match="at most one"):
        ActionTemplate(kind=ActionKind.POWER_CAP, value_from="supply_limit", scale=0.7)
    ActionTemplate(kind=ActionKind.POWER_CAP, value_from="thermal_path", scale=0.7)  # scale: its fallback


# ------------------------------------------------------------------ following the coolant


@given(st.floats(200.0, 700.0), st.floats(200.0, 700.0), st.floats(200.0, 700.0), resistance)
def test_a_followed_cap_never_rises_above_the_limit_before_the_cap(
    cap: float, now: float, ceil: float, r: float
) -> None:
    found = ThermalPathCap(cap, cap, r, 80.0, 400.0, 30.0, 89.0, MARGIN_C, LIMITS)
    value = followed_cap_w(found, now, ceil)
    assert value is None or value <= ceil
    assert value is None or abs(value - now) * r > 1.0  # a move worth more than the reading's 1 C
    assert followed_cap_w("no readings", now, ceil) is None


class PhysicalAdapter(PathAdapter):
    """A GPU with R = 0.105 C/W (2x an H100's) that draws 600 W when its limit allows: its die sits R·P above a
    coolant the test moves.
    """

    R = 0.105

    def __init__(self) -> None:
        super().__init__(ThermalPath(89.0, 35.0))
        self.coolant_c = 35.0

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        return ThermalPath(89.0, self.coolant_c)

    def power_w(self) -> float:
        return min(600.0, self.current(ActionKind.POWER_CAP, GPU) or 700.0)

    def read(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == DCGM_FI_DEV_POWER_USAGE:
            return self.power_w()
        return self.coolant_c + self.R * self.power_w() if field == DCGM_FI_DEV_GPU_TEMP else None


def _drive(adapter: PhysicalAdapter, r: Responder, t0: int, t1: int) -> None:
    incident = Incident(1, EventClass.COOLING_DEGRADATION, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    for t in range(t0, t1, 5):
        r.handle([incident], float(t), adapter.read)


def test_the_cap_follows_the_coolant_it_sees_and_stops_when_someone_else_sets_the_limit() -> None:
    adapter = PhysicalAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    _drive(adapter, r, 0, 100)
    first = adapter.current(ActionKind.POWER_CAP, GPU)
    assert first == pytest.approx((89.0 - MARGIN_C - 35.0) / adapter.R)  # 486 W
    adapter.coolant_c = 28.0  # the row's coolant cools by 7 C: the path carries 552 W
    _drive(adapter, r, 100, 400)
    followed = [
        a for a in r.log if a.request.kind == ActionKind.POWER_CAP and "follows its coolant" in a.request.reason
    ]
    assert followed and followed[0].status == "applied"
    assert adapter.current(ActionKind.POWER_CAP, GPU) == pytest.approx((89.0 - MARGIN_C - 28.0) / adapter.R)
    adapter.coolant_c = 20.0  # carries 629 W: above the 600 W the GPU draws, so nothing more to read off it
    adapter.settings[(ActionKind.POWER_CAP, GPU)] = 450.0  # an operator sets the limit: the loop leaves it
    n = len(r.log)
    _drive(adapter, r, 400, 800)
    assert not [a for a in r.log[n:] if a.request.kind == ActionKind.POWER_CAP]
    assert adapter.current(ActionKind.POWER_CAP, GPU) == 450.0


def test_a_die_not_settled_gets_no_cap_yet_and_is_read_again_until_it_is() -> None:
    """No fallback factor for a die still moving (the cluster can tell, just not yet): the follower reads it again
    every minute and caps it once settled. (A fallback of 0.7 x the present limit on a GPU already capped compounded:
    mixed_hall seed 2 held the faulty H100 at 315 W for the rest of the run.)
    """
    adapter = PhysicalAdapter()
    readings = {"settled": False}

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == DCGM_FI_DEV_GPU_TEMP and not readings["settled"]:
            return 50.0 + ago_s  # cooling off
        return adapter.read(field, entity, aggregate, ago_s)

    incident = Incident(1, EventClass.COOLING_DEGRADATION, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, 100, 5):
        r.handle([incident], float(t), read)
    (first,) = [a for a in r.log if a.request.kind == ActionKind.POWER_CAP]
    assert (first.status, first.request.value) == ("refused", 700.0)
    assert first.request.reason.endswith("above coolant: read again in 60 s")
    readings["settled"] = True
    for t in range(100, 200, 5):
        r.handle([incident], float(t), read)
    assert adapter.current(ActionKind.POWER_CAP, GPU) == pytest.approx((89.0 - MARGIN_C - 35.0) / adapter.R)
    # A second incident on the same GPU leaves the cap to its follower: no second cap, no fallback on top.
    n = len(r.log)
    second = Incident(2, EventClass.THERMAL_THROTTLE, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    for t in range(200, 300, 5):
        r.handle([second], float(t), read)
    caps = [a for a in r.log[n:] if a.request.kind == ActionKind.POWER_CAP]
    assert [a.status for a in caps] == ["refused"]
    assert caps[0].request.reason.endswith("its thermal-path cap already follows its coolant")


def test_a_die_still_moving_follows_its_coolant_with_the_paths_known_r() -> None:
    """A coolant that keeps moving (a reactive CDU) keeps the die from settling, and before, no settled reading
    meant no move: the cap lagged and the GPU reached its throttle point again (mixed_hall: 6-18 incidents on the
    one GPU). ``R`` is the path's, so the follower applies the mean of its settled readings to the coolant of now.
    """
    adapter = PhysicalAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    _drive(adapter, r, 0, 100)
    assert adapter.current(ActionKind.POWER_CAP, GPU) == pytest.approx((89.0 - MARGIN_C - 35.0) / adapter.R)
    adapter.coolant_c = 40.0  # warming, and the die with it: never settled from here on

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if field == DCGM_FI_DEV_GPU_TEMP:
            return adapter.coolant_c + adapter.R * adapter.power_w() - 0.2 * ago_s
        return adapter.read(field, entity, aggregate, ago_s)

    incident = Incident(1, EventClass.COOLING_DEGRADATION, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    for t in range(100, 400, 5):
        r.handle([incident], float(t), read)
    assert adapter.current(ActionKind.POWER_CAP, GPU) == pytest.approx((89.0 - MARGIN_C - 40.0) / adapter.R)
    (moved,) = [a for a in r.log if "follows its coolant" in a.request.reason]
    assert "last read" in moved.request.reason  # says the R is not from the readings of now


def test_a_bursty_die_is_read_over_the_longer_window_only_until_its_path_has_an_r() -> None:
    """The first cap of a bursty die comes from the 120 s window; after it the follower keeps that R (a die still
    moving follows with its known R), so a later burst pattern does not re-read it: reading a training GPU's
    iterations over the longer window at every follow moved mixed_hall seed 0's cap later (-0.5 % `pretrain`)."""
    adapter = PathAdapter(ThermalPath(89.0, 30.0))
    incident = Incident(1, EventClass.COOLING_DEGRADATION, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR)
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, 100, 5):
        r.handle([incident], float(t), _bursty_reader(hottest_c=89.0))
    first = adapter.current(ActionKind.POWER_CAP, GPU)
    assert first is not None and first < 700.0 and "over the last 120 s" in r.log[-1].request.reason
    hotter = _bursty_reader(hottest_c=89.0)

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        value = hotter(field, entity, aggregate, ago_s)
        return None if value is None else value + (6.0 if field == DCGM_FI_DEV_GPU_TEMP else 0.0)

    for t in range(100, 400, 5):
        r.handle([incident], float(t), read)
    assert adapter.current(ActionKind.POWER_CAP, GPU) == first  # the same coolant, the same R: no move
