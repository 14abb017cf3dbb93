"""A :class:`Finding`: one fact about the node, with its status and the files that show it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from twinloop.probe.root import Read

Status = Literal["present", "absent", "unknown"]
STATUSES: tuple[Status, ...] = ("present", "absent", "unknown")


class Finding(BaseModel):
    """One probe result.

    Attributes:
        check: dotted name of the fact (``io_uring``, ``cxl.devices``, ``pci.device``).
        status: ``present``, ``absent``, or ``unknown`` when the evidence could not be read.
        value: a short human-readable value (``6.8.0-45-generic``, ``2 nodes``, ``passthrough``).
        details: structured values for JSON consumers (counts, sizes in bytes, link speeds).
        evidence: node paths (``/sys/...``) read to reach the status; for ``unknown`` the unreadable
            ones, each followed by the reason.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    check: str
    status: Status
    value: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    evidence: tuple[str, ...] = ()


def unknown(check: str, *reads: Read, value: str = "") -> Finding:
    """An ``unknown`` finding naming the reads that failed (missing or unreadable) and why."""
    evidence = tuple(r.path if r.ok else f"{r.path} ({r.error or r.state})" for r in reads)
    why = value or "; ".join(f"{r.path}: {r.error or r.state}" for r in reads)
    return Finding(check=check, status="unknown", value=why, evidence=evidence)
