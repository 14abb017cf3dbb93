"""The loop's records (``loop_incidents``, ``loop_actions`` in the run's DuckDB file) for the incidents page:
incidents grouped by cause, each with the actions taken and what came of them.

Times are put on the telemetry's axis (``twinloop.report.timebase``): a twin run's records count simulated
seconds, its telemetry absolute UTC seconds; the pages show one absolute axis. Passing ``t0_s`` (the telemetry's
oldest timestamp) turns this on.
"""

from __future__ import annotations

from typing import Any

import duckdb

from twinloop.report.timebase import record_offset_s
from twinloop.telemetry.store.loop_records import read_loop_table as read_table
from twinloop.web.models import ActionRow, IncidentBrief, IncidentDetail, IncidentGroup, InjectedFault

SEVERITY_ORDER = ("info", "minor", "major", "critical")

#: What an action's final status says about its effect, best first.
_EFFECT = (
    ("verified", "verified: the expected effect appeared"),
    ("rolled_back", "rolled back: the expected effect did not appear"),
    ("restored", "held while the incident was open, then restored"),
    ("superseded", "held while the incident was open; changed since, so left as is"),
    ("applied", "applied"),
    ("dry_run", "dry run: command shown, not executed"),
    ("pending", "awaiting approval"),
    ("recommended", "recommended only (observe mode)"),
    ("rejected", "rejected by an operator"),
    ("refused", "refused by a guard rail"),
    ("failed", "failed"),
)


def runs(cur: duckdb.DuckDBPyConnection) -> list[str]:
    """Run names that have incidents or actions recorded."""
    names: set[str] = set()
    for table in ("loop_incidents", "loop_actions"):
        names.update(str(r["run"]) for r in read_table(cur, table))
    return sorted(names)


def _severity_rank(s: str) -> int:
    return SEVERITY_ORDER.index(s) if s in SEVERITY_ORDER else -1


def action_row(row: dict[str, Any], offset_s: float = 0.0) -> ActionRow:
    """An :class:`ActionRow` from a ``loop_actions`` row or a controller's pending-action dict."""
    value = row.get("value")
    incident = row.get("incident_id")
    return ActionRow(
        run=str(row.get("run", "")),
        action_id=int(row["action_id"]),
        ts=float(row.get("ts") or 0.0) + offset_s,
        kind=str(row.get("kind", "")),
        target=str(row.get("target", "")),
        value=None if value is None else float(value),
        status=str(row.get("status", "")),
        detail=str(row.get("detail") or ""),
        incident_id=-1 if incident is None else int(incident),
        clamped=bool(row.get("clamped") or False),
    )


def effect(actions: list[ActionRow]) -> str:
    """One line on what the actions of an incident achieved."""
    if not actions:
        return "no action"
    statuses = {a.status for a in actions}
    for status, text in _EFFECT:
        if status in statuses:
            return text
    return ", ".join(sorted(statuses))


def incident_brief(row: dict[str, Any], offset_s: float = 0.0) -> IncidentBrief:
    """An :class:`IncidentBrief` from a ``loop_incidents`` row (times shifted by ``offset_s``)."""
    return IncidentBrief(
        run=str(row["run"]),
        incident_id=int(row["incident_id"]),
        event_class=str(row["event_class"]),
        root=str(row["root"]),
        severity=str(row["severity"]),
        start_ts=float(row["start_ts"]) + offset_s,
        end_ts=float(row["end_ts"]) + offset_s,
        n_members=int(row["n_members"]),
        n_detections=int(row["n_detections"]),
        status=str(row["status"]),
    )


def _offset(rows: list[dict[str, Any]], key: str, t0_s: float | None) -> float:
    return record_offset_s((float(r[key]) for r in rows if r.get(key) is not None), t0_s)


def open_incidents(cur: duckdb.DuckDBPyConnection, t0_s: float | None = None) -> list[IncidentBrief]:
    """Open incidents of every run, most severe first, then newest."""
    table = read_table(cur, "loop_incidents")
    off = _offset(table, "start_ts", t0_s)
    rows = [incident_brief(r, off) for r in table if r["status"] == "open"]
    return sorted(rows, key=lambda i: (-_severity_rank(i.severity), -i.start_ts))


def incident_groups(cur: duckdb.DuckDBPyConnection, run: str | None, t0_s: float | None = None) -> list[IncidentGroup]:
    """Incidents of ``run`` (all runs when None) grouped by event class, with their actions and effect."""
    actions: dict[tuple[str, int], list[ActionRow]] = {}
    act_rows = read_table(cur, "loop_actions", run)
    a_off = _offset(act_rows, "ts", t0_s)
    for r in act_rows:
        a = action_row(r, a_off)
        actions.setdefault((a.run, a.incident_id), []).append(a)
    groups: dict[str, list[IncidentDetail]] = {}
    inc_rows = read_table(cur, "loop_incidents", run)
    i_off = _offset(inc_rows, "start_ts", t0_s)
    truth: dict[str, list[InjectedFault]] = {}
    gt_rows = read_table(cur, "loop_ground_truth", run)
    g_off = _offset(gt_rows, "start_ts", t0_s)
    for g in gt_rows:
        truth.setdefault(str(g["run"]), []).append(
            InjectedFault(
                fault=str(g["fault"]),
                entity=str(g["entity"]),
                start_ts=float(g["start_ts"]) + g_off,
                end_ts=float(g["end_ts"]) + g_off,
            )
        )
    for r in inc_rows:
        brief = incident_brief(r, i_off)
        acts = actions.get((brief.run, brief.incident_id), [])
        # the twin knows where a fault really was (e.g. the straggling GPU behind a job-level straggler)
        injected = [f for f in truth.get(brief.run, []) if f.start_ts <= brief.end_ts and f.end_ts >= brief.start_ts]
        detail = IncidentDetail(**brief.model_dump(), actions=acts, effect=effect(acts), injected=injected)
        groups.setdefault(brief.event_class, []).append(detail)
    out = [
        IncidentGroup(
            event_class=cls,
            count=len(items),
            worst_severity=max((i.severity for i in items), key=_severity_rank),
            incidents=items,
        )
        for cls, items in groups.items()
    ]
    return sorted(out, key=lambda g: (-_severity_rank(g.worst_severity), -g.count, g.event_class))


def action_log(cur: duckdb.DuckDBPyConnection, run: str | None, t0_s: float | None = None) -> list[ActionRow]:
    """Every recorded action of ``run`` (all runs when None), by run and action id."""
    rows = read_table(cur, "loop_actions", run)
    off = _offset(rows, "ts", t0_s)
    return [action_row(r, off) for r in rows]
