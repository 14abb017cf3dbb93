"""Each rank's own step time for the live loop: the per-GPU ``TWINLOOP_FI_RANK_STEP_TIME`` the straggler rule reads.

A synchronous job steps at its slowest rank's pace: every rank waits in the gradient all-reduce for the last one, so
the step's wall time is the same on every rank and names no straggler (the job-level ``step_time_s`` of
:mod:`twinloop.ops.live.job_progress` shows *that* the job slowed, not *where*). What names it is each rank's own
compute time of the step, without that wait: the same part of the step on every rank with no wait for a peer in
it, from the step's start to just before its first blocking collective (the gradient all-reduce or reduce-scatter),
timed with CUDA events or after a ``torch.cuda.synchronize()`` there (DDP overlaps the all-reduce with the backward:
time a gradient-accumulation micro-step under ``no_sync()``, or the forward alone; docs/loop-api.md). NVML and
dcgm-exporter have no such field; the twin has it (``rank_straggler``), and the ranks tell it live the way rank 0
tells the job's steps. Each rank appends, after each step (or every few), one line to its own file in
``<dir>/<job>.ranks/`` (any name ending ``.jsonl``; :func:`~twinloop.ops.respond.adapters.heartbeats.record_rank`
names it after the GPU)::

    {"ts": 1795430000.5, "event": "rank_step", "step": 1200, "step_time_s": 0.71, "gpu_uuid": "GPU-5fd8..."}

``step`` (steps done, >= 0) and ``step_time_s`` (> 0, s) are required, and the GPU: ``gpu_uuid``, its NVML UUID
(with or without the ``GPU-`` prefix; every source gives it as the GPU's ``UUID`` label), else ``host`` and
``gpu_index`` (its NVML index on that host, the ``gpu<i>`` of the entity id; a full host name also matches its
short name). A line naming a GPU the topology does not have is skipped, counted, and the first of each file
reported once, naming the file, the line and the field, as a bad line is.

One file per rank, not the job's own file: concurrent appends from many hosts to one file are not safe on NFS
(``open(2)``: O_APPEND "may lead to corrupted files on NFS filesystems if more than one process appends data to a
file at once"), contend for the file's end on a parallel file system every step, and would make the job file that
the checkpoint reader parses (:class:`~twinloop.ops.respond.adapters.heartbeats.JobHeartbeats`) hundreds of
times longer. A directory per job (not ``<job>.rank<R>.jsonl``) so no job id's own file is ever taken for a rank's.

Per sample, each GPU of a job gets its rank's latest step time at or before the sample's time (a line from the
future of a replayed recording waits for its time), NaN where none; a GPU the job map does not give the job gets
none of its values (a job that moved off a GPU leaves no stale value for the next one). Reading is cheap: per job
and sample one directory listing and one ``stat`` a file, and a file is read only when it grew, from where the last
read stopped (a line still being written waits for its newline; a file that shrank is read again). Lines are parsed
as they arrive; the per-sample work is vectorized over the due lines and the job's GPUs (no per-GPU loop).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.file_tail import FileTail
from twinloop.ops.live.site import gpu_index, host_of
from twinloop.ops.respond.adapters.heartbeats import GpuRef, job_file_name, rank_step_values, uuid_key
from twinloop.ops.say_once import SayOnce
from twinloop.telemetry.fields import TWINLOOP_FI_RANK_STEP_TIME

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Bytes read from one rank file per sample at most: a long recording is taken in over several samples.
READ_CHUNK_BYTES = 1 << 20


def _empty_f() -> F64:
    return np.zeros(0)


def _empty_i() -> I64:
    return np.zeros(0, dtype=np.int64)


@dataclass
class _Job:
    """One job's rank files, its lines not yet due (sorted by time), and each GPU's latest due step time."""

    files: dict[str, FileTail] = field(default_factory=dict)
    ts: F64 = field(default_factory=_empty_f)
    gpu: I64 = field(default_factory=_empty_i)
    value: F64 = field(default_factory=_empty_f)
    seen_gpu: I64 = field(default_factory=_empty_i)
    seen_value: F64 = field(default_factory=_empty_f)


class _Gpus:
    """The topology's GPUs by UUID and by (host, index), built once when the topology is known."""

    def __init__(self, gpu_ids: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> None:
        self.n = len(gpu_ids)
        self.by_uuid: dict[str, int] = {}
        self.by_host: dict[tuple[str, int], int] = {}
        short: dict[tuple[str, int], list[int]] = {}
        for i, gid in enumerate(gpu_ids):
            lab = labels.get(gid, {})
            if lab.get("UUID"):
                self.by_uuid[uuid_key(lab["UUID"])] = i
            host, index = host_of(gid, lab).lower(), gpu_index(gid, lab)
            if not index.isdigit():
                continue
            self.by_host[(host, int(index))] = i
            short.setdefault((host.split(".", 1)[0], int(index)), []).append(i)
        for key, found in short.items():  # a short name matches only where it names one GPU
            if len(found) == 1:
                self.by_host.setdefault(key, found[0])

    def find(self, ref: GpuRef) -> int | None:
        """The GPU's index in the topology, or None."""
        kind, name, index = ref
        if kind == "uuid":
            return self.by_uuid.get(uuid_key(name))
        name = name.lower()
        hit = self.by_host.get((name, index))
        return hit if hit is not None else self.by_host.get((name.split(".", 1)[0], index))

    def unknown(self, ref: GpuRef) -> str:
        """Why ``ref`` names no GPU of the topology (the field and what is allowed)."""
        if ref[0] == "uuid":
            return f"field gpu_uuid: {ref[1]!r} (allowed: the UUID label of one of the topology's {self.n} GPUs)"
        return f"field host: {ref[1]!r}, gpu_index {ref[2]} (allowed: a host and index of the topology's {self.n} GPUs)"


class RankProgress:
    """Reads the ranks' step lines from a heartbeat directory and hands them to the loop as a per-GPU field.

    Args:
        directory: the heartbeat directory (``twinloop watch --job-heartbeats``).
        warn: told once per file about its first bad line, and once about its first line naming an unknown GPU.
    """

    def __init__(self, directory: str | Path, warn: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self._say = SayOnce(warn)
        self._jobs: dict[str, _Job] = {}
        self._gpus: _Gpus | None = None
        self._gpu_ids: Sequence[str] = ()
        self._seen_any = False
        self.bad_lines = 0
        self.unknown_gpu_lines = 0

    def step_times(
        self,
        gpu_ids: Sequence[str],
        labels: Mapping[str, Mapping[str, str]],
        job_ids: Sequence[str],
        job_index: I64,
        ts: float,
    ) -> F64 | None:
        """Per GPU of ``gpu_ids``, its rank's latest step time at or before ``ts`` (NaN where none), or None while no
        rank line was ever taken (the field is then left out, as before).

        Args:
            gpu_ids: the topology's GPUs, in the order of the sample's arrays.
            labels: each GPU's labels (``UUID``, ``Hostname``, ``gpu``).
            job_ids: the jobs now.
            job_index: per GPU, its job's index in ``job_ids`` (-1: none).
            ts: the sample's time (Unix s).
        """
        if self._gpus is None or (gpu_ids is not self._gpu_ids and tuple(gpu_ids) != tuple(self._gpu_ids)):
            # A new topology renumbers the GPUs: what was read is read again against it.
            self._gpus, self._jobs = _Gpus(gpu_ids, labels), {}
        self._gpu_ids = gpu_ids  # the topology's own tuple: the next sample's is the same object
        out = np.full(len(gpu_ids), np.nan)
        for j, job in enumerate(job_ids):
            state = self._read(job)
            if state is None:
                continue
            self._advance(state, ts)
            mine = state.seen_gpu[job_index[state.seen_gpu] == j]
            out[mine] = state.seen_value[job_index[state.seen_gpu] == j]
        return out if self._seen_any else None

    def _read(self, job: str) -> _Job | None:
        name = job_file_name(job)
        if name is None:
            return None
        root = self.directory / f"{name}.ranks"
        state = self._jobs.setdefault(name, _Job())
        try:
            entries = sorted((e for e in os.scandir(root) if e.name.endswith(".jsonl")), key=lambda e: e.name)
        except OSError:  # no rank has written yet, or unreadable for now: what was read stands
            return state
        got: list[tuple[float, int, float]] = []
        for entry in entries:
            got += self._grown(state, entry)
        if got:
            self._seen_any = True
            new = np.array(got, dtype=np.float64).reshape(-1, 3)
            ts = np.concatenate([state.ts, new[:, 0]])
            order = np.argsort(ts, kind="stable")
            state.ts = ts[order]
            state.gpu = np.concatenate([state.gpu, new[:, 1].astype(np.int64)])[order]
            state.value = np.concatenate([state.value, new[:, 2]])[order]
        return state

    def _grown(self, state: _Job, entry: os.DirEntry[str]) -> list[tuple[float, int, float]]:
        """The new lines of one rank file as (ts, GPU index, step time)."""
        lines, _ = state.files.setdefault(entry.name, FileTail()).read(entry.path, READ_CHUNK_BYTES)
        out = []
        for line_no, raw in lines:
            if raw.strip():
                got = self._take(entry.path, line_no, raw)
                if got is not None:
                    out.append(got)
        return out

    def _take(self, path: str, line_no: int, raw: bytes) -> tuple[float, int, float] | None:
        """One line as (ts, GPU index, step time); a bad line or unknown GPU is counted and reported once a file."""
        assert self._gpus is not None
        values: dict[str, float] = {}
        ref: GpuRef | None = None
        why: str | None = "not JSON"
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            pass
        else:
            values, ref, why = rank_step_values(doc)
        if ref is None:
            self.bad_lines += 1
            self._say(f"rank heartbeats: {path}: line {line_no}: {why} (skipped)", key=path)
            return None
        gpu = self._gpus.find(ref)
        if gpu is None:
            self.unknown_gpu_lines += 1
            self._say(
                f"rank heartbeats: {path}: line {line_no}: {self._gpus.unknown(ref)} (skipped)", key=f"{path}#gpu"
            )
            return None
        return float(doc["ts"]), gpu, values[TWINLOOP_FI_RANK_STEP_TIME]

    @staticmethod
    def _advance(state: _Job, ts: float) -> None:
        """Take the lines due at ``ts``: each GPU keeps its latest (by time; the later line of a tie)."""
        k = int(np.searchsorted(state.ts, ts, side="right"))
        if k == 0:
            return
        gpu = np.concatenate([state.seen_gpu, state.gpu[:k]])[::-1]
        value = np.concatenate([state.seen_value, state.value[:k]])[::-1]
        seen, first = np.unique(gpu, return_index=True)  # reversed: the first found is the latest
        state.seen_gpu, state.seen_value = seen.astype(np.int64), value[first]
        state.ts, state.gpu, state.value = state.ts[k:], state.gpu[k:], state.value[k:]
