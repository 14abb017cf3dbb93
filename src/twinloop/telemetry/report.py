"""IngestReport: every bad-input problem counted and shown with examples naming source and line.

Nothing is dropped silently: a row that a parser or the validator rejects adds one to the count of its
problem kind, and the first few of each kind keep a one-line example ``source:line: message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: problem kind → what happens to the row.
PROBLEM_KINDS: dict[str, str] = {
    "bad_timestamp": "dropped",
    "nan": "dropped",
    "inf": "dropped",
    "negative": "dropped",
    "out_of_range": "dropped",
    "unknown_field": "dropped",
    "duplicate": "dropped",
    "out_of_order": "kept",
    "truncated": "dropped",
    "parse_error": "dropped",
    "unavailable": "skipped",
    "unknown_column": "skipped",
    "already_stored": "skipped",
    "source_error": "skipped",
}

MAX_EXAMPLES = 5


@dataclass
class IngestReport:
    """Counts per problem kind, with the first :data:`MAX_EXAMPLES` examples of each.

    Attributes:
        rows_in: rows the sources produced or parsed (valid or not).
        rows_stored: rows that passed validation and went to the store (or consumer).
        frames: frames read from the sources.
        problems: kind → count.
        examples: kind → up to ``MAX_EXAMPLES`` lines ``"source:line: message"``.
        interrupted: the run was stopped by Ctrl-C (what was read until then is counted and stored).
    """

    rows_in: int = 0
    rows_stored: int = 0
    frames: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    interrupted: bool = False

    def add(self, kind: str, source: str, line: int | str | None, message: str, count: int = 1) -> None:
        """Count ``count`` problems of ``kind``; keep the message as an example while there is room.

        Args:
            kind: one of :data:`PROBLEM_KINDS`.
            source: the file, URL or device the input came from.
            line: the line (or row, sample, query) number in it; ``None`` when not applicable.
            message: what is wrong with the value.
            count: how many rows this problem covers.
        """
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        if count <= 0:
            return
        self.problems[kind] = self.problems.get(kind, 0) + count
        ex = self.examples.setdefault(kind, [])
        if len(ex) < MAX_EXAMPLES:
            where = f"{source}:{line}" if line is not None else source
            ex.append(f"{where}: {message}")

    @property
    def dropped(self) -> int:
        """Rows rejected (not stored)."""
        return sum(n for k, n in self.problems.items() if PROBLEM_KINDS[k] == "dropped")

    @property
    def ok(self) -> bool:
        """True when no problem of any kind was seen."""
        return not self.problems

    def merge(self, other: IngestReport) -> None:
        """Add another report's counts and examples into this one."""
        self.rows_in += other.rows_in
        self.rows_stored += other.rows_stored
        self.frames += other.frames
        for kind, n in other.problems.items():
            self.problems[kind] = self.problems.get(kind, 0) + n
            ex = self.examples.setdefault(kind, [])
            ex.extend(other.examples.get(kind, [])[: MAX_EXAMPLES - len(ex)])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "rows_in": self.rows_in,
            "rows_stored": self.rows_stored,
            "rows_dropped": self.dropped,
            "frames": self.frames,
            "interrupted": self.interrupted,
            "problems": {
                k: {"count": n, "action": PROBLEM_KINDS[k], "examples": self.examples.get(k, [])}
                for k, n in sorted(self.problems.items())
            },
        }

    def summary_lines(self) -> list[str]:
        """Human-readable lines: totals, then one line per problem kind with its first example."""
        out = [f"rows in {self.rows_in}, stored {self.rows_stored}, dropped {self.dropped}, frames {self.frames}"]
        for kind, n in sorted(self.problems.items()):
            first = self.examples.get(kind, [""])[0]
            out.append(f"  {kind}: {n} ({PROBLEM_KINDS[kind]}); e.g. {first}")
        return out
