"""The web app's view of a telemetry DuckDB file: a shared read-only connection, a cursor per request, and a
cached topology (entity id → level, rack, row) so aggregation over 16k GPUs is NumPy, not a Python loop.

The file is opened read-only (several readers may share it). When it does not exist yet (a run that has
not written anything), every query sees an empty store and the app retries on the next request; when it is
replaced (a new run written to the same directory), the app reopens it. DuckDB lets one process write a file
or many read it, not both, so the app holds the file only for short snapshots: a connection lives at most
``snapshot_s`` and is closed once its last request is done; the next request opens the file again through the
store's gate (:mod:`twinloop.telemetry.store.lock`), waiting while a writer (``twinloop watch`` flushing every
second or so) appends. While a writer holds the file longer than ``busy_wait_s``, or the file is corrupt, a
request fails with :class:`StoreUnavailableError` (HTTP 503 with the reason), never with an empty store. A process
that writes the store itself (the loop runner serving its own run) passes ``connect`` instead, returning its
own connection; cursors of it see the writer's committed data live.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
from numpy.typing import NDArray

from twinloop.report.levels import gpu_spec_of
from twinloop.telemetry.store import lock, queries

#: Hierarchy depth of each level in ``site/row/rack/node/gpu``.
DEPTH = {"site": 1, "row": 2, "rack": 3, "node": 4, "gpu": 5}
JOB_LEVEL = 0


@dataclass(frozen=True)
class Topology:
    """Entities of the store, indexed by their ``entity_id``.

    Attributes:
        names: entity id string per ``entity_id`` (``""`` for unused ids).
        level: hierarchy depth per ``entity_id`` (1 site … 5 gpu, 0 job, −1 other).
        rack: index into ``racks`` per ``entity_id`` (−1 above rack level or for jobs).
        racks: rack ids, sorted; rack_row: index into ``rows`` per rack; rows: row ids, sorted.
        sites: site ids, sorted.
        job_of: job name per ``entity_id`` from the entity's ``job`` label (``""`` when unlabeled).
        slowdown_c: slowdown temperature per ``entity_id`` of the catalog GPU its labels name (``gpu_kind`` or
            ``modelName``), °C; NaN when unknown.
        by_name: entity id string → ``entity_id``.
    """

    names: list[str]
    level: NDArray[np.int8]
    rack: NDArray[np.int32]
    racks: list[str]
    rack_row: NDArray[np.int32]
    rows: list[str]
    sites: list[str]
    job_of: list[str]
    slowdown_c: NDArray[np.float64]
    by_name: dict[str, int] = field(repr=False)

    def ids_at(self, level: int) -> NDArray[np.int64]:
        """``entity_id`` of every entity at ``level``."""
        return np.flatnonzero(self.level == level)

    def under(self, prefix: str, level: int | None = None) -> list[int]:
        """``entity_id`` of ``prefix`` and everything below it (optionally only at ``level``)."""
        prefix = prefix.rstrip("/")
        out = [
            i
            for i, n in enumerate(self.names)
            if n and (n == prefix or n.startswith(prefix + "/")) and (level is None or self.level[i] == level)
        ]
        return out


def build_topology(rows: list[tuple[int, str, str | None]]) -> Topology:
    """A :class:`Topology` from ``(entity_id, entity, labels_json)`` rows of the ``entities`` table."""
    size = max((r[0] for r in rows), default=-1) + 1
    names = [""] * size
    job_of = [""] * size
    slowdown = np.full(size, np.nan)
    level = np.full(size, -1, dtype=np.int8)
    rack_name: list[str | None] = [None] * size
    for eid, name, labels in rows:
        names[eid] = name
        parts = name.split("/")
        if "jobs" in parts[1:2]:
            level[eid] = JOB_LEVEL
        elif len(parts) <= 5:
            level[eid] = len(parts)
            if len(parts) >= 3:
                rack_name[eid] = "/".join(parts[:3])
        if labels:
            try:
                parsed = json.loads(labels)
                job = parsed.get("job")
            except (ValueError, AttributeError):
                parsed, job = None, None
            if isinstance(job, str):
                job_of[eid] = job
            if isinstance(parsed, dict) and len(parts) == DEPTH["gpu"]:
                spec = gpu_spec_of({str(k): str(v) for k, v in parsed.items()})
                slowdown[eid] = spec.slowdown_temp_c if spec is not None else np.nan
    racks = sorted({r for r in rack_name if r is not None}, key=natural_key)
    rack_index = {r: i for i, r in enumerate(racks)}
    rack = np.array([rack_index[r] if r is not None else -1 for r in rack_name], dtype=np.int32)
    rows_ids = sorted({r.rsplit("/", 1)[0] for r in racks}, key=natural_key)
    row_index = {r: i for i, r in enumerate(rows_ids)}
    rack_row = np.array([row_index[r.rsplit("/", 1)[0]] for r in racks], dtype=np.int32)
    sites = sorted({n.split("/")[0] for n in names if n})
    return Topology(
        names=names,
        level=level,
        rack=rack,
        racks=racks,
        rack_row=rack_row,
        rows=rows_ids,
        sites=sites,
        job_of=job_of,
        slowdown_c=slowdown,
        by_name={n: i for i, n in enumerate(names) if n},
    )


def natural_key(name: str) -> list[tuple[int, int | str]]:
    """Sort key that orders ``g2`` before ``g10`` (digit runs compare as numbers)."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", name) if t]


