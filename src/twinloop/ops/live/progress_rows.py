"""The jobs' own progress as telemetry rows of the store: what the rules saw, at the time they saw it.

``twinloop watch --job-heartbeats DIR`` hands the rules, with every sample, each job's step fields
(:mod:`~twinloop.ops.live.job_progress`: ``TWINLOOP_FI_JOB_PROGRESS``, ``..._STEP_TIME``, ``..._LOSS``,
``..._GRAD_NORM``, ``..._TOKENS_PER_S``, ``..._PHASE``) and each GPU's rank step time
(:mod:`~twinloop.ops.live.rank_progress`: ``TWINLOOP_FI_RANK_STEP_TIME``). The GPUs' own rows reach the store as
the source delivered them; these do not come from the source, so the watcher writes them itself, one row per
field and entity at the sample's time, with the value the rules read (a field the job has not reported, NaN, is
no row). Jobs are ``<site>/jobs/<job id>`` as in the twin's stores, GPUs the topology's ids as in the GPU rows, so
an operator reads the job's step time beside its GPUs' clocks and the incidents on it (``twinloop query``,
``twinloop report``, the dashboard's job pages).

The rows carry a source key (:func:`progress_source_key`): a watcher started again over the same data (a replay,
or a restart that re-reads the heartbeat files) writes no row the store already holds for the same entity, field
and time (:meth:`~twinloop.telemetry.store.duckdb_store.DuckDBStore.append`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from twinloop.ops.ports import Sample
from twinloop.telemetry.fields import TWINLOOP_FI_RANK_STEP_TIME
from twinloop.telemetry.frame import Frame

#: The per-GPU fields of a job's progress (the rest of the progress is per job).
GPU_PROGRESS_FIELDS = (TWINLOOP_FI_RANK_STEP_TIME,)


class FrameSink(Protocol):
    """Where telemetry frames go: a store (``DuckDBStore``) or its queue (``SessionStore``)."""

    def append(self, frame: Frame, source_key: str | None = None) -> int:
        """Store (or queue) ``frame``; with ``source_key``, rows that source already stored are not written."""
        ...


def progress_source_key(directory: str | Path) -> str:
    """The source key of the progress rows read from a heartbeat directory (``job-heartbeats:<absolute path>``)."""
    return f"job-heartbeats:{Path(directory).resolve()}"


def job_entity_of(job: str, site: str) -> str:
    """A job's entity id: ``<site>/jobs/<job>`` (an id that is already an entity path is kept)."""
    return job if "/" in job else f"{site}/jobs/{job}"


def progress_frame(sample: Sample, gpu_ids: Sequence[str], site: str) -> Frame:
    """One sample's job fields and per-GPU progress fields as long rows at ``sample.ts`` (finite values only).

    Args:
        sample: the sample as the rules saw it.
        gpu_ids: the topology's GPU ids, in the order of the sample's per-GPU arrays.
        site: the site id (the jobs' entities are ``<site>/jobs/<job>``).
    """
    entities = [job_entity_of(j, site) for j in sample.job_ids] + list(gpu_ids)
    n_jobs = len(sample.job_ids)
    columns: list[tuple[str, np.ndarray, int]] = []  # (field, values, offset of its entities in ``entities``)
    for name, values in (sample.job_fields or {}).items():
        columns.append((name, np.asarray(values, dtype=np.float64), 0))
    for name in GPU_PROGRESS_FIELDS:
        if name in sample.gpu:
            columns.append((name, np.asarray(sample.gpu[name], dtype=np.float64), n_jobs))
    ent_parts, fld_parts, val_parts = [], [], []
    for k, (_, values, offset) in enumerate(columns):
        idx = np.flatnonzero(np.isfinite(values))
        ent_parts.append(idx + offset)
        fld_parts.append(np.full(idx.size, k, dtype=np.int64))
        val_parts.append(values[idx])
    if not columns or not sum(p.size for p in ent_parts):
        return Frame.empty(source="job-heartbeats")
    ent = np.concatenate(ent_parts)
    fld = np.concatenate(fld_parts)
    used_e, e_idx = np.unique(ent, return_inverse=True)  # only the entities and fields with a row are named
    used_f, f_idx = np.unique(fld, return_inverse=True)
    return Frame(
        ts_s=np.full(ent.size, float(sample.ts)),
        entity_idx=e_idx.astype(np.int32),
        field_idx=f_idx.astype(np.int16),
        value=np.concatenate(val_parts),
        entities=tuple(entities[i] for i in used_e),
        fields=tuple(columns[i][0] for i in used_f),
        source="job-heartbeats",
    )
