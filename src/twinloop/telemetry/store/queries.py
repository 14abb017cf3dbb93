"""Named read queries over a DuckDB telemetry store's schema, for the web app and the reports.

The store owns its schema (``entities``, ``fields``, ``samples``, ``rollup_1m``; see
:mod:`~twinloop.telemetry.store.duckdb_store`): front ends never write SQL, they call these functions with a
connection (or cursor) of the store and get typed rows or NumPy arrays back. Another backend (Prometheus,
Parquet, a server database) implements the same functions over its own storage. Ids here are the store's own
``entity_id`` / ``field_id`` (from :func:`entity_rows` and :func:`field_ids`); lists of them are written into the
SQL as integer literals, which is safe because they come from the store's tables, never from a request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

__all__ = [
    "TELEMETRY_TABLES",
    "BucketRows",
    "LatestRows",
    "RackBuckets",
    "bucket_aggregates",
    "entity_rows",
    "field_ids",
    "gpu_entities",
    "has_telemetry",
    "job_entities",
    "last_sample_ts",
    "latest_values",
    "mean_in_windows",
    "rack_max_buckets",
    "rack_min_offset_buckets",
    "registry_sizes",
    "run_means",
    "sample_count",
    "sample_time_range",
    "table_names",
    "value_changes",
    "version_key",
]

Con = duckdb.DuckDBPyConnection
#: Tables a store must hold to count as a telemetry store.
TELEMETRY_TABLES = frozenset({"entities", "fields", "samples"})
#: Aggregates :func:`bucket_aggregates` computes.
BUCKET_AGGS = ("avg", "min", "max", "bit_or")


def _ids(values: Sequence[int] | NDArray[np.int64]) -> str:
    """An SQL list of integers (ids come from the store's own tables, never from a request)."""
    return ", ".join(str(int(v)) for v in values) or "NULL"


# --- schema and registries -------------------------------------------------------------------------------------


def table_names(con: Con) -> set[str]:
    """Names of the tables in the store (telemetry and loop records)."""
    return {str(r[0]) for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def has_telemetry(con: Con) -> bool:
    """Whether the store holds the telemetry tables (a store nothing was written to yet does not)."""
    return table_names(con) >= TELEMETRY_TABLES


def version_key(con: Con) -> tuple[object, ...] | None:
    """What changes whenever the store's data does: sample count and newest time, and every loop table's rows."""
    tables = table_names(con)
    parts = ["(SELECT count(*) FROM samples)", "(SELECT max(ts) FROM samples)"]
    if "rollup_1m" in tables:  # the rollups make the same answer cheaper to get
        parts = ["(SELECT count(*) FROM rollup_1m)", "(SELECT max(last_ts) FROM rollup_1m)"]
    # loop records are replaced by delete + insert: a new rowid tells a changed row even at the same count
    parts += [f"(SELECT count(*) || ':' || max(rowid) FROM {t})" for t in sorted(tables) if t.startswith("loop_")]
    row = con.execute("SELECT " + ", ".join(parts)).fetchone()
    return tuple(row) if row else None


def registry_sizes(con: Con) -> tuple[int, int]:
    """(entities, fields) registered: grows whenever a new entity or field is stored."""
    row = con.execute("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM fields)").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def entity_rows(con: Con) -> list[tuple[int, str, str | None]]:
    """Every entity: ``(entity_id, entity, labels_json)``."""
    rows = con.execute("SELECT entity_id, entity, labels FROM entities").fetchall()
    return [(int(i), str(e), lab) for i, e, lab in rows]


def field_ids(con: Con) -> dict[str, int]:
    """Field name → stored ``field_id``."""
    return {str(n): int(i) for n, i in con.execute("SELECT name, field_id FROM fields").fetchall()}


def gpu_entities(con: Con) -> list[tuple[int, str]]:
    """``(entity_id, entity)`` of every GPU (``site/row/rack/node/gpu``; job entities excluded)."""
    rows = con.execute(
        "SELECT entity_id, entity FROM entities WHERE entity NOT LIKE '%/jobs/%' "
        "AND regexp_matches(entity, '^[^/]+/[^/]+/[^/]+/[^/]+/[^/]+$')"
    ).fetchall()
    return [(int(i), str(e)) for i, e in rows]


def job_entities(con: Con) -> list[tuple[int, str]]:
    """``(entity_id, entity)`` of every job (``<site>/jobs/<job id>``), in name order."""
    rows = con.execute(
        "SELECT entity_id, entity FROM entities WHERE regexp_matches(entity, '^[^/]+/jobs/[^/]+$') ORDER BY entity"
    ).fetchall()
    return [(int(i), str(e)) for i, e in rows]


# --- samples -----------------------------------------------------------------------------------------------------


def sample_count(con: Con) -> int:
    """Raw samples stored."""
    row = con.execute("SELECT count(*) FROM samples").fetchone()
    return int(row[0]) if row else 0


def sample_time_range(con: Con) -> tuple[float | None, float | None]:
    """(oldest, newest) raw sample timestamp, s; ``(None, None)`` when empty."""
    row = con.execute("SELECT min(ts), max(ts) FROM samples").fetchone()
    return (None, None) if row is None else (row[0], row[1])


@dataclass(frozen=True)
class LatestRows:
    """The newest value per (field, entity): aligned ``field_id``, ``entity_id`` and ``value`` arrays."""

    field_id: NDArray[np.int64]
    entity_id: NDArray[np.int64]
    value: NDArray[np.float64]


def latest_values(
    con: Con, field_ids: Sequence[int], since_ts: float, entity_ids: Sequence[int] | None = None
) -> LatestRows:
    """The newest value of each entity for each of ``field_ids`` among samples at or after ``since_ts``.

    Args:
        con: the store's connection.
        field_ids: stored field ids (non-empty).
        since_ts: oldest sample considered, s.
        entity_ids: only these entities (default: all).
    """
    where = f"ts >= ? AND field_id IN ({_ids(list(field_ids))})"
    if entity_ids is not None:
        where += f" AND entity_id IN ({_ids(entity_ids)})"
    sql = f"SELECT field_id, entity_id, arg_max(value, ts) AS value FROM samples WHERE {where} GROUP BY ALL"
    res = con.execute(sql, [float(since_ts)]).fetchnumpy()
    return LatestRows(
        np.asarray(res["field_id"], dtype=np.int64),
        np.asarray(res["entity_id"], dtype=np.int64),
        np.asarray(res["value"], dtype=np.float64),
    )


@dataclass(frozen=True)
class BucketRows:
    """One row per (entity, time bucket) that has samples: ``entity_id``, bucket index ``bucket`` (from
    ``since_s`` in steps of the width) and one column per requested aggregate (NaN where the bucket has no
    sample of that field).
    """

    entity_id: NDArray[np.int64]
    bucket: NDArray[np.int64]
    columns: list[NDArray[np.float64]]


def bucket_aggregates(
    con: Con,
    specs: Sequence[tuple[int, str]],
    entity_ids: Sequence[int],
    since_s: float,
    until_s: float,
    width_s: float,
) -> BucketRows:
    """Per entity and time bucket of ``width_s`` in ``[since_s, until_s)``, one aggregate per ``(field_id, agg)``.

    ``agg`` is one of :data:`BUCKET_AGGS` (``bit_or`` over the values as integers, for bit masks).

    Raises:
        ValueError: an unknown aggregate.
    """
    cols = []
    for k, (fid, agg) in enumerate(specs):
        if agg not in BUCKET_AGGS:
            raise ValueError(f"unknown aggregate {agg!r} (allowed: {', '.join(BUCKET_AGGS)})")
        expr = "CAST(value AS BIGINT)" if agg == "bit_or" else "value"
        cols.append(f"{agg}({expr}) FILTER (WHERE field_id = {int(fid)}) AS c{k}")
    sql = (
        f"SELECT entity_id, CAST(floor((ts - ?) / ?) AS BIGINT) AS b, {', '.join(cols)} FROM samples "
        f"WHERE ts >= ? AND ts < ? AND field_id IN ({_ids(sorted({f for f, _ in specs}))}) "
        f"AND entity_id IN ({_ids(entity_ids)}) GROUP BY ALL"
    )
    res = con.execute(sql, [since_s, width_s, since_s, until_s]).fetchnumpy()
    columns = []
    for k in range(len(specs)):
        col = res[f"c{k}"]
        data = np.ma.getdata(col).astype(np.float64)
        if np.ma.isMaskedArray(col):
            data = np.where(np.ma.getmaskarray(col), np.nan, data)
        columns.append(data)
    return BucketRows(np.asarray(res["entity_id"], dtype=np.int64), np.asarray(res["b"], dtype=np.int64), columns)


def last_sample_ts(con: Con, entity_ids: Sequence[int]) -> dict[int, float]:
    """Newest sample time of each entity (of any field), s; entities without samples are absent."""
    rows = con.execute(
        f"SELECT entity_id, max(ts) FROM samples WHERE entity_id IN ({_ids(entity_ids)}) GROUP BY entity_id"
    ).fetchall()
    return {int(e): float(t) for e, t in rows}


def value_changes(con: Con, field_id: int, entity_ids: Sequence[int]) -> list[tuple[int, float, float, float | None]]:
    """Every change of a field's value: ``(entity_id, ts, value, previous value)``, the first sample included
    (previous ``None``), ordered by entity and time.
    """
    sql = (
        "WITH p AS (SELECT entity_id, ts, value, lag(value) OVER (PARTITION BY entity_id ORDER BY ts) AS prev "
        f"FROM samples WHERE field_id = {int(field_id)} AND entity_id IN ({_ids(entity_ids)})) "
        "SELECT entity_id, ts, value, prev FROM p WHERE prev IS NULL OR value != prev ORDER BY entity_id, ts"
    )
    return [(int(e), float(t), float(v), None if p is None else float(p)) for e, t, v, p in con.execute(sql).fetchall()]


def mean_in_windows(con: Con, field_id: int, windows: Mapping[int, tuple[float, float]]) -> dict[int, float | None]:
    """Mean of a field per entity over that entity's ``(from, to]`` window, s."""
    if not windows:
        return {}
    rows = ", ".join(f"({int(j)}, {float(a)!r}, {float(b)!r})" for j, (a, b) in windows.items())
    sql = (
        f"WITH w(entity_id, t0, t1) AS (VALUES {rows}) SELECT s.entity_id, avg(s.value) FROM samples s "
        f"JOIN w USING (entity_id) WHERE s.field_id = {int(field_id)} AND s.ts > w.t0 AND s.ts <= w.t1 GROUP BY 1"
    )
    return {int(e): (None if v is None else float(v)) for e, v in con.execute(sql).fetchall()}


def run_means(
    con: Con,
    entity_ids: Sequence[int],
    start_field_id: int | None,
    not_started_value: int,
    mean_field_id: int,
    positive_mean_field_id: int,
) -> dict[int, tuple[float | None, float | None]]:
    """Per entity, from its first sample of ``start_field_id`` whose value is not ``not_started_value`` (its
    first sample of any field when ``start_field_id`` is ``None``): the mean of ``mean_field_id`` and the mean of
    the positive values of ``positive_mean_field_id`` (a job's throughput and step time once it left the queue).
    An id of −1 matches no field.
    """
    started = (
        f"field_id = {int(start_field_id)} AND value != {int(not_started_value)}"
        if start_field_id is not None
        else "TRUE"
    )
    sql = (
        f"WITH start AS (SELECT entity_id, min(ts) AS t0 FROM samples WHERE entity_id IN ({_ids(entity_ids)}) "
        f"AND {started} GROUP BY entity_id) "
        f"SELECT s.entity_id, avg(s.value) FILTER (WHERE s.field_id = {int(mean_field_id)}), "
        f"avg(s.value) FILTER (WHERE s.field_id = {int(positive_mean_field_id)} AND s.value > 0) "
        "FROM samples s JOIN start USING (entity_id) WHERE s.ts >= start.t0 GROUP BY s.entity_id"
    )
    return {int(e): (g, m) for e, g, m in con.execute(sql).fetchall()}


# --- per-rack heat maps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RackBuckets:
    """One aggregate per (rack, time bucket) with samples: aligned ``rack`` ids, bucket indices and values."""

    rack: NDArray[np.str_]
    bucket: NDArray[np.int64]
    value: NDArray[np.float64]


def _rack_buckets(res: Mapping[str, object]) -> RackBuckets:
    return RackBuckets(
        np.asarray(res["rack"], dtype=str), np.asarray(res["b"], dtype=np.int64), np.asarray(res["v"], dtype=np.float64)
    )


def rack_max_buckets(con: Con, field_id: int, t0: float, every_s: float) -> RackBuckets:
    """Max of a GPU field over each rack's GPUs per time bucket of ``every_s`` from ``t0``."""
    sql = (
        "WITH g AS (SELECT entity_id, regexp_extract(entity, '^([^/]+/[^/]+/[^/]+)/[^/]+/[^/]+$', 1) AS rack "
        "FROM entities WHERE entity NOT LIKE '%/jobs/%') "
        "SELECT g.rack, CAST(floor((s.ts - ?) / ?) AS BIGINT) AS b, max(s.value) AS v FROM samples s "
        "JOIN g USING (entity_id) WHERE s.field_id = ? AND g.rack != '' GROUP BY ALL"
    )
    return _rack_buckets(con.execute(sql, [t0, every_s, int(field_id)]).fetchnumpy())


def rack_min_offset_buckets(
    con: Con,
    field_id: int,
    t0: float,
    every_s: float,
    entity_ids: Sequence[int],
    offsets: Sequence[float] | NDArray[np.float64],
) -> RackBuckets:
    """Min of ``offset − value`` over each rack's listed entities per time bucket (e.g. headroom of each GPU's
    temperature to its own slowdown temperature, the offset).
    """
    con.register("_tl_slow", pa.table({"entity_id": list(entity_ids), "slow": offsets}))
    try:
        sql = (
            "SELECT regexp_extract(e.entity, '^([^/]+/[^/]+/[^/]+)/', 1) AS rack, "
            "CAST(floor((s.ts - ?) / ?) AS BIGINT) AS b, min(t.slow - s.value) AS v FROM samples s "
            "JOIN _tl_slow t USING (entity_id) JOIN entities e USING (entity_id) WHERE s.field_id = ? GROUP BY ALL"
        )
        res = con.execute(sql, [t0, every_s, int(field_id)]).fetchnumpy()
    finally:
        con.unregister("_tl_slow")
    return _rack_buckets(res)
