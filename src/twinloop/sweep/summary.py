"""Summarize a sweep: per scenario, loop setting and metric, the mean and 95 % interval across seeds.

The interval is Student's t on the seeds' values (``mean ± t(0.975, n-1) · s / sqrt(n)``): the seeds are
independent runs of the same scenario, and there are few of them (5 in the packaged sweep), where a normal
interval would be too narrow. With one seed there is no interval (``None``). Failed runs are left out and
counted per group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Stat:
    """One metric of one (scenario, loop) group across seeds.

    Attributes:
        scenario / loop / metric: the group and the figure (detection figures are prefixed ``detection.``).
        n: seeds with a value; mean: their mean; half_width: the 95 % t-interval's half width (None if n < 2).
        values: per seed, as (seed, value).
    """

    scenario: str
    loop: str
    metric: str
    n: int
    mean: float
    half_width: float | None
    values: tuple[tuple[int, float], ...]

    @property
    def low(self) -> float | None:
        """Lower end of the 95 % interval."""
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        """Upper end of the 95 % interval."""
        return None if self.half_width is None else self.mean + self.half_width


def t_interval(x: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None]:
    """Mean and half width of the Student-t interval of ``x`` (half width None for fewer than two values)."""
    a = np.asarray(x, dtype=np.float64)
    mean = float(a.mean())
    if a.size < 2:
        return mean, None
    sem = float(a.std(ddof=1)) / math.sqrt(a.size)
    return mean, float(stats.t.ppf(0.5 + confidence / 2.0, a.size - 1)) * sem


def summarize(rows: Iterable[dict[str, Any]]) -> list[Stat]:
    """Every (scenario, loop, metric) group of the ok rows, in first-seen order of scenarios, loops and metrics."""
    groups: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for r in sorted(rows, key=lambda r: r["cell"]):
        if r["status"] != "ok":
            continue
        pairs = [(k, v) for k, v in r["metrics"]] + [(f"detection.{k}", v) for k, v in r["detection"]]
        for k, v in pairs:
            groups.setdefault((r["scenario"], r["loop"], k), []).append((int(r["seed"]), float(v)))
    out = []
    for (scenario, loop, metric), vals in groups.items():
        mean, hw = t_interval([v for _, v in vals])
        out.append(Stat(scenario, loop, metric, len(vals), mean, hw, tuple(vals)))
    return out


def by_scenario(summary: Sequence[Stat]) -> dict[str, dict[str, dict[str, Stat]]]:
    """Scenario → metric → loop setting → :class:`Stat` (first-seen order), the layout of the tables."""
    out: dict[str, dict[str, dict[str, Stat]]] = {}
    for s in summary:
        out.setdefault(s.scenario, {}).setdefault(s.metric, {})[s.loop] = s
    return out


def stats_doc(summary: Sequence[Stat]) -> list[dict[str, Any]]:
    """The summary as JSON-ready dicts."""
    return [
        {"scenario": s.scenario, "loop": s.loop, "metric": s.metric, "n": s.n, "mean": s.mean,
         "ci95_low": s.low, "ci95_high": s.high}
        for s in summary
    ]  # fmt: skip


def fmt_interval(s: Stat) -> str:
    """``mean ± half`` with three significant digits (``mean`` alone without an interval)."""
    if s.half_width is None:
        return f"{s.mean:,.3g}"
    return f"{s.mean:,.3g} ± {s.half_width:,.2g}"
