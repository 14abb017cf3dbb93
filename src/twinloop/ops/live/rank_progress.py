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
none of its values (a job that moved off a GPU leaves no stale value for the next one).

A rank that stops writing while the job steps on is a broken writer, not a rank: in a synchronous job no rank can
stop while the others step (each step waits for every rank), so its last step time says nothing about the GPU now.
Where the job reports its step counter (its own ``step`` lines, :mod:`twinloop.ops.live.job_progress`), a rank
whose latest line is more than :data:`STALE_STRIDES` of its own writing strides (the steps between its last two
lines; one before it has two) behind the job's counter at the sample has its value expired: NaN, and its file named
once in a warning, until it writes again. The rule counts steps, not seconds: a wall-clock limit would have to be
tuned to the job's step time (0.16 s on an H200 job, minutes on others), would expire every rank of a job that
pauses to save a checkpoint or waits in a queue (its counter stops too), and would keep a dead rank's value for as
long as it allows; a rank that writes every few steps is allowed as many. It needs the rank's ``step`` to count
what the job's ``step`` lines count. Where the job reports no step counter (no step lines, or none due yet), the
rank's latest value stands however old, as before: nothing tells a stopped writer from a stopped job.

Reading is cheap: per job and sample one directory listing and one ``stat`` a file, and a file is read only when it
grew, from where the last read stopped (a line still being written waits for its newline; a file that shrank or was
replaced is read again: :class:`~twinloop.ops.file_tail.FileTail`). Lines are parsed as they arrive; the per-sample
work is vectorized over the due lines and the job's GPUs (no per-GPU loop).
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
from twinloop.ops.respond.adapters.heartbeat_lines import GpuRef, rank_step_values, uuid_key
from twinloop.ops.respond.adapters.heartbeats import job_file_name
from twinloop.ops.say_once import SayOnce
from twinloop.telemetry.fields import TWINLOOP_FI_RANK_STEP_TIME

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Bytes read from one rank file per sample at most: a long recording is taken in over several samples.
READ_CHUNK_BYTES = 1 << 20
#: A rank's value expires when its latest line is more than this many of its own writing strides behind the job's
#: step counter (see the module docstring): a step or two of lag between the job's line and the rank's is timing.
STALE_STRIDES = 3


def _empty_f() -> F64:
    return np.zeros(0)


def _empty_i() -> I64:
    return np.zeros(0, dtype=np.int64)


