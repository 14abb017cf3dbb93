"""Per-job charts of a report: each job's step time (and throughput, where it reports one) over time, with the
incidents on the job shaded and the actions on it marked.

A job is a ``<site>/jobs/<job id>`` entity with ``TWINLOOP_FI_JOB_STEP_TIME`` or ``TWINLOOP_FI_JOB_TOKENS_PER_S``
rows: the twin writes them for its jobs, and ``twinloop watch --job-heartbeats`` for a live job from the steps it
reports (:mod:`twinloop.ops.live.progress_rows`). So "the job slowed at 14:02" reads off the same time axis as the
GPUs' telemetry and the loop's records. An incident is on a job when it is rooted at the job or (a live watcher's
records) counts the job among its entities; an action is on it when it targets the job or answers one of its
incidents.

Where the store knows which GPUs a live job ran on (a watcher's placement spans, ``loop_job_gpus``), the job's
section also charts its GPUs' SM clock and power, the mean and the minimum over the GPUs it held at each time: a
step time that rose while the clocks held points away from the GPUs (a co-tenant, a data-loader stall), one that
rose with a clock that fell points at a throttled GPU. A store without placement (a twin's, an older watcher's)
charts the job's own fields only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.report.charts import SEVERITY_COLORS
from twinloop.report.html import Section, timeseries_chart
from twinloop.report.timebase import record_offset_s
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
)
from twinloop.telemetry.store import queries as store_queries
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.store.loop_records import incident_entity_rows, job_gpu_spans, read_loop_table

F64 = NDArray[np.float64]
#: Most jobs charted (jobs with incidents first, then by name); the rest are counted in a note.
MAX_JOBS = 24
#: Most time buckets per chart.
MAX_POINTS = 600
#: The job fields charted: (field, series name, unit).
JOB_SERIES = (
    (TWINLOOP_FI_JOB_STEP_TIME, "step time", "s"),
    (TWINLOOP_FI_JOB_TOKENS_PER_S, "tokens/s", "tokens/s"),
)
#: The job's GPUs' fields charted where its placement is stored: (field, chart name, unit).
GPU_SERIES = (
    (DCGM_FI_DEV_SM_CLOCK, "GPU SM clock", "MHz"),
    (DCGM_FI_DEV_POWER_USAGE, "GPU power", "W"),
)


@dataclass(frozen=True)
class JobChart:
    """What a report charted for one job (the ``--json`` of ``twinloop report``).

    Attributes:
        job: the job's entity id.
        points: per charted field, its buckets with a value.
        incidents: incidents on the job (shaded).
        actions: actions on the job (marked).
        gpus: the GPUs it ran on (stored placement; empty where none is stored).
        gpu_points: per charted GPU field, its buckets with a value over the job's GPUs.
    """

    job: str
    points: dict[str, int]
    incidents: int
    actions: int
    gpus: list[str] = dataclasses.field(default_factory=list)
    gpu_points: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


Rows = tuple[NDArray[np.object_], F64, F64]


def _rows(store: DuckDBStore, field: str, every_s: float) -> Rows:
    """(entity, bucket ts, bucket mean) of ``field`` for every entity (empty where the store has no such field)."""
    if store.field_id(field) is None:
        return np.zeros(0, dtype=object), np.zeros(0), np.zeros(0)
    tab = store.downsample(field, every_s)
    ents = np.asarray(tab.column("entity").to_pylist(), dtype=object)
    return ents, tab.column("ts").to_numpy(), tab.column("mean").to_numpy()


def _series(store: DuckDBStore, field: str, every_s: float) -> dict[str, tuple[F64, F64]]:
    """Per job entity: (bucket ts, bucket mean) of ``field``."""
    ents, ts, mean = _rows(store, field, every_s)
    return {str(e): (ts[ents == e], mean[ents == e]) for e in dict.fromkeys(ents.tolist())}


def _gpu_series(rows: Rows, every_s: float, spans: Sequence[tuple[str, float, float]]) -> tuple[F64, F64, F64]:
    """(bucket ts, mean, minimum) over the GPUs of a job's placement ``spans`` ((GPU, first_ts, last_ts)) of a GPU
    field's ``rows`` (:func:`_rows`): each GPU's bucket mean counts in the buckets its span overlaps.
    """
    empty = np.zeros(0)
    ents, ts, mean = rows
    keep = np.zeros(ts.size, dtype=bool)
    for gpu, first, last in spans:  # per span, vectorized over its rows
        keep |= (ents == gpu) & (ts + every_s > first) & (ts <= last)
    keep &= np.isfinite(mean)
    if not keep.any():
        return empty, empty, empty
    at, inv = np.unique(ts[keep], return_inverse=True)
    vals = mean[keep]
    low = np.full(at.size, np.inf)
    np.minimum.at(low, inv, vals)
    return at, np.bincount(inv, weights=vals) / np.bincount(inv), low


def _on_jobs(
    store: DuckDBStore, jobs: Sequence[str], run: str | None, t0_s: float
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]], float, float]:
    """Per job, its incidents and its actions; and the shifts that put each on the telemetry's time axis."""
    incidents = read_loop_table(store.con, "loop_incidents", run)
    actions = read_loop_table(store.con, "loop_actions", run)
    members = {(r, i): set(json.loads(e)) for r, i, e in incident_entity_rows(store.con, run)}
    wanted = set(jobs)
    inc_of: dict[str, list[dict[str, Any]]] = {j: [] for j in jobs}
    job_of_inc: dict[tuple[str, int], set[str]] = {}
    for inc in incidents:
        key = (str(inc["run"]), int(inc["incident_id"]))
        on = ({str(inc["root"])} | members.get(key, set())) & wanted
        job_of_inc[key] = on
        for j in on:
            inc_of[j].append(inc)
    act_of: dict[str, list[dict[str, Any]]] = {j: [] for j in jobs}
    for act in actions:
        via = job_of_inc.get((str(act["run"]), int(act["incident_id"] if act["incident_id"] is not None else -1)))
        for j in ({str(act["target"])} & wanted) | (via or set()):
            act_of[j].append(act)
    inc_shift = record_offset_s([float(i["start_ts"]) for i in incidents], t0_s)
    act_shift = record_offset_s([float(a["ts"]) for a in actions], t0_s)
    return inc_of, act_of, inc_shift, act_shift


