"""The floor map and drill-down: ``/api/floor``, ``/api/rack``, ``/api/gpu``, ``/api/series``."""

from __future__ import annotations

import math
from typing import Annotated, Any

import duckdb
import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query

from twinloop.hardware.power import CLOCK_EVENT_GPU_IDLE
from twinloop.report.levels import POWER_FRACTION_LEVELS, TEMP_HEADROOM_LEVELS, Level, default_slowdown_temp_c
from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.web.api.deps import WebState, cursor, store_cached, web_state
from twinloop.web.auth import require_read
from twinloop.web.db import DEPTH
from twinloop.web.models import (
    ColorLevel,
    Floor,
    FloorRow,
    GpuHistory,
    GpuNow,
    NodeDetail,
    RackDetail,
    RackHeat,
    ReasonSpan,
    Series,
    Sparkline,
    error_responses,
)
from twinloop.web.params import EntityId, Points, RackId, SinceS, UntilS, time_window
from twinloop.web.queries import (
    CLOCK,
    LIMIT,
    NODE_POWER,
    POWER,
    RACK_INLET,
    RACK_POWER,
    REASONS,
    TEMP,
    Buckets,
    _num,
    as_list,
    buckets,
    gpus_of_rack,
    latest,
    rack_stats,
    reason_names,
)

router = APIRouter(
    prefix="/api", tags=["floor"], dependencies=[Depends(require_read)], responses=error_responses(401, 403, 404)
)

RACK_SPAN_S = 1800.0
GPU_SPAN_S = 6 * 3600.0
FIELD_PATTERN = r"^[A-Z][A-Z0-9_]{0,79}$"