EMPTY_TOPOLOGY = build_topology([])


class StoreUnavailableError(RuntimeError):
    """The store exists but cannot be read now (a writer holds it, or it is corrupt): HTTP 503."""


class TelemetryDB:
    """Read access to one telemetry store file for the web app.

    Args:
        path: the DuckDB file (may not exist yet); ``None`` for an app without telemetry.
        connect: returns an open connection to use instead of opening ``path`` (in-process writers).
        snapshot_s: how long one read-only connection is kept before the file is let go, s.
        busy_wait_s: how long a request waits for a writer to let go of the file before a 503, s.
    """

    def __init__(
        self,
        path: Path | None,
        connect: Callable[[], duckdb.DuckDBPyConnection] | None = None,
        snapshot_s: float = 1.0,
        busy_wait_s: float = 3.0,
    ) -> None:
        self.path = path
        self._connect = connect
        self.snapshot_s = snapshot_s
        self.busy_wait_s = busy_wait_s
        self._con: duckdb.DuckDBPyConnection | None = None
        self._opened_at = 0.0
        self._users: dict[int, int] = {}  # id(parent connection) -> cursors in use
        self._parent_of: dict[int, duckdb.DuckDBPyConnection] = {}  # id(cursor) -> its parent
        self._retired: dict[int, duckdb.DuckDBPyConnection] = {}  # expired parents still serving cursors
        self._lock = threading.Lock()
        self._topo_key: tuple[int, int] | None = None
        self._topo = EMPTY_TOPOLOGY
        self._fields: dict[str, int] = {}
        self._range_key: int | None = None
        self._range: tuple[float | None, float | None] = (None, None)
        self._file_id: tuple[int, int] | None = None
        self._generation = 0  # connections opened so far: the store cannot change while one stays open
        self._ready_generation = -1  # the connection found to hold the telemetry tables (checked once per open)
        #: results cached until the store changes (see :meth:`cached`): key -> (store version, value)
        self._cache: dict[object, tuple[object, object]] = {}

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path) if self.path is not None else None
        except OSError:
            return None
        return None if st is None else (st.st_dev, st.st_ino)

    def _retire(self) -> None:
        """Let go of the current connection (closed now, or when its last cursor is released)."""
        con, self._con = self._con, None
        if con is None:
            return
        if self._users.get(id(con), 0) == 0:
            self._users.pop(id(con), None)
            con.close()
        else:
            self._retired[id(con)] = con

    def _open(self) -> duckdb.DuckDBPyConnection:
        assert self.path is not None
        # the gate, shared: a writer that holds it is appending now; wait for it instead of starving it
        if not lock.acquire(self.path, exclusive=False, timeout_s=self.busy_wait_s):
            raise StoreUnavailableError(f"telemetry store busy: a writer holds {self.path.name} (retry shortly)")
        try:
            self._file_id = self._stat()
            self._generation += 1
            return lock.connect_retry(self.path, read_only=True, timeout_s=self.busy_wait_s)
        except lock.StoreBusyError:
            raise StoreUnavailableError(f"telemetry store busy: another process holds {self.path.name}") from None
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0][:200]
            raise StoreUnavailableError(f"telemetry store unreadable ({type(exc).__name__}: {first})") from None
        finally:
            lock.release(self.path)

    def cursor(self) -> duckdb.DuckDBPyConnection | None:
        """A cursor for one request, or ``None`` when there is no store (yet); give it back with :meth:`release`.

        Raises:
            StoreUnavailableError: the file exists but a writer holds it or it cannot be read.
        """
        with self._lock:
            if self._con is not None and self._connect is None:
                replaced = self._stat() != self._file_id
                if replaced:
                    # a new run into the same directory: drop the old file and its caches
                    self._topo_key, self._range_key, self._cache = None, None, {}
                if replaced:
                    self._retire()
                elif time.monotonic() - self._opened_at > self.snapshot_s:
                    if self.path is not None and lock.acquire(self.path, exclusive=False, timeout_s=0.0):
                        # no writer waits (it would hold the gate): keep the connection, its caches stay warm
                        lock.release(self.path)
                        self._opened_at = time.monotonic()
                    else:
                        self._retire()
            if self._con is None:
                if self._connect is not None:
                    self._con = self._connect()
                elif self.path is not None and self.path.is_file():
                    self._con = self._open()
                    self._opened_at = time.monotonic()
                else:
                    return None
            parent = self._con
            cur = parent.cursor()
            self._users[id(parent)] = self._users.get(id(parent), 0) + 1
            self._parent_of[id(cur)] = parent
            # A file this object opened read-only cannot change while open: its tables are checked once per open.
            known_ready = self._connect is None and self._ready_generation == self._generation
            generation = self._generation
        if known_ready:
            return cur
        try:
            ready = queries.has_telemetry(cur)
        except duckdb.Error as exc:
            self.release(cur)
            raise StoreUnavailableError(f"telemetry store unreadable ({type(exc).__name__})") from None
        if not ready:
            self.release(cur)
            return None
        if self._connect is None:
            self._ready_generation = generation
        return cur

    def release(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Close a cursor from :meth:`cursor`; the last one of an expired connection closes it (file let go)."""
        cur.close()
        with self._lock:
            parent = self._parent_of.pop(id(cur), None)
            if parent is None:
                return
            left = self._users.get(id(parent), 1) - 1
            self._users[id(parent)] = left
            if left <= 0 and id(parent) in self._retired:
                del self._retired[id(parent)]
                self._users.pop(id(parent), None)
                if self._connect is None:
                    parent.close()

    def version(self, cur: duckdb.DuckDBPyConnection) -> tuple[object, ...]:
        """What changes whenever the store does: file identity, sample count, newest minute, loop rows.

        A file this object opened cannot change while its connection stays open (a writer needs the file to
        itself), so then the connection's generation is the version, with no query at all.
        """
        if self._connect is None:
            return (self._file_id, self._generation)
        return (self._file_id, queries.version_key(cur))

    def cached(self, key: object, version: object, compute: Callable[[], object]) -> object:
        """``compute()``, cached under ``key`` until ``version`` changes (results of heavy queries)."""
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        with self._lock:
            if len(self._cache) > 256:  # bounded: distinct query parameters would grow it without end
                self._cache.clear()
            self._cache[key] = (version, value)
        return value

    def close(self) -> None:
        """Close the shared connection (only one this object opened)."""
        with self._lock:
            if self._con is not None and self._connect is None:
                self._con.close()
            self._con = None

    def topology(self, cur: duckdb.DuckDBPyConnection) -> Topology:
        """The cached topology, rebuilt when the entity or field tables grew."""
        key = queries.registry_sizes(cur)
        with self._lock:
            if key == self._topo_key:
                return self._topo
        topo = build_topology(queries.entity_rows(cur))
        fields = queries.field_ids(cur)
        with self._lock:
            self._topo_key, self._topo, self._fields = key, topo, fields
        return topo

    def field_ids(self, cur: duckdb.DuckDBPyConnection) -> dict[str, int]:
        """Field name → stored id (refreshed with the topology)."""
        self.topology(cur)
        with self._lock:
            return dict(self._fields)

    def time_range(self, cur: duckdb.DuckDBPyConnection) -> tuple[float | None, float | None]:
        """(oldest, newest) sample timestamp, cached until the sample count changes."""
        count = queries.sample_count(cur)
        with self._lock:
            if count == self._range_key:
                return self._range
        rng = queries.sample_time_range(cur)
        with self._lock:
            self._range_key, self._range = count, rng
        return rng
