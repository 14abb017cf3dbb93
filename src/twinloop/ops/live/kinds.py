"""The live source kinds of ``twinloop watch SOURCE``, one builder each, in :data:`LIVE_KINDS`.

``SOURCE`` is ``KIND`` or ``KIND:TARGET``:

* ``nvml`` — this machine's GPUs through NVML (``nvml:REC.json`` replays a recording through the fake NVML);
* ``nvidia-smi`` — ``nvidia-smi --query-gpu ... -lms`` live, or ``nvidia-smi:FILE`` a recorded CSV;
* ``dcgm:URL`` — scrape a dcgm-exporter ``/metrics`` every tick;
* ``prometheus:URL`` — PromQL over DCGM metrics on a Prometheus server, every scrape step (the fleet-scale path:
  labels once a minute, values through label-light range queries; see ``PrometheusConfig.mode`` ``follow``);
* ``replay:FILE`` — a recording: a twinloop DuckDB store or long Parquet, a long/wide CSV (``ts, entity, ...``),
  or the NVML sampler's CSV (``t, power_mw, ...``), played at ``--speed``.

Each builder wraps an existing telemetry source (:mod:`twinloop.telemetry.sources`); none parses on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from twinloop.errors import InputError, unknown_name
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_PROF_DRAM_ACTIVE,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiSource
from twinloop.telemetry.sources.nvml import NvmlConfig, NvmlSource
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.replay import ReplayConfig, ReplaySource
from twinloop.telemetry.sources.sampler_csv import SamplerCsvConfig, SamplerCsvSource, is_sampler_csv

#: The DCGM fields the ``prometheus`` kind asks for each tick (what the rules read).
PROMQL_FIELDS = (
    DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_MEMORY_TEMP, DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_POWER_MGMT_LIMIT, DCGM_FI_DEV_CLOCKS_EVENT_REASONS, DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE, DCGM_FI_DEV_FB_USED,
)  # fmt: skip


@dataclass(frozen=True)
class Built:
    """A source and what the cluster needs to know about it.

    Attributes:
        source: the telemetry source.
        cadence_s: its sampling period, s (None: inferred from the data).
        replay: a recording (paced by ``--speed``, ends at its end) rather than a live source.
        whole_sweeps: each frame is one complete sweep over the GPUs (see ``LiveOptions.whole_sweeps``).
    """

    source: Source
    cadence_s: float | None
    replay: bool
    whole_sweeps: bool = False


@dataclass(frozen=True)
class KindArgs:
    """What the command line says about the source."""

    target: str | None
    period_s: float = 1.0
    duration_s: float | None = None
    node_prefix: str | None = None


Builder = Callable[[KindArgs], Built]


class Scheduled(Source):
    """A one-poll HTTP source asked again on a fixed schedule: every ``period_s`` from the start, not ``period_s``
    after the previous answer (the wrapped source sleeps between its own polls, which drifts by the time a poll
    takes; at fleet scale a poll takes a large part of a second).
    """

    name: ClassVar[str] = "scheduled"
    config_type: ClassVar[type[SourceConfig]] = PrometheusConfig
    target_field: ClassVar[str | None] = "url"

    def __init__(self, config: SourceConfig | None = None, period_s: float = 1.0, duration_s: float | None = None):
        super().__init__(config)
        self.period_s = period_s
        self.duration_s = duration_s

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """One poll of the wrapped source per period."""
        assert isinstance(self.config, PrometheusConfig)
        one = PrometheusSource(self.config.model_copy(update={"polls": 1}))
        t0 = time.monotonic()
        k = 0
        while self.duration_s is None or k * self.period_s < self.duration_s:
            yield from one.frames(report)
            k += 1
            # Skip the ticks a slow poll overran, so the schedule never builds a backlog.
            k = max(k, int((time.monotonic() - t0) / self.period_s))
            time.sleep(max(0.0, t0 + k * self.period_s - time.monotonic()))


def _nvml(a: KindArgs) -> Built:
    cfg = NvmlConfig(period_s=a.period_s, duration_s=a.duration_s, node_prefix=a.node_prefix, replay_file=a.target,
                     start_ts_s=0.0 if a.target else None)  # fmt: skip
    return Built(NvmlSource(cfg), a.period_s, replay=a.target is not None, whole_sweeps=True)


def _nvidia_smi(a: KindArgs) -> Built:
    cfg = NvidiaSmiConfig(path=a.target, period_ms=max(100, round(a.period_s * 1000)), duration_s=a.duration_s,
                          node_prefix=a.node_prefix)  # fmt: skip
    live = a.target is None
    return Built(NvidiaSmiSource(cfg), a.period_s if live else None, replay=not live, whole_sweeps=live)


def _need(a: KindArgs, kind: str, what: str) -> str:
    if not a.target:
        raise InputError("SOURCE", kind, f"needs {what} ({kind}:{what})")
    return a.target


def _dcgm(a: KindArgs) -> Built:
    url = _need(a, "dcgm", "URL")
    if "://" not in url:
        if Path(url).exists():  # `curl .../metrics > f.prom`: a page of the past, not an exporter to poll
            raise InputError(
                "SOURCE", "dcgm", f"{url} is a file; dcgm: takes the exporter's URL (dcgm:http://HOST:9400); a saved "
                "page with timestamps: `twinloop detect FILE` or `twinloop ingest prometheus FILE`",
            )  # fmt: skip
        url = f"http://{url}"  # dcgm:node17:9400
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    cfg = PrometheusConfig(url=url, mode="scrape", entity_prefix="site0/row0/rack0", timeout_s=max(5.0, 2 * a.period_s))
    return Built(Scheduled(cfg, a.period_s, a.duration_s), a.period_s, replay=False, whole_sweeps=True)


def _prometheus(a: KindArgs) -> Built:
    url = _need(a, "prometheus", "URL")
    query = '{__name__=~"' + "|".join(PROMQL_FIELDS) + '"}'
    cfg = PrometheusConfig(url=url, mode="follow", queries=(query,), period_s=a.period_s, duration_s=a.duration_s,
                           timeout_s=max(10.0, 2 * a.period_s))  # fmt: skip
    return Built(PrometheusSource(cfg), a.period_s, replay=False, whole_sweeps=True)


def _replay(a: KindArgs) -> Built:
    path = _need(a, "replay", "FILE")
    suffix = Path(path).suffix.lower()
    if not Path(path).is_file():
        raise FileNotFoundError(2, "no such file", path)
    if suffix in (".duckdb", ".db", ".parquet", ".pq"):
        return Built(ReplaySource(ReplayConfig(path=path, frame_s=60.0)), None, replay=True)
    if suffix == ".csv" and is_sampler_csv(path):
        prefix = a.node_prefix or "site0/row0/rack0/vm"
        return Built(SamplerCsvSource(SamplerCsvConfig(path=path, node_prefix=prefix)), None, replay=True)
    if suffix == ".csv":
        return Built(FileSource(FileConfig(path=path, batch_rows=20_000)), None, replay=True)
    raise InputError(path, "", "unknown recording type (allowed: .duckdb, .db, .parquet, .pq, .csv)")


LIVE_KINDS: dict[str, Builder] = {
    "nvml": _nvml,
    "nvidia-smi": _nvidia_smi,
    "dcgm": _dcgm,
    "prometheus": _prometheus,
    "replay": _replay,
}


def parse_source(spec: str) -> tuple[str, str | None]:
    """``KIND[:TARGET]`` → (kind, target); URLs keep their own colons."""
    kind, sep, target = spec.partition(":")
    if kind not in LIVE_KINDS:
        if Path(spec).is_file():
            raise InputError("SOURCE", "", f"{spec!r} is a file: watch a recording as `replay {spec}`")
        raise unknown_name("SOURCE", "", "source kind", kind, LIVE_KINDS)
    return kind, (target if sep and target else None)


def build_source(spec: str, period_s: float = 1.0, duration_s: float | None = None,
                 node_prefix: str | None = None) -> Built:  # fmt: skip
    """The source for ``SOURCE`` (see the module docstring)."""
    if not period_s > 0:
        raise InputError("--period", "", f"{period_s} (allowed: > 0 s)")
    kind, target = parse_source(spec)
    return LIVE_KINDS[kind](KindArgs(target, period_s, duration_s, node_prefix))
