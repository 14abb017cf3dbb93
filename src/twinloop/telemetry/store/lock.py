"""Who may write, read or replace a store file, across processes: an advisory gate beside the DuckDB file.

DuckDB lets one process write a file or several read it, not both, and it says so only by failing to open.
The gate ``<db>.lock`` (``flock``) adds the order DuckDB lacks:

* a **writer** (any read-write :class:`~twinloop.telemetry.store.duckdb_store.DuckDBStore`) holds the gate
  exclusively for as long as its connection is open; the watcher opens, appends and closes every second or so,
  so it holds the gate only for short sessions;
* a **reader** (the web app) takes the gate shared only while it opens its read-only connection and keeps that
  connection for a short snapshot; a writer that holds the gate therefore waits at most one snapshot for the
  readers to go, and no new reader slips in meanwhile (no starvation of the writer);
* **replacing** a store (``sim``/``run --out``) needs the gate exclusively at once: a store another process
  holds is never deleted.

The kernel drops a ``flock`` when its process dies (``kill -9`` included), so a crashed writer never leaves the
store locked. Locks are counted per process and path: a process that already holds the gate may open the store
again (DuckDB shares one database instance inside a process).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # POSIX only; elsewhere the gate is a no-op and DuckDB's own lock is all there is
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

import duckdb

#: How often a waiting process tries the gate again, s.
POLL_S = 0.02


class StoreBusyError(RuntimeError):
    """The store is held by another process (a writer, or a reader when replacing it)."""


def lock_path(db: str | Path) -> Path:
    """The gate file of store ``db``."""
    return Path(str(db) + ".lock")


def is_lock_error(exc: BaseException) -> bool:
    """Whether a DuckDB error says another process holds the file."""
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


@dataclass
class _Held:
    fd: int
    exclusive: bool
    count: int


_HELD: dict[str, _Held] = {}
_MUTEX = threading.Lock()


def _key(db: str | Path) -> str:
    return os.path.realpath(str(db))


def acquire(db: str | Path, exclusive: bool, timeout_s: float = 0.0) -> bool:
    """Take the gate of ``db`` (waiting up to ``timeout_s``); False when another process holds it.

    A process already holding the gate (in either mode) gets it again at once; release as often as acquired.
    """
    if fcntl is None or str(db) == ":memory:":
        return True
    key = _key(db)
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        with _MUTEX:
            held = _HELD.get(key)
            if held is not None:
                held.count += 1
                return True
            path = lock_path(db)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            else:
                _HELD[key] = _Held(fd, exclusive, 1)
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def release(db: str | Path) -> None:
    """Give back one hold of the gate of ``db``."""
    if fcntl is None or str(db) == ":memory:":
        return
    with _MUTEX:
        held = _HELD.get(_key(db))
        if held is None:
            return
        held.count -= 1
        if held.count <= 0:
            del _HELD[_key(db)]
            os.close(held.fd)  # closing the descriptor drops the flock


def connect_retry(
    db: str | Path, read_only: bool, timeout_s: float, config: dict[str, Any] | None = None
) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` that waits up to ``timeout_s`` while another process holds the file.

    Raises:
        StoreBusyError: still held after ``timeout_s``.
        duckdb.Error: any other failure (a corrupt file, not a DuckDB file).
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        try:
            return duckdb.connect(str(db), read_only=read_only, config=config or {})
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise
            if time.monotonic() >= deadline:
                raise StoreBusyError(f"{db}: held by another process (DuckDB lock)") from None
        time.sleep(POLL_S * 5)


def remove_store(db: str | Path, wait_readers_s: float = 3.0) -> None:
    """Delete store ``db`` (and its WAL) for a fresh run; the caller holds the gate exclusively.

    Waits up to ``wait_readers_s`` for read-only snapshots of other processes to close (they cannot reopen while
    the gate is held), then checks DuckDB's own lock once more, for processes that do not use the gate.

    Raises:
        StoreBusyError: another process still has the file open.
    """
    path = Path(db)
    if not path.exists():
        return
    # not openable (corrupt, not DuckDB) but not held either: a fresh run replaces it
    with contextlib.suppress(duckdb.Error):
        connect_retry(path, read_only=False, timeout_s=wait_readers_s).close()
    path.unlink()
    Path(str(path) + ".wal").unlink(missing_ok=True)
