"""Telemetry sources: one file per kind, all registered in :data:`SOURCES`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twinloop.errors import InputError, unknown_name
from twinloop.telemetry.sources.base import Source, SourceConfig
from twinloop.telemetry.sources.files import FileSource
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiSource
from twinloop.telemetry.sources.nvml import NvmlSource
from twinloop.telemetry.sources.prometheus import PrometheusSource
from twinloop.telemetry.sources.replay import ReplaySource
from twinloop.telemetry.sources.twin import TwinSource

SOURCES: dict[str, type[Source]] = {
    cls.name: cls for cls in (TwinSource, ReplaySource, FileSource, NvmlSource, NvidiaSmiSource, PrometheusSource)
}


def make_source(kind: str, target: str | None = None, options: dict[str, Any] | None = None) -> Source:
    """Build a registered source from its kind, the positional target (path/URL) and plain options.

    Raises:
        InputError: unknown kind or invalid options.
    """
    if kind not in SOURCES:
        if Path(kind).is_file():
            raise InputError(
                "ingest", "SOURCE", f"{kind!r} is a file, not a source kind: name its kind first, "
                f"`twinloop ingest {_kind_of_file(Path(kind))} {kind}` (kinds: {', '.join(sorted(SOURCES))})",
            )  # fmt: skip
        raise unknown_name("ingest", "SOURCE", "source", kind, SOURCES)
    cls = SOURCES[kind]
    opts = dict(options or {})
    if target is not None:
        if cls.target_field is None:
            raise InputError("ingest", "TARGET", f"the {kind} source takes no positional target")
        opts[cls.target_field] = target
    return cls.from_options(opts)


def _kind_of_file(path: Path) -> str:
    """The source kind that reads ``path``, guessed from its contents (for the hint of a misplaced path)."""
    from twinloop.telemetry.sources.nvidia_smi import parse_header
    from twinloop.telemetry.sources.nvidia_smi_dmon import is_dmon_header
    from twinloop.telemetry.sources.prometheus_saved import is_prometheus_json
    from twinloop.telemetry.store.duckdb_store import is_duckdb_file

    if is_duckdb_file(path):
        return "replay"
    if is_prometheus_json(path):
        return "prometheus"
    with path.open(encoding="utf-8-sig", errors="replace") as fh:
        first = fh.readline(65536)
        return "nvidia-smi" if parse_header(first) or is_dmon_header(first) else "file"


__all__ = ["SOURCES", "Source", "SourceConfig", "make_source"]
