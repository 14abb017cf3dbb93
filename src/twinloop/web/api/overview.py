"""``GET /api/overview`` (site power, PUE, hottest racks, throttling, open incidents) and ``GET /api/status``."""

from __future__ import annotations

import duckdb
from fastapi import APIRouter, Depends, Request

from twinloop.telemetry.store.queries import sample_count
from twinloop.web.api.deps import WebState, cursor, scalars, store_cached, web_state
from twinloop.web.auth import require_read
from twinloop.web.db import DEPTH, JOB_LEVEL
from twinloop.web.loop_queries import open_incidents
from twinloop.web.models import Counts, Overview, SitePower, Status, Throttling, error_responses
from twinloop.web.queries import rack_stats, site_power

router = APIRouter(
    prefix="/api", tags=["overview"], dependencies=[Depends(require_read)], responses=error_responses(401, 403)
)

HOTTEST = 5
MAX_OPEN_LISTED = 20


def pending_count(state: WebState) -> int:
    """Actions waiting for approval in the attached loop (0 without one)."""
    return len(state.controller.pending_actions()) if state.controller is not None else 0


@router.get("/overview", response_model=Overview, summary="Site power, PUE, hottest racks, throttling, incidents")
def overview(state: WebState = Depends(web_state), cur: duckdb.DuckDBPyConnection | None = Depends(cursor)) -> Overview:
    """What the site is doing now."""
    live = state.controller is not None
    if cur is None:
        empty = SitePower(
            ts=None,
            facility_power_w=None,
            it_power_w=None,
            cooling_power_w=None,
            losses_w=None,
            pue=None,
            ambient_temp_c=None,
        )
        return Overview(
            site=None,
            ts=None,
            oldest_ts=None,
            counts=Counts(sites=0, rows=0, racks=0, nodes=0, gpus=0, jobs=0),
            power=empty,
            hottest_racks=[],
            throttling=Throttling(gpus_reporting=0, gpus_throttled=0, by_reason={}),
            open_incidents=[],
            open_incident_count=0,
            pending_actions=pending_count(state),
            live=live,
        )
    now = _overview_now(state=state, cur=cur)
    # the attached loop's figures are not the store's: never cached
    return now.model_copy(update={"pending_actions": pending_count(state), "live": live})


@store_cached
def _overview_now(state: WebState, cur: duckdb.DuckDBPyConnection) -> Overview:
    """The overview from the store alone (cached until the store changes; precomputed once per change)."""
    db = state.db
    topo = db.topology(cur)
    oldest, newest = db.time_range(cur)
    power = site_power(cur, db, state.now_window_s)
    stats = rack_stats(cur, db, state.now_window_s)
    hottest = sorted((r for r in stats.heat if r.max_gpu_temp_c is not None), key=lambda r: -(r.max_gpu_temp_c or 0.0))[
        :HOTTEST
    ]
    incidents = open_incidents(cur, oldest)
    counts = Counts(
        sites=len(topo.sites),
        rows=len(topo.rows),
        racks=len(topo.racks),
        nodes=int((topo.level == DEPTH["node"]).sum()),
        gpus=int((topo.level == DEPTH["gpu"]).sum()),
        jobs=int((topo.level == JOB_LEVEL).sum()),
    )
    return Overview(
        site=topo.sites[0] if len(topo.sites) == 1 else (", ".join(topo.sites) or None),
        ts=newest,
        oldest_ts=oldest,
        counts=counts,
        power=power,
        hottest_racks=hottest,
        throttling=stats.throttling,
        open_incidents=incidents[:MAX_OPEN_LISTED],
        open_incident_count=len(incidents),
        pending_actions=0,
        live=False,
    )


@router.get("/status", response_model=Status, summary="Newest data, attached loop, pending actions")
def status(
    request: Request, state: WebState = Depends(web_state), cur: duckdb.DuckDBPyConnection | None = Depends(cursor)
) -> Status:
    """Cheap liveness check the pages poll through the live stream."""
    oldest, newest, samples = None, None, 0
    if cur is not None:
        oldest, newest = state.db.time_range(cur)
        samples = sample_count(cur)
    ctl = state.controller
    return Status(
        newest_ts=newest,
        oldest_ts=oldest,
        samples=samples,
        live=ctl is not None,
        controller=scalars(ctl.status()) if ctl is not None else None,
        pending_actions=pending_count(state),
        open_read=bool(request.app.state.auth.open_read),
    )
