"""What a loop run leaves behind for people and the web app: incidents, actions and ground truth, as tables
in the same DuckDB file as the telemetry (one file per run directory, zero set-up).

Tables (``run`` names the pass, e.g. ``loop-off`` / ``loop-on``)::

    loop_incidents(run, incident_id, event_class, root, severity, start_ts, end_ts, n_members, n_detections, status)
    loop_actions(run, action_id, ts, kind, target, value, status, detail, incident_id, clamped)
    loop_ground_truth(run, fault, entity, start_ts, end_ts)

Writes replace a run's rows in one transaction, so a crash never leaves half a run.

A live watcher (:class:`LiveRecords`) writes the same two tables row by row as things happen, plus
``loop_incident_entities(run, incident_id, entities, closed_ts, pipeline_id)``,
``loop_action_notes(run, action_id, rule, reason, verification)`` and ``loop_state(run, key, value)`` (what a
restart needs: learned thresholds, incidents it closed on restart).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import ActionResult
from twinloop.telemetry.store.session import SessionStore

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


# ---------------------------------------------------------------------------------------------------------------
# Live records: a watcher writes each incident update and each action as it happens (``twinloop watch``), and
# reads them back when it starts again on the same file (restart safety).

_LIVE_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_incident_entities(run VARCHAR, incident_id BIGINT, entities VARCHAR,
  closed_ts DOUBLE, pipeline_id BIGINT);
CREATE TABLE IF NOT EXISTS loop_action_notes(run VARCHAR, action_id BIGINT, rule VARCHAR, reason VARCHAR,
  verification VARCHAR);
CREATE TABLE IF NOT EXISTS loop_state(run VARCHAR, key VARCHAR, value VARCHAR);
"""

#: Action statuses that judge an earlier action's effect (their result goes to that action's ``verification``).
VERDICTS = frozenset({"verified", "rolled_back"})


def rule_of(reason: str) -> str:
    """The policy rule named in a responder's reason (``<rule> on incident <id> (...)``), or ``""``."""
    head, sep, _ = reason.partition(" on incident ")
    return head if sep else ""


@dataclass(frozen=True)
class StoredAction:
    """An action as a previous run of the watcher left it."""

    action_id: int
    ts: float
    kind: str
    target: str
    value: float | None
    status: str
    incident_id: int
    rule: str
    reason: str


def _schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(_SCHEMA)
    con.execute(_LIVE_SCHEMA)


def _run_tx(con: duckdb.DuckDBPyConnection, statements: list[tuple[str, list[Any]]]) -> None:
    _schema(con)
    con.execute("BEGIN TRANSACTION")
    try:
        for sql, params in statements:
            con.execute(sql, params)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


