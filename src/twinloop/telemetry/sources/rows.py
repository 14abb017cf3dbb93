"""Samples a text source has parsed, kept in long form until it cuts them into a frame.

Every line-oriented reader (CSV, nvidia-smi, ``dmon``, Prometheus text and answers) appends one sample at a time;
this is their one buffer, so a frame is built the same way from each.
"""

from __future__ import annotations

from twinloop.telemetry.frame import Frame


class Rows:
    """Parsed samples not yet framed: parallel lists, each entity's labels, and the source they came from."""

    def __init__(self, source: str = "") -> None:
        self.source = source
        self.ts: list[float] = []
        self.entity: list[str] = []
        self.field: list[str] = []
        self.value: list[float] = []
        self.lines: list[int] = []
        self.labels: dict[str, dict[str, str]] = {}

    def add(self, ts: float, entity: str, field: str, value: float, line: int) -> None:
        """One sample, from line ``line`` of the source."""
        self.ts.append(ts)
        self.entity.append(entity)
        self.field.append(field)
        self.value.append(value)
        self.lines.append(line)

    def __len__(self) -> int:
        return len(self.ts)

    def flush(self) -> Frame:
        """The samples as one frame, with their entities' labels; the buffer starts again (the labels stay, since an
        entity's labels come with its first line only).
        """
        frame = Frame.from_long(self.ts, self.entity, self.field, self.value, labels=self.labels,
                                source=self.source, lines=self.lines)  # fmt: skip
        self.ts, self.entity, self.field, self.value, self.lines = [], [], [], [], []
        return frame
