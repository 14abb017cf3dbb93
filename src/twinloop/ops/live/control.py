"""The watcher's side of the approval channel: what an action awaiting a person looks like in it.

The channel itself (a small SQLite file beside the store, shared by the watcher and the dashboard) is a store and
lives with the other stores: :mod:`twinloop.telemetry.store.control`.
"""

from __future__ import annotations

from typing import Any

from twinloop.ops.respond.actions import ActionRequest
from twinloop.telemetry.store.control import ControlChannel, Decision, control_path

__all__ = ["ControlChannel", "Decision", "control_path", "pending_row"]


def pending_row(action_id: int, request: ActionRequest, ts: float, clamped: bool) -> dict[str, Any]:
    """An action awaiting a person, as the control file lists it (the columns of ``loop_actions``)."""
    return {"action_id": int(action_id), "ts": float(ts), "kind": str(request.kind), "target": request.target,
            "value": request.value, "detail": request.reason, "incident_id": int(request.incident_id),
            "clamped": bool(clamped)}  # fmt: skip
