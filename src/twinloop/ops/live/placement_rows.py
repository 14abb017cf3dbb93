"""Where each live job ran: its GPUs and over which time, as placement spans for the store.

``twinloop watch --job-heartbeats DIR --db FILE`` stores the jobs' progress (:mod:`.progress_rows`); without the
GPUs each job held, a report cannot put the job's GPUs' clocks and power beside its step time, the view that tells
"the job slowed while its GPUs' clocks held" (a co-tenant, a data-loader stall) from "a GPU throttled". Every sample
carries the placement (``job_index``: per GPU, the index into ``job_ids``, -1 for none); this module turns it into
spans, one per job and unchanged placement: ``(job, GPUs, first_ts, last_ts)``. A span grows while the placement
holds and ends when it changes or the job leaves (the next placement is a new span), so the store keeps a few rows
per job rather than one per sample (``loop_job_gpus`` in :mod:`twinloop.telemetry.store.loop_records`).

Restart-safe: a span is keyed by job and ``first_ts``, so a watcher over the same data again writes the same spans;
a watcher started again later continues the job's last stored span when the job's first placement is the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from twinloop.ops.live.progress_rows import job_entity_of
from twinloop.ops.ports import Sample


@dataclass(frozen=True)
class PlacementSpan:
    """One job on a set of GPUs over a time.

    Attributes:
        job: the job's entity id (``<site>/jobs/<job>``).
        gpus: its GPUs' ids, in name order.
        first_ts: the first sample time it held them, s.
        last_ts: the last one so far, s.
    """

    job: str
    gpus: tuple[str, ...]
    first_ts: float
    last_ts: float


class JobPlacement:
    """Follows the samples' placement and hands out the spans to store (see the module docstring).

    Args:
        gpu_ids: the topology's GPU ids, in the order of the samples' per-GPU arrays.
        site: the site id (jobs are ``<site>/jobs/<job>``).
        stored: per job, its last stored span (``(GPUs in name order, first_ts, last_ts)``), continued when the job's
            first placement here is the same and not earlier.
    """

    def __init__(
        self,
        gpu_ids: Sequence[str],
        site: str,
        stored: Mapping[str, tuple[tuple[str, ...], float, float]] | None = None,
    ) -> None:
        self._gpus = np.asarray(list(gpu_ids), dtype=object)
        self._site = site
        self._stored = dict(stored or {})
        self._open: dict[str, PlacementSpan] = {}
        self._ended: list[PlacementSpan] = []
        self._key: tuple[tuple[str, ...], bytes] | None = None  # the last placement seen (job ids, job_index)
        self._last_ts: float | None = None
        self._dirty = False

    def observe(self, sample: Sample) -> None:
        """Take one sample's placement (a sample without one, no scheduler, changes nothing)."""
        if sample.job_index is None:
            return
        index = np.asarray(sample.job_index, dtype=np.int64)
        ts = float(sample.ts)
        key = (tuple(sample.job_ids), index.tobytes())
        if key != self._key:  # only a changed placement is grouped anew; an unchanged one just grows its spans
            self._place(sample.job_ids, index, ts)
            self._key = key
        self._last_ts = ts if self._last_ts is None else max(self._last_ts, ts)
        self._dirty = True

    def _place(self, job_ids: Sequence[str], index: np.ndarray, ts: float) -> None:
        """End the spans whose placement changed and open the new ones at ``ts``."""
        on = np.flatnonzero((index >= 0) & (index < len(job_ids)))
        on = on[np.argsort(index[on], kind="stable")]
        now: dict[str, tuple[str, ...]] = {}
        if on.size:
            for part in np.split(on, np.flatnonzero(np.diff(index[on])) + 1):  # one part per job
                job = job_entity_of(job_ids[int(index[part[0]])], self._site)
                now[job] = tuple(sorted(set(now.get(job, ())) | set(self._gpus[part].tolist())))
        for job, span in list(self._open.items()):
            if now.get(job) != span.gpus:
                self._ended.append(self._grown(span))
                del self._open[job]
        for job, gpus in now.items():
            if job in self._open:
                continue
            stored = self._stored.pop(job, None)
            if stored is not None and stored[0] == gpus and stored[1] <= ts:
                self._open[job] = PlacementSpan(job, gpus, stored[1], max(stored[2], ts))
            else:
                self._open[job] = PlacementSpan(job, gpus, ts, ts)

    def _grown(self, span: PlacementSpan) -> PlacementSpan:
        """``span`` up to the last sample seen (before this one)."""
        last = span.last_ts if self._last_ts is None else max(span.last_ts, self._last_ts)
        return PlacementSpan(span.job, span.gpus, span.first_ts, last)

    def take(self) -> list[PlacementSpan]:
        """The spans to store since the last call: those that ended, and the open ones as they stand."""
        if not self._dirty and not self._ended:
            return []
        out = self._ended + [self._grown(s) for s in self._open.values()]
        self._ended, self._dirty = [], False
        return out
