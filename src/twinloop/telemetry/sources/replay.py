"""Replay stored telemetry: a twinloop DuckDB store or a long-form Parquet export, in time order.

Samples are cut into frames of ``frame_s`` seconds of data. ``speed`` paces the replay against the wall
clock (1 = as recorded, 10 = ten times faster, 0 = as fast as possible), so a stored incident can be
played into the exporter or the loop as if it were live.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field

from twinloop.errors import InputError
from twinloop.telemetry.entity import under
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Pacer, Source, SourceConfig


class ReplayConfig(SourceConfig):
    """Replay options.

    Attributes:
        path: a twinloop DuckDB store (``.duckdb``/``.db``) or a long Parquet file from ``export_parquet``.
        frame_s: seconds of recorded time per emitted frame.
        speed: replay speed relative to the recording (0 = no pacing).
        field: replay only this field (``None`` = all).
        entity_prefix: replay only entities under this prefix.
    """

    path: str = "twinloop.duckdb"
    frame_s: float = Field(default=1.0, gt=0)
    speed: float = Field(default=0.0, ge=0)
    field: str | None = None
    entity_prefix: str = ""


def load_recording(cfg: ReplayConfig) -> Frame:
    """The whole recording ``cfg.path`` (its field and entity filters applied) as one frame, labels included."""
    path = Path(cfg.path)
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", cfg.path)
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(cfg.path)
            frame = Frame.from_arrow(table, source=cfg.path)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(cfg.path, "", f"not a long-form telemetry Parquet file: {exc}") from None
        keep = np.ones(len(frame), dtype=bool)
        if cfg.field is not None:
            keep &= frame.field_names() == cfg.field
        keep &= under(frame.entity_names(), cfg.entity_prefix)
        return frame.take(keep)
    from twinloop.telemetry.store.duckdb_store import DuckDBStore

    store = DuckDBStore(cfg.path, read_only=True)
    try:
        table = store.read_long(cfg.field, cfg.entity_prefix)
        labels = store.labels(cfg.entity_prefix)
    finally:
        store.close()
    frame = Frame.from_arrow(table, source=cfg.path)
    return Frame(frame.ts_s, frame.entity_idx, frame.field_idx, frame.value, frame.entities, frame.fields,
                 labels, cfg.path, np.arange(1, len(frame) + 1, dtype=np.int64))  # fmt: skip


class ReplaySource(Source):
    """Stored samples replayed in time order, optionally paced."""

    name: ClassVar[str] = "replay"
    config_type: ClassVar[type[SourceConfig]] = ReplayConfig
    target_field: ClassVar[str | None] = "path"

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield one frame per ``frame_s`` window of recorded time."""
        cfg = self.config
        assert isinstance(cfg, ReplayConfig)
        frame = load_recording(cfg)
        if not len(frame):
            return
        order = np.argsort(frame.ts_s, kind="stable")
        frame = frame.take(order)
        window = np.floor((frame.ts_s - frame.ts_s[0]) / cfg.frame_s).astype(np.int64)
        cuts = np.flatnonzero(np.diff(window)) + 1
        pacer = Pacer(cfg.speed)
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(frame)], strict=True):
            pacer.wait(float(frame.ts_s[lo]))
            yield frame.take(np.arange(lo, hi))
