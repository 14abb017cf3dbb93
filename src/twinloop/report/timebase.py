"""One time axis for telemetry and loop records.

The twin stamps telemetry with ``EPOCH_START_S + simulated seconds`` (absolute UTC times), while the loop's
records of a twin run (incidents, actions) count simulated seconds from 0. Shown together, the records are put
on the telemetry's absolute axis; records that are already epoch seconds (a live cluster) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Seconds at or above this are epoch (absolute) times; below, simulated seconds from the run's start.
EPOCH_MIN_S = 1.0e9


def record_offset_s(record_ts: Iterable[float], telemetry_t0_s: float | None) -> float:
    """What to add to loop-record times to put them on the telemetry's axis: the twin's epoch start when the
    telemetry is absolute and the records are simulated seconds, else 0.
    """
    ts = list(record_ts)
    if telemetry_t0_s is None or telemetry_t0_s < EPOCH_MIN_S or not ts or max(ts) >= EPOCH_MIN_S:
        return 0.0
    from twinloop.twin.telemetry_out import EPOCH_START_S  # only for a twin run's records (the twin is heavy)

    return EPOCH_START_S
