"""Reports straight from a run's DuckDB file: facility power and PUE over time, the GPU temperature heat map by
rack (coloured by headroom to each GPU's slowdown temperature), the incident timelines (loop off and loop on
apart, on one time axis) and the action log (when the loop recorded any), and optional summary and loop-off vs
loop-on comparison tables. Every time is shown as stored: UTC clock for epoch seconds, ``h:mm:ss`` for
simulation seconds.

``sim_report(db, out_html)`` is what ``twinloop sim`` calls; ``loop_sections(con)`` and
``telemetry_sections(store)`` are the parts ``twinloop run`` reuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from twinloop.report.charts import SEVERITY_COLORS, TimelineItem, fmt_si
from twinloop.report.html import Section, comparison_table, heatmap, table, timeline, timeseries_chart, write_report
from twinloop.report.levels import TEMP_HEADROOM_LEVELS, default_slowdown_temp_c, slowdown_temps_c
from twinloop.report.timebase import EPOCH_MIN_S, record_offset_s
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_GPU_TEMP,
    TWINLOOP_FI_CONVERSION_LOSS,
    TWINLOOP_FI_COOLING_POWER,
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_IT_POWER,
    TWINLOOP_FI_PUE,
)
from twinloop.telemetry.store import queries as store_queries
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.store.loop_records import read_loop_table as read_table

#: Most time buckets per chart.
MAX_POINTS = 600
SITE_POWER_FIELDS = {
    "facility": TWINLOOP_FI_FACILITY_POWER,
    "IT": TWINLOOP_FI_IT_POWER,
    "cooling": TWINLOOP_FI_COOLING_POWER,
    "losses": TWINLOOP_FI_CONVERSION_LOSS,
}
PUE_FIELD = TWINLOOP_FI_PUE
GPU_TEMP = DCGM_FI_DEV_GPU_TEMP


def _grid(t0: float, t1: float, points: int = MAX_POINTS) -> float:
    return max((t1 - t0) / points, 1e-3)


def _site_series(store: DuckDBStore, field: str, t0: float, every_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(bucket ts, mean) summed over site-level entities (ids without '/')."""
    if store.field_id(field) is None:
        return np.zeros(0), np.zeros(0)
    tab = store.downsample(field, every_s)
    ents = np.asarray(tab.column("entity").to_pylist(), dtype=object)
    site = np.array(["/" not in e for e in ents], dtype=bool)
    ts = tab.column("ts").to_numpy()[site]
    mean = tab.column("mean").to_numpy()[site]
    uniq, idx = np.unique(ts, return_inverse=True)
    return uniq, np.bincount(idx, weights=mean, minlength=uniq.size)


def _rack_grid(rows: store_queries.RackBuckets, t0: float, every_s: float) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(bucket ts, rack ids, racks × buckets) from per-(rack, bucket) rows."""
    racks, r_idx = np.unique(rows.rack, return_inverse=True)
    buckets, b_idx = np.unique(rows.bucket, return_inverse=True)
    grid = np.full((racks.size, buckets.size), np.nan)
    grid[r_idx, b_idx] = rows.value
    return t0 + buckets * every_s, [str(r) for r in racks], grid


def rack_headroom(store: DuckDBStore, t0: float, every_s: float) -> tuple[np.ndarray, list[str], np.ndarray, int]:
    """Least headroom to slowdown temperature among each rack's GPUs per time bucket (°C; each GPU against its
    own catalog slowdown temperature): (bucket ts, rack ids, racks × buckets, GPUs of unknown model).
    """
    fid = store.field_id(GPU_TEMP)
    if fid is None:
        return np.zeros(0), [], np.zeros((0, 0)), 0
    labels = store.labels()
    ents = store_queries.gpu_entities(store.con)
    if not ents:
        return np.zeros(0), [], np.zeros((0, 0)), 0
    slow, unknown = slowdown_temps_c(labels, [e for _, e in ents])
    rows = store_queries.rack_min_offset_buckets(store.con, fid, t0, every_s, [i for i, _ in ents], slow)
    if not rows.bucket.size:
        return np.zeros(0), [], np.zeros((0, 0)), unknown
    ts, racks, grid = _rack_grid(rows, t0, every_s)
    return ts, racks, grid, unknown


def rack_temperature(store: DuckDBStore, t0: float, every_s: float) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Max GPU temperature per rack and time bucket: (bucket ts, rack ids, racks × buckets)."""
    fid = store.field_id(GPU_TEMP)
    if fid is None:
        return np.zeros(0), [], np.zeros((0, 0))
    rows = store_queries.rack_max_buckets(store.con, fid, t0, every_s)
    if not rows.bucket.size:
        return np.zeros(0), [], np.zeros((0, 0))
    return _rack_grid(rows, t0, every_s)


