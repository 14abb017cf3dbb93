"""A job's own progress for the live loop: the step lines of its heartbeat file, as job telemetry.

NVML, nvidia-smi and dcgm-exporter see GPUs, not jobs: without the job's own step counter the loop cannot tell a
hung job (GPUs idle, no step for minutes), a slowed one (step time up with no clock drop: a straggler somewhere) or
silent data corruption (a loss or gradient-norm spike with no hardware event). A training job tells it the way it
tells the loop its checkpoints (:mod:`twinloop.ops.respond.adapters.heartbeats`): rank 0 appends one line a step to
``<dir>/<job>.jsonl``::

    {"ts": 1795430000.5, "event": "step", "step": 1200, "step_time_s": 0.82, "loss": 2.31, "grad_norm": 0.94}

``step`` (steps done, required) is the progress counter; ``step_time_s`` (the last step's wall time, > 0),
``loss``, ``grad_norm`` (>= 0) and ``tokens_per_s`` (>= 0) are optional. Each becomes the job field the twin
reports (:data:`STEP_FIELDS`), so the same job rules run live and in the twin. The job's lifecycle lines give its
phase: writing a checkpoint from a ``checkpoint_start`` to its ``checkpoint_done`` or next step (a save that stops
the steps is no hang), queued from a ``requeued`` to the next ``restarted``, launching from a ``restarted`` to its
first step, done after ``finished`` (a job that ended is no hang, where the job list still names it), training
otherwise once a step was seen.

A sample at time ``ts`` sees each field's latest value reported at or before ``ts`` (a report from the future of a
replayed recording is held back until its time), except ``loss`` and ``grad_norm``: the largest reported since the
sample before, so a one-step spike between two samples is seen at any cadence (on a real H200, a job stepping every
0.16 s under a 5 s watcher: the step after a flipped bit's loss spike was reported before the next sample, and hid it).

The file is read as it grows (from where the last read stopped; a line still being written waits for its newline);
a file that shrank (rotated) is read again from its start. A bad line (not JSON, no finite ``ts`` >= 0, a step field
out of range) is skipped, counted, and the first of each file reported once, naming the file, the line and the field.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.job_rules import CHECKPOINT_PHASE
from twinloop.ops.file_tail import FileTail
from twinloop.ops.live.rank_progress import RankProgress
from twinloop.ops.respond.adapters.heartbeat_lines import LINE_EVENTS, RANK_EVENT, STEP_FIELDS, bad_field, step_values
from twinloop.ops.respond.adapters.heartbeats import job_file_name
from twinloop.ops.say_once import SayOnce
from twinloop.telemetry.fields import TWINLOOP_FI_JOB_PHASE

F64 = NDArray[np.float64]

# Phase codes of TWINLOOP_FI_JOB_PHASE (twinloop.telemetry.fields).
QUEUED, LAUNCH, TRAINING, DONE = 0.0, 2.0, 3.0, 7.0
#: What each lifecycle line puts the job in (a step line puts it in TRAINING).
PHASE_OF_EVENT: Mapping[str, float] = {
    "checkpoint_start": CHECKPOINT_PHASE,
    "checkpoint_done": TRAINING,
    "requeued": QUEUED,
    "restarted": LAUNCH,
    "finished": DONE,
}
#: Job fields that take the largest value reported between two samples, not the latest: a spike must not be missed.
PEAK_FIELDS = frozenset({STEP_FIELDS["loss"][0], STEP_FIELDS["grad_norm"][0]})
#: Bytes read from one file per sample at most: a long recording is taken in over several samples, not in one stall.
READ_CHUNK_BYTES = 8 << 20


@dataclass
class _Report:
    ts: float
    values: dict[str, float]
    phase: float


@dataclass
class _Tail:
    """One job file as read so far: where the next read starts, the reports not yet due, the latest due values."""

    file: FileTail = field(default_factory=FileTail)
    pending: list[_Report] = field(default_factory=list)
    latest: dict[str, float] = field(default_factory=dict)
    phase: float = math.nan
    bad: int = 0


class JobProgress:
    """Reads the jobs' step lines from a heartbeat directory and hands them to the loop as job fields.

    Args:
        directory: the heartbeat directory (``twinloop watch --job-heartbeats``).
        warn: told once per file about its first bad line (the watcher's progress stream).
    """

    def __init__(self, directory: str | Path, warn: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self._say = SayOnce(warn)
        self._tails: dict[str, _Tail] = {}
        #: The ranks' own step lines (``<dir>/<job>.ranks/``), the per-GPU counterpart of the job's step lines.
        self.ranks = RankProgress(directory, warn)

    @property
    def bad_lines(self) -> int:
        """Lines skipped so far, over every job file read (the rank files': ``ranks.bad_lines``)."""
        return sum(t.bad for t in self._tails.values())

    def fields(self, job_ids: Sequence[str], ts: float) -> dict[str, F64]:
        """Per job field, the value of each of ``job_ids`` as of ``ts`` (NaN where the job reported none)."""
        names = [name for name, _, _ in STEP_FIELDS.values()] + [TWINLOOP_FI_JOB_PHASE]
        out = {name: np.full(len(job_ids), np.nan) for name in names}
        for j, job in enumerate(job_ids):
            tail = self._read(job)
            if tail is None:
                continue
            self._advance(tail, ts)
            for name, value in tail.latest.items():
                out[name][j] = value
            out[TWINLOOP_FI_JOB_PHASE][j] = tail.phase
        return out

    def _read(self, job: str) -> _Tail | None:
        name = job_file_name(job)
        if name is None:
            return None
        path = self.directory / f"{name}.jsonl"
        tail = self._tails.setdefault(name, _Tail())
        lines, rotated = tail.file.read(path, READ_CHUNK_BYTES)
        if rotated:  # what it holds now is all there is
            file = tail.file
            self._tails[name] = tail = _Tail(file=file)
        for line_no, raw in lines:
            self._take(tail, path, line_no, raw)
        return tail

    def _take(self, tail: _Tail, path: Path, line_no: int, raw: bytes) -> None:
        """Parse one line into a pending report; a bad one is counted and its file's first reported once."""
        if not raw.strip():
            return
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            why: str | None = "not JSON"
        else:
            why = bad_field(doc, LINE_EVENTS)
            if isinstance(doc, dict) and doc.get("event") == RANK_EVENT:
                where = f"{path.stem}.ranks/, one file per rank (not the job's file)"
                why = f"field event: {RANK_EVENT!r} belongs in {where}"
            values: dict[str, float] = {}
            if why is None and doc["event"] == "step":
                values, why = step_values(doc)
        if why is not None:
            tail.bad += 1
            self._say(f"job heartbeats: {path}: line {line_no}: {why} (skipped)", key=str(path))
            return
        event = doc["event"]
        phase = TRAINING if event == "step" else PHASE_OF_EVENT[event]
        report = _Report(float(doc["ts"]), values, phase)
        # Lines are appended in time order; a late one (two writers) is put in its place.
        bisect.insort_right(tail.pending, report, key=lambda r: r.ts)

    @staticmethod
    def _advance(tail: _Tail, ts: float) -> None:
        """Apply the reports due at ``ts``, in time order (the peak fields: their largest among them)."""
        due = 0
        peaks: dict[str, float] = {}
        while due < len(tail.pending) and tail.pending[due].ts <= ts:
            r = tail.pending[due]
            tail.latest.update(r.values)
            for name in PEAK_FIELDS & r.values.keys():
                peaks[name] = max(peaks.get(name, -math.inf), r.values[name])
            # A step is training even inside a save (an asynchronous one): only a save that stops the steps is a
            # pause, and one that never ends then reads as a pause (a forced checkpoint's timeout goes to a person).
            tail.phase = r.phase
            due += 1
        tail.latest.update(peaks)
        del tail.pending[:due]