def _level(lv: Level) -> dict[str, Any]:
    def finite(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {"label": lv.label, "min": finite(lv.min), "max": finite(lv.max), "color": lv.fill, "ink": lv.ink}


def _range(values: list[float | None]) -> tuple[float, float] | None:
    finite = [v for v in values if v is not None]
    return (min(finite), max(finite)) if finite else None


@router.get("/floor", response_model=Floor, summary="Rows and racks with GPU temperature and power now")
@store_cached
def floor(state: WebState = Depends(web_state), cur: duckdb.DuckDBPyConnection | None = Depends(cursor)) -> Floor:
    """Every rack, grouped by row, with max/mean GPU temperature, power and throttled GPUs now."""
    levels = {
        "temp_levels": [ColorLevel(**_level(lv)) for lv in TEMP_HEADROOM_LEVELS],
        "power_levels": [ColorLevel(**_level(lv)) for lv in POWER_FRACTION_LEVELS],
        "slowdown_default_c": default_slowdown_temp_c(),
    }
    if cur is None:
        return Floor(ts=None, rows=[], temp_range_c=None, power_range_w=None, **levels)
    stats = rack_stats(cur, state.db, state.now_window_s)
    rows: dict[str, list[RackHeat]] = {}
    for r in stats.heat:
        rows.setdefault(r.row, []).append(r)
    return Floor(
        ts=state.db.time_range(cur)[1],
        rows=[FloorRow(row=k, racks=v) for k, v in rows.items()],
        temp_range_c=_range([r.max_gpu_temp_c for r in stats.heat]),
        power_range_w=_range([r.power_w for r in stats.heat]),
        slowdown_assumed_gpus=stats.slowdown_assumed_gpus,
        **levels,
    )


def _spark(b: Buckets, eid: int) -> Sparkline:
    n = b.ts.size
    return Sparkline(
        ts=b.ts.tolist(),
        power_w=as_list(b.values.get((eid, POWER)), n),
        temp_c=as_list(b.values.get((eid, TEMP)), n),
        clock_mhz=as_list(b.values.get((eid, CLOCK)), n),
    )


@router.get("/rack", response_model=RackDetail, summary="A rack's nodes and GPUs with sparklines")
@store_cached
def rack(
    id: RackId,
    since_s: SinceS = None,
    until_s: UntilS = None,
    points: Points = 60,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> RackDetail:
    """Power and inlet temperature of the rack; per node and GPU the values now and sparklines of power,
    temperature and SM clock (bucket means over the last 30 min by default).
    """
    if cur is None:
        raise HTTPException(404, f"no rack {id!r} (no telemetry store)")
    db = state.db
    topo = db.topology(cur)
    nodes, gpus = gpus_of_rack(topo, id)
    if not gpus and not nodes:
        raise HTTPException(404, f"no rack {id!r}")
    oldest, newest = db.time_range(cur)
    window = time_window(since_s, until_s, newest, oldest, RACK_SPAN_S)
    fields = db.field_ids(cur)
    rack_eid = topo.by_name.get(id)
    own = [rack_eid] if rack_eid is not None else []
    now = latest(
        cur,
        fields,
        (POWER, TEMP, CLOCK, REASONS, NODE_POWER, RACK_POWER, RACK_INLET),
        (newest or 0.0) - state.now_window_s,
        [*own, *nodes, *gpus],
    )
    size = len(topo.names)
    col = {k: v.lookup(size) for k, v in now.items()}
    spec = [(POWER, "avg"), (TEMP, "avg"), (CLOCK, "avg")]
    b = buckets(cur, fields, gpus, spec, *window, points) if window else Buckets(np.zeros(0), None, {})
    gpu_rows = {}
    for g in gpus:
        mask = _num(col[REASONS][g])
        m = None if mask is None else int(mask)
        gpu_rows[g] = GpuNow(
            gpu=topo.names[g],
            power_w=_num(col[POWER][g]),
            temp_c=_num(col[TEMP][g]),
            clock_mhz=_num(col[CLOCK][g]),
            clock_event_reasons=m,
            reasons=reason_names(m),
            spark=_spark(b, g),
        )
    node_rows = []
    node_names = [topo.names[n] for n in nodes]
    orphans = [g for g in gpus if topo.names[g].rsplit("/", 1)[0] not in node_names]
    for n in nodes:
        mine = [gpu_rows[g] for g in gpus if topo.names[g].rsplit("/", 1)[0] == topo.names[n]]
        power = _num(col[NODE_POWER][n])
        if power is None and any(x.power_w is not None for x in mine):
            power = sum(x.power_w or 0.0 for x in mine)
        node_rows.append(NodeDetail(node=topo.names[n], power_w=power, gpus=mine))
    for parent in sorted({topo.names[g].rsplit("/", 1)[0] for g in orphans}):
        mine = [gpu_rows[g] for g in orphans if topo.names[g].rsplit("/", 1)[0] == parent]
        node_rows.append(NodeDetail(node=parent, power_w=sum(x.power_w or 0.0 for x in mine), gpus=mine))
    rack_power = _num(col[RACK_POWER][rack_eid]) if rack_eid is not None else None
    if rack_power is None:
        rack_power = sum(x.power_w or 0.0 for x in gpu_rows.values()) if gpu_rows else None
    return RackDetail(
        rack=id,
        ts=newest,
        power_w=rack_power,
        inlet_temp_c=_num(col[RACK_INLET][rack_eid]) if rack_eid is not None else None,
        since_ts=window[0] if window else None,
        until_ts=window[1] if window else None,
        nodes=node_rows,
    )


def _reason_spans(ts: list[float], width: float, masks: list[int | None]) -> list[ReasonSpan]:
    """Merge consecutive buckets (empty buckets are already dropped) with the same non-idle reasons."""
    spans: list[ReasonSpan] = []
    prev_bits = 0
    for t, m in zip(ts, masks, strict=True):
        bits = (m or 0) & ~CLOCK_EVENT_GPU_IDLE
        if bits and spans and prev_bits == bits:
            spans[-1] = spans[-1].model_copy(update={"end_ts": t + width})
        elif bits:
            spans.append(ReasonSpan(start_ts=t, end_ts=t + width, mask=bits, reasons=reason_names(bits)))
        prev_bits = bits
    return spans


@router.get("/gpu", response_model=GpuHistory, summary="A GPU's history with clock-event reasons")
@store_cached
def gpu(
    id: EntityId,
    since_s: SinceS = None,
    until_s: UntilS = None,
    points: Points = 300,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> GpuHistory:
    """Bucket means of power, temperature, SM clock and power limit, the OR of clock-event reasons per bucket,
    and the stretches of time each set of reasons held (last 6 h by default).
    """
    if cur is None:
        raise HTTPException(404, f"no GPU {id!r} (no telemetry store)")
    db = state.db
    topo = db.topology(cur)
    eid = topo.by_name.get(id)
    if eid is None or topo.level[eid] != DEPTH["gpu"]:
        raise HTTPException(404, f"no GPU {id!r}")
    oldest, newest = db.time_range(cur)
    window = time_window(since_s, until_s, newest, oldest, GPU_SPAN_S)
    fields = db.field_ids(cur)
    spec = [(POWER, "avg"), (TEMP, "avg"), (CLOCK, "avg"), (LIMIT, "avg"), (REASONS, "bit_or")]
    b = buckets(cur, fields, [eid], spec, *window, points) if window else Buckets(np.zeros(0), None, {})
    n = b.ts.size
    masks = [None if v is None else int(v) for v in as_list(b.values.get((eid, REASONS)), n)]
    now = latest(cur, fields, (POWER, TEMP, CLOCK, REASONS), (newest or 0.0) - state.now_window_s, [eid])
    size = len(topo.names)
    col = {k: v.lookup(size)[eid] for k, v in now.items()}
    mask_now = _num(col[REASONS])
    m_now = None if mask_now is None else int(mask_now)
    rack_idx = int(topo.rack[eid])
    return GpuHistory(
        gpu=id,
        rack=topo.racks[rack_idx] if rack_idx >= 0 else None,
        bucket_s=b.bucket_s,
        ts=b.ts.tolist(),
        power_w=as_list(b.values.get((eid, POWER)), n),
        temp_c=as_list(b.values.get((eid, TEMP)), n),
        clock_mhz=as_list(b.values.get((eid, CLOCK)), n),
        power_limit_w=as_list(b.values.get((eid, LIMIT)), n),
        slowdown_temp_c=_num(topo.slowdown_c[eid]) or default_slowdown_temp_c(),
        slowdown_assumed=bool(np.isnan(topo.slowdown_c[eid])),
        clock_event_reasons=masks,
        reason_spans=_reason_spans(b.ts.tolist(), b.bucket_s or 1.0, masks),
        latest=GpuNow(
            gpu=id,
            power_w=_num(col[POWER]),
            temp_c=_num(col[TEMP]),
            clock_mhz=_num(col[CLOCK]),
            clock_event_reasons=m_now,
            reasons=reason_names(m_now),
            spark=_spark(b, eid),
        ),
    )


@router.get("/series", response_model=Series, summary="One field of one entity over time")
@store_cached
def series(
    entity: EntityId,
    field: Annotated[str, Query(pattern=FIELD_PATTERN, description="field name, e.g. TWINLOOP_FI_PUE")],
    since_s: SinceS = None,
    until_s: UntilS = None,
    points: Points = 300,
    state: WebState = Depends(web_state),
    cur: duckdb.DuckDBPyConnection | None = Depends(cursor),
) -> Series:
    """Bucket mean, min and max of ``field`` on ``entity`` (the whole stored range by default)."""
    name = canonical_field(field) or field
    if cur is None:
        raise HTTPException(404, "no telemetry store")
    db = state.db
    topo = db.topology(cur)
    fields = db.field_ids(cur)
    eid = topo.by_name.get(entity)
    if eid is None:
        raise HTTPException(404, f"no entity {entity!r}")
    if name not in fields:
        raise HTTPException(404, f"no field {field!r} in the store")
    oldest, newest = db.time_range(cur)
    window = time_window(since_s, until_s, newest, oldest, float("inf"))
    spec = [(name, "avg"), (name, "min"), (name, "max")]
    b = Buckets(np.zeros(0), None, {})
    if window:
        # three aggregates of one field: ask for each under its own alias
        b = buckets(
            cur,
            {f"{name}#{a}": fields[name] for _, a in spec},
            [eid],
            [(f"{name}#{a}", a) for _, a in spec],
            *window,
            points,
        )
    n = b.ts.size
    spec_unit = FIELD_BY_NAME.get(name)
    return Series(
        entity=entity,
        field=name,
        unit=spec_unit.unit if spec_unit else "",
        bucket_s=b.bucket_s,
        ts=b.ts.tolist(),
        mean=as_list(b.values.get((eid, f"{name}#avg")), n),
        min=as_list(b.values.get((eid, f"{name}#min")), n),
        max=as_list(b.values.get((eid, f"{name}#max")), n),
    )
