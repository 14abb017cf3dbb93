"""DuckDB telemetry store (the default): one embedded file, transactions, SQL downsampling.

Schema (normalized so the big table holds only numbers)::

    entities(entity_id INTEGER PRIMARY KEY, entity VARCHAR UNIQUE, labels VARCHAR -- JSON)
    fields(field_id SMALLINT PRIMARY KEY, name VARCHAR UNIQUE)
    samples(ts DOUBLE -- epoch s UTC, entity_id INTEGER, field_id SMALLINT, value DOUBLE)
    rollup_1m(bucket, entity_id, field_id, min, max, sum, count, first_ts, last_ts, last) -- see rollup.py
    ingests(source VARCHAR, ts_min DOUBLE, ts_max DOUBLE, n_rows BIGINT) -- per source: the span it covered, rows

Every :meth:`DuckDBStore.append` is one transaction: new entity/field ids and the samples commit together
or not at all, so a crash (even ``kill -9``) mid-append loses at most that batch; DuckDB's write-ahead log
replays committed batches on the next open. Samples go in through DuckDB's Arrow scan (no Python loop
over rows); rows arrive field-major, so DuckDB's per-row-group min/max indexes skip other fields at query
time. Per-minute rollups written in the same transaction let aggregates and downsampling over long
ranges read whole minutes from ``rollup_1m`` and raw samples only at the range's edges.

Idempotent ingest: an append that names its ``source_key`` widens that source's one row in ``ingests`` (the span
from its oldest to its newest time stored, and its row count) in the same transaction, updated in place: the table
holds one row per source however often it is written (a watcher flushes every second, 86,400 times a day). When a
later batch of the same source overlaps that span (a file ingested again after a crash, a watcher re-run over a
recording), the rows the store already holds (same entity, field and timestamp) are left out; a batch that
overlaps nothing (a live source's next flush, newer than all it stored) skips the check, so it pays nothing for it.

The check stays exact with one span instead of one range per batch: the span only decides *whether* to look, and
the look is at the stored rows themselves, so a re-run writes nothing twice and a late row older than the span's
end that was never stored (a gap, a reading that arrived late) is still written. What the span changes: within it,
a row another source stored at the same entity, field and time also counts as stored (the store keeps one value per
entity, field and time there), where per-batch ranges could leave a gap between two batches unchecked. A store
written with one row per batch (before this layout) opens and dedupes as before: the span is taken over its rows,
and its rows of a source are merged into one the first time that source is written again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from twinloop.errors import InputError, unknown_name
from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store import lock
from twinloop.telemetry.store.rollup import BUCKET_S, ROLLUP_DDL, full_minutes, rollup
from twinloop.telemetry.validate import MAX_SANE_TS_S

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS entities(entity_id INTEGER PRIMARY KEY, entity VARCHAR UNIQUE, labels VARCHAR);
CREATE TABLE IF NOT EXISTS fields(field_id SMALLINT PRIMARY KEY, name VARCHAR UNIQUE);
CREATE TABLE IF NOT EXISTS samples(ts DOUBLE, entity_id INTEGER, field_id SMALLINT, value DOUBLE);
CREATE TABLE IF NOT EXISTS ingests(source VARCHAR, ts_min DOUBLE, ts_max DOUBLE, n_rows BIGINT);
"""
    + ROLLUP_DDL
)


