"""Whether a file's time column is a clock or only numbers its samples (``twinloop detect --interval-s``).

Public labelled series often carry no clock. Yahoo's S5 A1 files number their hourly samples ``timestamp`` = 1, 2,
3 ...; the UCR anomaly archive writes one value per line with no header; ``pandas.DataFrame.to_csv`` writes an
unnamed 0, 1, 2 ... index. Read as seconds, a numbered file looked like 1 Hz GPU telemetry and got the GPU default
detectors, which by design ignore a one-sample spike (on a Yahoo-like file with two spikes of 25 sigma: no
detection), and a file with no time column was refused.

So small consecutive integers (from 0 or 1, step 1) under a name where a clock would be a date or UNIX time
(``timestamp``, ``time``, ``date``, ``datetime``) or under an index name (``index``, an unnamed column), and a
missing time column, make a **sample index**: the samples are taken :data:`ASSUMED_INTERVAL_S` apart unless the
user gives the interval (``--interval-s``), and detections are reported in the file's own numbering. Names that
say seconds (``ts``, ``t``, ``t_s``, ``time_s``: the telemetry schema's and the twin's) stay a clock, so GPU
telemetry keeps its detectors.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Names of an index column: read as the time column only when it numbers the samples.
INDEX_NAMES = ("index", "idx", "sample", "", "unnamed: 0")

#: Time-column names whose clock would be a date or UNIX time, so 0/1, 2, 3 ... there numbers samples.
DATE_NAMES = frozenset({"timestamp", "time", "date", "datetime"})

#: The interval a sample index is given when the user does not say: 5 min, CloudWatch's basic monitoring period
#: and the step of most of the Numenta Anomaly Benchmark's series, so the kind profiles' spans (a day, a week,
#: clamped to sample counts) keep the meaning they were chosen with on such series. An assumption, reported.
ASSUMED_INTERVAL_S = 300.0


#: Smallest magnitude of a UNIX time in ms, µs and ns: as seconds, 1e11 is the year 5138, so a clock that large
#: counts a finer unit (JavaScript's ``Date.now()``, Grafana and Prometheus exports in ms; pandas' int64 in ns).
EPOCH_UNITS: tuple[tuple[float, str, float], ...] = ((1e17, "ns", 1e-9), (1e14, "us", 1e-6), (1e11, "ms", 1e-3))


def epoch_unit(ts: NDArray[np.float64]) -> tuple[str, float]:
    """The unit of a numeric clock (``s``, ``ms``, ``us``, ``ns``) from its median magnitude, and its factor to s."""
    finite = np.abs(ts[np.isfinite(ts)])
    median = float(np.median(finite)) if finite.size else 0.0
    for lo, unit, scale in EPOCH_UNITS:
        if median >= lo:
            return unit, scale
    return "s", 1.0


def is_sample_index(name: str, ts: NDArray[np.float64]) -> bool:
    """Whether the time column ``name`` with values ``ts`` (file order) numbers samples rather than keeping time."""
    key = name.strip().lower()
    if key not in DATE_NAMES and key not in INDEX_NAMES:
        return False
    if ts.size < 2 or not np.isfinite(ts).all():
        return False
    return float(ts[0]) in (0.0, 1.0) and bool(np.all(np.diff(ts) == 1.0))
