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


def counter_mask(values: F64) -> NDArray[np.bool_]:
    """Which columns of ``values`` (n_samples, n_series; NaN = missing) are cumulative counters."""
    out = np.zeros(values.shape[1], dtype=bool)
    for j in range(values.shape[1]):  # columns of one file (a handful), not GPUs in a hot path
        v = values[:, j]
        v = v[np.isfinite(v)]
        if v.size <= MIN_STEPS:
            continue
        prev, step = v[:-1], np.diff(v)
        reset = (step < 0) & (v[1:] < RESET_FRACTION * prev)
        fall = (step < 0) & ~reset
        out[j] = not fall.any() and _longest_flat_run(step) <= MAX_FLAT_SHARE * step.size
    return out


def _longest_flat_run(step: F64) -> int:
    """The most consecutive zero steps."""
    flat = np.concatenate(([0], (step == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(flat))
    return int((edges[1::2] - edges[::2]).max()) if edges.size else 0


def as_rates(ts: F64, values: F64, mask: NDArray[np.bool_]) -> F64:
    """``values`` with the ``mask`` columns replaced by their increase per second since the previous finite
    sample (NaN at the first sample and at a reset).
    """
    out = values.copy()
    for j in np.flatnonzero(mask):
        v = values[:, j]
        ok = np.flatnonzero(np.isfinite(v))
        rate = np.full(v.shape, np.nan)
        step = np.diff(v[ok])
        with np.errstate(divide="ignore", invalid="ignore"):
            r = step / np.diff(ts[ok])
        rate[ok[1:]] = np.where(step >= 0, r, np.nan)
        out[:, j] = rate
    return out
