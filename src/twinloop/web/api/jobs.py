"""``GET /api/jobs`` (every job's lifecycle and throughput) and ``GET /api/job`` (one job's time series)."""

from __future__ import annotations

import duckdb
from fastapi import APIRouter, Depends, HTTPException

from twinloop.web.api.deps import WebState, cursor, store_cached, web_state
from twinloop.web.auth import require_read
from twinloop.web.job_queries import job_detail, job_summaries
from twinloop.web.models import JobDetail, JobSummary, error_responses
from twinloop.web.params import EntityId, Points, SinceS, UntilS, time_window

router = APIRouter(
    prefix="/api", tags=["jobs"], dependencies=[Depends(require_read)], responses=error_responses(401, 403, 404)
)


@router.get("/jobs", response_model=list[JobSummary], summary="Jobs: phase, step time, goodput, checkpoints")
@store_cached
def jobs(
    state: WebState = Depends(web_state), cur: duckdb.DuckDBPyConnection | None = Depends(cursor)
) -> list[JobSummary]:
    """Every job with its lifecycle phases, step time, throughput, goodput, checkpoints and restarts."""
    return [] if cur is None else job_summaries(cur, state.db)


@router.get("/job", response_model=JobDetail, summary="One job's step time, throughput, phase and power")
@store_cached
def job(
    id: EntityId,
    since_s: SinceS = None,
    until_s: UntilS = None,
    points: Points = 300,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> JobDetail:
    """A job's bucketed series over the whole stored range by default; power sums its labelled GPUs."""
    if cur is None:
        raise HTTPException(404, f"no job {id!r} (no telemetry store)")
    oldest, newest = state.db.time_range(cur)
    window = time_window(since_s, until_s, newest, oldest, float("inf"))
    detail = job_detail(cur, state.db, id, *window, points) if window else None
    if detail is None:
        raise HTTPException(404, f"no job {id!r}")
    return detail
