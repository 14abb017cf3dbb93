"""`twinloop watch`: one JSON document, progress on stderr, bad input in one line with exit code 2, the
dashboard's approve reaching a watcher through its control file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.control import ControlChannel, control_path
from twinloop.web import create_app
from twinloop.web.controller import DbController

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h100"
runner = CliRunner()


def test_json_document_on_a_recording(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["mode"] == "observe" and doc["actuator"] == "none" and doc["stopped"] == "end"
    assert doc["samples"] == 165 and doc["counts"]["actions"] == 0
    throttle = [i for i in doc["incidents"] if i["class"] == "power_throttle"]
    assert len(throttle) == 1
    inc = throttle[0]
    assert set(inc) >= {"opened_ts", "closed_ts", "class", "severity", "root", "entities"}
    assert inc["root"] == "site0/row0/rack0/vm/gpu0" and inc["entities"] == [inc["root"]]
    assert inc["severity"] == "minor" and inc["opened_ts"] > 1.7e9
    # the store has the telemetry and the records; the control file exists for the dashboard
    assert control_path(db).is_file()


def test_kind_and_file_apart_and_times_people_read(tmp_path: Path) -> None:
    rec = FIX / "nvml_1hz_idle_to_caps.csv"
    apart = runner.invoke(app, ["watch", "replay", str(rec), "--json"])
    joined = runner.invoke(app, ["watch", f"replay:{rec}", "--json"])
    assert apart.exit_code == 0, apart.output
    assert json.loads(apart.stdout)["incidents"] == json.loads(joined.stdout)["incidents"]
    text = runner.invoke(app, ["watch", "replay", str(rec)])
    assert text.exit_code == 0 and " UTC" not in text.stdout
    assert "power_throttle minor at site0/row0/rack0/vm/gpu0 opened 20" in text.stdout  # a date, not 1.7e9 seconds
    for args, needle in [([str(rec)], f"`replay {rec}`"), ([f"replay:{rec}", str(rec)], "give it once")]:
        res = runner.invoke(app, ["watch", *args])
        assert res.exit_code == 2 and needle in res.stderr, res.output


def test_policy_auto_mode_records_actions_with_rule_and_reason(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: t\nmode: auto\nrules:\n  - name: drain-throttled\n    when: [power_throttle]\n"
        "    actions: [{kind: drain, target: node}]\n"
    )
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}", "--mode", "auto", "--policy",
                              str(policy), "--duration", "140", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["stopped"] == "duration"
    (act,) = doc["actions"]
    assert act["status"] == "dry_run" and act["kind"] == "drain" and act["rule"] == "drain-throttled"
    assert act["target"] == "site0/row0/rack0/vm" and "incident" in act["reason"]
    assert act["incident_id"] == next(i["incident_id"] for i in doc["incidents"] if i["class"] == "power_throttle")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["replay:/nonexistent.duckdb"], "file not found"),
        (["bogus:x"], "SOURCE"),
        (["dcgm"], "needs URL"),
        (["replay:x.duckdb", "--mode", "yolo"], "--mode"),
        (["replay:x.duckdb", "--actuator", "ipmi"], "--actuator"),
        (["replay:x.duckdb", "--speed", "-1"], "--speed"),
        (["nvml", "--speed", "2"], "--speed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], where: str) -> None:
    (tmp_path / "x.duckdb").write_text("")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = runner.invoke(app, ["watch", *args, "--json"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 2, res.output
    assert where in res.stderr and res.stderr.count("\n") == 1 and res.stdout == ""


def test_bad_site_file_names_file_and_field(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("site: dc1\nhosts:\n  vm: {row: 'r/1'}\n")
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}", "--topology", str(site)])
    assert res.exit_code == 2 and "site.yaml" in res.stderr and "hosts.vm.row" in res.stderr


def test_site_file_places_the_gpu(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("site: dc1\nhosts:\n  vm: {row: row4, rack: r12, cdu: cdu-b, pdu: pdu-7}\n")
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}", "--topology", str(site),
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    roots = {i["root"] for i in json.loads(res.stdout)["incidents"]}
    assert roots == {"dc1/row4/r12/vm/gpu0"}


def test_dashboard_approve_goes_through_the_control_file(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    watcher_side = ControlChannel(control_path(db))
    pending = {"action_id": 7, "ts": 1.0, "kind": "drain", "target": "dc/r/k/n1", "value": None,
               "detail": "drain-throttled on incident 3", "incident_id": 3, "clamped": False}  # fmt: skip
    watcher_side.put_pending(pending)
    watcher_side.heartbeat({"mode": "approve", "samples": 10})
    token = "t" * 32
    web = create_app(None, tmp_path, token, controller=DbController(control_path(db)))
    client = TestClient(web)
    auth = {"Authorization": f"Bearer {token}"}
    pending = client.get("/api/actions/pending", headers=auth).json()
    assert [p["action_id"] for p in pending] == [7]
    assert client.post("/api/actions/7/approve", headers=auth).status_code == 200
    assert client.post("/api/actions/7/approve", headers=auth).status_code == 404  # no longer pending
    assert watcher_side.take_decisions() == [(7, "approve")]
    assert watcher_side.take_decisions() == []  # consumed once


def test_speed_paces_a_recording() -> None:
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}", "--speed", "50", "--duration",
                              "50", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["stopped"] == "duration" and doc["samples"] == 50
    assert doc["wall_s"] >= 49 / 50  # 49 s of recorded time between the first and the last sample, at 50x


def test_jobs_k8s_groups_pods_by_controller_and_reaches_the_k8s_actuator() -> None:
    """`--jobs k8s` is the controller-grouping job source, and the k8s actuator asks it which pods to delete and which
    jobs serve (before: one job per pod, and the actuator knew no pods)."""
    from twinloop.cli.watch_cmd import _job_source
    from twinloop.ops.live.actuators import JobLookup, make_actuator
    from twinloop.ops.live.k8s_fleet import KubernetesJobs

    source = _job_source("k8s")
    assert isinstance(source, KubernetesJobs)
    act = make_actuator("k8s", jobs=JobLookup(source))
    assert act.real.fleet is source and act.dry.fleet is source  # type: ignore[attr-defined]
