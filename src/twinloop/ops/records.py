"""What a loop run leaves behind for people and the web app: incidents, actions and ground truth, as tables
in the same DuckDB file as the telemetry (one file per run directory, zero set-up).

Tables (``run`` names the pass, e.g. ``loop-off`` / ``loop-on``)::

    loop_incidents(run, incident_id, event_class, root, severity, start_ts, end_ts, n_members, n_detections, status)
    loop_actions(run, action_id, ts, kind, target, value, status, detail, incident_id, clamped)
    loop_ground_truth(run, fault, entity, start_ts, end_ts)
    loop_advisory(run, incident_id, ts, rule_class, advisory_class, advisory_probability, rule_class_probability)

Writes replace a run's rows in one transaction, so a crash never leaves half a run. The tables and their SQL
belong to the store (:mod:`twinloop.telemetry.store.loop_records`); this module turns loop objects into rows.

A live watcher (:class:`LiveRecords`) writes the same two tables row by row as things happen, plus
``loop_incident_entities(run, incident_id, entities, closed_ts, pipeline_id)``,
``loop_action_notes(run, action_id, rule, reason, verification)`` and ``loop_state(run, key, value)`` (what a
restart needs: learned thresholds, incidents it closed on restart).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from twinloop.ops.classify.advisory import Advice
from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import ActionResult
from twinloop.telemetry.store import loop_records
from twinloop.telemetry.store.session import SessionStore


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
    advice: Iterable[Advice] = (),
) -> None:
    """Replace ``run``'s incidents, actions, ground truth and advisory classes (the learned classifier's second
    opinion, :mod:`twinloop.ops.classify.advisory`) in one transaction.
    """
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
    adv_rows = [
        (run, a.incident_id, a.ts, a.rule_class.value, a.advisory_class.value, a.probability, a.rule_class_probability)
        for a in advice
    ]
    loop_records.replace_run(con, run, inc_rows, act_rows, gt_rows, adv_rows)


def read_table(con: duckdb.DuckDBPyConnection, table: str, run: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``loop_incidents``/``loop_actions``/``loop_ground_truth``/``loop_advisory`` as dicts (all runs, or
    one).
    """
    return loop_records.read_loop_table(con, table, run)


# ---------------------------------------------------------------------------------------------------------------
# Live records: a watcher writes each incident update and each action as it happens (``twinloop watch``), and
# reads them back when it starts again on the same file (restart safety).

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
                loop_records.ensure_schema(con)
                yield con
            return
        if not self._ready:
            loop_records.ensure_schema(self.target)
            self._ready = True
        yield self.target

    def _tx(self, statements: list[loop_records.Statement]) -> None:
        if isinstance(self.target, SessionStore):
            self.target.write(lambda con: loop_records.run_transaction(con, statements))
        else:
            loop_records.run_transaction(self.target, statements)

    def flush_due(self) -> bool:
        """Write queued records when their period is due (session stores); True when nothing is left queued."""
        return self.target.maybe_flush() if isinstance(self.target, SessionStore) else True

    def flush(self) -> bool:
        """Write queued records now, waiting for the file if another process holds it (session stores)."""
        return self.target.flush(wait_s=10.0) if isinstance(self.target, SessionStore) else True

    def incident(self, i: Incident, pipeline_id: int | None = None) -> None:
        """Insert or replace one incident (its latest version)."""
        closed = i.end_ts if i.status != "open" else None
        row = (i.incident_id, str(i.event_class), i.root, i.severity.name.lower(), i.start_ts, i.end_ts,
               len(i.members), i.n_detections, i.status)  # fmt: skip
        self._tx(loop_records.incident_upsert(self.run, row, json.dumps(list(i.members)), closed, pipeline_id))

    def advice(self, a: Advice) -> None:
        """Insert or replace one incident's advisory class (the learned classifier's second opinion)."""
        row = (a.incident_id, a.ts, a.rule_class.value, a.advisory_class.value, a.probability, a.rule_class_probability)
        self._tx(loop_records.advisory_upsert(self.run, row))

    def close_incident(self, incident_id: int, ts: float, why: str) -> None:
        """Close a stored incident that a restarted watcher did not see again."""
        self._tx(loop_records.incident_close(self.run, incident_id, ts, why))

    def action(self, action_id: int, a: ActionResult, verifies: int | None = None) -> None:
        """Insert or replace one action result (stored under ``action_id``); a verdict also fills in the
        ``verification`` of the action it judges (``verifies``).
        """
        req = a.request
        row = (a.ts, str(req.kind), req.target, req.value, a.status, a.detail, req.incident_id, a.clamped)
        stmts = loop_records.action_upsert(self.run, action_id, row, rule_of(req.reason), req.reason)
        if verifies is not None:
            stmts.append(loop_records.action_verification(self.run, verifies, f"{a.status}: {a.detail}"))
        self._tx(stmts)

    def set_state(self, key: str, value: Any) -> None:
        """Remember a value (JSON) under ``key`` for the next start."""
        self._tx(loop_records.state_set(self.run, key, json.dumps(value)))

    def job_gpus(self, spans: Sequence[tuple[str, Sequence[str], float, float]]) -> None:
        """Store jobs' placement spans ``(job, GPUs, first_ts, last_ts)`` in one transaction (a stored span grows)."""
        if spans:
            self._tx([st for j, g, f, t in spans for st in loop_records.job_gpus_upsert(self.run, j, g, f, t)])

    def last_job_gpus(self) -> dict[str, tuple[tuple[str, ...], float, float]]:
        """Per job of this run, its latest stored placement span: (GPUs in name order, first_ts, last_ts)."""
        with self._con() as con:
            return loop_records.last_job_gpu_spans(con, self.run)

    def state(self, key: str, default: Any = None) -> Any:
        """A value remembered by :meth:`set_state`, or ``default``."""
        with self._con() as con:
            value = loop_records.state_value(con, self.run, key)
        return default if value is None else json.loads(value)

    def max_ids(self) -> tuple[int, int]:
        """The largest stored incident and action ids of this run (-1 when none)."""
        with self._con() as con:
            return loop_records.max_ids(con, self.run)

    def open_incidents(self) -> list[dict[str, Any]]:
        """This run's incidents still open, with their entities."""
        with self._con() as con:
            return loop_records.open_incident_rows(con, self.run)

    def actions(self) -> list[StoredAction]:
        """This run's actions in id order."""
        with self._con() as con:
            rows = loop_records.action_rows(con, self.run)
        return [StoredAction(int(r[0]), float(r[1]), str(r[2]), str(r[3]), r[4], str(r[5]), int(r[6]),
                             str(r[7] or ""), str(r[8] or "")) for r in rows]  # fmt: skip

    def summary(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every incident (``opened_ts``, ``closed_ts``, ``class``, ``severity``, ``root``, ``entities``) and every
        action (with ``rule``, ``reason``, ``verification``) of this run.
        """
        with self._con() as con:
            inc_rows = loop_records.incident_summary_rows(con, self.run)
            act_rows = loop_records.action_summary_rows(con, self.run)
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
