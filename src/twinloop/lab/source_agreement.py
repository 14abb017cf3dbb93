"""Whether two telemetry sources read the same GPU alike (twinloop's NVML source vs nvidia-smi's own CSV).

Both read the same NVML counters, so over a shared window their means should agree to the sensors' resolution,
and at matching instants (nearest samples within ``match_s``) the clocks and reason bits should be equal; what
differs is when each one sampled. Used on the real H100 recording in ``tests/fixtures/h100_nvml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiSource
from twinloop.telemetry.sources.replay import ReplayConfig, ReplaySource

F64 = NDArray[np.float64]
Series = dict[str, tuple[F64, F64]]


@dataclass(frozen=True)
class Agreement:
    """One field read by both sources over their shared window.

    Attributes:
        field: field name. n_a, n_b: samples of each source in the window.
        mean_a, mean_b: the window's means. matched: sample pairs within ``match_s`` of each other.
        mean_abs_diff: mean |a − b| over the matched pairs. equal_share: share of matched pairs that are equal.
    """

    field: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    matched: int
    mean_abs_diff: float
    equal_share: float


def _first_gpu_series(source: Source) -> tuple[Series, IngestReport]:
    """Per field (ts, value) of the first entity a telemetry source reads, through the ingest's validation."""
    report = IngestReport()
    frame = Frame.concat(list(validated_frames(source, report)))
    out: Series = {}
    for f in frame.fields:
        ts, _, grid = frame.to_dense(f)
        ok = np.isfinite(grid[:, 0])
        out[f] = (ts[ok], grid[ok, 0])
    return out, report


def long_parquet_series(path: str | Path) -> Series:
    """Per field (ts, value) of the first entity in a long-form export (``DuckDBStore.export_parquet``)."""
    return _first_gpu_series(ReplaySource(ReplayConfig(path=str(path))))[0]


def smi_series(path: str | Path, utc_offset_h: float = 0.0) -> tuple[Series, IngestReport]:
    """Per field (ts, value) of the first GPU in an nvidia-smi CSV, read by twinloop's nvidia-smi source."""
    return _first_gpu_series(NvidiaSmiSource(NvidiaSmiConfig(path=str(path), utc_offset_h=utc_offset_h)))


def agreement(a: Series, b: Series, match_s: float = 0.05) -> list[Agreement]:
    """Every field both sources read, over the window both cover."""
    rows = []
    for f in sorted(set(a) & set(b)):
        (ta, va), (tb, vb) = a[f], b[f]
        lo, hi = max(ta[0], tb[0]), min(ta[-1], tb[-1])
        ia, ib = (ta >= lo) & (ta <= hi), (tb >= lo) & (tb <= hi)
        ta_w, va_w, tb_w, vb_w = ta[ia], va[ia], tb[ib], vb[ib]
        j = np.clip(np.searchsorted(tb_w, ta_w), 1, len(tb_w) - 1)
        nearest = np.where(np.abs(tb_w[j - 1] - ta_w) <= np.abs(tb_w[j] - ta_w), j - 1, j)
        close = np.abs(tb_w[nearest] - ta_w) <= match_s
        diff = va_w[close] - vb_w[nearest[close]]
        rows.append(Agreement(f, int(ia.sum()), int(ib.sum()), float(va_w.mean()), float(vb_w.mean()),
                              int(close.sum()), float(np.abs(diff).mean()) if diff.size else float("nan"),
                              float((diff == 0).mean()) if diff.size else float("nan")))  # fmt: skip
    return rows


def energy_vs_power(ts_s: F64, energy_j: F64, power_w: F64) -> tuple[float, float]:
    """The energy counter's increase over the record and the trapezoid integral of the sampled power, J."""
    return float(energy_j[-1] - energy_j[0]), float(np.trapezoid(power_w, ts_s))
