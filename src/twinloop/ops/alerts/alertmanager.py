"""Alertmanager API v2 client: incidents and failed actions become alerts (``POST /api/v2/alerts``).

An open incident of ``min_severity`` or above is posted as a firing alert (``startsAt`` its opening time, labels
``alertname=twinloop_<class>``, ``severity``, ``root``, ``incident_id``); when it closes it is posted again with
``endsAt`` so Alertmanager resolves it. An action that failed on its target is raised to a person as a
``twinloop_action_failed`` critical alert. Alertmanager wants alerts re-sent while they fire (else it resolves
them after its ``resolve_timeout``), so :meth:`AlertmanagerClient.refresh` re-posts the open ones.

Sending never stops the loop: a request is tried at most ``attempts`` times with ``timeout_s`` each, and a
failure is counted and returned as a warning.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from twinloop.ops.events import Incident, Severity
from twinloop.ops.respond.actions import ActionResult


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def incident_alert(incident: Incident, source: str = "twinloop", url: str = "") -> dict[str, Any]:
    """An incident as an Alertmanager v2 alert (resolved when the incident is closed or merged)."""
    alert: dict[str, Any] = {
        "labels": {
            "alertname": f"twinloop_{incident.event_class.value}",
            "severity": incident.severity.name.lower(),
            "root": incident.root,
            "incident_id": str(incident.incident_id),
            "source": source,
        },
        "annotations": {
            "summary": f"{incident.event_class.value} at {incident.root} ({len(incident.members)} entities)",
            "entities": ", ".join(incident.members[:20]),
        },
        "startsAt": _iso(incident.start_ts),
    }
    details = dict.fromkeys(d.detail for d in incident.evidence if d.detail)
    if details:  # what the detection found beyond the class (a co-tenant: the GPU, its processes, the slowdown)
        alert["annotations"]["description"] = "; ".join(details)
    if url:
        alert["generatorURL"] = url
    if incident.status != "open":
        alert["endsAt"] = _iso(max(incident.end_ts, incident.start_ts + 1e-3))
    return alert


def action_alert(action_id: int, result: ActionResult, source: str = "twinloop") -> dict[str, Any]:
    """A failed action as a critical alert for a person (the loop does not retry it)."""
    req = result.request
    return {
        "labels": {
            "alertname": "twinloop_action_failed",
            "severity": "critical",
            "kind": str(req.kind),
            "target": req.target,
            "action_id": str(action_id),
            "incident_id": str(req.incident_id),
            "source": source,
        },
        "annotations": {
            "summary": f"{req.kind} on {req.target} failed: {result.detail}"[:500],
            "reason": req.reason,
        },
        "startsAt": _iso(result.ts),
    }


class AlertmanagerClient:
    """Posts alerts to one Alertmanager.

    Args:
        url: the Alertmanager base URL (``http://host:9093``).
        min_severity: incidents below this are not sent.
        timeout_s: per request, s.
        attempts: tries per post (bounded; a failed post is reported, not queued forever).
        source: the ``source`` label of every alert.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        url: str,
        min_severity: Severity = Severity.MINOR,
        timeout_s: float = 3.0,
        attempts: int = 2,
        source: str = "twinloop",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.min_severity = min_severity
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.source = source
        self.transport = transport
        self.sent = 0
        self.failed = 0
        self._firing: dict[int, dict[str, Any]] = {}

    def post(self, alerts: list[dict[str, Any]]) -> str | None:
        """Post alerts; returns None on success or a one-line warning."""
        if not alerts:
            return None
        last = ""
        with httpx.Client(timeout=self.timeout_s, transport=self.transport) as client:
            for _ in range(self.attempts):
                try:
                    resp = client.post(self.url, json=alerts)
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    continue
                if resp.status_code == 200:
                    self.sent += len(alerts)
                    return None
                last = f"HTTP {resp.status_code}: {resp.text.strip()[:200]}"
                if resp.status_code < 500:
                    break  # a bad request will not get better by sending it again
        self.failed += len(alerts)
        return f"alertmanager {self.url}: {len(alerts)} alert(s) not sent ({last})"

    def incidents(self, updates: list[Incident]) -> str | None:
        """Send the incident updates that matter (firing or resolved)."""
        out = []
        for inc in updates:
            if inc.status == "open" and inc.severity >= self.min_severity:
                alert = incident_alert(inc, self.source)
                self._firing[inc.incident_id] = alert
                out.append(alert)
            elif inc.status != "open" and inc.incident_id in self._firing:
                del self._firing[inc.incident_id]
                out.append(incident_alert(inc, self.source))
        return self.post(out)

    def failed_action(self, action_id: int, result: ActionResult) -> str | None:
        """Raise a failed action to a person."""
        return self.post([action_alert(action_id, result, self.source)])

    def refresh(self) -> str | None:
        """Re-send the firing alerts (Alertmanager resolves alerts it has not heard of for a while)."""
        return self.post(list(self._firing.values()))