def telemetry_sections(store: DuckDBStore) -> list[Section]:
    """Facility power, PUE and the rack temperature heat map from a store (empty list for an empty store)."""
    t0, t1 = store.time_range()
    if t0 is None or t1 is None:
        return []
    every = _grid(t0, t1)
    out = []
    power = {name: _site_series(store, f, t0, every) for name, f in SITE_POWER_FIELDS.items()}
    power = {k: v for k, v in power.items() if v[0].size}
    if power:
        ts = next(iter(power.values()))[0]
        series = {k: v[1] if v[0].size == ts.size else np.interp(ts, v[0], v[1]) for k, v in power.items()}
        out.append(
            Section(
                "Facility power",
                timeseries_chart("Facility power (IT + cooling + losses)", ts, series, "W"),
                note=f"Bucket means over {every:.3g} s.",
            )
        )
    pue_ts, pue = _site_series(store, PUE_FIELD, t0, every)
    if pue_ts.size:
        out.append(
            Section(
                "PUE",
                timeseries_chart("PUE = facility / IT power", pue_ts, {"PUE": pue}),
            )
        )
    ts, racks, grid = rack_temperature(store, t0, every)
    h_ts, h_racks, headroom, unknown = rack_headroom(store, t0, every)
    if racks and h_racks == racks and h_ts.size == ts.size:
        assumed = (
            f" {unknown} GPU(s) of unknown model are judged against {fmt_si(default_slowdown_temp_c(), '°C')}."
            if unknown
            else ""
        )
        out.append(
            Section(
                "GPU temperature by rack",
                heatmap(
                    "Hottest GPU per rack (°C), coloured by headroom to slowdown",
                    ts,
                    racks,
                    grid,
                    "°C",
                    TEMP_HEADROOM_LEVELS,
                    levels_of=headroom,
                    levels_label="headroom",
                ),
                note="Each cell: the maximum GPU temperature in the rack over the bucket; its colour: the least "
                "headroom of any GPU in the rack to that GPU's own slowdown temperature (GPU catalog)." + assumed,
            )
        )
    return out


def _shift(ts: Sequence[float], t0: float | None) -> float:
    return record_offset_s(ts, t0)


def time_text(ts: float) -> str:
    """One timestamp as the charts show it: UTC date and time for epoch seconds, ``h:mm:ss`` for simulation."""
    if ts >= EPOCH_MIN_S:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
    s = round(ts)
    return f"{'-' if s < 0 else ''}{abs(s) // 3600}:{abs(s) % 3600 // 60:02d}:{abs(s) % 60:02d}"


