"""Run a sweep's cells as Ray tasks: a local Ray by default, an existing cluster by address.

Each cell is one ``ray.remote`` task (one CPU). At most ``workers`` tasks are in flight, so the same spec gives
the same work per task on 1 worker or N, and rows arrive as tasks finish (the caller's ``on_row`` streams them
to Parquet and the store). A cell that raises is submitted once more; if it fails again its row is kept with
``status = "failed"`` and the error, never dropped. Ray's own retries are off (``max_retries=0``) so the
attempt count in a row is the true one.

Rows do not depend on which worker ran them or in what order: every random part of a run draws from the
scenario's ``seed`` field (see :mod:`twinloop.sweep.spec`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from twinloop.errors import InputError
from twinloop.sweep.cell import row, run_cell
from twinloop.sweep.spec import Cell

Kernel = Callable[[Cell, str, int], dict[str, Any]]
MAX_ATTEMPTS = 2  # the first run and one retry


def default_workers() -> int:
    """One worker per core of this machine."""
    return os.cpu_count() or 1


@contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[dict[str, Any]]:
    """A connected Ray: the one already initialized, a cluster at ``address`` (``ray://host:10001``, ``auto``),
    or a fresh local one with ``num_cpus=workers``, no dashboard and quiet logs. Yields ``ray.cluster_resources()``;
    shuts down only what it started.
    """
    import ray

    started = False
    if not ray.is_initialized():
        quiet: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
        try:
            if address:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            else:
                ray.init(num_cpus=workers or default_workers(), **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError("--address", "", f"cannot connect to Ray at {address or 'local'}: {exc}") from None
        started = True
    try:
        yield dict(ray.cluster_resources())  # type: ignore[no-untyped-call]  # ray 2.60 leaves it unannotated
    finally:
        if started:
            ray.shutdown()


def _kernel(cell: Cell, sweep: str, attempt: int) -> dict[str, Any]:
    r = run_cell(cell, sweep)
    r["attempts"] = attempt
    return r


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # RayTaskError carries the worker's exception as .cause
    return f"{type(cause).__name__}: {cause}".splitlines()[0][:500]


@dataclass(frozen=True)
class SweepRun:
    """What a sweep did: every row (sorted by cell), the failed ones, timing and where it ran."""

    rows: tuple[dict[str, Any], ...]
    failed: tuple[dict[str, Any], ...]
    wall_s: float
    workers: int
    cluster_cpus: float


def run_cells(
    cells: list[Cell],
    sweep: str,
    *,
    workers: int | None = None,
    address: str | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    kernel: Kernel = _kernel,
) -> SweepRun:
    """Run every cell as a Ray task, at most ``workers`` at a time; retry a failed cell once; return all rows.

    Args:
        cells: the sweep's cells (:func:`twinloop.sweep.spec.cells`).
        sweep: the sweep's name (a column of every row).
        workers: tasks in flight (default: one per core here, or the cluster's CPUs with ``address``).
        address: an existing Ray cluster (``ray://host:10001`` or ``auto``); ``None`` starts a local one.
        on_row: called with each row as it arrives (completion order), failed rows included.
        kernel: ``(cell, sweep, attempt) -> row``; tests pass a failing one.
    """
    import ray

    if workers is not None and workers < 1:
        raise InputError("--workers", "", f"{workers} (allowed: >= 1)")
    started = time.perf_counter()
    with ray_session(address, workers) as resources:
        cpus = float(resources.get("CPU", 1.0))
        limit = workers or max(1, int(cpus))
        task = ray.remote(num_cpus=1, max_retries=0)(kernel)
        queue = list(reversed(cells))
        pending: dict[Any, tuple[Cell, int]] = {}
        rows: list[dict[str, Any]] = []

        def submit(cell: Cell, attempt: int) -> None:
            pending[task.remote(cell, sweep, attempt)] = (cell, attempt)

        while queue or pending:
            while queue and len(pending) < limit:
                submit(queue.pop(), 1)
            done, _ = ray.wait(list(pending), num_returns=1)
            cell, attempt = pending.pop(done[0])
            try:
                r = ray.get(done[0])
            except Exception as exc:
                if attempt < MAX_ATTEMPTS:
                    submit(cell, attempt + 1)
                    continue
                r = row(cell, sweep, "failed", attempt, _error_text(exc), float("nan"), "", {}, {})
            rows.append(r)
            if on_row is not None:
                on_row(r)
    rows.sort(key=lambda r: r["cell"])
    return SweepRun(
        rows=tuple(rows),
        failed=tuple(r for r in rows if r["status"] != "ok"),
        wall_s=time.perf_counter() - started,
        workers=limit,
        cluster_cpus=cpus,
    )
