"""``GET /api/live``: a server-sent-event stream that says when there is new data or a new pending action.

Every ``live_interval_s`` the stream checks the store's newest sample and sample count and the attached loop's
status; when any of them changed it sends an ``update`` event (JSON: ``newest_ts``, ``samples``, ``pending``,
``controller``), otherwise a comment line to keep the connection open. Pages then re-fetch what they show
through the JSON API. ``max_events`` ends the stream after that many updates (0 = until the client leaves).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from twinloop.telemetry.store.queries import sample_count
from twinloop.web.api.deps import WebState, scalars, web_state
from twinloop.web.auth import require_read
from twinloop.web.db import StoreUnavailableError
from twinloop.web.models import error_responses

router = APIRouter(
    prefix="/api", tags=["live"], dependencies=[Depends(require_read)], responses=error_responses(401, 403)
)


def snapshot(state: WebState) -> dict[str, Any]:
    """What the live stream compares between ticks."""
    newest, samples, store = None, 0, "ok"
    try:
        cur = state.db.cursor()
    except StoreUnavailableError as exc:
        cur, store = None, str(exc)
    if cur is not None:
        try:
            _, newest = state.db.time_range(cur)
            samples = sample_count(cur)
        finally:
            state.db.release(cur)
    ctl = state.controller
    return {
        # an older store may hold a non-finite timestamp: JSON has no NaN
        "newest_ts": newest if newest is None or math.isfinite(newest) else None,
        "samples": samples,
        "store": store,
        "pending": len(ctl.pending_actions()) if ctl is not None else 0,
        "controller": scalars(ctl.status()) if ctl is not None else None,
    }


@router.get(
    "/live",
    summary="Server-sent events: new data, new pending actions",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
)
async def live(
    request: Request,
    max_events: Annotated[int, Query(ge=0, le=100_000, description="stop after this many updates (0 = never)")] = 0,
    state: WebState = Depends(web_state),
) -> StreamingResponse:
    """Stream ``update`` events while the client stays connected."""

    async def events() -> AsyncIterator[str]:
        last: dict[str, Any] | None = None
        sent = 0
        yield "retry: 3000\n\n"
        while True:
            doc = await run_in_threadpool(snapshot, state)
            if doc != last:
                last = doc
                sent += 1
                yield f"event: update\ndata: {json.dumps(doc)}\n\n"
                if max_events and sent >= max_events:
                    return
            else:
                yield ": idle\n\n"
            if await request.is_disconnected():
                return
            await asyncio.sleep(state.live_interval_s)

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
