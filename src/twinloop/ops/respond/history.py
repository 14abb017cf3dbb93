"""Reading a cluster's recent telemetry back through the responder's reader.

A reader answers ``read(field, entity, aggregate, ago_s)`` from the snapshots it keeps (the twin's every 10 s; a
live watcher's at its source's cadence). Rules that judge a window rather than a reading (a GPU's thermal path over
30 s, a row's working heat over two minutes) take the same readings back over it.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``read(field, entity, aggregate, ago_s)``: the responder's telemetry reader.
ReadFn = Callable[..., float | None]

#: Spacing of the readings taken back over a window, s: the twin's reader keeps a snapshot every 10 s (the packaged
#: scenarios' GPU telemetry comes every 10 s too), so a finer step would read the same snapshot twice.
STEP_S = 10.0


def read_back(read: ReadFn, field: str, entity: str, aggregate: str, window_s: float) -> list[tuple[float, float]]:
    """(seconds ago, value) of ``field`` over ``entity`` (``aggregate``: ``mean`` or ``max``), now and every
    :data:`STEP_S` back to ``window_s`` ago, oldest last; the readings the reader has (None ones left out).
    """
    out = []
    for k in range(int(window_s // STEP_S) + 1):
        value = read(field, entity, aggregate, k * STEP_S)
        if value is not None:
            out.append((k * STEP_S, value))
    return out
