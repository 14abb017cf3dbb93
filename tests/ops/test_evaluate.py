from pathlib import Path

from twinloop.ops.evaluate import Label, evaluate_detection
from twinloop.ops.events import EventClass, Incident, Severity


def inc(iid: int, cls: EventClass, root: str, start: float, sev: Severity = Severity.MAJOR) -> Incident:
    return Incident(iid, cls, root, (root,), start, start + 10, sev)


def test_precision_recall_and_time_to_detect() -> None:
    faults = [
        Label("cdu_pump_degradation", "dc1/r01", 100.0, 400.0),
        Label("cdu_pump_degradation", "dc1/r02", 1000.0, 1300.0),
        Label("psu_loss", "dc1/r01/k04/n02", 500.0, 800.0),
    ]
    incidents = [
        inc(1, EventClass.COOLING_DEGRADATION, "dc1/r01/k03", 120.0),  # true, 20 s late
        inc(2, EventClass.POWER_DELIVERY_FAULT, "dc1/r01/k04/n02", 502.0),  # true, 2 s late
        inc(3, EventClass.COOLING_DEGRADATION, "dc1/r02", 3000.0),  # too late: false alarm
        inc(4, EventClass.STRAGGLER, "dc1/r01/k01/n01/g3", 50.0),  # explained by a background failure
        inc(5, EventClass.BENIGN_PHASE_CHANGE, "dc1/r01", 130.0, Severity.INFO),  # info: not scored
    ]
    background = [Label("failure:faulty_gpu", "dc1/r01/k01/n01/g3", 40.0, 640.0)]
    report = evaluate_detection(incidents, faults, background)
    q = {c.fault: c for c in report.per_fault}
    assert q["cdu_pump_degradation"].recall == 0.5
    assert q["cdu_pump_degradation"].precision == 0.5
    assert q["cdu_pump_degradation"].median_time_to_detect_s == 20.0
    assert q["psu_loss"].recall == 1.0 and q["psu_loss"].precision == 1.0
    assert q["psu_loss"].median_time_to_detect_s == 2.0
    assert [i.incident_id for i in report.false_alarms] == [3]
    assert [i.incident_id for i in report.background] == [4]


def test_wrong_class_or_place_does_not_match() -> None:
    faults = [Label("sdc", "dc1/jobs/train", 100.0, 400.0)]
    report = evaluate_detection([inc(1, EventClass.SUSPECTED_SDC, "dc1/jobs/serve", 110.0)], faults)
    assert report.per_fault[0].recall == 0.0 and len(report.false_alarms) == 1


def test_a_site_wide_fault_does_not_steal_a_local_faults_credit_by_list_order() -> None:
    """Issue 14: the heat wave listed first took the credit of a GPU's thermal-interface fault."""
    from twinloop.ops.events import EventClass, Incident, Severity

    gpu = "dc1/r01/k01/n01/g3"
    inc = Incident(1, EventClass.THERMAL_THROTTLE, gpu, (gpu,), 320.0, 400.0, Severity.MAJOR)
    wave = Label("heat_wave", "dc1", 300.0, 900.0)
    tim = Label("gpu_thermal_interface", gpu, 100.0, 900.0)
    for faults in ([wave, tim], [tim, wave]):
        report = evaluate_detection([inc], faults)
        hit = {q.fault: q.n_true_incidents for q in report.per_fault}
        assert hit == {"gpu_thermal_interface": 1, "heat_wave": 0}


def test_a_rack_capped_by_design_explains_its_power_throttling_and_nothing_else() -> None:
    cap = [Label("power_limit:rack cap", "dc2/r01/k01", 0.0, 3600.0)]
    throttle = inc(1, EventClass.POWER_THROTTLE, "dc2/r01/k01/n02", 25.0)
    hot = inc(2, EventClass.COOLING_DEGRADATION, "dc2/r01/k01/n03", 40.0)
    elsewhere = inc(3, EventClass.POWER_THROTTLE, "dc2/r02/k01/n01", 50.0)
    report = evaluate_detection([throttle, hot, elsewhere], [], cap)
    assert [i.incident_id for i in report.background] == [1]
    assert [i.incident_id for i in report.false_alarms] == [2, 3]


def test_the_twins_rack_caps_are_labelled() -> None:
    from twinloop.closedloop.adapter import TwinAdapter
    from twinloop.closedloop.labels import ground_truth
    from twinloop.twin.engine import Twin
    from twinloop.twin.scenario import load_scenario

    path = Path(__file__).resolve().parents[2] / "src" / "twinloop" / "scenarios" / "mixed_hall.yaml"
    twin = Twin(load_scenario(path), source="mixed_hall.yaml")
    twin.run(2)
    _, background = ground_truth(twin, TwinAdapter(twin))
    caps = [b for b in background if b.kind.startswith("power_limit:")]
    assert caps and {b.entity.rsplit("/", 1)[0] for b in caps} == {"dc2/r01"}