@dataclass
class _Job:
    """One job's rank files, its lines not yet due (sorted by time), and each GPU's latest due step time."""

    files: dict[str, FileTail] = field(default_factory=dict)
    #: The rank files' paths, in the order first read (a line's ``file`` is its index here).
    paths: list[str] = field(default_factory=list)
    file_index: dict[str, int] = field(default_factory=dict)
    ts: F64 = field(default_factory=_empty_f)
    gpu: I64 = field(default_factory=_empty_i)
    value: F64 = field(default_factory=_empty_f)
    step: F64 = field(default_factory=_empty_f)
    file: I64 = field(default_factory=_empty_i)
    seen_gpu: I64 = field(default_factory=_empty_i)
    seen_value: F64 = field(default_factory=_empty_f)
    #: Per GPU seen: its latest line's step, the step of the line before it (NaN: none), and the line's file.
    seen_step: F64 = field(default_factory=_empty_f)
    seen_prev: F64 = field(default_factory=_empty_f)
    seen_file: I64 = field(default_factory=_empty_i)


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
        job_steps: F64 | None = None,
    ) -> F64 | None:
        """Per GPU of ``gpu_ids``, its rank's latest step time at or before ``ts`` (NaN where none, or expired: see
        the module docstring), or None while no rank line was ever taken (the field is then left out, as before).

        Args:
            gpu_ids: the topology's GPUs, in the order of the sample's arrays.
            labels: each GPU's labels (``UUID``, ``Hostname``, ``gpu``).
            job_ids: the jobs now.
            job_index: per GPU, its job's index in ``job_ids`` (-1: none).
            ts: the sample's time (Unix s).
            job_steps: per job of ``job_ids``, its step counter at ``ts`` (``TWINLOOP_FI_JOB_PROGRESS``; NaN or
                None: not reported, no value expires).
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
            sel = job_index[state.seen_gpu] == j
            value = state.seen_value[sel]
            if job_steps is not None and np.isfinite(job_steps[j]):
                value = np.where(self._expired(state, sel, float(job_steps[j])), np.nan, value)
            out[state.seen_gpu[sel]] = value
        return out if self._seen_any else None

    def _expired(self, state: _Job, sel: NDArray[np.bool_], job_step: float) -> NDArray[np.bool_]:
        """Which of the selected GPUs' latest lines are too far behind the job's counter; their files told once."""
        step = state.seen_step[sel]
        stride = np.fmax(step - state.seen_prev[sel], 1.0)  # NaN (one line so far) or a restart's drop: 1
        behind = job_step - step
        stale = behind > STALE_STRIDES * stride
        for k in np.flatnonzero(stale):
            path = state.paths[int(state.seen_file[sel][k])]
            self._say(
                f"rank heartbeats: {path}: last step {step[k]:.15g} is {behind[k]:.15g} steps behind the job's"
                f" {job_step:.15g}"
                " (a synchronous job's ranks step together: its writer stopped): its step time expired until it"
                " writes again",
                key=f"{path}#expired",
            )
        return stale

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
        got: list[tuple[float, int, float, float, int]] = []
        for entry in entries:
            got += self._grown(state, entry)
        if got:
            self._seen_any = True
            new = np.array(got, dtype=np.float64).reshape(-1, 5)
            ts = np.concatenate([state.ts, new[:, 0]])
            order = np.argsort(ts, kind="stable")
            state.ts = ts[order]
            state.gpu = np.concatenate([state.gpu, new[:, 1].astype(np.int64)])[order]
            state.value = np.concatenate([state.value, new[:, 2]])[order]
            state.step = np.concatenate([state.step, new[:, 3]])[order]
            state.file = np.concatenate([state.file, new[:, 4].astype(np.int64)])[order]
        return state

    def _grown(self, state: _Job, entry: os.DirEntry[str]) -> list[tuple[float, int, float, float, int]]:
        """The new lines of one rank file as (ts, GPU index, step time, step, file index)."""
        tail = state.files.get(entry.name)
        if tail is None:
            tail = state.files[entry.name] = FileTail()
            state.paths.append(entry.path)
        file = state.file_index.setdefault(entry.name, len(state.file_index))
        lines, _ = tail.read(entry.path, READ_CHUNK_BYTES)
        out = []
        for line_no, raw in lines:
            if raw.strip():
                got = self._take(entry.path, line_no, raw)
                if got is not None:
                    out.append((*got, file))
        return out

    def _take(self, path: str, line_no: int, raw: bytes) -> tuple[float, int, float, float] | None:
        """One line as (ts, GPU index, step time, step); a bad line or unknown GPU is counted and reported once a
        file.
        """
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
        return float(doc["ts"]), gpu, values[TWINLOOP_FI_RANK_STEP_TIME], values["step"]

    @staticmethod
    def _advance(state: _Job, ts: float) -> None:
        """Take the lines due at ``ts``: each GPU keeps its latest (by time; the later line of a tie), and the step
        of the line before it (its writing stride).
        """
        k = int(np.searchsorted(state.ts, ts, side="right"))
        if k == 0:
            return
        # Latest first: the due lines reversed, then what was seen (itself reversed, to index it back below).
        gpu = np.concatenate([state.gpu[:k][::-1], state.seen_gpu[::-1]])
        value = np.concatenate([state.value[:k][::-1], state.seen_value[::-1]])
        step = np.concatenate([state.step[:k][::-1], state.seen_step[::-1]])
        file = np.concatenate([state.file[:k][::-1], state.seen_file[::-1]])
        seen, first = np.unique(gpu, return_index=True)  # the first found is the latest
        later = np.ones(gpu.shape[0], dtype=bool)
        later[first] = False
        again, second = np.unique(gpu[later], return_index=True)  # the one before it, where there is one
        prev = np.full(seen.shape[0], np.nan)
        prev[np.searchsorted(seen, again)] = step[later][second]
        old = first >= k  # no new line: its own previous step stands
        prev[old] = state.seen_prev[::-1][first[old] - k]
        state.seen_gpu, state.seen_value = seen.astype(np.int64), value[first]
        state.seen_step, state.seen_prev, state.seen_file = step[first], prev, file[first]
        state.ts, state.gpu, state.value = state.ts[k:], state.gpu[k:], state.value[k:]
        state.step, state.file = state.step[k:], state.file[k:]