def loop_sections(
    con: duckdb.DuckDBPyConnection, run: str | None = None, t0_s: float | None = None, t1_s: float | None = None
) -> list[Section]:
    """One incident timeline per run (loop off and loop on apart, on one shared time axis) and the action log
    from the loop's records (empty list when there are none). ``t0_s``/``t1_s``: the telemetry's time range.
    """
    incidents = read_table(con, "loop_incidents", run)
    actions = read_table(con, "loop_actions", run)
    out = []
    if incidents:
        shift = _shift([float(i["start_ts"]) for i in incidents], t0_s)
        items = [
            TimelineItem(
                lane=f"{i['event_class']}",
                start_s=float(i["start_ts"]) + shift,
                end_s=float(i["end_ts"]) + shift,
                label=f"#{i['incident_id']} {i['event_class']} at {i['root']} ({i['severity']}, {i['status']})",
                color=SEVERITY_COLORS.get(str(i["severity"]), "#64748b"),
            )
            for i in incidents
        ]
        lo = min([i.start_s for i in items] + ([t0_s] if t0_s is not None else []))
        hi = max([i.end_s for i in items] + ([t1_s] if t1_s is not None else []))
        runs = list(dict.fromkeys(str(i["run"]) for i in incidents))
        body = "".join(
            timeline(
                f"{r}: incidents by cause (colour: severity)",
                [it for it, i in zip(items, incidents, strict=True) if str(i["run"]) == r],
                lo,
                hi,
            )
            for r in runs
        )
        out.append(
            Section(
                "Incident timeline",
                body,
                note=f"{len(incidents)} incident(s) in {len(runs)} run(s), one chart per run on the same time axis; "
                "hover a bar for its root and severity.",
            )
        )
    if actions:
        shift = _shift([float(a["ts"]) for a in actions], t0_s)
        rows = [
            [
                a["run"],
                int(a["action_id"]),
                time_text(float(a["ts"]) + shift),
                a["kind"],
                a["target"],
                None if a["value"] is None else float(a["value"]),
                a["status"],
                a["detail"] or "",
            ]
            for a in actions
        ]
        headers = ["run", "id", "time", "kind", "target", "value", "status", "detail"]
        out.append(Section("Action log", table(headers, rows)))
    return out


def summary_section(summary: Mapping[str, Any]) -> Section:
    """A table of a ``twinloop sim`` summary's energy, PUE and per-job figures."""
    e = summary.get("energy", {})
    rows: list[list[object]] = [
        ["facility energy (kWh)", e.get("facility_kwh")],
        ["IT energy (kWh)", e.get("it_kwh")],
        ["cooling energy (kWh)", e.get("cooling_kwh")],
        ["conversion losses (kWh)", e.get("conversion_loss_kwh")],
        ["PUE", summary.get("pue")],
        ["peak facility power (W)", summary.get("peak_facility_power_w")],
        ["PSU overloads", summary.get("psu_overloads")],
    ]
    jobs = [
        [
            j.get("name"),
            j.get("kind"),
            j.get("gpus"),
            j.get("ettr"),
            j.get("goodput_tokens_per_s"),
            j.get("interruptions"),
        ]
        for j in summary.get("jobs", [])
    ]
    body = table(["quantity", "value"], rows)
    if jobs:
        body += table(["job", "kind", "GPUs", "ETTR", "goodput tokens/s", "interruptions"], jobs, "Jobs")
    return Section("Summary", body)


def sim_report(
    db_path: str | Path,
    out_html: str | Path,
    title: str = "twinloop simulation report",
    summary: Mapping[str, Any] | None = None,
    comparison: tuple[Mapping[str, float | None], Mapping[str, float | None]] | None = None,
    higher_is_better: Sequence[str] = ("goodput_tokens_per_s", "ettr"),
) -> Path:
    """Write one self-contained HTML report from a run's DuckDB file.

    Args:
        db_path: the run's ``telemetry.duckdb``.
        out_html: where to write the report.
        title: the report's title.
        summary: the ``twinloop sim`` summary document, shown as tables when given.
        comparison: (loop-off, loop-on) metric dicts for the comparison table, when the run had both.
        higher_is_better: comparison metrics where larger is better (others: lower is better).

    Raises:
        FileNotFoundError: ``db_path`` does not exist.
    """
    with DuckDBStore(db_path, read_only=True) as store:
        t0, t1 = store.time_range()
        sections: list[Section] = []
        if comparison is not None:
            sections.append(Section("Loop off vs loop on", comparison_table(*comparison, higher_is_better)))
        if summary is not None:
            sections.append(summary_section(summary))
        sections += telemetry_sections(store)
        sections += loop_sections(store.con, None, t0, t1)
    span = f"{(t1 - t0) / 60:.1f} min of telemetry" if t0 is not None and t1 is not None else "no telemetry"
    return write_report(out_html, title, sections, subtitle=f"{Path(db_path).name}: {span}")
