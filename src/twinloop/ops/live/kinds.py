"""The live source kinds of ``twinloop watch SOURCE``, one builder each, in :data:`LIVE_KINDS`.

``SOURCE`` is ``KIND`` or ``KIND:TARGET``:

* ``nvml`` — this machine's GPUs through NVML (``nvml:REC.json`` replays a recording through the fake NVML);
* ``nvidia-smi`` — ``nvidia-smi --query-gpu ... -lms`` live, or ``nvidia-smi:FILE`` a recorded CSV;
* ``dcgm:URL`` — scrape a dcgm-exporter ``/metrics`` every tick;
* ``prometheus:URL`` — PromQL over DCGM metrics on a Prometheus server every tick (the fleet-scale path);
* ``replay:FILE`` — a recording: a twinloop DuckDB store or long Parquet, a long/wide CSV (``ts, entity, ...``),
  or the NVML sampler's CSV (``t, power_mw, ...``), played at ``--speed``.

Each builder wraps an existing telemetry source (:mod:`twinloop.telemetry.sources`); none parses on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from twinloop.errors import InputError, unknown_name
from twinloop.ops.live.sampler_csv import SamplerCsvConfig, SamplerCsvSource, is_sampler_csv
from twinloop.telemetry.sources.base import Source
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiSource
from twinloop.telemetry.sources.nvml import NvmlConfig, NvmlSource
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.replay import ReplayConfig, ReplaySource

#: Polls a live HTTP source makes at most (a watcher runs until stopped or ``--duration``).
MANY_POLLS = 10**9
#: The DCGM fields the ``prometheus`` kind asks for each tick (what the rules read).
PROMQL_FIELDS = (
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED",
)  # fmt: skip


@dataclass(frozen=True)
class Built:
    """A source and what the cluster needs to know about it.

    Attributes:
        source: the telemetry source.
        cadence_s: its sampling period, s (None: inferred from the data).
        replay: a recording (paced by ``--speed``, ends at its end) rather than a live source.
    """

    source: Source
    cadence_s: float | None
    replay: bool


@dataclass(frozen=True)
class KindArgs:
    """What the command line says about the source."""

    target: str | None
    period_s: float = 1.0
    duration_s: float | None = None
    node_prefix: str | None = None


Builder = Callable[[KindArgs], Built]


def _nvml(a: KindArgs) -> Built:
    cfg = NvmlConfig(period_s=a.period_s, duration_s=a.duration_s, node_prefix=a.node_prefix, replay_file=a.target,
                     start_ts_s=0.0 if a.target else None)  # fmt: skip
    return Built(NvmlSource(cfg), a.period_s, replay=a.target is not None)


def _nvidia_smi(a: KindArgs) -> Built:
    cfg = NvidiaSmiConfig(path=a.target, period_ms=max(100, round(a.period_s * 1000)), duration_s=a.duration_s,
                          node_prefix=a.node_prefix)  # fmt: skip
    return Built(NvidiaSmiSource(cfg), None if a.target else a.period_s, replay=a.target is not None)


def _need(a: KindArgs, kind: str, what: str) -> str:
    if not a.target:
        raise InputError("SOURCE", kind, f"needs {what} ({kind}:{what})")
    return a.target


def _dcgm(a: KindArgs) -> Built:
    url = _need(a, "dcgm", "URL")
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    cfg = PrometheusConfig(url=url, mode="scrape", polls=MANY_POLLS, period_s=a.period_s,
                           entity_prefix="site0/row0/rack0")  # fmt: skip
    return Built(PrometheusSource(cfg), a.period_s, replay=False)


def _prometheus(a: KindArgs) -> Built:
    url = _need(a, "prometheus", "URL")
    query = '{__name__=~"' + "|".join(PROMQL_FIELDS) + '"}'
    cfg = PrometheusConfig(url=url, mode="instant", queries=(query,), polls=MANY_POLLS, period_s=a.period_s,
                           timeout_s=max(5.0, 2 * a.period_s))  # fmt: skip
    return Built(PrometheusSource(cfg), a.period_s, replay=False)


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
        raise unknown_name("SOURCE", "", "source kind", kind, LIVE_KINDS)
    return kind, (target if sep and target else None)


def build_source(spec: str, period_s: float = 1.0, duration_s: float | None = None,
                 node_prefix: str | None = None) -> Built:  # fmt: skip
    """The source for ``SOURCE`` (see the module docstring)."""
    if not period_s > 0:
        raise InputError("--period", "", f"{period_s} (allowed: > 0 s)")
    kind, target = parse_source(spec)
    return LIVE_KINDS[kind](KindArgs(target, period_s, duration_s, node_prefix))
