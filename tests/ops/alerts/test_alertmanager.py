"""The Alertmanager client against a real Alertmanager (Debian package ``prometheus-alertmanager``), started here on
127.0.0.1 with a temporary configuration and storage, and stopped afterwards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests import servers

from twinloop.ops.alerts import AlertmanagerClient
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult

pytestmark = pytest.mark.integration


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    with servers.alertmanager(tmp_path) as server:
        yield server.url


def alerts(url: str, active: bool = True) -> list[dict]:
    params = {"active": str(active).lower(), "inhibited": "true", "silenced": "true", "unprocessed": "true"}
    return httpx.get(f"{url}/api/v2/alerts", params=params, timeout=5).json()


def wait_for(pred, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_incidents_fire_and_resolve_and_failed_actions_raise_an_alert(alertmanager: str) -> None:
    now = time.time()
    client = AlertmanagerClient(alertmanager)
    inc = Incident(12, EventClass.POWER_THROTTLE, "dc/r1/k1/n1/gpu0", ("dc/r1/k1/n1/gpu0",), now - 30, now - 1,
                   Severity.MINOR)  # fmt: skip
    info = Incident(13, EventClass.BENIGN_PHASE_CHANGE, "dc/r1/k1/n1/gpu1", ("dc/r1/k1/n1/gpu1",), now - 30, now,
                    Severity.INFO)  # fmt: skip
    assert client.incidents([inc, info]) is None
    assert wait_for(lambda: len(alerts(alertmanager)) == 1)
    got = alerts(alertmanager)[0]
    assert got["labels"]["alertname"] == "twinloop_power_throttle"
    assert got["labels"]["root"] == "dc/r1/k1/n1/gpu0" and got["labels"]["incident_id"] == "12"
    assert got["labels"]["severity"] == "minor"

    failed = ActionResult(4, ActionRequest(ActionKind.DRAIN, "dc/r1/k1/n1", incident_id=12), "failed", now,
                          "scontrol: exit 1")  # fmt: skip
    assert client.failed_action(104, failed) is None
    assert wait_for(lambda: any(a["labels"]["alertname"] == "twinloop_action_failed" for a in alerts(alertmanager)))

    closed = Incident(12, EventClass.POWER_THROTTLE, "dc/r1/k1/n1/gpu0", ("dc/r1/k1/n1/gpu0",), now - 30, now - 0.5,
                      Severity.MINOR, status="closed")  # fmt: skip
    assert client.incidents([closed]) is None
    assert wait_for(
        lambda: not any(a["labels"]["alertname"] == "twinloop_power_throttle" for a in alerts(alertmanager))
    )
    assert client.sent == 3 and client.failed == 0


def test_an_unreachable_alertmanager_is_a_warning_not_a_crash() -> None:
    client = AlertmanagerClient(f"http://127.0.0.1:{servers.free_port()}", timeout_s=0.5, attempts=2)
    inc = Incident(1, EventClass.POWER_THROTTLE, "a/b/c/d/gpu0", ("a/b/c/d/gpu0",), 1.0, 2.0, Severity.MAJOR)
    warning = client.incidents([inc])
    assert warning is not None and "not sent" in warning and client.failed == 1
