"""Named random streams of a twin, all from the scenario seed.

Each random part of the twin owns one stream, ``numpy.random.default_rng([seed, stream code, *more])``, so
that one part drawing more or fewer numbers (a telemetry setting that samples more GPUs, a scenario with one
more fault) never moves what another part draws. The failure process and background stragglers keep the plain
``default_rng(seed)`` stream they always had.
"""

from __future__ import annotations

import numpy as np

#: Stream codes (never renumber one: that would change every seeded result drawn from it).
STREAMS: dict[str, int] = {"variation": 1, "faults": 2, "sensors": 3, "peaks": 4}


def stream(seed: int, name: str, *more: int) -> np.random.Generator:
    """The generator of stream ``name`` (a key of :data:`STREAMS`) for ``seed``, optionally sub-keyed by ``more``.

    Raises:
        KeyError: unknown stream name.
    """
    return np.random.default_rng([int(seed), STREAMS[name], *(int(m) for m in more)])
