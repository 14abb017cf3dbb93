"""The watcher around the loop: approvals from the dashboard's side of the control file, failed actions raised to a
person and never retried, restarts that resume incidents and never repeat an action."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import httpx

from twinloop.ops.alerts import AlertmanagerClient
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.control import ControlChannel
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.ops.records import LiveRecords
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply
from twinloop.ops.respond.policy import Mode, Policy
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.web.controller import DbController

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "h100"
CAPS = FIX / "nvml_1hz_idle_to_caps.csv"
POLICY = Policy.model_validate(
    {"name": "drain-on-throttle", "mode": "auto",
     "rules": [{"name": "drain-throttled", "when": ["power_throttle"],
                "actions": [{"kind": "drain", "target": "node"}]}]}
)  # fmt: skip


class Recording(ActionAdapter):
    """Counts what it is asked to do; ``fail`` makes every request fail as a scheduler command would."""

    name: ClassVar[str] = "recording"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[ActionRequest] = []

    def _apply(self, request: ActionRequest) -> AdapterReply:
        self.calls.append(request)
        if self.fail:
            return AdapterReply("failed", "scontrol: error: Invalid node name specified")
        return AdapterReply("applied", f"drained {request.target}")


def watcher(tmp: Path, csv_path: Path, adapter: ActionAdapter, mode: Mode, **kw: Any) -> tuple[Watcher, Any]:
    con = duckdb.connect(str(tmp / "w.duckdb"))
    cluster = SourceCluster(FileSource(FileConfig(path=str(csv_path))), adapter, LiveOptions(cadence_s=1.0))
    control = ControlChannel(tmp / "w.duckdb.control.sqlite")
    w = Watcher(cluster, LiveRecords(con), control, config=WatchConfig(mode=mode, policy=POLICY, heartbeat_s=0.0),
                **kw)  # fmt: skip
    return w, con


def actions(con: Any) -> list[dict[str, Any]]:
    return LiveRecords(con).summary()[1]


def test_approval_in_the_dashboard_reaches_the_running_watcher(tmp_path: Path) -> None:
    adapter = Recording()
    w, con = watcher(tmp_path, CAPS, adapter, "approve")
    dashboard = DbController(tmp_path / "w.duckdb.control.sqlite")
    sent: list[dict[str, Any]] = []

    def person() -> bool:  # looks at the dashboard between ticks, approves what waits
        for a in dashboard.pending_actions():
            sent.append(dashboard.approve(a["action_id"]))
        return False

    w.run(stop=person)
    assert len(sent) == 1 and sent[0]["status"] == "approve sent"
    assert [r.kind for r in adapter.calls] == [ActionKind.DRAIN]
    rows = actions(con)
    assert [r["status"] for r in rows] == ["pending", "applied"]
    assert rows[0]["rule"] == "drain-throttled" and rows[0]["incident_id"] >= 1
    assert dashboard.pending_actions() == []
    assert dashboard.status()["mode"] == "approve"


def test_a_failed_action_is_recorded_raised_and_not_retried(tmp_path: Path) -> None:
    posted: list[Any] = []

    def am(request: httpx.Request) -> httpx.Response:
        posted.extend(json.loads(request.content))
        return httpx.Response(200)

    alerts = AlertmanagerClient("http://am.invalid", transport=httpx.MockTransport(am))
    adapter = Recording(fail=True)
    w, con = watcher(tmp_path, CAPS, adapter, "auto", alerts=alerts)
    w.run()
    assert len(adapter.calls) == 1  # the incident lasted 70 s; the failed drain was not tried again
    rows = actions(con)
    assert [r["status"] for r in rows] == ["failed"]
    assert "Invalid node name" in rows[0]["detail"]
    names = [a["labels"]["alertname"] for a in posted]
    assert "twinloop_action_failed" in names and "twinloop_power_throttle" in names
    failed = next(a for a in posted if a["labels"]["alertname"] == "twinloop_action_failed")
    assert failed["labels"]["severity"] == "critical" and failed["labels"]["target"].endswith("/vm")


def split(src: Path, dst1: Path, dst2: Path, at_s: float) -> None:
    with open(src, newline="") as fh:
        rows = list(csv.reader(fh))
    t0 = float(rows[1][0])
    for dst, keep in ((dst1, lambda t: t - t0 < at_s), (dst2, lambda t: t - t0 >= at_s)):
        with open(dst, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(rows[0])
            w.writerows(r for r in rows[1:] if keep(float(r[0])))


def test_restart_resumes_the_incident_and_never_repeats_its_action(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    split(CAPS, first, second, at_s=115.0)  # killed in the middle of the cap steps
    adapter = Recording()
    w1, con = watcher(tmp_path, first, adapter, "auto")
    w1.run()
    con.close()
    before = LiveRecords(duckdb.connect(str(tmp_path / "w.duckdb"))).summary()
    assert [i["class"] for i in before[0] if i["status"] == "open"] == ["power_throttle"]
    assert [a["status"] for a in before[1]] == ["applied"]
    w2, con2 = watcher(tmp_path, second, adapter, "auto")
    s = w2.run()
    assert s.resumed_incidents == 1
    incidents, acts = LiveRecords(con2).summary()
    throttles = [i for i in incidents if i["class"] == "power_throttle"]
    assert len(throttles) == 1 and throttles[0]["incident_id"] == before[0][0]["incident_id"]
    assert len(adapter.calls) == 1 and [a["status"] for a in acts] == ["applied"]
    assert len({i["incident_id"] for i in incidents}) == len(incidents)


def test_restart_relists_pending_approvals(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    split(CAPS, first, second, at_s=115.0)
    w1, con = watcher(tmp_path, first, Recording(), "approve")
    w1.run()
    con.close()
    pending = ControlChannel(tmp_path / "w.duckdb.control.sqlite").pending()
    assert len(pending) == 1
    w2, _ = watcher(tmp_path, second, Recording(), "approve")
    s = w2.run()
    assert s.relisted_pending == 1
    again = ControlChannel(tmp_path / "w.duckdb.control.sqlite").pending()
    assert [a["action_id"] for a in again] == [pending[0]["action_id"]]


def test_an_incident_not_seen_again_after_a_restart_is_closed(tmp_path: Path) -> None:
    first, _ = tmp_path / "a.csv", tmp_path / "b.csv"
    split(CAPS, first, tmp_path / "b.csv", at_s=115.0)
    w1, con = watcher(tmp_path, first, Recording(), "observe")
    w1.run()
    con.close()
    w2, con2 = watcher(tmp_path, FIX / "nvml_1hz_bursts_cooldown.csv", Recording(), "observe")
    w2.run()
    incidents, _ = LiveRecords(con2).summary()
    (throttle,) = [i for i in incidents if i["class"] == "power_throttle"]
    assert throttle["status"] == "closed" and throttle["closed_ts"] is not None
