"""The channel between a running watcher and people: pending approvals out, decisions in, status (its store).

DuckDB lets one process write a file, or several read it, not both; a watcher writes its store all the time, so
``twinloop serve --db`` in another process cannot share that file. The watcher therefore keeps this small SQLite
file next to its store (``<db>.control.sqlite``; SQLite lets several processes write one file): it lists the
actions awaiting a person and the watcher's status, and takes decisions (approve/reject) that the dashboard
(:class:`~twinloop.web.controller.DbController`) writes. The watcher applies a decision at its next tick, under
the guard rails, and records the result in its store as usual.

Tables::

    pending(run, action_id, ts, kind, target, value, detail, incident_id, clamped, status)
    decisions(seq INTEGER PRIMARY KEY, run, action_id, decision, ts, consumed)
    status(run PRIMARY KEY, doc, heartbeat_ts)
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending(run TEXT, action_id INTEGER, ts REAL, kind TEXT, target TEXT, value REAL,
  detail TEXT, incident_id INTEGER, clamped INTEGER, status TEXT, PRIMARY KEY (run, action_id));
CREATE TABLE IF NOT EXISTS decisions(seq INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT, action_id INTEGER,
  decision TEXT, ts REAL, consumed INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS status(run TEXT PRIMARY KEY, doc TEXT, heartbeat_ts REAL);
"""

Decision = Literal["approve", "reject"]


def control_path(db: str | Path) -> Path:
    """The control file of a store: ``<db>.control.sqlite``."""
    return Path(f"{db}.control.sqlite")


class ControlChannel:
    """One side of the channel (the watcher or the dashboard); every call is its own short transaction.

    Args:
        path: the SQLite file (created with its tables on first use).
        run: the watcher's run name.
    """

    def __init__(self, path: str | Path, run: str = "watch") -> None:
        self.path = Path(path)
        self.run = run

    @contextmanager
    def _con(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=10.0)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)
            with con:
                yield con
        finally:
            con.close()

    # ------------------------------------------------------------------ the watcher's side
    def put_pending(self, action: dict[str, Any]) -> None:
        """List an action awaiting a person (a :func:`pending_row`)."""
        with self._con() as con:
            con.execute(
                "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                [self.run, action["action_id"], action["ts"], action["kind"], action["target"], action["value"],
                 action["detail"], action["incident_id"], int(bool(action["clamped"]))],
            )  # fmt: skip

    def settle(self, action_id: int, status: str) -> None:
        """Mark a listed action decided (approved and applied, rejected, refused...)."""
        with self._con() as con:
            con.execute("UPDATE pending SET status = ? WHERE run = ? AND action_id = ?", [status, self.run, action_id])

    def take_decisions(self) -> list[tuple[int, Decision]]:
        """Decisions not yet taken, oldest first; they are marked consumed."""
        with self._con() as con:
            rows = con.execute(
                "SELECT seq, action_id, decision FROM decisions WHERE run = ? AND consumed = 0 ORDER BY seq",
                [self.run],
            ).fetchall()
            con.executemany("UPDATE decisions SET consumed = 1 WHERE seq = ?", [(r[0],) for r in rows])
        return [(int(r[1]), r[2]) for r in rows if r[2] in ("approve", "reject")]

    def heartbeat(self, doc: dict[str, Any]) -> None:
        """Publish the watcher's status (mode, counts, newest sample)."""
        with self._con() as con:
            con.execute("INSERT OR REPLACE INTO status VALUES (?, ?, ?)", [self.run, json.dumps(doc), time.time()])

    # ------------------------------------------------------------------ the dashboard's side
    def pending(self) -> list[dict[str, Any]]:
        """Actions awaiting a person, oldest first."""
        with self._con() as con:
            rows = con.execute(
                "SELECT action_id, ts, kind, target, value, detail, incident_id, clamped FROM pending "
                "WHERE run = ? AND status = 'pending' ORDER BY action_id",
                [self.run],
            ).fetchall()
        keys = ("action_id", "ts", "kind", "target", "value", "detail", "incident_id", "clamped")
        return [{"run": self.run, "status": "pending", **dict(zip(keys, r, strict=True))} for r in rows]

    def decide(self, action_id: int, decision: Decision) -> bool:
        """Send a decision on a pending action; False when no such action is pending."""
        with self._con() as con:
            row = con.execute(
                "SELECT 1 FROM pending WHERE run = ? AND action_id = ? AND status = 'pending'", [self.run, action_id]
            ).fetchone()
            if row is None:
                return False
            con.execute(
                "INSERT INTO decisions(run, action_id, decision, ts) VALUES (?, ?, ?, ?)",
                [self.run, action_id, decision, time.time()],
            )
            con.execute(
                "UPDATE pending SET status = ? WHERE run = ? AND action_id = ?",
                [f"{decision} sent", self.run, action_id],
            )
        return True

    def status(self) -> dict[str, Any]:
        """The watcher's last published status, with the heartbeat's age in seconds."""
        with self._con() as con:
            row = con.execute("SELECT doc, heartbeat_ts FROM status WHERE run = ?", [self.run]).fetchone()
        if row is None:
            return {"run": self.run, "watcher": "never seen"}
        return {**json.loads(row[0]), "run": self.run, "heartbeat_age_s": round(time.time() - float(row[1]), 1)}
