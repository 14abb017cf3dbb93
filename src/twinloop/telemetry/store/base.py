"""The Store protocol: append frames, query by entity prefix / field / time, downsample, retain, export."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa

from twinloop.telemetry.frame import Frame


@runtime_checkable
class Store(Protocol):
    """A telemetry store. Timestamps are epoch seconds (UTC); values are in each field's fixed unit.

    ``entity_prefix`` selects an entity and everything below it in the ``site/row/rack/node/gpu``
    hierarchy (``"site0/row1"`` matches ``site0/row1/...`` but not ``site0/row10``); ``""`` selects all.
    """

    def append(self, frame: Frame, source_key: str | None = None) -> int:
        """Store the rows of ``frame`` atomically (all or none); returns the rows written.

        With ``source_key``, rows that source already stored (same entity, field, timestamp) are skipped.
        """
        ...

    def query(
        self, field: str, entity_prefix: str = "", since_s: float | None = None, until_s: float | None = None
    ) -> pa.Table:
        """Raw samples (ts, entity, field, value) ordered by entity and time."""
        ...

    def downsample(
        self,
        field: str,
        every_s: float,
        entity_prefix: str = "",
        since_s: float | None = None,
        until_s: float | None = None,
    ) -> pa.Table:
        """Per entity and time bucket of ``every_s``: ts (bucket start), entity, min, mean, max, last, count."""
        ...

    def aggregate(
        self, field: str, entity_prefix: str = "", since_s: float | None = None, until_s: float | None = None
    ) -> pa.Table:
        """Per entity over the range: entity, min, mean, max, last, count."""
        ...

    def latest(self, entity_prefix: str = "") -> pa.Table:
        """The newest sample of every (entity, field): ts, entity, field, value."""
        ...

    def delete_before(self, ts_s: float) -> int:
        """Retention: delete samples older than ``ts_s``; returns the rows deleted."""
        ...

    def export_parquet(
        self,
        path: str | Path,
        field: str | None = None,
        entity_prefix: str = "",
        since_s: float | None = None,
        until_s: float | None = None,
    ) -> int:
        """Write the selected samples (long form) to a Parquet file; returns the rows written."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...
