"""Streaming change and anomaly detection, vectorized across entities.

* :mod:`.base` — the :class:`~.base.Detector` base class (NaN-, gap- and flap-safe) and ``REGISTRY``;
* one module per detector variant (EWMA/robust z-score, novelty-gated robust z, same-phase robust z for periodic
  series, CUSUM, Page-Hinkley, seasonal, river adapters);
* :mod:`.rules` — cross-signal rules a person would write (cooling, throttling, straggler, SDC, XID, hang);
* :mod:`.grouping` — merge simultaneous same-class detections along the topology into one incident;
* :mod:`.pipeline` — per-step pipeline combining the three; :mod:`.offline` — run detectors on a file.
"""


def load_variants() -> None:
    """Import every detector variant so that ``base.REGISTRY`` is complete (river itself loads lazily)."""
    from twinloop.ops.detect import (  # noqa: F401
        cusum,
        ewma_zscore,
        novelty_z,
        page_hinkley,
        phase_z,
        river_adapters,
        seasonal,
    )
