import pytest

from twinloop.closedloop.cluster import TwinCluster
from twinloop.closedloop.passes import run_pass
from twinloop.errors import InputError
from twinloop.ops.learn.precool import RowHeatForecast, load_models
from twinloop.ops.ports import END, Sample
from twinloop.twin.scenario import SCENARIO_DIR, scenario_from_dict


def _spec(announce_s: float, submit_s: float = 900.0, cdu: dict[str, float] | None = None):  # type: ignore[no-untyped-def]
    raw = {
        "name": "precool-test",
        "site": "pc",
        "duration_s": submit_s + 300,
        "step_s": 5,
        "seed": 4,
        "rows": [{"count": 2, "racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "cdu": cdu or {}}],
        "power_chain": {"facility_power_budget_w": 5.0e6},
        "jobs": [
            {"name": "later", "kind": "training", "gpus": 16, "submit_s": submit_s, "announce_s": announce_s,
             "plan": {"model": "llama-3-8b", "precision": "bf16"}},
        ],
        "telemetry": {"facility_every_s": 5, "gpu_every_s": 5},
    }  # fmt: skip
    return scenario_from_dict(raw, "test", str(SCENARIO_DIR))


def _rises(announce_s: float) -> dict[float, dict[str, float]]:
    heat = RowHeatForecast(*load_models())
    cluster = TwinCluster(_spec(announce_s), rack_heat_every_s=heat.sample_s, rack_heat_horizons_s=heat.horizons_s)
    out = {}
    while cluster.now_s() < 880:
        sample = cluster.poll()
        assert isinstance(sample, Sample)
        if sample.rack_heat is not None:
            heat.observe(sample.rack_heat)
        if sample.ts in (200.0, 850.0):
            out[sample.ts] = {row: heat.rise_w(row) for row in ("pc/r01", "pc/r02")}
    return out


def test_an_announced_job_shows_as_heat_coming_on_its_row_only() -> None:
    announced = _rises(600.0)
    unannounced = _rises(0.0)
    planned_w = 16 * 500.0  # 16 H100s at well over 500 W each when training
    assert announced[850.0]["pc/r01"] > 0.5 * planned_w  # first fit puts it on the first row
    assert abs(announced[850.0]["pc/r02"]) < 0.1 * planned_w
    assert unannounced[850.0]["pc/r01"] < 0.1 * planned_w  # not known until it is submitted
    assert abs(announced[200.0]["pc/r01"]) < 0.1 * planned_w  # before the announcement


def test_rack_heat_comes_every_sample_interval_and_only_when_asked() -> None:
    with pytest.raises(InputError, match="rack_heat_every_s"):
        TwinCluster(_spec(0.0), rack_heat_every_s=7.0)
    cluster = TwinCluster(_spec(0.0), rack_heat_every_s=10.0, duration_s=60)
    samples = []
    while isinstance(sample := cluster.poll(), Sample):
        samples.append(sample)
    assert sample is END and len(samples) == 12  # 60 s of 5 s steps
    heat = [s.ts for s in samples if s.rack_heat is not None]
    assert heat == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    rh = samples[1].rack_heat
    assert rh is not None and rh.rack_ids == ("pc/r01/k01", "pc/r01/k02", "pc/r02/k01", "pc/r02/k02")
    assert rh.load_w.shape == (4,) and {k: v.shape for k, v in rh.known_ahead_w.items()} == {
        300.0: (4, 4),
        600.0: (4, 4),
        900.0: (4, 4),
    }
    plain = TwinCluster(_spec(0.0), duration_s=20)
    assert all(s.rack_heat is None for s in iter(plain.poll, END))


def _precool_moves(cdu: dict[str, float] | None = None) -> list[str]:
    """The loop's precool moves on the test hall, the job announced 10 min ahead and submitted at 20 min: the
    optimizer relaxes the idle rows from its warm-up (5 min) on, the heat shows in the forecast from 10 min."""
    result = run_pass(_spec(600.0, submit_s=1200.0, cdu=cdu), True)
    return [a.request.reason for a in result.actions if "forecast to arrive" in a.request.reason]


def test_no_precool_for_heat_the_gpus_carry_with_margin_to_spare() -> None:
    # 30 C water, relaxed up to 38 C: 16 H100s at 700 W run at most ~38 + 0.05 * 700 + the coolant's warming, far
    # under their 89 C slowdown. Precooling would cost cooling energy for nothing (before the arrival model: 7 moves).
    assert _precool_moves() == []


def test_precool_still_happens_when_the_arriving_heat_would_throttle() -> None:
    # A hot hall (52 C warm-water supply): idle H100s at ~56 C would reach ~87 C at 700 W, within 5 C of slowdown.
    moves = _precool_moves({"supply_temp_c": 52.0, "setpoint_max_c": 55.0})
    assert moves and all("hottest GPU predicted" in m and "(slowdown 89 C - margin)" in m for m in moves)
