"""``twinloop report``: one self-contained HTML report from any store, a live watcher's included.

What :func:`~twinloop.report.sim.sim_report` shows of a twin run (facility power, PUE, the rack temperature heat
map, the incident timelines, the action log), where the store holds it, and per job its step time and throughput
with the incidents and actions on it (:mod:`twinloop.report.jobs`): on a ``twinloop watch --job-heartbeats`` store,
the job's own pace beside its GPUs' telemetry and the loop's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinloop.report.html import Section, write_report
from twinloop.report.jobs import JobChart, job_sections
from twinloop.report.sim import loop_sections, telemetry_sections
from twinloop.telemetry.store.duckdb_store import DuckDBStore


@dataclass(frozen=True)
class StoreReport:
    """A report written: where, over which time range, its section titles and the jobs it charted."""

    path: Path
    first_ts: float | None
    last_ts: float | None
    sections: list[str] = field(default_factory=list)
    jobs: list[JobChart] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"out": str(self.path), "first_ts": self.first_ts, "last_ts": self.last_ts,
                "sections": list(self.sections), "jobs": [j.to_dict() for j in self.jobs]}  # fmt: skip


def store_report(
    db_path: str | Path, out_html: str | Path, run: str | None = None, title: str = "twinloop report"
) -> StoreReport:
    """Write one self-contained HTML report from a store (read only: a running watcher keeps writing it).

    Args:
        db_path: the DuckDB store (``twinloop watch --db``, ``twinloop ingest``, a run's ``telemetry.duckdb``).
        out_html: where to write the report.
        run: only this run's incidents and actions (None: every run's).
        title: the report's title.

    Raises:
        FileNotFoundError: ``db_path`` does not exist.
        InputError: it is not a twinloop store.
    """
    with DuckDBStore(db_path, read_only=True) as store:
        t0, t1 = store.time_range()
        sections: list[Section] = telemetry_sections(store)
        jobs, charts = job_sections(store, run)
        sections += jobs
        sections += loop_sections(store.con, run, t0, t1)
    span = f"{(t1 - t0) / 60:.1f} min of telemetry" if t0 is not None and t1 is not None else "no telemetry"
    path = write_report(out_html, title, sections, subtitle=f"{Path(db_path).name}: {span}")
    return StoreReport(path, t0, t1, [s.title for s in sections], charts)