class LiveRecords:
    """Writes a watcher's incidents and actions as they happen, each in its own transaction, and reads back what
    a previous run of the same ``run`` left (open incidents, pending approvals, actions taken, state).

    Args:
        target: an open connection (written at once), or a :class:`SessionStore` (writes queue and go to the file
            in its next short session, so that other processes, the dashboard among them, can read it between).
        run: the run name.
    """

    def __init__(self, target: duckdb.DuckDBPyConnection | SessionStore, run: str = "watch") -> None:
        self.target = target
        self.run = run
        self._ready = False

    @contextmanager
    def _con(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for reading (a session of the store: the queued writes go first)."""
        if isinstance(self.target, SessionStore):
            with self.target.session(wait_s=10.0) as con:
                _schema(con)
                yield con
            return
        if not self._ready:
            _schema(self.target)
            self._ready = True
        yield self.target

    def _tx(self, statements: list[tuple[str, list[Any]]]) -> None:
        if isinstance(self.target, SessionStore):
            self.target.write(lambda con: _run_tx(con, statements))
        else:
            _run_tx(self.target, statements)

    def flush_due(self) -> bool:
        """Write queued records when their period is due (session stores); True when nothing is left queued."""
        return self.target.maybe_flush() if isinstance(self.target, SessionStore) else True

    def flush(self) -> bool:
        """Write queued records now, waiting for the file if another process holds it (session stores)."""
        return self.target.flush(wait_s=10.0) if isinstance(self.target, SessionStore) else True

    def incident(self, i: Incident, pipeline_id: int | None = None) -> None:
        """Insert or replace one incident (its latest version)."""
        closed = i.end_ts if i.status != "open" else None
        self._tx(
            [
                ("DELETE FROM loop_incidents WHERE run = ? AND incident_id = ?", [self.run, i.incident_id]),
                ("DELETE FROM loop_incident_entities WHERE run = ? AND incident_id = ?", [self.run, i.incident_id]),
                ("INSERT INTO loop_incidents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 [self.run, i.incident_id, str(i.event_class), i.root, i.severity.name.lower(), i.start_ts,
                  i.end_ts, len(i.members), i.n_detections, i.status]),
                ("INSERT INTO loop_incident_entities VALUES (?, ?, ?, ?, ?)",
                 [self.run, i.incident_id, json.dumps(list(i.members)), closed, pipeline_id]),
            ]
        )  # fmt: skip

    def close_incident(self, incident_id: int, ts: float, why: str) -> None:
        """Close a stored incident that a restarted watcher did not see again."""
        self._tx(
            [
                ("UPDATE loop_incidents SET status = 'closed', end_ts = greatest(end_ts, ?) WHERE run = ? AND "
                 "incident_id = ?", [ts, self.run, incident_id]),
                ("UPDATE loop_incident_entities SET closed_ts = ? WHERE run = ? AND incident_id = ?",
                 [ts, self.run, incident_id]),
                ("INSERT INTO loop_state VALUES (?, ?, ?)", [self.run, f"closed:{incident_id}", why]),
            ]
        )  # fmt: skip

    def action(self, action_id: int, a: ActionResult, verifies: int | None = None) -> None:
        """Insert or replace one action result (stored under ``action_id``); a verdict also fills in the
        ``verification`` of the action it judges (``verifies``)."""
        req = a.request
        stmts: list[tuple[str, list[Any]]] = [
            ("DELETE FROM loop_actions WHERE run = ? AND action_id = ?", [self.run, action_id]),
            ("DELETE FROM loop_action_notes WHERE run = ? AND action_id = ?", [self.run, action_id]),
            ("INSERT INTO loop_actions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             [self.run, action_id, a.ts, str(req.kind), req.target, req.value, a.status, a.detail,
              req.incident_id, a.clamped]),
            ("INSERT INTO loop_action_notes VALUES (?, ?, ?, ?, ?)",
             [self.run, action_id, rule_of(req.reason), req.reason, None]),
        ]  # fmt: skip
        if verifies is not None:
            stmts.append(
                ("UPDATE loop_action_notes SET verification = ? WHERE run = ? AND action_id = ?",
                 [f"{a.status}: {a.detail}", self.run, verifies])
            )  # fmt: skip
        self._tx(stmts)

    def set_state(self, key: str, value: Any) -> None:
        """Remember a value (JSON) under ``key`` for the next start."""
        self._tx(
            [
                ("DELETE FROM loop_state WHERE run = ? AND key = ?", [self.run, key]),
                ("INSERT INTO loop_state VALUES (?, ?, ?)", [self.run, key, json.dumps(value)]),
            ]
        )

    def state(self, key: str, default: Any = None) -> Any:
        """A value remembered by :meth:`set_state`, or ``default``."""
        with self._con() as con:
            row = con.execute("SELECT value FROM loop_state WHERE run = ? AND key = ?", [self.run, key]).fetchone()
        return default if row is None else json.loads(row[0])

    def max_ids(self) -> tuple[int, int]:
        """The largest stored incident and action ids of this run (-1 when none)."""
        with self._con() as con:
            i = con.execute("SELECT max(incident_id) FROM loop_incidents WHERE run = ?", [self.run]).fetchone()
            a = con.execute("SELECT max(action_id) FROM loop_actions WHERE run = ?", [self.run]).fetchone()
        return (-1 if not i or i[0] is None else int(i[0])), (-1 if not a or a[0] is None else int(a[0]))

    def open_incidents(self) -> list[dict[str, Any]]:
        """This run's incidents still open, with their entities."""
        with self._con() as con:
            cur = con.execute(
                "SELECT i.incident_id, i.event_class, i.root, i.severity, i.start_ts, i.end_ts, e.entities "
                "FROM loop_incidents i LEFT JOIN loop_incident_entities e USING (run, incident_id) "
                "WHERE i.run = ? AND i.status = 'open' ORDER BY i.incident_id",
                [self.run],
            )
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def actions(self) -> list[StoredAction]:
        """This run's actions in id order."""
        with self._con() as con:
            rows = con.execute(
                "SELECT a.action_id, a.ts, a.kind, a.target, a.value, a.status, a.incident_id, n.rule, n.reason "
                "FROM loop_actions a LEFT JOIN loop_action_notes n USING (run, action_id) WHERE a.run = ? "
                "ORDER BY a.action_id",
                [self.run],
            ).fetchall()
        return [StoredAction(int(r[0]), float(r[1]), str(r[2]), str(r[3]), r[4], str(r[5]), int(r[6]),
                             str(r[7] or ""), str(r[8] or "")) for r in rows]  # fmt: skip

    def summary(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every incident (``opened_ts``, ``closed_ts``, ``class``, ``severity``, ``root``, ``entities``) and every
        action (with ``rule``, ``reason``, ``verification``) of this run."""
        with self._con() as con:
            inc_rows = con.execute(
                "SELECT i.incident_id, i.start_ts, e.closed_ts, i.event_class, i.severity, i.root, e.entities, "
                "i.status, i.end_ts FROM loop_incidents i LEFT JOIN loop_incident_entities e "
                "USING (run, incident_id) WHERE i.run = ? ORDER BY i.incident_id",
                [self.run],
            ).fetchall()
            act_rows = con.execute(
                "SELECT a.action_id, a.ts, a.kind, a.target, a.value, a.status, a.detail, a.incident_id, n.rule, "
                "n.reason, n.verification FROM loop_actions a LEFT JOIN loop_action_notes n USING (run, action_id) "
                "WHERE a.run = ? ORDER BY a.action_id",
                [self.run],
            ).fetchall()
        incidents = [
            {"incident_id": int(r[0]), "opened_ts": r[1], "closed_ts": r[2] if r[7] != "open" else None,
             "class": r[3], "severity": r[4], "root": r[5], "entities": json.loads(r[6] or "[]"), "status": r[7],
             "last_ts": r[8]}
            for r in inc_rows
        ]  # fmt: skip
        cols = ["action_id", "ts", "kind", "target", "value", "status", "detail", "incident_id", "rule", "reason",
                "verification"]  # fmt: skip
        actions = [dict(zip(cols, r, strict=True)) for r in act_rows]
        return incidents, actions
