"""The web app's handle on a running loop: pending actions, approve/reject, status, mode.

:class:`LoopController` is what :func:`twinloop.web.app.create_app` accepts; the loop runner hands one in.
:class:`ResponderController` is the concrete one over a :class:`~twinloop.ops.respond.responder.Responder`
in ``approve`` mode. The responder is not thread-safe and the web server answers from worker threads, so
every call holds ``lock`` (pass the loop runner's lock so approvals never interleave with a loop step).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from twinloop.ops import ActionRequest, ActionResult, Mode, Reader, Responder

MODES: tuple[Mode, ...] = ("observe", "approve", "auto")


class UnknownActionError(KeyError):
    """No pending action has this id."""


@runtime_checkable
class LoopController(Protocol):
    """What the web app needs from a running loop (plain dicts, JSON-ready)."""

    def status(self) -> dict[str, Any]:
        """Mode, policy, counts; small scalar values only."""
        ...

    def pending_actions(self) -> list[dict[str, Any]]:
        """Actions waiting for a person: dicts with the keys of :func:`action_dict`."""
        ...

    def approve(self, action_id: int) -> dict[str, Any]:
        """Approve a pending action (raises :class:`UnknownActionError` for an unknown id)."""
        ...

    def reject(self, action_id: int) -> dict[str, Any]:
        """Reject a pending action (raises :class:`UnknownActionError` for an unknown id)."""
        ...


@runtime_checkable
class ModeSwitch(Protocol):
    """A controller that can also change the responder's mode."""

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch to ``observe``, ``approve`` or ``auto``; returns the new status."""
        ...


def action_dict(
    action_id: int,
    request: ActionRequest,
    status: str,
    ts: float,
    detail: str = "",
    clamped: bool = False,
    run: str = "live",
) -> dict[str, Any]:
    """One action as the API shows it (the columns of ``loop_actions``)."""
    return {
        "run": run,
        "action_id": int(action_id),
        "ts": float(ts),
        "kind": str(request.kind),
        "target": request.target,
        "value": request.value,
        "status": status,
        "detail": detail or request.reason,
        "incident_id": int(request.incident_id),
        "clamped": bool(clamped),
    }


class ResponderController:
    """A :class:`LoopController` over a responder.

    Args:
        responder: the loop's responder (its mode decides whether actions wait for approval).
        read: the telemetry reader the responder uses to take a baseline when an approved action is applied.
        clock: current time for the action log, s (the loop's clock: wall time, or simulated time).
        lock: shared with the loop runner; every call holds it.
        run: the run name shown with live actions.
    """

    def __init__(
        self,
        responder: Responder,
        read: Reader,
        clock: Callable[[], float] = time.time,
        lock: threading.RLock | None = None,
        run: str = "live",
    ) -> None:
        self.responder = responder
        self.read = read
        self.clock = clock
        self.lock = lock or threading.RLock()
        self.run = run

    def status(self) -> dict[str, Any]:
        """Mode, policy name, pending count, actions logged."""
        with self.lock:
            r = self.responder
            return {
                "run": self.run,
                "mode": r.mode,
                "policy": r.policy.name,
                "pending": len(r.pending),
                "actions_logged": len(r.log),
            }

    def pending_actions(self) -> list[dict[str, Any]]:
        """The responder's pending actions, oldest first."""
        with self.lock:
            by_id = {a.action_id: a for a in self.responder.log}
            out = []
            for action_id, request in sorted(self.responder.pending.items()):
                rec = by_id.get(action_id)
                out.append(
                    action_dict(
                        action_id,
                        request,
                        "pending",
                        rec.ts if rec else 0.0,
                        "",
                        rec.clamped if rec else False,
                        self.run,
                    )
                )
            return out

    def _decided(self, action_id: int, result: ActionResult) -> dict[str, Any]:
        return {
            "action_id": int(action_id),
            "status": result.status,
            "detail": result.detail,
            "result_action_id": result.action_id,
        }

    def approve(self, action_id: int) -> dict[str, Any]:
        """Approve: the responder re-checks its guard rails and applies the action."""
        with self.lock:
            if action_id not in self.responder.pending:
                raise UnknownActionError(action_id)
            return self._decided(action_id, self.responder.approve(action_id, self.clock(), self.read))

    def reject(self, action_id: int) -> dict[str, Any]:
        """Reject: recorded as ``rejected`` by operator."""
        with self.lock:
            if action_id not in self.responder.pending:
                raise UnknownActionError(action_id)
            return self._decided(action_id, self.responder.reject(action_id, self.clock()))

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch the responder's mode (``observe``, ``approve``, ``auto``)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        with self.lock:
            self.responder.mode = mode  # type: ignore[assignment]
        return self.status()


class DbController:
    """A :class:`LoopController` for a watcher running in another process (``twinloop watch --db``), through its
    control file (:mod:`twinloop.ops.live.control`): pending actions and status come from it, and approve/reject
    are written to it for the watcher to apply at its next tick (under its guard rails).

    Args:
        path: the control file (``<db>.control.sqlite``).
        run: the watcher's run name.
    """

    def __init__(self, path: str | Path, run: str = "watch") -> None:
        from twinloop.telemetry.store.control import ControlChannel

        self.channel = ControlChannel(path, run)
        self.run = run

    def status(self) -> dict[str, Any]:
        """The watcher's last published status (scalars only) and the heartbeat's age."""
        doc = self.channel.status()
        return {k: v for k, v in doc.items() if isinstance(v, str | int | float | bool) or v is None}

    def pending_actions(self) -> list[dict[str, Any]]:
        """Actions the watcher is holding for a person."""
        return [{**a, "clamped": bool(a["clamped"])} for a in self.channel.pending()]

    def _decide(self, action_id: int, decision: Literal["approve", "reject"]) -> dict[str, Any]:
        if not self.channel.decide(action_id, decision):
            raise UnknownActionError(action_id)
        return {
            "action_id": int(action_id),
            "status": f"{decision} sent",
            "detail": "the watcher applies it at its next tick, under its guard rails",
            "result_action_id": int(action_id),
        }

    def approve(self, action_id: int) -> dict[str, Any]:
        """Send an approval to the watcher."""
        return self._decide(action_id, "approve")

    def reject(self, action_id: int) -> dict[str, Any]:
        """Send a rejection to the watcher."""
        return self._decide(action_id, "reject")
