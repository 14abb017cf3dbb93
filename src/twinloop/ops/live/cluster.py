"""A live cluster over any telemetry source: the :class:`~twinloop.ops.ports.Cluster` port for real GPUs.

:class:`SourceCluster` reads a :class:`~twinloop.telemetry.sources.base.Source` (NVML, nvidia-smi, a dcgm-exporter
scrape, Prometheus, a recording) in a background thread, hands every raw frame to ``on_frame`` (the store: all
rows, duplicates and late ones included, so nothing is lost), and assembles per-GPU samples at the source's
cadence (:class:`~twinloop.ops.live.assemble.SampleAssembler`). It learns the topology from the first frames'
entities and labels, placed by an optional site file, and the jobs from a :class:`JobSource`.

Data-quality problems become ``Sample.warnings``: gaps, NaN bursts, duplicated or out-of-order rows, source
errors the source counted (a Prometheus that stopped answering), and a source that went silent for
``silence_s`` and came back. The constructor only stores its arguments; the thread starts on the first
:meth:`topology` or :meth:`poll`.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.live.assemble import SampleAssembler
from twinloop.ops.live.job_progress import JobProgress
from twinloop.ops.live.jobs import JobMap
from twinloop.ops.live.site import SiteFile, place_gpus
from twinloop.ops.ports import END, Sample, Topology, _End
from twinloop.ops.respond.adapters.base import ActionAdapter
from twinloop.telemetry.fields import (
    TWINLOOP_FI_GPU_COMPUTE_PROCESSES,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_RANK_STEP_TIME,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Pacer, Source
from twinloop.telemetry.sources.nvml_processes import PROCESSES_LABEL

F64 = NDArray[np.float64]

#: Reads the jobs now for the GPUs of a topology (and their labels); None = no scheduler information.
JobSource = Callable[[tuple[str, ...], Mapping[str, Mapping[str, str]]], JobMap | None]

_DONE = object()

#: Rows this close in time are one sweep over the GPUs, s (per-GPU jitter of nvidia-smi and exporters).
SWEEP_JITTER_S = 0.02


def is_gpu_entity(entity: str, labels: Mapping[str, str]) -> bool:
    """A GPU series: a ``gpu`` label, or an id ending in ``gpu<N>``."""
    leaf = entity.rsplit("/", 1)[-1]
    return bool(labels.get("gpu")) or (leaf.startswith("gpu") and leaf[3:].isdigit())


@dataclass(frozen=True)
class LiveOptions:
    """How a live cluster reads its source.

    Attributes:
        cadence_s: the source's sampling period, s (None: the median step of the first data).
        speed: replay pacing (1 = as recorded, 0 = as fast as possible); live sources pace themselves (0).
        silence_s: no data for this long is a source that went away (default 5 ticks, at least 5 s).
        keep_s: how far back :meth:`SourceCluster.read` can look, s.
        discover_s: how long to wait for the first data before giving up on the topology, s.
        jobs_every_s: how often the job source is asked again, s.
        whole_sweeps: every frame of the source is one complete sweep over the GPUs (NVML, a scrape, a PromQL poll),
            so its tick is emitted at once instead of one tick late.
    """

    cadence_s: float | None = None
    speed: float = 0.0
    silence_s: float | None = None
    keep_s: float = 900.0
    discover_s: float = 60.0
    jobs_every_s: float = 60.0
    whole_sweeps: bool = False


class SourceCluster:
    """The :class:`~twinloop.ops.ports.Cluster` port over a telemetry source (see the module docstring).

    Args:
        source: the telemetry source.
        adapter: carries actions out (a dry-run or no-op adapter when the loop may not touch anything).
        options: cadence, pacing, silence and history settings.
        site: where hosts sit (rack/row/CDU/PDU), or None.
        jobs: the job source, or None.
        progress: the jobs' own step reports (their heartbeat files), read as job telemetry, and their ranks' own
            step times, as the per-GPU ``TWINLOOP_FI_RANK_STEP_TIME``; needs ``jobs``.
        on_frame: called with every raw frame (GPU ids as in the topology), e.g. the store's ``append``.
    """

    def __init__(
        self,
        source: Source,
        adapter: ActionAdapter,
        options: LiveOptions | None = None,
        site: SiteFile | None = None,
        jobs: JobSource | None = None,
        on_frame: Callable[[Frame], Any] | None = None,
        progress: JobProgress | None = None,
    ) -> None:
        self.source = source
        self._adapter = adapter
        self.options = options or LiveOptions()
        self.site = site
        self.jobs = jobs
        self.progress = progress
        self.on_frame = on_frame
        self.report = IngestReport()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=256)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._topo: Topology | None = None
        self._map: dict[str, str] = {}
        self._labels: dict[str, dict[str, str]] = {}
        self._assembler: SampleAssembler | None = None
        self._buffered: list[Frame] = []
        self._ready: deque[Sample] = deque()
        self._history: deque[tuple[float, dict[str, F64]]] = deque()
        self._gpu_sets: dict[str, NDArray[np.int64]] = {}
        self._ended = False
        self._error: BaseException | None = None
        self._last_data_wall = time.monotonic()
        self._pending_warnings: list[str] = []
        self._idle_since: float | None = None  # when polls began finding nothing (wall clock)
        self._errors_seen = 0
        self._pacer = Pacer(self.options.speed)
        self._jobs: JobMap | None = None
        self._jobs_at = -np.inf
        self._processes: dict[str, str] = {}  # GPU id -> its compute processes, as the source last named them
        self._now = float("nan")
        self.samples = 0
        self.cadence_s: float | None = self.options.cadence_s

    # ------------------------------------------------------------------ port
    @property
    def adapter(self) -> ActionAdapter:
        """The action adapter."""
        return self._adapter

    @property
    def silence_s(self) -> float:
        """No data for this long is a source that went away, s."""
        o = self.options
        return o.silence_s if o.silence_s is not None else max(5.0, 5.0 * (self.cadence_s or 1.0))

    def now_s(self) -> float:
        """The time of the newest sample (data time: Unix s for live sources and recordings)."""
        return self._now

    def topology(self, stop: Callable[[], bool] | None = None) -> Topology:
        """The GPUs seen in the first data (waits up to ``discover_s`` for it, or until ``stop()`` says so: a
        source that never answers must not hold Ctrl-C / SIGTERM for the whole wait).
        """
        if self._topo is None:
            self._start()
            deadline = time.monotonic() + self.options.discover_s
            while self._topo is None:
                wait = max(0.0, deadline - time.monotonic())
                item = self._next_item(wait if stop is None else min(wait, 0.2))
                stopped = stop is not None and stop()
                if item is _DONE or (item is None and (time.monotonic() >= deadline or stopped)):
                    if self._error is not None:
                        raise self._error
                    self._ended = item is _DONE
                    self._build_topology()
                    break
                if isinstance(item, Frame):
                    self._buffered.append(item)
                    if self._has_gpus(item) and (len(self._buffered) > 1 or self._spans_ticks(item)):
                        self._build_topology()
        assert self._topo is not None
        return self._topo

    def poll(self) -> Sample | _End | None:
        """The next sample; None when nothing new has arrived within a short wait; END when the source ended."""
        self.topology()
        if self._ready:
            return self._emit(self._ready.popleft())
        if self._ended and not self._buffered:
            return END
        wait = min(0.2, max(0.01, (self.cadence_s or 1.0) / 4.0))
        deadline = time.monotonic() + wait
        while not self._ready:
            frames, self._buffered = self._buffered, []
            for frame in frames:
                self._take(frame)
            if self._ready:
                break
            if self._ended:
                self._flush(final=True)
                break
            item = self._next_item(max(0.0, deadline - time.monotonic()))
            if item is _DONE:
                self._ended = True
                if self._error is not None:
                    raise self._error
                continue
            if isinstance(item, Frame):
                self._buffered.append(item)
                continue
            if self._idle_since is None:
                self._idle_since = time.monotonic()
            break  # nothing within the wait
        if self._ready:
            return self._emit(self._ready.popleft())
        if self._ended:
            return END
        return None

    def read(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        """A field over the GPUs under ``entity`` (mean or max), now or ``ago_s`` ago; None when unknown."""
        if not self._history:
            return None
        idx = self._gpus_under(entity)
        if idx.size == 0:
            return None
        when = self._history[-1][0] - max(0.0, ago_s)
        snap = None
        for ts, fields in reversed(self._history):
            if ts <= when + 1e-9:
                snap = fields
                break
        if snap is None or field not in snap:
            return None
        values = snap[field][idx]
        values = values[np.isfinite(values)]
        if not values.size:
            return None
        return float(values.max() if aggregate == "max" else values.mean())

    def close(self, wait_s: float = 2.0) -> None:
        """Stop the reader thread (the source's generator is closed with it), waiting at most ``wait_s`` for it.

        The thread looks at the stop flag only between frames: a source blocked in its own wait (the Prometheus
        source's back-off while its endpoint is down) would hold `twinloop watch` past Ctrl-C and SIGTERM for good.
        After ``wait_s`` the thread, a daemon, is left to end with the process.
        """
        self._stop.set()
        deadline = time.monotonic() + wait_s
        while self._thread is not None and self._thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
            self._thread.join(timeout=0.05)

    # ------------------------------------------------------------------ internals
    def _start(self) -> None:
        if self._thread is not None:
            return

        def run() -> None:
            try:
                gen = self.source.frames(self.report)
                for frame in gen:
                    while not self._stop.is_set():
                        try:
                            self._queue.put(frame, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if self._stop.is_set():
                        getattr(gen, "close", lambda: None)()
                        break
            except BaseException as exc:  # handed to the loop's thread, which raises it
                self._error = exc
            finally:
                while True:
                    try:
                        self._queue.put(_DONE, timeout=0.1)
                        break
                    except queue.Full:
                        if self._stop.is_set():
                            break

        self._thread = threading.Thread(target=run, name=f"twinloop-{self.source.name}", daemon=True)
        self._thread.start()

    def _next_item(self, timeout: float) -> Any:
        try:
            return self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def _has_gpus(self, frame: Frame) -> bool:
        return any(is_gpu_entity(e, frame.labels.get(e, {})) for e in frame.entities)

    def _spans_ticks(self, frame: Frame) -> bool:
        return bool(len(frame)) and float(np.ptp(frame.ts_s)) >= (self.options.cadence_s or 1.0)

    def _build_topology(self) -> None:
        labels: dict[str, dict[str, str]] = {}
        for f in self._buffered:
            for e in f.entities:
                labels.setdefault(e, {}).update(f.labels.get(e, {}))
        gpus = sorted(e for e, lab in labels.items() if is_gpu_entity(e, lab))
        self._topo, self._map = place_gpus(gpus, labels, self.site)
        self._labels = {self._map[e]: labels[e] for e in gpus}
        if self.cadence_s is None:
            stamps = np.unique(np.concatenate([f.ts_s for f in self._buffered])) if self._buffered else np.zeros(0)
            # Rows within SWEEP_JITTER_S of the previous one belong to the same sweep (nvidia-smi writes each GPU's
            # row a few ms apart); the cadence is the median step between sweep starts.
            starts = stamps[np.r_[True, np.diff(stamps) > SWEEP_JITTER_S]] if stamps.size else stamps
            steps = np.diff(starts)
            self.cadence_s = float(np.median(steps)) if steps.size else 1.0
        self._assembler = SampleAssembler(self._topo.gpu_ids, self.cadence_s, entity_map=self._map)

    def _renamed(self, frame: Frame) -> Frame:
        if not self._map or all(self._map.get(e, e) == e for e in frame.entities):
            return frame
        ents = tuple(self._map.get(e, e) for e in frame.entities)
        labels = {self._map.get(e, e): lab for e, lab in frame.labels.items()}
        return Frame(frame.ts_s, frame.entity_idx, frame.field_idx, frame.value, ents, frame.fields, labels,
                     frame.source, frame.lines)  # fmt: skip

    def _take(self, frame: Frame) -> None:
        assert self._assembler is not None
        now = time.monotonic()
        if self._idle_since is not None and now - self._idle_since > self.silence_s:
            self._pending_warnings.append(
                f"source {self.source.label} was silent for {now - self._idle_since:.0f} s and came back"
            )
        self._idle_since = None
        self._last_data_wall = now
        if self.on_frame is not None and len(frame):
            self.on_frame(self._renamed(frame))
        if TWINLOOP_FI_GPU_COMPUTE_PROCESSES in frame.fields:  # only a source that lists processes names them
            for entity, labels in frame.labels.items():
                if PROCESSES_LABEL in labels:  # who runs on the GPU (NVML): named in a co-tenant's incident
                    self._processes[self._map.get(entity, entity)] = labels[PROCESSES_LABEL]
        self._assembler.add(frame)
        self._flush(final=self.options.whole_sweeps)

    def _flush(self, final: bool) -> None:
        assert self._assembler is not None
        for ts, fields, warnings in self._assembler.ready(final=final):
            self._ready.append(self._sample(ts, fields, warnings))
        late = self._assembler.take_late_warning()
        if late and self._ready:
            last = self._ready.pop()
            self._ready.append(replace(last, warnings=(*last.warnings, late)))

    def _source_warnings(self) -> list[str]:
        out, self._pending_warnings = self._pending_warnings, []
        errors = self.report.problems.get("source_error", 0)
        if errors > self._errors_seen:
            example = (self.report.examples.get("source_error") or [""])[-1]
            out.append(f"source: {errors - self._errors_seen} read error(s) ({example})")
            self._errors_seen = errors
        return out

    def _sample(self, ts: float, fields: dict[str, F64], warnings: tuple[str, ...]) -> Sample:
        assert self._topo is not None
        jobs = self._job_map(ts)
        job_fields = None if jobs is None or self.progress is None else self.progress.fields(jobs.job_ids, ts)
        if jobs is not None and self.progress is not None and job_fields is not None:
            # Each GPU's rank's own step time, the field the twin gives the rank straggler rule (none reported: left
            # out, as before); a rank far behind the job's step counter is a stopped writer (its value expires).
            ranks = self.progress.ranks.step_times(
                self._topo.gpu_ids, self._labels, jobs.job_ids, jobs.job_index, ts, job_fields[TWINLOOP_FI_JOB_PROGRESS]
            )
            if ranks is not None:
                fields = {**fields, TWINLOOP_FI_RANK_STEP_TIME: ranks}
        return Sample(
            ts=ts,
            gpu=fields,
            job_index=None if jobs is None else jobs.job_index,
            job_ids=() if jobs is None else jobs.job_ids,
            job_fields=job_fields,
            warnings=(*warnings, *self._source_warnings()),
            gpu_processes=dict(self._processes),
        )

    def _job_map(self, ts: float) -> JobMap | None:
        if self.jobs is None:
            return None
        if ts - self._jobs_at >= self.options.jobs_every_s:
            assert self._topo is not None
            self._jobs = self.jobs(self._topo.gpu_ids, self._labels)
            self._jobs_at = ts
        return self._jobs

    def _emit(self, sample: Sample) -> Sample:
        self._pacer.wait(sample.ts)
        self._now = sample.ts
        self._history.append((sample.ts, dict(sample.gpu)))
        while self._history and sample.ts - self._history[0][0] > self.options.keep_s:
            self._history.popleft()
        self.samples += 1
        return sample

    def silent_for_s(self) -> float:
        """Wall seconds the source has delivered nothing while the loop waited for it (0 when it is flowing)."""
        return 0.0 if self._idle_since is None else time.monotonic() - self._idle_since

    def _gpus_under(self, entity: str) -> NDArray[np.int64]:
        idx = self._gpu_sets.get(entity)
        if idx is None:
            assert self._topo is not None
            ids = self._topo.gpu_ids
            idx = np.array([i for i, g in enumerate(ids) if g == entity or g.startswith(entity + "/")], dtype=np.int64)
            self._gpu_sets[entity] = idx
        return idx
