"""Telemetry: DCGM-named fields, frames, sources, the DuckDB store and the Prometheus exporter."""

from __future__ import annotations

from twinloop.telemetry.fields import FIELD_BY_NAME, FIELDS, FieldSpec, canonical_field
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import ingest, validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.validate import Validator

__all__ = [
    "FIELDS",
    "FIELD_BY_NAME",
    "FieldSpec",
    "Frame",
    "IngestReport",
    "Validator",
    "canonical_field",
    "ingest",
    "validated_frames",
]
