"""Telemetry stores (DuckDB by default)."""

from __future__ import annotations

from twinloop.telemetry.store.base import Store
from twinloop.telemetry.store.duckdb_store import DuckDBStore

__all__ = ["DuckDBStore", "Store"]
