"""The one-GPU NVML sampler CSV (``shared/data/h100/tools/sampler.py``): ``t, power_mw, ..., fb_used_mib``.

That script writes NVML's raw units, one row per read (20 Hz on the H100 recording). This reader converts them to
the field table's units (mW → W, mJ → J) and names the GPU ``<node_prefix>/gpu0``, so the file replays through the
same loop as any other source. Bad cells are counted, not fatal; a file without a ``t`` column is an InputError.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from pydantic import Field

from twinloop.errors import InputError
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEM_CLOCK,
    DCGM_FI_DEV_MEM_COPY_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Pacer, Source, SourceConfig

#: sampler column → (field, factor to the field's unit).
COLUMNS: dict[str, tuple[str, float]] = {
    "power_mw": (DCGM_FI_DEV_POWER_USAGE, 1e-3),  # nvmlDeviceGetPowerUsage: a 1 s average on Hopper
    "energy_mj": (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1e-3),
    "gpu_temp_c": (DCGM_FI_DEV_GPU_TEMP, 1.0),
    "mem_temp_c": (DCGM_FI_DEV_MEMORY_TEMP, 1.0),
    "sm_mhz": (DCGM_FI_DEV_SM_CLOCK, 1.0),
    "mem_mhz": (DCGM_FI_DEV_MEM_CLOCK, 1.0),
    "util_gpu": (DCGM_FI_DEV_GPU_UTIL, 1.0),
    "util_mem": (DCGM_FI_DEV_MEM_COPY_UTIL, 1.0),
    "reasons": (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, 1.0),
    "power_limit_mw": (DCGM_FI_DEV_POWER_MGMT_LIMIT, 1e-3),
    "fb_used_mib": (DCGM_FI_DEV_FB_USED, 1.0),
}


def is_sampler_csv(path: str | Path) -> bool:
    """Whether a CSV file's header is the sampler's (``t,power_mw,...``)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            header = fh.readline().strip().split(",")
    except OSError:
        return False
    return bool(header) and header[0] == "t" and "power_mw" in header


class SamplerCsvConfig(SourceConfig):
    """Options: the file, the GPU's entity prefix, rows per frame, replay speed (0 = no pacing)."""

    path: str = "samples.csv"
    node_prefix: str = "site0/row0/rack0/vm"
    batch_rows: int = Field(default=2000, ge=1)
    speed: float = Field(default=0.0, ge=0)


class SamplerCsvSource(Source):
    """Rows of a sampler CSV as frames (one GPU)."""

    name: ClassVar[str] = "nvml-sampler-csv"
    config_type: ClassVar[type[SourceConfig]] = SamplerCsvConfig
    target_field: ClassVar[str | None] = "path"

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Frames of ``batch_rows`` rows, paced at ``speed``."""
        cfg = self.config
        assert isinstance(cfg, SamplerCsvConfig)
        if not Path(cfg.path).is_file():
            raise FileNotFoundError(2, "no such file", cfg.path)
        try:
            table = pacsv.read_csv(
                cfg.path, convert_options=pacsv.ConvertOptions(column_types={c: pa.float64() for c in COLUMNS})
            )
        except (pa.ArrowException, ValueError) as exc:
            raise InputError(cfg.path, "", f"not a sampler CSV: {str(exc).splitlines()[0]}") from None
        if "t" not in table.column_names:
            raise InputError(cfg.path, "t", "missing (expected the sampler's columns t, power_mw, ...)")
        ts = np.asarray(table.column("t").cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        entity = f"{cfg.node_prefix.rstrip('/')}/gpu0"
        labels = {entity: {"gpu": "0", "Hostname": cfg.node_prefix.rstrip("/").rsplit("/", 1)[-1]}}
        cols = {}
        for col, (field, factor) in COLUMNS.items():
            if col in table.column_names:
                cols[field] = np.asarray(table.column(col).to_numpy(zero_copy_only=False), dtype=np.float64) * factor
        pacer = Pacer(cfg.speed)
        n = ts.size
        for lo in range(0, n, cfg.batch_rows):
            hi = min(n, lo + cfg.batch_rows)
            t = ts[lo:hi]
            good = np.isfinite(t)
            if (~good).any():
                report.add("parse_error", cfg.path, lo + 2 + int(np.flatnonzero(~good)[0]), "bad t", int((~good).sum()))
            t = t[good]
            if not t.size:
                continue
            pacer.wait(float(t[0]))
            dense = {f: v[lo:hi][good][:, None] for f, v in cols.items()}
            frame = Frame.from_dense(t, [entity], dense, labels=labels, source=cfg.path)
            missing = np.isnan(frame.value)
            if missing.any():
                report.add("unavailable", cfg.path, None, "empty cells", int(missing.sum()))
            yield frame.take(~missing)
