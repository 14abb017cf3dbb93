import duckdb

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.records import GroundTruthLabel, read_table, write_run
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult


def test_write_replaces_a_run_and_reads_back() -> None:
    con = duckdb.connect(":memory:")
    assert read_table(con, "loop_incidents") == []
    inc = Incident(7, EventClass.COOLING_DEGRADATION, "dc/r1", ("dc/r1/k1",), 10.0, 20.0, Severity.MAJOR)
    act = ActionResult(0, ActionRequest(ActionKind.CDU_FLOW, "dc/r1/cdu", 1.3, incident_id=7), "applied", 12.0)
    gt = GroundTruthLabel("cdu_pump_degradation", "dc/r1/cdu", 5.0, 600.0)
    write_run(con, "loop-on", [inc], [act], [gt])
    write_run(con, "loop-on", [inc], [act, act], [gt])  # replaces, does not append
    write_run(con, "loop-off", [], [], [gt])
    rows = read_table(con, "loop_incidents", "loop-on")
    assert rows == [{"run": "loop-on", "incident_id": 7, "event_class": "cooling_degradation", "root": "dc/r1",
                     "severity": "major", "start_ts": 10.0, "end_ts": 20.0, "n_members": 1, "n_detections": 0,
                     "status": "open"}]  # fmt: skip
    assert len(read_table(con, "loop_actions", "loop-on")) == 2
    assert {r["run"] for r in read_table(con, "loop_ground_truth")} == {"loop-on", "loop-off"}
