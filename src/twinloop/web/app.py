"""The dashboard application: :func:`create_app` builds the FastAPI app (JSON API under ``/api``, pages, static
files). Building it has no side effects: nothing is opened until the first request.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import duckdb
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from twinloop import __version__
from twinloop.errors import InputError
from twinloop.report.charts import ASSETS_DIR
from twinloop.web import pages
from twinloop.web.api import files, floor, incidents, jobs, live, overview, planner
from twinloop.web.api.deps import RunFactory, WebState
from twinloop.web.auth import MIN_TOKEN_LENGTH, AuthSettings
from twinloop.web.controller import LoopController
from twinloop.web.db import StoreUnavailableError, TelemetryDB
from twinloop.web.guard import MAX_BODY_BYTES, RequestGuard
from twinloop.web.pages import SECURITY_HEADERS

STATIC_DIR = Path(__file__).resolve().parent / "static"


def _query_names(dependant: Dependant) -> set[str]:
    """Query parameter names of an endpoint and of everything it depends on."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _no_undeclared_query(request: Request) -> None:
    """The schema closes every API query: an undeclared parameter is a mistake, not something to ignore."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.url.path.startswith("/api/"):
        return
    declared = _query_names(route.dependant)
    unknown = [k for k in request.query_params if k not in declared]
    if unknown:
        allowed = ", ".join(sorted(declared)) or "none"
        msg = f"unknown parameter (allowed: {allowed})"
        raise HTTPException(status_code=422, detail=[{"type": "value_error", "loc": ["query", unknown[0]], "msg": msg}])


def _finite(doc: Any) -> Any:
    """``doc`` with every non-finite float written as a string (``"nan"``, ``"inf"``)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return str(doc)
    if isinstance(doc, dict):
        return {k: _finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_finite(v) for v in doc]
    return doc


def _query_error(name: str, msg: str) -> JSONResponse:
    return JSONResponse({"detail": [{"type": "value_error", "loc": ["query", name], "msg": msg}]}, status_code=422)


def create_app(
    db_path: str | Path | None,
    data_dir: str | Path,
    token: str,
    open_read: bool = False,
    controller: LoopController | None = None,
    run_factory: RunFactory | None = None,
    connect: Callable[[], duckdb.DuckDBPyConnection] | None = None,
    now_window_s: float = 30.0,
    live_interval_s: float = 2.0,
    allowed_hosts: Collection[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The twinloop dashboard and JSON API.

    Args:
        db_path: the telemetry DuckDB file (opened read-only on first use; may not exist yet).
        data_dir: the only directory requests can read files from (HTML reports); must exist.
        token: bearer token for state-changing endpoints (and reads unless ``open_read``); 16+ characters.
        open_read: let read-only endpoints answer without the token.
        controller: the running loop (pending actions, approve/reject, status), if one is attached.
        run_factory: starts a run for ``POST /api/runs`` (409 without one).
        connect: returns an open connection to the store, for a process that writes it itself.
        now_window_s: "now" is the newest sample of each entity within this many seconds of the newest one.
        live_interval_s: how often the live stream checks for new data, s.
        allowed_hosts: ``Host`` names accepted besides the loopback ones (the bound host; DNS-rebinding guard).
        max_body_bytes: the largest request body, bytes (413 above it; checked after the token, before parsing).

    Raises:
        InputError: a short token, a missing data directory or non-positive intervals.
    """
    data = _checked(token, data_dir, now_window_s, live_interval_s)
    app = FastAPI(
        title="twinloop",
        version=__version__,
        description="Telemetry, jobs, incidents and planner of a twinloop site. Read endpoints take the bearer "
        "token unless the server was started with --open-read; state-changing ones always do.",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        dependencies=[Depends(_no_undeclared_query)],
    )
    app.state.auth = AuthSettings(token=token, open_read=open_read)
    app.state.web = WebState(
        db=TelemetryDB(None if db_path is None else Path(db_path), connect),
        data_dir=data,
        controller=controller,
        run_factory=run_factory,
        now_window_s=now_window_s,
        live_interval_s=live_interval_s,
    )
    for module in (overview, floor, jobs, incidents, planner, live, files):
        app.include_router(module.router)
    app.include_router(pages.router())
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # the chart library and its renderer: the very files the HTML reports inline
    app.mount("/vendor", StaticFiles(directory=ASSETS_DIR), name="vendor")

    _error_handlers(app)
    _headers_middleware(app)

    # outermost: Host, token of writes and body size are settled before anything reads the body
    app.add_middleware(RequestGuard, auth=app.state.auth, allowed_hosts=allowed_hosts, max_body_bytes=max_body_bytes)
    return app


def _checked(token: str, data_dir: str | Path, now_window_s: float, live_interval_s: float) -> Path:
    """The data directory, once the token length, the directory and the intervals are checked."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise InputError("--token", "", f"must be at least {MIN_TOKEN_LENGTH} characters, got {len(token)}")
    data = Path(data_dir)
    if not data.is_dir():
        raise InputError("--data-dir", "", f"{data}: not a directory")
    if not (now_window_s > 0 and live_interval_s > 0):
        raise InputError("create_app", "now_window_s", "intervals must be > 0 s")
    return data


def _error_handlers(app: FastAPI) -> None:
    """Invalid input → 422 with finite JSON; a store unavailable or failing → 503."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # the echoed input may hold NaN/inf (Python's JSON reads them): JSON out has no such numbers
        return JSONResponse({"detail": _finite(jsonable_encoder(exc.errors()))}, status_code=422)

    @app.exception_handler(StoreUnavailableError)
    async def _store_unavailable(request: Request, exc: StoreUnavailableError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "2"})

    @app.exception_handler(duckdb.Error)
    async def _store_error(request: Request, exc: duckdb.Error) -> JSONResponse:
        # a store being rewritten or locked by a writer is a temporary condition, not a server bug
        return JSONResponse({"detail": f"telemetry store unavailable: {type(exc).__name__}"}, status_code=503)


def _headers_middleware(app: FastAPI) -> None:
    """Refuse repeated query parameters; add the security headers, and ``no-store`` on the API."""

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        keys = [k for k, _ in request.query_params.multi_items()]
        if len(keys) != len(set(keys)):  # every parameter is a scalar: a repeated one is ambiguous input
            dup = next(k for k in keys if keys.count(k) > 1)
            return _query_error(dup, "parameter given more than once")
        response = await call_next(request)
        if request.url.path != "/api/docs":  # Swagger UI needs its own scripts
            for k, v in SECURITY_HEADERS.items():
                response.headers.setdefault(k, v)
        if request.url.path.startswith("/api/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response
