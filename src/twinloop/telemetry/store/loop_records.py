"""The loop's record tables in a DuckDB telemetry store: schema, writes and named reads.

:mod:`twinloop.ops.records` decides *what* a loop run records (incidents, actions, ground truth, a watcher's
state); this module is *how* the DuckDB store keeps it, so the SQL stays with the store that owns the file.
Rows come in as plain tuples in table-column order (this layer knows no ``Incident`` or ``ActionResult``).

Tables (``run`` names the pass, e.g. ``loop-off`` / ``loop-on``, or a watcher's run)::

    loop_incidents(run, incident_id, event_class, root, severity, start_ts, end_ts, n_members, n_detections, status)
    loop_actions(run, action_id, ts, kind, target, value, status, detail, incident_id, clamped)
    loop_ground_truth(run, fault, entity, start_ts, end_ts)
    loop_advisory(run, incident_id, ts, rule_class, advisory_class, advisory_probability, rule_class_probability)
    loop_incident_entities(run, incident_id, entities, closed_ts, pipeline_id)   -- live watchers
    loop_action_notes(run, action_id, rule, reason, verification)                -- live watchers
    loop_state(run, key, value)                                                  -- live watchers
    loop_job_gpus(run, job, gpu, first_ts, last_ts)                              -- live watchers' jobs

``loop_job_gpus`` is where a live job ran: one row per GPU of a span over which the job's placement held (a span
is keyed by run, job and ``first_ts``; its ``last_ts`` grows while the placement holds, and a changed placement is
a new span), so a report reads the job's GPUs' telemetry beside its step time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

__all__ = [
    "LOOP_TABLES",
    "Statement",
    "action_rows",
    "action_summary_rows",
    "action_upsert",
    "action_verification",
    "advisory_upsert",
    "ensure_schema",
    "incident_close",
    "incident_entity_rows",
    "incident_summary_rows",
    "incident_upsert",
    "job_gpu_spans",
    "job_gpus_upsert",
    "last_job_gpu_spans",
    "max_ids",
    "open_incident_rows",
    "read_loop_table",
    "replace_run",
    "run_transaction",
    "state_set",
    "state_value",
]

Con = duckdb.DuckDBPyConnection
#: One statement of a write: SQL and its parameters (built here, run by :func:`run_transaction`).
Statement = tuple[str, list[Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_incidents(run VARCHAR, incident_id BIGINT, event_class VARCHAR, root VARCHAR,
  severity VARCHAR, start_ts DOUBLE, end_ts DOUBLE, n_members INTEGER, n_detections INTEGER, status VARCHAR);
CREATE TABLE IF NOT EXISTS loop_actions(run VARCHAR, action_id BIGINT, ts DOUBLE, kind VARCHAR, target VARCHAR,
  value DOUBLE, status VARCHAR, detail VARCHAR, incident_id BIGINT, clamped BOOLEAN);
CREATE TABLE IF NOT EXISTS loop_ground_truth(run VARCHAR, fault VARCHAR, entity VARCHAR, start_ts DOUBLE,
  end_ts DOUBLE);
CREATE TABLE IF NOT EXISTS loop_advisory(run VARCHAR, incident_id BIGINT, ts DOUBLE, rule_class VARCHAR,
  advisory_class VARCHAR, advisory_probability DOUBLE, rule_class_probability DOUBLE);
"""

_LIVE_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_incident_entities(run VARCHAR, incident_id BIGINT, entities VARCHAR,
  closed_ts DOUBLE, pipeline_id BIGINT);
CREATE TABLE IF NOT EXISTS loop_action_notes(run VARCHAR, action_id BIGINT, rule VARCHAR, reason VARCHAR,
  verification VARCHAR);
