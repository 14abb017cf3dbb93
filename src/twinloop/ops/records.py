"""What a loop run leaves behind for people and the web app: incidents, actions and ground truth, as tables
in the same DuckDB file as the telemetry (one file per run directory, zero set-up).

Tables (``run`` names the pass, e.g. ``loop-off`` / ``loop-on``)::

    loop_incidents(run, incident_id, event_class, root, severity, start_ts, end_ts, n_members, n_detections, status)
    loop_actions(run, action_id, ts, kind, target, value, status, detail, incident_id, clamped)
    loop_ground_truth(run, fault, entity, start_ts, end_ts)

Writes replace a run's rows in one transaction, so a crash never leaves half a run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb

from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import ActionResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_incidents(run VARCHAR, incident_id BIGINT, event_class VARCHAR, root VARCHAR,
  severity VARCHAR, start_ts DOUBLE, end_ts DOUBLE, n_members INTEGER, n_detections INTEGER, status VARCHAR);
CREATE TABLE IF NOT EXISTS loop_actions(run VARCHAR, action_id BIGINT, ts DOUBLE, kind VARCHAR, target VARCHAR,
  value DOUBLE, status VARCHAR, detail VARCHAR, incident_id BIGINT, clamped BOOLEAN);
CREATE TABLE IF NOT EXISTS loop_ground_truth(run VARCHAR, fault VARCHAR, entity VARCHAR, start_ts DOUBLE,
  end_ts DOUBLE);
"""


@dataclass(frozen=True)
class GroundTruthLabel:
    """An injected fault: what, where, when (seconds of simulation time)."""

    fault: str
    entity: str
    start_ts: float
    end_ts: float


def write_run(
    con: duckdb.DuckDBPyConnection,
    run: str,
    incidents: Iterable[Incident],
    actions: Iterable[ActionResult],
    ground_truth: Iterable[GroundTruthLabel] = (),
) -> None:
    """Replace ``run``'s incidents, actions and ground truth in one transaction."""
    inc_rows = [
        (run, i.incident_id, str(i.event_class), i.root, i.severity.name.lower(), i.start_ts, i.end_ts,
         len(i.members), i.n_detections, i.status)
        for i in incidents
    ]  # fmt: skip
    act_rows = [
        (run, a.action_id, a.ts, str(a.request.kind), a.request.target, a.request.value, a.status, a.audit_detail,
         a.request.incident_id, a.clamped)
        for a in actions
    ]  # fmt: skip
    gt_rows = [(run, g.fault, g.entity, g.start_ts, g.end_ts) for g in ground_truth]
    con.execute(_SCHEMA)
    con.execute("BEGIN TRANSACTION")
    try:
        for table, rows, width in (
            ("loop_incidents", inc_rows, 10),
            ("loop_actions", act_rows, 10),
            ("loop_ground_truth", gt_rows, 5),
        ):
            con.execute(f"DELETE FROM {table} WHERE run = ?", [run])
            if rows:
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * width)})", rows)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def read_table(con: duckdb.DuckDBPyConnection, table: str, run: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``loop_incidents``/``loop_actions``/``loop_ground_truth`` as dicts (all runs, or one)."""
    if table not in ("loop_incidents", "loop_actions", "loop_ground_truth"):
        raise ValueError(f"unknown loop table {table!r}")
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()
    if not exists or not exists[0]:
        return []
    order = {"loop_incidents": "start_ts", "loop_actions": "action_id", "loop_ground_truth": "start_ts"}[table]
    query = f"SELECT * FROM {table}" + (" WHERE run = ?" if run else "") + f" ORDER BY run, {order}"
    cur = con.execute(query, [run] if run else [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
