"""Incidents and actions: read the loop's records; approve/reject pending actions, change the mode and start a
run (these need the bearer token always).
"""

from __future__ import annotations

from typing import Annotated, Any

import duckdb
from fastapi import APIRouter, Depends, HTTPException, Path

from twinloop.web.api.deps import WebState, cursor, need_controller, scalars, web_state
from twinloop.web.auth import require_read, require_write
from twinloop.web.controller import ModeSwitch, UnknownActionError
from twinloop.web.loop_queries import action_log, action_row, incident_groups, runs
from twinloop.web.models import (
    ActionLog,
    ActionRow,
    ControllerState,
    Decision,
    Incidents,
    ModeChange,
    RunStart,
    RunStarted,
    error_responses,
)
from twinloop.web.params import OptionalRun

router = APIRouter(prefix="/api", tags=["incidents"], responses=error_responses(401, 403))

ActionId = Annotated[int, Path(ge=0, le=2**62, description="action id from /api/actions/pending")]


def _pending(state: WebState) -> list[ActionRow]:
    return [action_row(a) for a in state.controller.pending_actions()] if state.controller is not None else []


def _recorded(state: WebState, cur: duckdb.DuckDBPyConnection | None, run: str | None) -> tuple[list[str], list[Any]]:
    """The store's part of the incidents page (run names and groups), computed once per store version."""
    if cur is None:
        return [], []
    key = (__name__, "incidents", run)
    found = state.db.cached(key, state.db.version(cur),
                            lambda: (runs(cur), incident_groups(cur, run, state.db.time_range(cur)[0])))  # fmt: skip
    return found  # type: ignore[return-value]


@router.get(
    "/incidents",
    response_model=Incidents,
    dependencies=[Depends(require_read)],
    summary="Incidents grouped by cause, with actions and effect",
)
def incidents(
    run: OptionalRun = None,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> Incidents:
    """The loop's incidents of ``run`` (all runs by default) grouped by event class, most severe first."""
    names, groups = _recorded(state, cur, run)
    mode = state.controller.status().get("mode") if state.controller is not None else None
    return Incidents(runs=names, run=run, groups=groups, pending=_pending(state), mode=mode)


@router.get("/actions", response_model=ActionLog, dependencies=[Depends(require_read)], summary="The action log")
def actions(
    run: OptionalRun = None,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> ActionLog:
    """Every recorded action of ``run`` (all runs by default)."""
    return ActionLog(run=run, actions=action_log(cur, run, state.db.time_range(cur)[0]) if cur is not None else [])


@router.get(
    "/actions/pending",
    response_model=list[ActionRow],
    dependencies=[Depends(require_read)],
    summary="Actions waiting for approval",
)
def pending(state: WebState = Depends(web_state)) -> list[ActionRow]:
    """Pending actions of the attached loop (empty without one)."""
    return _pending(state)


def _decide(state: WebState, action_id: int, approve: bool) -> Decision:
    ctl = need_controller(state)
    try:
        doc = ctl.approve(action_id) if approve else ctl.reject(action_id)
    except UnknownActionError:
        raise HTTPException(404, f"no pending action {action_id}") from None
    return Decision(action_id=action_id, status=str(doc.get("status", "")), detail=str(doc.get("detail", "")))


@router.post(
    "/actions/{action_id}/approve",
    response_model=Decision,
    dependencies=[Depends(require_write)],
    responses=error_responses(404, 409),
    summary="Approve a pending action (token required)",
)
def approve(action_id: ActionId, state: WebState = Depends(web_state)) -> Decision:
    """The responder checks its guard rails again and applies the action."""
    return _decide(state, action_id, approve=True)


@router.post(
    "/actions/{action_id}/reject",
    response_model=Decision,
    dependencies=[Depends(require_write)],
    responses=error_responses(404, 409),
    summary="Reject a pending action (token required)",
)
def reject(action_id: ActionId, state: WebState = Depends(web_state)) -> Decision:
    """The action is recorded as rejected by an operator."""
    return _decide(state, action_id, approve=False)


@router.put(
    "/policy/mode",
    response_model=ControllerState,
    dependencies=[Depends(require_write)],
    responses=error_responses(400, 409),
    summary="Change the responder's mode (token required)",
)
def set_mode(change: ModeChange, state: WebState = Depends(web_state)) -> ControllerState:
    """Switch the attached loop between observe, approve and auto."""
    ctl = need_controller(state)
    if not isinstance(ctl, ModeSwitch):
        raise HTTPException(409, "the attached loop cannot change its mode")
    doc = ctl.set_mode(change.mode)
    return ControllerState(controller=scalars(doc), pending_actions=len(ctl.pending_actions()))


@router.post(
    "/runs",
    response_model=RunStarted,
    dependencies=[Depends(require_write)],
    responses=error_responses(400, 409),
    summary="Start a loop or simulation run (token required)",
)
def start_run(request: RunStart, state: WebState = Depends(web_state)) -> RunStarted:
    """Ask the run factory configured at start to begin a run; 409 when none is configured."""
    if state.run_factory is None:
        raise HTTPException(409, "this server was started without a run factory")
    return RunStarted(started=True, detail=scalars(state.run_factory(request)))