CREATE TABLE IF NOT EXISTS loop_state(run VARCHAR, key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS loop_job_gpus(run VARCHAR, job VARCHAR, gpu VARCHAR, first_ts DOUBLE, last_ts DOUBLE);
"""

#: The tables :func:`read_loop_table` reads, with the column each is ordered by (after ``run``).
LOOP_TABLES = {
    "loop_incidents": "start_ts",
    "loop_actions": "action_id",
    "loop_ground_truth": "start_ts",
    "loop_advisory": "incident_id",
}


def ensure_schema(con: Con, live: bool = True) -> None:
    """Create the record tables that are missing (with ``live``, a watcher's extra tables too)."""
    con.execute(_SCHEMA)
    if live:
        con.execute(_LIVE_SCHEMA)


def replace_run(
    con: Con,
    run: str,
    incidents: Sequence[tuple[Any, ...]],
    actions: Sequence[tuple[Any, ...]],
    ground_truth: Sequence[tuple[Any, ...]],
    advisory: Sequence[tuple[Any, ...]] = (),
) -> None:
    """Replace ``run``'s incidents, actions, ground truth and advisory classes (rows in column order, ``run``
    first) in one transaction.
    """
    con.execute(_SCHEMA)
    con.execute("BEGIN TRANSACTION")
    try:
        for table, rows, width in (
            ("loop_incidents", incidents, 10),
            ("loop_actions", actions, 10),
            ("loop_ground_truth", ground_truth, 5),
            ("loop_advisory", advisory, 7),
        ):
            con.execute(f"DELETE FROM {table} WHERE run = ?", [run])
            if rows:
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * width)})", list(rows))
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def read_loop_table(con: Con, table: str, run: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``loop_incidents``/``loop_actions``/``loop_ground_truth`` as dicts (all runs, or one).

    Raises:
        ValueError: another table.
    """
    if table not in LOOP_TABLES:
        raise ValueError(f"unknown loop table {table!r}")
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()
    if not exists or not exists[0]:
        return []
    query = f"SELECT * FROM {table}" + (" WHERE run = ?" if run else "") + f" ORDER BY run, {LOOP_TABLES[table]}"
    cur = con.execute(query, [run] if run else [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


# --- live watchers: statements, each write one transaction ------------------------------------------------------


def run_transaction(con: Con, statements: Sequence[Statement]) -> None:
    """Run ``statements`` in one transaction (the tables are created first when missing)."""
    ensure_schema(con)
    con.execute("BEGIN TRANSACTION")
    try:
        for sql, params in statements:
            con.execute(sql, params)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def incident_upsert(run: str, row: Sequence[Any], entities_json: str, closed_ts: float | None,
                    pipeline_id: int | None) -> list[Statement]:  # fmt: skip
    """Insert or replace one incident: ``row`` is its ``loop_incidents`` columns after ``run``."""
    incident_id = row[0]
    return [
        ("DELETE FROM loop_incidents WHERE run = ? AND incident_id = ?", [run, incident_id]),
        ("DELETE FROM loop_incident_entities WHERE run = ? AND incident_id = ?", [run, incident_id]),
        ("INSERT INTO loop_incidents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [run, *row]),
        ("INSERT INTO loop_incident_entities VALUES (?, ?, ?, ?, ?)",
         [run, incident_id, entities_json, closed_ts, pipeline_id]),
    ]  # fmt: skip


def advisory_upsert(run: str, row: Sequence[Any]) -> list[Statement]:
    """Insert or replace one incident's advisory class: ``row`` is its ``loop_advisory`` columns after ``run``."""
    return [
        ("DELETE FROM loop_advisory WHERE run = ? AND incident_id = ?", [run, row[0]]),
        ("INSERT INTO loop_advisory VALUES (?, ?, ?, ?, ?, ?, ?)", [run, *row]),
    ]


def incident_close(run: str, incident_id: int, ts: float, why: str) -> list[Statement]:
    """Close a stored incident at ``ts`` (its end never moves back) and remember why in ``loop_state``."""
    return [
        ("UPDATE loop_incidents SET status = 'closed', end_ts = greatest(end_ts, ?) WHERE run = ? AND "
         "incident_id = ?", [ts, run, incident_id]),
        ("UPDATE loop_incident_entities SET closed_ts = ? WHERE run = ? AND incident_id = ?", [ts, run, incident_id]),
        ("INSERT INTO loop_state VALUES (?, ?, ?)", [run, f"closed:{incident_id}", why]),
    ]  # fmt: skip


def action_upsert(run: str, action_id: int, row: Sequence[Any], rule: str, reason: str) -> list[Statement]:
    """Insert or replace one action: ``row`` is its ``loop_actions`` columns after ``run`` and ``action_id``."""
    return [
        ("DELETE FROM loop_actions WHERE run = ? AND action_id = ?", [run, action_id]),
        ("DELETE FROM loop_action_notes WHERE run = ? AND action_id = ?", [run, action_id]),
        ("INSERT INTO loop_actions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [run, action_id, *row]),
        ("INSERT INTO loop_action_notes VALUES (?, ?, ?, ?, ?)", [run, action_id, rule, reason, None]),
    ]


def action_verification(run: str, action_id: int, verification: str) -> Statement:
    """Set the verification note of an earlier action."""
    return ("UPDATE loop_action_notes SET verification = ? WHERE run = ? AND action_id = ?",
            [verification, run, action_id])  # fmt: skip


def state_set(run: str, key: str, value_json: str) -> list[Statement]:
    """Remember ``value_json`` under ``key`` (replacing what was there)."""
    return [
        ("DELETE FROM loop_state WHERE run = ? AND key = ?", [run, key]),
        ("INSERT INTO loop_state VALUES (?, ?, ?)", [run, key, value_json]),
    ]


def state_value(con: Con, run: str, key: str) -> str | None:
    """The JSON remembered under ``key``, or ``None``."""
    row = con.execute("SELECT value FROM loop_state WHERE run = ? AND key = ?", [run, key]).fetchone()
    return None if row is None else str(row[0])


def max_ids(con: Con, run: str) -> tuple[int, int]:
    """The largest stored incident and action ids of ``run`` (-1 when none)."""
    i = con.execute("SELECT max(incident_id) FROM loop_incidents WHERE run = ?", [run]).fetchone()
    a = con.execute("SELECT max(action_id) FROM loop_actions WHERE run = ?", [run]).fetchone()
    return (-1 if not i or i[0] is None else int(i[0])), (-1 if not a or a[0] is None else int(a[0]))


def open_incident_rows(con: Con, run: str) -> list[dict[str, Any]]:
    """``run``'s open incidents (incident_id, event_class, root, severity, start_ts, end_ts, entities)."""
    cur = con.execute(
        "SELECT i.incident_id, i.event_class, i.root, i.severity, i.start_ts, i.end_ts, e.entities "
        "FROM loop_incidents i LEFT JOIN loop_incident_entities e USING (run, incident_id) "
        "WHERE i.run = ? AND i.status = 'open' ORDER BY i.incident_id",
        [run],
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def action_rows(con: Con, run: str) -> list[tuple[Any, ...]]:
    """``run``'s actions in id order: (action_id, ts, kind, target, value, status, incident_id, rule, reason)."""
    return con.execute(
        "SELECT a.action_id, a.ts, a.kind, a.target, a.value, a.status, a.incident_id, n.rule, n.reason "
        "FROM loop_actions a LEFT JOIN loop_action_notes n USING (run, action_id) WHERE a.run = ? "
        "ORDER BY a.action_id",
        [run],
    ).fetchall()


def incident_summary_rows(con: Con, run: str) -> list[tuple[Any, ...]]:
    """``run``'s incidents: (incident_id, start_ts, closed_ts, event_class, severity, root, entities, status,
    end_ts).
    """
    return con.execute(
        "SELECT i.incident_id, i.start_ts, e.closed_ts, i.event_class, i.severity, i.root, e.entities, "
        "i.status, i.end_ts FROM loop_incidents i LEFT JOIN loop_incident_entities e "
        "USING (run, incident_id) WHERE i.run = ? ORDER BY i.incident_id",
        [run],
    ).fetchall()


def action_summary_rows(con: Con, run: str) -> list[tuple[Any, ...]]:
    """``run``'s actions: (action_id, ts, kind, target, value, status, detail, incident_id, rule, reason,
    verification).
    """
    return con.execute(
        "SELECT a.action_id, a.ts, a.kind, a.target, a.value, a.status, a.detail, a.incident_id, n.rule, "
        "n.reason, n.verification FROM loop_actions a LEFT JOIN loop_action_notes n USING (run, action_id) "
        "WHERE a.run = ? ORDER BY a.action_id",
        [run],
    ).fetchall()


def incident_entity_rows(con: Con, run: str | None = None) -> list[tuple[str, int, str]]:
    """(run, incident_id, entities JSON) of the incidents a live watcher recorded (all runs, or one); empty when no
    watcher wrote to the store.
    """
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'loop_incident_entities'"
    ).fetchone()
    if not exists or not exists[0]:
        return []
    rows = con.execute(
        "SELECT run, incident_id, entities FROM loop_incident_entities" + (" WHERE run = ?" if run else ""),
        [run] if run else [],
    ).fetchall()
    return [(str(r), int(i), str(e or "[]")) for r, i, e in rows]


def job_gpus_upsert(run: str, job: str, gpus: Sequence[str], first_ts: float, last_ts: float) -> list[Statement]:
    """Insert one placement span of ``job`` (a row per GPU) or grow the stored one that began at ``first_ts``: its
    ``last_ts`` never moves back, and a GPU already stored for the span is not stored again (a re-run over the same
    data writes the same span).
    """
    gpu_list = list(gpus)
    return [
        ("UPDATE loop_job_gpus SET last_ts = greatest(last_ts, ?) WHERE run = ? AND job = ? AND first_ts = ? AND "
         "list_contains(?::VARCHAR[], gpu)", [last_ts, run, job, first_ts, gpu_list]),
        ("INSERT INTO loop_job_gpus SELECT ?, ?, u.gpu, ?, ? FROM (SELECT unnest(?::VARCHAR[]) AS gpu) u WHERE NOT "
         "EXISTS (SELECT 1 FROM loop_job_gpus x WHERE x.run = ? AND x.job = ? AND x.first_ts = ? AND x.gpu = u.gpu)",
         [run, job, first_ts, last_ts, gpu_list, run, job, first_ts]),
    ]  # fmt: skip


def _has_table(con: Con, table: str) -> bool:
    row = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()
    return bool(row and row[0])


def job_gpu_spans(con: Con, run: str | None = None) -> list[tuple[str, str, float, float]]:
    """Every stored placement row (all runs, or one): (job, gpu, first_ts, last_ts) by job, first_ts, gpu; none
    where the store has no placement (a twin's store, an older watcher's).
    """
    if not _has_table(con, "loop_job_gpus"):
        return []
    query = "SELECT job, gpu, first_ts, last_ts FROM loop_job_gpus" + (" WHERE run = ?" if run else "")
    return [tuple(r) for r in con.execute(query + " ORDER BY job, first_ts, gpu", [run] if run else []).fetchall()]


def last_job_gpu_spans(con: Con, run: str) -> dict[str, tuple[tuple[str, ...], float, float]]:
    """Per job of ``run``, its latest stored placement span: (GPUs in name order, first_ts, last_ts)."""
    rows = con.execute(
        "SELECT job, list(gpu ORDER BY gpu), first_ts, max(last_ts) FROM loop_job_gpus WHERE run = ? AND "
        "(job, first_ts) IN (SELECT (job, max(first_ts)) FROM loop_job_gpus WHERE run = ? GROUP BY job) "
        "GROUP BY job, first_ts",
        [run, run],
    ).fetchall()
    return {str(j): (tuple(g), float(f), float(t)) for j, g, f, t in rows}
