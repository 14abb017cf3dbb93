"""Alerts out where SREs already look: an Alertmanager client (API v2)."""

from twinloop.ops.alerts.alertmanager import AlertmanagerClient, action_alert, incident_alert

__all__ = ["AlertmanagerClient", "action_alert", "incident_alert"]
