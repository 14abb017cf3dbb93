"""Shared state and dependencies of the API routers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import duckdb
from fastapi import HTTPException, Request

from twinloop.web.controller import LoopController
from twinloop.web.db import TelemetryDB
from twinloop.web.models import RunStart

#: Starts a loop or simulation run; returns a small JSON-ready status dict.
RunFactory = Callable[[RunStart], dict[str, Any]]


@dataclass
class WebState:
    """Everything the routers share (held in ``app.state.web``).

    Attributes:
        db: the telemetry store.
        data_dir: the only directory requests may read files from (HTML reports).
        controller: the running loop, when one is attached.
        run_factory: starts a run (``POST /api/runs``), when configured.
        now_window_s: how far back from the newest sample "now" reaches, s.
        live_interval_s: how often the live stream checks for new data, s.
    """

    db: TelemetryDB
    data_dir: Path
    controller: LoopController | None = None
    run_factory: RunFactory | None = None
    now_window_s: float = 30.0
    live_interval_s: float = 2.0


def web_state(request: Request) -> WebState:
    """The app's :class:`WebState`."""
    state: WebState = request.app.state.web
    return state


def cursor(request: Request) -> Iterator[duckdb.DuckDBPyConnection | None]:
    """A store cursor for the request (``None`` when there is no store yet), closed afterwards."""
    db = web_state(request).db
    cur = db.cursor()
    try:
        yield cur
    finally:
        if cur is not None:
            db.release(cur)


def need_controller(state: WebState) -> LoopController:
    """The attached controller, or 409 when no loop is running."""
    if state.controller is None:
        raise HTTPException(409, "no loop is attached to this server")
    return state.controller


def scalars(doc: dict[str, Any]) -> dict[str, str | float | int | bool | None]:
    """Only the JSON scalars of a status dict (the schema promises scalars)."""
    return {str(k): v for k, v in doc.items() if v is None or isinstance(v, str | float | int | bool)}


F = TypeVar("F", bound=Callable[..., Any])


def store_cached(fn: F) -> F:
    """Cache an endpoint's answer until the store changes (:meth:`TelemetryDB.version`).

    For endpoints whose answer depends only on their query parameters and the store (not on the attached loop):
    16 dashboards polling the same page then cost one computation per change of the store, not 16 per poll.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state, cur = kwargs.get("state"), kwargs.get("cur")
        params = {k: v for k, v in kwargs.items() if k not in ("state", "cur")}
        if not isinstance(state, WebState) or cur is None or args:
            return fn(*args, **kwargs)
        if not all(v is None or isinstance(v, str | int | float | bool) for v in params.values()):
            return fn(*args, **kwargs)
        key = (fn.__module__, fn.__name__, tuple(sorted(params.items())))
        return state.db.cached(key, state.db.version(cur), lambda: fn(*args, **kwargs))

    return wrapper  # type: ignore[return-value]
