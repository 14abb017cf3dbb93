"""Writes a twin run's telemetry to a directory: ``telemetry.duckdb`` through the telemetry layer's store, plus
``events.jsonl`` and ``ground_truth.json``.

Frames are buffered and appended in batches of about ``FLUSH_ROWS`` samples (one transaction each).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.twin.telemetry_out import frames_of

if TYPE_CHECKING:
    from twinloop.twin.engine import Twin
    from twinloop.twin.events import StepResult

FLUSH_ROWS = 2_000_000


class TelemetryWriter:
    """Collects step results of ``twin`` and writes them under ``out_dir`` (created if missing)."""

    def __init__(self, twin: Twin, out_dir: Path) -> None:
        self.twin = twin
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.buffer: list[Any] = []
        self.buffered_rows = 0
        self.rows = 0
        self.path = self.out_dir / "telemetry.duckdb"
        # never delete a store another process holds (a serve, an ingest, a second run): refused in one line
        self.store = DuckDBStore(self.path, replace=True)
        _ = self.store.con
        self.events = (self.out_dir / "events.jsonl").open("w")
        self._placed = np.full(twin.topo.n_gpus, -1, dtype=np.int64)

    def add(self, result: StepResult) -> None:
        """Buffer one step's telemetry and events."""
        for e in result.events:
            self.events.write(json.dumps(asdict(e)) + "\n")
        for frame in frames_of(self.twin, result):
            self.buffer.append(frame)
            self.buffered_rows += len(frame)
        if self.buffered_rows >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered frames."""
        if not self.buffer:
            return
        frame = Frame.concat(self.buffer)
        labels = self._job_labels()
        if labels:
            frame = dataclasses.replace(frame, labels={**frame.labels, **labels})
        self.store.append(frame)
        self.rows += len(frame)
        self.buffer, self.buffered_rows = [], 0

    def _job_labels(self) -> dict[str, dict[str, str]]:
        """``job`` labels of the GPUs whose job changed since the last flush (placement is not per step)."""
        now = self.twin.job_of_gpu
        changed = np.flatnonzero(now != self._placed)
        self._placed = now.copy()
        topo, jobs = self.twin.topo, self.twin.jobs
        return {topo.gpu_id(int(i)): {"job": jobs[int(now[i])].spec.name if now[i] >= 0 else ""} for i in changed}

    def close(self) -> dict[str, Any]:
        """Flush, write the ground truth, close; returns where and how much was written."""
        self.flush()
        self.events.close()
        self.store.close()
        truth = [asdict(label) for label in self.twin.ground_truth]
        (self.out_dir / "ground_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
        return {
            "path": str(self.path),
            "rows": self.rows,
            "events": str(self.out_dir / "events.jsonl"),
            "ground_truth": str(self.out_dir / "ground_truth.json"),
        }
