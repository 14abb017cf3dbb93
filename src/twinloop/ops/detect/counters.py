"""Cumulative counters in a user's file, read as their rates.

An energy counter (NVML's total energy, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``), a byte or request counter
(Prometheus ``*_total`` exported raw) only ever rises; a z-score or CUSUM on the running total alarms on the
slope changing, hours after the fact and on a scale that grows with the file. What an operator reads off a
counter is its rate (``rate()`` in PromQL), so a counter column is analysed as its per-second increase.

A column is a counter when it falls on no step but resets (a restarted exporter starts again near zero: a fall
to below :data:`RESET_FRACTION` of the previous value) and rises all through the file: no flat stretch longer
than :data:`MAX_FLAT_SHARE` of it. Read faster than it updates (NVML's energy counter moves every 100 ms; read
at 20 Hz, half the steps are flat) a counter is flat for a sample or two at a time, never for long. A gauge that
only steps up now and then (memory used, a power limit) stays flat for long stretches and is left alone; so is
any series with an ordinary fall.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

#: Longest run of flat steps (between finite samples) a counter may have, as a share of its steps.
MAX_FLAT_SHARE = 0.05
#: A fall to below this fraction of the previous value is a counter reset, not a fall.
RESET_FRACTION = 0.1
#: Fewest steps on which a column is judged (a handful of rising samples says nothing).
MIN_STEPS = 20


def _steps(values: F64) -> tuple[F64, F64, NDArray[np.bool_], NDArray[np.int64]]:
    """Each sample against the last finite one before it, vectorised over the columns: (previous value, step, whether
    the row is a step between two finite samples, row of that previous sample).
    """
    n = values.shape[0]
    finite = np.isfinite(values)
    last = np.where(finite, np.arange(n)[:, None], -1)
    np.maximum.accumulate(last, axis=0, out=last)
    prev_row = last[:-1]
    prev = np.take_along_axis(values, np.maximum(prev_row, 0), axis=0)
    is_step = finite[1:] & (prev_row >= 0)
    with np.errstate(invalid="ignore"):
        step = np.where(is_step, values[1:] - prev, np.nan)
    return prev, step, is_step, prev_row


def counter_mask(values: F64) -> NDArray[np.bool_]:
    """Which columns of ``values`` (n_samples, n_series; NaN = missing) are cumulative counters."""
    if values.shape[0] < 2:
        return np.zeros(values.shape[1], dtype=bool)
    prev, step, is_step, _ = _steps(values)
    with np.errstate(invalid="ignore"):
        falls = is_step & (step < 0)
        reset = falls & (values[1:] < RESET_FRACTION * prev)
        flat = is_step & (step == 0)
    n_steps = is_step.sum(axis=0)
    # longest run of flat steps; rows that are no step (a missing sample) neither extend nor end a run
    count = np.cumsum(flat, axis=0)
    ended = np.where(is_step & ~flat, count, 0)
    np.maximum.accumulate(ended, axis=0, out=ended)
    longest = (count - ended).max(axis=0)
    keep = (n_steps >= MIN_STEPS) & ~(falls & ~reset).any(axis=0) & (longest <= MAX_FLAT_SHARE * n_steps)
    return np.asarray(keep, dtype=bool)


def as_rates(ts: F64, values: F64, mask: NDArray[np.bool_]) -> F64:
    """``values`` with the ``mask`` columns replaced by their increase per second since the previous finite
    sample (NaN at the first sample and at a reset).
    """
    out = values.copy()
    cols = np.flatnonzero(mask)
    if not cols.size or values.shape[0] < 2:
        return out
    v = values[:, cols]
    _, step, is_step, prev_row = _steps(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = step / (ts[1:, None] - ts[np.maximum(prev_row, 0)])
    rate = np.where(is_step & (step >= 0), rate, np.nan)
    out[:, cols] = np.vstack([np.full((1, cols.size), np.nan), rate])
    return out
