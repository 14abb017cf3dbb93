from twinloop.closedloop.passes import compare, run_pass
from twinloop.twin.scenario import scenario_from_dict

SITE = {
    "name": "loop-test",
    "site": "dc1",
    "duration_s": 600,
    "rows": [
        {"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0, "pump_power_w": 300}}
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
    "faults": [{"kind": "psu_loss", "target": "dc1/r01/k01/n01", "start_s": 200, "duration_s": 120, "magnitude": 5}],
}


def test_loop_detects_the_injected_fault_and_acts_only_when_on() -> None:
    off, on = compare(scenario_from_dict(SITE, "loop-test.yaml"))
    assert off.actions == () and on.actions
    for r in (off, on):
        (psu,) = [q for q in r.detection.per_fault if q.fault == "psu_loss"]
        assert psu.recall == 1.0 and psu.median_time_to_detect_s is not None and psu.median_time_to_detect_s <= 30
    assert {a.request.kind.value for a in on.actions} >= {"power_cap", "checkpoint"}
    assert all(a.status != "failed" for a in on.actions)
    # Same seed, same scenario: identical physics until the loop's first action.
    assert off.summary["energy"]["facility_kwh"] > 0 and on.summary["scenario"] == off.summary["scenario"]


def test_loop_on_an_air_cooled_hall_has_no_cdu_to_optimize() -> None:
    air = {**SITE, "duration_s": 420, "rows": [{**SITE["rows"][0], "cooling": "air"}]}  # type: ignore[dict-item]
    on = run_pass(scenario_from_dict(air, "air.yaml"), True)
    assert on.summary["simulated_s"] == 420  # the loop ran; the optimizer found no liquid row to move
    assert not any(a.request.reason.startswith("cooling optimizer") for a in on.actions)
