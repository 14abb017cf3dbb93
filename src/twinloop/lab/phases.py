"""A recording's phase timeline (``t,phase`` CSV: the time each phase began) and what the loop found in each.

Used to judge a replay against what the workload did (``benchmarks/watch_h100_replay.py``, the H100 tests): an
incident belongs to the phase in which it opened.
"""

from __future__ import annotations

import bisect
import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from twinloop.errors import InputError


def load_phases(path: str | Path) -> list[tuple[float, str]]:
    """``(start_ts, phase)`` in time order from a ``t,phase`` CSV."""
    out = []
    with open(path, newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh), start=2):
            try:
                out.append((float(row["t"]), str(row["phase"])))
            except (KeyError, TypeError, ValueError):
                raise InputError(str(path), f"line {n}", "expected columns t (Unix s) and phase") from None
    return sorted(out, key=lambda p: p[0])


def phase_at(phases: list[tuple[float, str]], ts: float) -> str:
    """The phase running at ``ts`` (``before`` the first; a phase named twice at one time: the later name)."""
    starts = [p[0] for p in phases]
    i = bisect.bisect_right(starts, ts) - 1
    return phases[i][1] if i >= 0 else "before"


def phase_group(phase: str) -> str:
    """``cap_600`` → ``cap``, ``burst_3`` → ``burst``, ``decode_b8`` → ``decode``; other names as they are."""
    head, sep, tail = phase.rpartition("_")
    return head if sep and (tail.isdigit() or (tail[:1] == "b" and tail[1:].isdigit())) else phase


def by_phase(
    incidents: Iterable[Mapping[str, Any]], phases: list[tuple[float, str]]
) -> dict[str, list[dict[str, Any]]]:
    """Incidents (dicts with ``opened_ts``) grouped by the phase in which they opened, in phase order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for inc in incidents:
        out.setdefault(phase_at(phases, float(inc["opened_ts"])), []).append(dict(inc))
    order = {name: i for i, (_, name) in enumerate(phases)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], -1)))