def is_duckdb_file(path: str | Path) -> bool:
    """Whether ``path`` is a DuckDB database file (its header carries ``DUCK`` at byte 8), whatever its name."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


_BATCH_SCHEMA = pa.schema(
    [("ts", pa.float64()), ("entity_id", pa.int32()), ("field_id", pa.int16()), ("value", pa.float64())]
)


class DuckDBStore:
    """Telemetry store in a DuckDB file (``":memory:"`` for a throw-away one).

    Args:
        path: the database file; created with its schema when missing.
        threads: DuckDB worker threads (``None`` = DuckDB's default, all cores).
        read_only: open without write access (several readers may share a file).
        lock_timeout_s: how long a writer waits for another process to let go of the file (see
            :mod:`~twinloop.telemetry.store.lock`) before refusing, s.
        replace: delete an existing store first (a fresh run), only if no other process holds it.
        force: add the twinloop tables to a DuckDB file that holds other tables (without it: refused).
    """

    def __init__(
        self,
        path: str | Path = "twinloop.duckdb",
        threads: int | None = None,
        read_only: bool = False,
        lock_timeout_s: float = 10.0,
        replace: bool = False,
        force: bool = False,
    ):
        self.path = str(path)
        self.threads = threads
        self.read_only = read_only
        self.lock_timeout_s = lock_timeout_s
        self.replace = replace
        self.force = force
        self._gated = False
        self._con: duckdb.DuckDBPyConnection | None = None
        self._entity_ids: dict[str, int] = {}
        self._labels: dict[str, str] = {}
        self._label_objs: dict[str, Mapping[str, str]] = {}
        self._field_ids: dict[str, int] = {}

    # ----- connection ---------------------------------------------------------------------------------
    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The open connection (opened, and the schema created, on first use)."""
        if self._con is None:
            config: dict[str, Any] = {}
            if self.threads is not None:
                config["threads"] = self.threads
            path = Path(self.path)
            if self.read_only and not path.exists():
                raise FileNotFoundError(2, "no such database", self.path)
            if path.is_file() and path.stat().st_size > 0 and not is_duckdb_file(path):  # not a new store either
                raise InputError(
                    self.path, "", "not a DuckDB store (a store is written by `twinloop ingest`; a CSV or "
                    "Prometheus file is read by `twinloop detect`, or ingested first)"
                )  # fmt: skip
            if not self.read_only:
                self._open_gate()
            try:
                self._con = lock.connect_retry(self.path, self.read_only, self.lock_timeout_s, config)
                if not self.read_only:
                    self._check_foreign(self._con)
                    self._con.execute(_SCHEMA)
                self._load_ids()
            except (duckdb.Error, lock.StoreBusyError, InputError) as exc:
                self.close()
                if isinstance(exc, InputError):
                    raise
                raise InputError(self.path, "", f"cannot open DuckDB store: {exc}") from None
        return self._con

    def _open_gate(self) -> None:
        """Hold the store's gate exclusively while writing; delete the old store first when replacing."""
        if not lock.acquire(self.path, exclusive=True, timeout_s=self.lock_timeout_s):
            raise InputError(
                self.path, "", f"in use by another process (it holds {lock.lock_path(self.path).name}); "
                "stop it or use another file"
            )  # fmt: skip
        self._gated = True
        if self.replace:
            try:
                lock.remove_store(self.path)
                self.replace = False  # once: a reopen of this store keeps what this run wrote
            except lock.StoreBusyError:
                self.close()
                raise InputError(self.path, "", "in use by another process; not replaced (stop it or use --out "
                                 "elsewhere)") from None  # fmt: skip

    def _check_foreign(self, con: duckdb.DuckDBPyConnection) -> None:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "entities" not in tables and not self.force:
            shown = ", ".join(sorted(tables)[:5])
            raise InputError(
                self.path, "", f"not a twinloop store (it holds tables {shown}); refusing to add twinloop tables "
                "to it without --force"
            )  # fmt: skip

    def _load_ids(self) -> None:
        con = self._con
        assert con is not None
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "entities" not in tables:
            raise InputError(self.path, "", "not a twinloop telemetry store (no entities table)")
        rows = con.execute("SELECT entity, entity_id, labels FROM entities").fetchall()
        self._entity_ids = {e: i for e, i, _ in rows}
        self._labels = {e: lab for e, _, lab in rows if lab}
        self._field_ids = dict(con.execute("SELECT name, field_id FROM fields").fetchall())

    def close(self) -> None:
        """Close the connection (data already committed stays)."""
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._gated:
            self._gated = False
            lock.release(self.path)

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- writing ------------------------------------------------------------------------------------
    def append(self, frame: Frame, source_key: str | None = None) -> int:
        """Store the rows of ``frame`` in one transaction; returns the rows written.

        Field names must already be canonical (:class:`~twinloop.telemetry.validate.Validator` does it).

        Args:
            frame: the samples.
            source_key: where they come from (``kind:absolute path``); when given, rows this source already
                stored (same entity, field and timestamp, within the source's span) are not written again.
        """
        if not len(frame):
            return 0
        # Writers that bypass the Validator (the live watcher, replays) must not store times that break every
        # reader and the minute rollup (NaN, inf, 1e23): keep only times in [0, MAX_SANE_TS_S].
        with np.errstate(invalid="ignore"):
            sane = np.isfinite(frame.ts_s) & (frame.ts_s >= 0.0) & (frame.ts_s <= MAX_SANE_TS_S)
        if not sane.all():
            frame = frame.take(sane)
            if not len(frame):
                return 0
        con = self.con
        if source_key is not None:
            frame = self._not_yet_stored(frame, source_key)
            if not len(frame):
                return 0
        new_ents = [e for e in dict.fromkeys(frame.entities) if e not in self._entity_ids]
        new_flds = [f for f in dict.fromkeys(frame.fields) if f not in self._field_ids]
        ent_ids = dict(self._entity_ids)
        fld_ids = dict(self._field_ids)
        for e in new_ents:
            ent_ids[e] = len(ent_ids)
        for f in new_flds:
            fld_ids[f] = len(fld_ids)
        label_rows, seen = self._changed_labels(frame, ent_ids)
        e_lut = np.array([ent_ids[e] for e in frame.entities], dtype=np.int32)
        f_lut = np.array([fld_ids[f] for f in frame.fields], dtype=np.int16)
        e_ids, f_ids = e_lut[frame.entity_idx], f_lut[frame.field_idx]
        batch = pa.Table.from_arrays(
            [
                pa.array(frame.ts_s, pa.float64()),
                pa.array(e_ids, pa.int32()),
                pa.array(f_ids, pa.int16()),
                pa.array(frame.value, pa.float64()),
            ],
            schema=_BATCH_SCHEMA,
        )
        rolled = rollup(frame.ts_s, e_ids, f_ids, frame.value)
        con.begin()
        try:
            self._insert_names([(ent_ids[e], e) for e in new_ents], [(fld_ids[f], f) for f in new_flds], label_rows)
            if source_key is not None:
                self._widen_span(source_key, float(frame.ts_s.min()), float(frame.ts_s.max()), len(frame))
            con.register("_twinloop_batch", batch)
            con.execute("INSERT INTO samples SELECT * FROM _twinloop_batch")
            con.unregister("_twinloop_batch")
            con.register("_twinloop_rollup", rolled)
            con.execute("INSERT INTO rollup_1m SELECT * FROM _twinloop_rollup")
            con.unregister("_twinloop_rollup")
            con.commit()
        except BaseException:
            con.rollback()
            raise
        self._entity_ids = ent_ids
        self._field_ids = fld_ids
        self._labels.update({ent: text for text, ent in label_rows})
        self._label_objs.update(seen)
        return len(frame)

    def _changed_labels(
        self, frame: Frame, ent_ids: Mapping[str, int]
    ) -> tuple[list[tuple[str, str]], dict[str, Mapping[str, str]]]:
        """(labels JSON, entity) of the entities whose labels changed, and the label dicts seen this time."""
        label_rows = []
        seen: dict[str, Mapping[str, str]] = {}
        for ent, lab in frame.labels.items():
            # A producer that hands the same label dict again (the twin, every step) costs no JSON encoding;
            # producers replace a label dict when labels change, never mutate one they handed out.
            if self._label_objs.get(ent) is lab or ent not in ent_ids:
                continue
            seen[ent] = lab
            text = json.dumps(dict(lab), sort_keys=True)
            if self._labels.get(ent) != text:
                label_rows.append((text, ent))
        return label_rows, seen

    def _insert_names(
        self, entities: list[tuple[int, str]], fields: list[tuple[int, str]], label_rows: list[tuple[str, str]]
    ) -> None:
        """Inside the append's transaction: new entities and fields with their ids, changed labels."""
        con = self.con
        if entities:
            ids = pa.array([i for i, _ in entities], pa.int32())
            names = pa.array([e for _, e in entities], pa.string())
            con.register("_twinloop_new", pa.table({"entity_id": ids, "entity": names}))
            con.execute("INSERT INTO entities SELECT entity_id, entity, NULL FROM _twinloop_new")
            con.unregister("_twinloop_new")
        if fields:
            con.executemany("INSERT INTO fields VALUES (?, ?)", fields)
        if label_rows:
            texts, ents = zip(*label_rows, strict=True)
            con.register("_twinloop_lab", pa.table({"labels": list(texts), "entity": list(ents)}))
            con.execute("UPDATE entities SET labels = n.labels FROM _twinloop_lab n WHERE entities.entity = n.entity")
            con.unregister("_twinloop_lab")

    def _widen_span(self, source_key: str, lo: float, hi: float, n_rows: int) -> None:
        """Inside the append's transaction: widen ``source_key``'s span in ``ingests`` to ``[lo, hi]``, count its rows.

        One row per source, updated in place; a source with several rows (a store written one row per batch) has
        them merged into one here.
        """
        con = self.con
        row = con.execute(
            "UPDATE ingests SET ts_min = least(ts_min, ?), ts_max = greatest(ts_max, ?), n_rows = n_rows + ? "
            "WHERE source = ?",
            [lo, hi, n_rows, source_key],
        ).fetchone()
        updated = int(row[0]) if row else 0
        if updated == 1:
            return
        if updated > 1:  # the old layout: its rows now all hold the whole span, each with its own count
            row = con.execute("SELECT min(ts_min), max(ts_max), sum(n_rows) - ? * (count(*) - 1) FROM ingests "
                              "WHERE source = ?", [n_rows, source_key]).fetchone()  # fmt: skip
            assert row is not None
            lo, hi, n_rows = float(row[0]), float(row[1]), int(row[2])
            con.execute("DELETE FROM ingests WHERE source = ?", [source_key])
        con.execute("INSERT INTO ingests VALUES (?, ?, ?, ?)", [source_key, lo, hi, n_rows])

    def _not_yet_stored(self, frame: Frame, source_key: str) -> Frame:
        """``frame`` without the rows the store already holds, looked for only where it overlaps the source's span."""
        con = self.con
        lo, hi = float(frame.ts_s.min()), float(frame.ts_s.max())
        # min/max over the source's rows: one in this layout, one per batch in a store written before it
        row = con.execute("SELECT min(ts_min), max(ts_max) FROM ingests WHERE source = ?", [source_key]).fetchone()
        if not row or row[0] is None or row[1] < lo or row[0] > hi:
            return frame
        e_lut = np.array([self._entity_ids.get(e, -1) for e in frame.entities], dtype=np.int64)
        f_lut = np.array([self._field_ids.get(f, -1) for f in frame.fields], dtype=np.int64)
        e_ids, f_ids = e_lut[frame.entity_idx], f_lut[frame.field_idx]
        known = np.flatnonzero((e_ids >= 0) & (f_ids >= 0))  # rows of new entities or fields cannot be stored
        if not known.size:
            return frame
        probe = pa.table({"i": pa.array(known, pa.int64()), "ts": pa.array(frame.ts_s[known], pa.float64()),
                          "entity_id": pa.array(e_ids[known].astype(np.int32), pa.int32()),
                          "field_id": pa.array(f_ids[known].astype(np.int16), pa.int16())})  # fmt: skip
        con.register("_twinloop_probe", probe)
        try:
            stored = con.execute(
                "SELECT p.i FROM _twinloop_probe p SEMI JOIN (SELECT ts, entity_id, field_id FROM samples "
                "WHERE ts BETWEEN ? AND ?) s ON p.ts = s.ts AND p.entity_id = s.entity_id AND p.field_id = s.field_id",
                [lo, hi],
            ).fetchnumpy()["i"]
        finally:
            con.unregister("_twinloop_probe")
        if not len(stored):
            return frame
        keep = np.ones(len(frame), dtype=bool)
        keep[np.asarray(stored, dtype=np.int64)] = False
        return frame.take(keep)

    def delete_before(self, ts_s: float) -> int:
        """Retention: delete samples with ``ts < ts_s``; returns the rows deleted.

        Rollups of whole minutes before ``ts_s`` go too; the minute that ``ts_s`` cuts is rebuilt from the
        samples that remain, all in one transaction.
        """
        cut = float(ts_s)
        minute = float(np.floor(cut / BUCKET_S) * BUCKET_S)
        con = self.con
        con.begin()
        try:
            row = con.execute("DELETE FROM samples WHERE ts < ?", [cut]).fetchone()
            con.execute("DELETE FROM rollup_1m WHERE bucket <= ?", [minute] if cut > minute else [minute - 1])
            if cut > minute:
                con.execute(
                    "INSERT INTO rollup_1m SELECT ?, entity_id, field_id, min(value), max(value), sum(value), "
                    "count(*), min(ts), max(ts), arg_max(value, ts) FROM samples WHERE ts >= ? AND ts < ? "
                    "GROUP BY entity_id, field_id",
                    [minute, cut, minute + BUCKET_S],
                )
            con.commit()
        except BaseException:
            con.rollback()
            raise
        return int(row[0]) if row else 0

    def retain(self, max_age_s: float) -> int:
        """Retention relative to the newest sample: keep only the last ``max_age_s`` seconds."""
        _, newest = self.time_range()
        return 0 if newest is None else self.delete_before(newest - max_age_s)

    # ----- reading ------------------------------------------------------------------------------------
    def field_id(self, field: str) -> int | None:
        """The stored id of ``field`` (alias resolved); ``None`` when no sample of it was stored.

        Raises:
            InputError: ``field`` is not a known field name.
        """
        _ = self.con
        name = canonical_field(field)
        if name is None:
            raise unknown_name(self.path, "field", "field", field, FIELD_BY_NAME)
        return self._field_ids.get(name)

    def _where(
        self,
        field_id: int | None,
        entity_prefix: str,
        since_s: float | None,
        until_s: float | None,
        ts_col: str = "s.ts",
        extra: str = "",
        sane_col: str = "s.ts",
    ) -> tuple[str, list[Any]]:
        # Stores written before timestamps were validated may hold NaN, inf or absurd times: never read them.
        clauses: list[str] = [f"isfinite({sane_col}) AND {sane_col} BETWEEN 0 AND {MAX_SANE_TS_S!r}"]
        if extra:
            clauses.append(extra)
        params: list[Any] = []
        if field_id is not None:
            clauses.append("s.field_id = ?")
            params.append(field_id)
        if since_s is not None:
            clauses.append(f"{ts_col} >= ?")
            params.append(float(since_s))
        if until_s is not None:
            clauses.append(f"{ts_col} < ?")
            params.append(float(until_s))
        prefix = entity_prefix.rstrip("/")
        if prefix:
            ids = [i for e, i in self._entity_ids.items() if e == prefix or e.startswith(prefix + "/")]
            if not ids:
                clauses.append("FALSE")
            else:
                clauses.append("s.entity_id IN (SELECT unnest(?::INTEGER[]))")
                params.append(ids)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def _empty(self, columns: Mapping[str, pa.DataType]) -> pa.Table:
        return pa.table({k: pa.array([], t) for k, t in columns.items()})

    def query(
        self, field: str, entity_prefix: str = "", since_s: float | None = None, until_s: float | None = None
    ) -> pa.Table:
        """Raw samples of one field: ts, entity, field, value ordered by entity then ts."""
        fid = self.field_id(field)
        if fid is None:
            return self._empty({"ts": pa.float64(), "entity": pa.string(), "field": pa.string(), "value": pa.float64()})
        where, params = self._where(fid, entity_prefix, since_s, until_s)
        sql = (
            "SELECT s.ts, e.entity, f.name AS field, s.value FROM samples s JOIN entities e USING (entity_id) "
            f"JOIN fields f USING (field_id){where} ORDER BY e.entity, s.ts"
        )
        return self.con.execute(sql, params).to_arrow_table()

    def _partials(
        self, fid: int, entity_prefix: str, since_s: float | None, until_s: float | None, every_s: float | None
    ) -> tuple[str, list[Any]]:
        """SQL for partial aggregates per (bucket, entity): rollups for whole minutes, raw rows at the edges.

        With ``every_s`` ``None`` everything falls in one bucket (0); otherwise rollups are used only when
        ``every_s`` is a whole number of minutes (so minutes nest in buckets), else raw samples throughout.
        """
        use_rollup = every_s is None or (every_s % BUCKET_S == 0)
        if not use_rollup:
            where, params = self._where(fid, entity_prefix, since_s, until_s)
            sql = (
                "SELECT floor(s.ts / ?) * ? AS b, s.entity_id, min(s.value) AS mn, max(s.value) AS mx, "
                "sum(s.value) AS sm, count(*) AS n, max(s.ts) AS lt, arg_max(s.value, s.ts) AS lv "
                f"FROM samples s{where} GROUP BY ALL"
            )
            return sql, [every_s, every_s, *params]
        lo, hi = full_minutes(since_s, until_s)
        bucket = "0.0" if every_s is None else f"floor(s.bucket / {float(every_s)!r}) * {float(every_s)!r}"
        raw_bucket = "0.0" if every_s is None else f"floor(s.ts / {float(every_s)!r}) * {float(every_s)!r}"
        r_where, r_params = self._where(fid, entity_prefix, lo, hi, ts_col="s.bucket", sane_col="s.last_ts")
        edge = []
        edge_params: list[Any] = []
        if lo is not None:
            edge.append("s.ts < ?")
            edge_params.append(lo)
        if hi is not None:
            edge.append("s.ts >= ?")
            edge_params.append(hi)
        parts = [
            f"SELECT {bucket} AS b, s.entity_id, s.min AS mn, s.max AS mx, s.sum AS sm, s.count AS n, "
            f"s.last_ts AS lt, s.last AS lv FROM rollup_1m s{r_where}"
        ]
        params = list(r_params)
        if edge:
            e_where, e_params = self._where(fid, entity_prefix, since_s, until_s, extra="(" + " OR ".join(edge) + ")")
            parts.append(
                f"SELECT {raw_bucket} AS b, s.entity_id, min(s.value), max(s.value), sum(s.value), count(*), "
                f"max(s.ts), arg_max(s.value, s.ts) FROM samples s{e_where} GROUP BY ALL"
            )
            params += edge_params + e_params
        return " UNION ALL ".join(parts), params

    def downsample(
        self,
        field: str,
        every_s: float,
        entity_prefix: str = "",
        since_s: float | None = None,
        until_s: float | None = None,
    ) -> pa.Table:
        """Per entity and bucket ``floor(ts / every_s) * every_s``: ts, entity, min, mean, max, last, count."""
        if not every_s > 0:
            raise InputError(self.path, "every", f"bucket width must be > 0 s, got {every_s}")
        fid = self.field_id(field)
        cols = {"ts": pa.float64(), "entity": pa.string()} | dict.fromkeys(("min", "mean", "max", "last"), pa.float64())
        if fid is None:
            return self._empty(cols | {"count": pa.int64()})
        parts, params = self._partials(fid, entity_prefix, since_s, until_s, float(every_s))
        sql = (
            f"WITH p AS ({parts}), b AS (SELECT p.b AS ts, p.entity_id, min(p.mn) AS min, "
            "sum(p.sm) / sum(p.n) AS mean, max(p.mx) AS max, arg_max(p.lv, p.lt) AS last, "
            "sum(p.n)::BIGINT AS count FROM p GROUP BY ALL) "
            "SELECT b.ts, e.entity, b.min, b.mean, b.max, b.last, b.count FROM b JOIN entities e USING (entity_id) "
            "ORDER BY e.entity, b.ts"
        )
        return self.con.execute(sql, params).to_arrow_table()

    def aggregate(
        self, field: str, entity_prefix: str = "", since_s: float | None = None, until_s: float | None = None
    ) -> pa.Table:
        """Per entity over the whole range: entity, min, mean, max, last, count."""
        fid = self.field_id(field)
        if fid is None:
            cols = {"entity": pa.string()} | dict.fromkeys(("min", "mean", "max", "last"), pa.float64())
            return self._empty(cols | {"count": pa.int64()})
        parts, params = self._partials(fid, entity_prefix, since_s, until_s, None)
        sql = (
            f"WITH p AS ({parts}), a AS (SELECT p.entity_id, min(p.mn) AS min, sum(p.sm) / sum(p.n) AS mean, "
            "max(p.mx) AS max, arg_max(p.lv, p.lt) AS last, sum(p.n)::BIGINT AS count FROM p GROUP BY p.entity_id) "
            "SELECT e.entity, a.min, a.mean, a.max, a.last, a.count FROM a JOIN entities e USING (entity_id) "
            "ORDER BY e.entity"
        )
        return self.con.execute(sql, params).to_arrow_table()

    def latest(self, entity_prefix: str = "") -> pa.Table:
        """The newest sample per (entity, field): ts, entity, field, value (read from the rollups)."""
        where, params = self._where(None, entity_prefix, None, None, sane_col="s.last_ts")
        sql = (
            "WITH l AS (SELECT s.entity_id, s.field_id, max(s.last_ts) AS ts, arg_max(s.last, s.last_ts) AS value "
            f"FROM rollup_1m s{where} GROUP BY ALL) "
            "SELECT l.ts, e.entity, f.name AS field, l.value FROM l JOIN entities e USING (entity_id) "
            "JOIN fields f USING (field_id) ORDER BY e.entity, f.name"
        )
        return self.con.execute(sql, params).to_arrow_table()

    def labels(self, entity_prefix: str = "") -> dict[str, dict[str, str]]:
        """Labels of the stored entities under ``entity_prefix``."""
        _ = self.con
        prefix = entity_prefix.rstrip("/")
        return {
            e: json.loads(t) for e, t in self._labels.items() if not prefix or e == prefix or e.startswith(prefix + "/")
        }

    def time_range(self, field: str | None = None) -> tuple[float | None, float | None]:
        """(oldest, newest) timestamp stored (of ``field`` if given); ``(None, None)`` when empty."""
        fid = None if field is None else self.field_id(field)
        if field is not None and fid is None:
            return None, None
        where, params = self._where(fid, "", None, None, sane_col="s.last_ts")
        row = self.con.execute(f"SELECT min(s.first_ts), max(s.last_ts) FROM rollup_1m s{where}", params).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def count(self) -> int:
        """Number of stored samples."""
        row = self.con.execute("SELECT count(*) FROM samples").fetchone()
        return int(row[0]) if row else 0

    def read_long(
        self,
        field: str | None = None,
        entity_prefix: str = "",
        since_s: float | None = None,
        until_s: float | None = None,
    ) -> pa.Table:
        """Samples in long form (ts, entity, field, value), ordered by time (for replay and export)."""
        fid = None if field is None else self.field_id(field)
        if field is not None and fid is None:
            return self._empty({"ts": pa.float64(), "entity": pa.string(), "field": pa.string(), "value": pa.float64()})
        where, params = self._where(fid, entity_prefix, since_s, until_s)
        sql = (
            "SELECT s.ts, e.entity, f.name AS field, s.value FROM samples s JOIN entities e USING (entity_id) "
            f"JOIN fields f USING (field_id){where} ORDER BY s.ts, e.entity, f.name"
        )
        return self.con.execute(sql, params).to_arrow_table()

    def export_parquet(
        self,
        path: str | Path,
        field: str | None = None,
        entity_prefix: str = "",
        since_s: float | None = None,
        until_s: float | None = None,
    ) -> int:
        """Write selected samples in long form (ts, entity, field, value) to Parquet; returns the rows written.

        DuckDB streams the rows to the file (``COPY``), so stores larger than memory export too.
        """
        fid = None if field is None else self.field_id(field)
        params: list[Any]
        if field is not None and fid is None:
            where, params = " WHERE FALSE", []
        else:
            where, params = self._where(fid, entity_prefix, since_s, until_s)
        target = str(path).replace("'", "''")
        sql = (
            "COPY (SELECT s.ts, e.entity, f.name AS field, s.value FROM samples s JOIN entities e USING (entity_id) "
            f"JOIN fields f USING (field_id){where} ORDER BY s.ts, e.entity, f.name) "
            f"TO '{target}' (FORMAT PARQUET, COMPRESSION ZSTD)"
        )
        row = self.con.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    # ----- side tables (results next to the telemetry) ---------------------------------------------------
    def append_table(self, name: str, table: pa.Table) -> int:
        """Append ``table`` to the table ``name`` (created from its Arrow schema on first use), in one transaction.

        For results that live next to the telemetry, such as a sweep's runs (``twinloop.sweep``); returns the rows
        written. ``name`` must be a plain identifier.
        """
        if not name.isidentifier() or name in ("entities", "fields", "samples", "rollup_1m"):
            raise InputError(self.path, name, "bad table name (allowed: an identifier, not a telemetry table)")
        con = self.con
        con.register("_incoming", table)
        try:
            con.execute("BEGIN")
            con.execute(f"CREATE TABLE IF NOT EXISTS {name} AS SELECT * FROM _incoming LIMIT 0")
            con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM _incoming")
            con.execute("COMMIT")
        except duckdb.Error:
            con.execute("ROLLBACK")
            raise
        finally:
            con.unregister("_incoming")
        return int(table.num_rows)

    def read_table(self, name: str) -> pa.Table:
        """The whole side table ``name`` (see :meth:`append_table`) as Arrow."""
        if not name.isidentifier():
            raise InputError(self.path, name, "bad table name (allowed: an identifier)")
        return self.con.execute(f"SELECT * FROM {name}").to_arrow_table()
