"""A store that a long-running writer holds only in short sessions, so that other processes can read it between.

``twinloop watch --db`` runs for days; DuckDB lets one process write a file or several read it, not both. So the
watcher does not keep the file open: frames and record writes queue in memory, and every ``flush_s`` (wall) it
opens the store, appends everything queued (each write its own transaction, in order), and closes it again
(:mod:`~twinloop.telemetry.store.lock` keeps readers from starving it). While another process holds the file the
queue simply grows and is written at the next chance: nothing is lost, and the loop never blocks on the file.

A frame queued with a ``source_key`` is written as :meth:`DuckDBStore.append` writes such a frame: rows that source
already stored (same entity, field and time) are left out, so a watcher started again over the same data adds none
twice. The frames queued between two record writes go in one append per source key (their order among themselves
does not matter: they are different rows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from twinloop.errors import InputError
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

#: A queued write: runs inside one session with the open connection.
Write = Callable[[duckdb.DuckDBPyConnection], None]


@dataclass(frozen=True)
class _Keyed:
    """A frame queued with the source key its rows are checked against (None: written as they are)."""

    frame: Frame
    source_key: str | None


class SessionStore:
    """Queues writes to a DuckDB store and applies them in short open → write → close sessions.

    Args:
        path: the store file.
        flush_s: how often :meth:`maybe_flush` writes the queue, wall s.
        busy_wait_s: how long one flush waits for another process to let go of the file before trying later, s.
    """

    def __init__(self, path: str | Path, flush_s: float = 1.0, busy_wait_s: float = 0.25) -> None:
        if not flush_s >= 0 or not busy_wait_s >= 0:
            raise InputError("SessionStore", "flush_s", "must be >= 0 s")
        self.path = Path(path)
        self.flush_s = flush_s
        self.busy_wait_s = busy_wait_s
        self._queue: list[_Keyed | Write] = []
        self._last_flush = time.monotonic()
        self.busy_since: float | None = None  # monotonic time of the first flush refused since the last success
        self.sessions = 0
        self.rows = 0

    @property
    def queued(self) -> int:
        """Writes waiting for the next session."""
        return len(self._queue)

    def append(self, frame: Frame, source_key: str | None = None) -> int:
        """Queue a telemetry frame; returns its rows (written at the next flush).

        Args:
            frame: the samples.
            source_key: where they come from; when given, rows this source already stored are not written again
                (:meth:`DuckDBStore.append`).
        """
        if len(frame):
            self._queue.append(_Keyed(frame, source_key))
        return len(frame)

    def write(self, op: Write) -> None:
        """Queue a write (one transaction of its own, run at the next flush in order)."""
        self._queue.append(op)

    @contextmanager
    def session(self, wait_s: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open the store (writing the queue first), yield its connection, close it.

        Raises:
            InputError: another process still holds the store after ``wait_s`` (default: ``busy_wait_s``).
        """
        store = DuckDBStore(self.path, lock_timeout_s=self.busy_wait_s if wait_s is None else wait_s)
        try:
            con = store.con
            self._drain(store)
            self.sessions += 1
            yield con
        finally:
            store.close()

    def _drain(self, store: DuckDBStore) -> None:
        while self._queue:
            head = self._queue[0]
            if isinstance(head, _Keyed):
                n = 1
                while n < len(self._queue) and isinstance(self._queue[n], _Keyed):
                    n += 1
                by_key: dict[str | None, list[Frame]] = {}
                for item in self._queue[:n]:
                    if isinstance(item, _Keyed):
                        by_key.setdefault(item.source_key, []).append(item.frame)
                for key, frames in by_key.items():
                    self.rows += store.append(Frame.concat(frames), source_key=key)
                del self._queue[:n]
            else:
                head(store.con)
                del self._queue[0]

    def flush(self, wait_s: float | None = None) -> bool:
        """Write the queue now; False (queue kept) when another process holds the store."""
        self._last_flush = time.monotonic()
        if not self._queue:
            return True
        try:
            with self.session(wait_s):
                pass
        except InputError:
            if self.busy_since is None:
                self.busy_since = time.monotonic()
            return False
        self.busy_since = None
        return True

    def maybe_flush(self) -> bool:
        """:meth:`flush` when ``flush_s`` has passed since the last one; True when nothing is left queued."""
        if time.monotonic() - self._last_flush >= self.flush_s:
            return self.flush()
        return not self._queue
