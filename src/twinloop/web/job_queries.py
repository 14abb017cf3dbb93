"""Job queries: lifecycle phases, step time, throughput, goodput, checkpoints and restarts from the job fields
(``<site>/jobs/<name>`` entities), and a job's power profile from the GPUs labelled with it.

``tokens_per_s`` is the mean of the reported throughput over the job's last ``RECENT_S`` seconds (or four
step times, when longer): the twin reports a step's tokens in the tick the step completes (zero in between),
so the newest sample alone reads 0 most of the time.

Goodput here is the mean reported throughput since the job first left the queue (zero while it waits,
ramps up or restarts). Work lost to a restart (iterations since the last checkpoint) is not visible in
telemetry, so this is an upper bound on the twin's own goodput (``twinloop sim`` reports that one).
"""

from __future__ import annotations

import duckdb
import numpy as np

from twinloop.telemetry.fields import (
    TWINLOOP_FI_JOB_GPUS,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
)
from twinloop.telemetry.store import queries as store_queries
from twinloop.web.db import JOB_LEVEL, TelemetryDB
from twinloop.web.models import JobDetail, JobSummary, PhaseSpan
from twinloop.web.queries import POWER, _num, as_list, buckets, latest

PHASE_FIELD = TWINLOOP_FI_JOB_PHASE
STEP_FIELD = TWINLOOP_FI_JOB_STEP_TIME
TPS_FIELD = TWINLOOP_FI_JOB_TOKENS_PER_S
GPUS_FIELD = TWINLOOP_FI_JOB_GPUS

#: Lifecycle phase codes as the twin writes them (``twinloop.twin.jobs.Phase``; a test checks they agree).
PHASE_NAMES: dict[int, str] = {
    0: "queued",
    1: "ramp_up",
    2: "launch",
    3: "sustained",
    4: "checkpoint",
    5: "hung",
    6: "cooldown",
    7: "done",
}
QUEUED, SUSTAINED, CHECKPOINT = 0, 3, 4
#: Window of the "now" throughput, s (at least four step times).
RECENT_S = 60.0


def phase_name(code: float | None) -> str | None:
    """The phase name of a stored code (``phase_<n>`` for unknown codes)."""
    if code is None or not np.isfinite(code):
        return None
    return PHASE_NAMES.get(int(code), f"phase_{int(code)}")


def _phase_changes(
    cur: duckdb.DuckDBPyConnection, fid: int, jobs: list[int]
) -> dict[int, list[tuple[float, float, float | None]]]:
    """Per job: (ts, phase, previous phase) at every change of phase, plus the job's last sample time."""
    out: dict[int, list[tuple[float, float, float | None]]] = {j: [] for j in jobs}
    for eid, ts, value, prev in store_queries.value_changes(cur, fid, jobs):
        out[eid].append((ts, value, prev))
    return out


def job_summaries(cur: duckdb.DuckDBPyConnection, db: TelemetryDB) -> list[JobSummary]:
    """Every job in the store with its lifecycle and throughput over the whole stored range."""
    topo = db.topology(cur)
    fields = db.field_ids(cur)
    oldest, newest = db.time_range(cur)
    jobs = sorted(topo.ids_at(JOB_LEVEL).tolist(), key=lambda i: topo.names[i])
    if not jobs or oldest is None or newest is None:
        return []
    size = len(topo.names)
    now = latest(cur, fields, (PHASE_FIELD, STEP_FIELD, TPS_FIELD, GPUS_FIELD), oldest, jobs)
    cols = {k: now[k].lookup(size) for k in now}
    last_ts = store_queries.last_sample_ts(cur, jobs)
    changes = _phase_changes(cur, fields[PHASE_FIELD], jobs) if PHASE_FIELD in fields else {}
    stats: dict[int, tuple[float | None, float | None]] = {}
    if TPS_FIELD in fields or STEP_FIELD in fields:
        stats = store_queries.run_means(
            cur, jobs, fields.get(PHASE_FIELD), QUEUED, fields.get(TPS_FIELD, -1), fields.get(STEP_FIELD, -1)
        )
    windows = {}
    for j in jobs:
        step = _num(cols[STEP_FIELD][j]) or 0.0
        end = float(last_ts.get(j, newest))
        windows[j] = (end - max(RECENT_S, 4.0 * step), end)
    recent = store_queries.mean_in_windows(cur, fields[TPS_FIELD], windows) if TPS_FIELD in fields else {}
    out = []
    for j in jobs:
        name = topo.names[j]
        ch = changes.get(j, [])
        end = float(last_ts.get(j, newest))
        spans = [
            PhaseSpan(phase=phase_name(v) or "", start_ts=t, end_ts=ch[k + 1][0] if k + 1 < len(ch) else end)
            for k, (t, v, _) in enumerate(ch)
        ]
        started = [s for s in spans if s.phase != PHASE_NAMES[QUEUED]]
        wall = end - started[0].start_ts if started else 0.0
        sustained = sum(s.end_ts - s.start_ts for s in spans if s.phase == PHASE_NAMES[SUSTAINED])
        goodput, mean_step = stats.get(j, (None, None))
        gpus = _num(cols[GPUS_FIELD][j])
        out.append(
            JobSummary(
                job=name,
                name=name.rsplit("/", 1)[-1],
                phase=phase_name(cols[PHASE_FIELD][j]),
                gpus=None if gpus is None else int(gpus),
                step_time_s=_num(cols[STEP_FIELD][j]),
                mean_step_time_s=_num(mean_step),
                tokens_per_s=_num(recent.get(j)),
                goodput_tokens_per_s=_num(goodput),
                sustained_fraction=sustained / wall if wall > 0 else None,
                checkpoints=sum(1 for _, v, _ in ch if v == CHECKPOINT),
                restarts=sum(1 for _, v, p in ch if v == QUEUED and p is not None and p != QUEUED),
                phases=spans,
            )
        )
    return out


def job_detail(
    cur: duckdb.DuckDBPyConnection, db: TelemetryDB, job: str, since_s: float, until_s: float, points: int
) -> JobDetail | None:
    """One job's summary and its bucketed series; ``None`` when the store has no such job."""
    topo = db.topology(cur)
    summary = next((s for s in job_summaries(cur, db) if s.job == job), None)
    if summary is None:
        return None
    jid = topo.by_name[job]
    gpus = [i for i, j in enumerate(topo.job_of) if j == summary.name and topo.level[i] == 5]
    specs = [(STEP_FIELD, "avg"), (TPS_FIELD, "avg"), (PHASE_FIELD, "max"), (POWER, "avg")]
    b = buckets(cur, db.field_ids(cur), [jid, *gpus], specs, since_s, until_s, points)
    n = b.ts.size
    power = None
    if gpus and n:
        stack = np.vstack([b.values.get((g, POWER), np.full(n, np.nan)) for g in gpus])
        power = np.where(np.isfinite(stack).any(axis=0), np.nansum(stack, axis=0), np.nan)
    return JobDetail(
        summary=summary,
        bucket_s=b.bucket_s,
        ts=b.ts.tolist(),
        step_time_s=as_list(b.values.get((jid, STEP_FIELD)), n),
        tokens_per_s=as_list(b.values.get((jid, TPS_FIELD)), n),
        phase=as_list(b.values.get((jid, PHASE_FIELD)), n),
        power_w=as_list(power, n) if power is not None else [],
        power_gpus=len(gpus),
    )