def job_sections(store: DuckDBStore, run: str | None = None) -> tuple[list[Section], list[JobChart]]:
    """One section per job that reports a step time or throughput (see the module docstring), and what each shows.

    Args:
        store: the telemetry store (read).
        run: only this run's incidents and actions (None: every run's).
    """
    t0, t1 = store.time_range()
    if t0 is None or t1 is None:
        return [], []
    every = max((t1 - t0) / MAX_POINTS, 1e-3)
    data = {field: _series(store, field, every) for field, _, _ in JOB_SERIES}
    known = {e for _, e in store_queries.job_entities(store.con)}
    jobs = sorted({j for per_job in data.values() for j in per_job} & known)
    if not jobs:
        return [], []
    inc_of, act_of, inc_shift, act_shift = _on_jobs(store, jobs, run, t0)
    placed: dict[str, list[tuple[str, float, float]]] = {}
    for job, gpu, first, last in job_gpu_spans(store.con, run):
        placed.setdefault(job, []).append((gpu, float(first), float(last)))
    # Each GPU field downsampled once for every job (buckets are absolute: a job's own range would give the same).
    gpu_rows = {field: _rows(store, field, every) for field, _, _ in GPU_SERIES} if placed else {}
    jobs.sort(key=lambda j: (not inc_of[j], j))
    sections, shown = [], []
    for job in jobs[:MAX_JOBS]:
        bands = [
            (float(i["start_ts"]) + inc_shift, max(float(i["end_ts"]), float(i["start_ts"]) + every) + inc_shift,
             f"#{i['incident_id']} {i['event_class']}", SEVERITY_COLORS.get(str(i["severity"]), "#64748b"))
            for i in inc_of[job]
        ]  # fmt: skip
        marks = [(float(a["ts"]) + act_shift, f"{a['kind']} {a['status']}") for a in act_of[job]]
        body, points = "", {}
        for field, name, unit in JOB_SERIES:
            ts, mean = data[field].get(job, (np.zeros(0), np.zeros(0)))
            if not ts.size:
                continue
            points[field] = int(np.isfinite(mean).sum())
            body += timeseries_chart(f"{job}: {name}", ts, {name: mean}, unit, marks, bands)
        gpu_points = {}
        for field_name, name, unit in GPU_SERIES if job in placed else ():
            ts, mean, low = _gpu_series(gpu_rows[field_name], every, placed[job])
            if not ts.size:
                continue
            gpu_points[field_name] = int(ts.size)
            body += timeseries_chart(f"{job}: {name}", ts, {"mean": mean, "min": low}, unit, marks, bands)
        gpus = sorted({g for g, _, _ in placed.get(job, [])})
        note = (
            f"Each point: the mean of the job's values in a bucket of {every:.3g} s (one sample where samples are "
            f"further apart). Shaded: the {len(bands)} incident(s) on the job (colour: severity); dashed lines: the "
            f"{len(marks)} action(s) on it."
        )
        if gpu_points:
            note += (
                f" GPU SM clock and power: the mean and the minimum, per bucket, over the {len(gpus)} GPU(s) the job "
                "ran on then (its stored placement)."
            )
        sections.append(Section(f"Job {job}", body, note=note))
        shown.append(JobChart(job, points, len(bands), len(marks), gpus, gpu_points))
    if len(jobs) > MAX_JOBS:
        left = Section("More jobs", "", note=f"{len(jobs) - MAX_JOBS} more job(s) not charted (`twinloop query`).")
        sections.append(left)
    return sections, shown
