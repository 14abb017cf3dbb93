"""Telemetry sources: one file per kind, all registered in :data:`SOURCES`."""

from __future__ import annotations

from typing import Any

from twinloop.errors import unknown_name
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
        raise unknown_name("ingest", "SOURCE", "source", kind, SOURCES)
    cls = SOURCES[kind]
    opts = dict(options or {})
    if target is not None:
        if cls.target_field is None:
            from twinloop.errors import InputError

            raise InputError("ingest", "TARGET", f"the {kind} source takes no positional target")
        opts[cls.target_field] = target
    return cls.from_options(opts)


__all__ = ["SOURCES", "Source", "SourceConfig", "make_source"]
