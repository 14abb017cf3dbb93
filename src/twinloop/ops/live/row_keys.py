"""The source key of the GPU rows ``twinloop watch SOURCE --db FILE`` writes: which data they are.

The store leaves out a keyed row it already holds (same entity, field and time; see
:meth:`~twinloop.telemetry.store.duckdb_store.DuckDBStore.append`), so the key decides only *whether* a batch is
checked, never which rows survive the check: a key that names more than one read of the same data costs a check,
one that names less lets a re-run store its rows twice. Hence:

* **a recording** (``replay:FILE``, ``nvidia-smi:FILE``, ``nvml:REC.json``) is keyed as ``twinloop ingest`` keys the
  same file (:func:`~twinloop.telemetry.ingest.default_source_key`: kind, absolute path, a hash of the options that
  select data), with the options that only pace or bound a live read (``--period``, a duration, a timeout) set to
  their defaults: a watcher re-run over the file, with other rules, another period or after a crash, stores none of
  its rows twice, nor rows ``twinloop ingest file FILE`` put in the store before (where the entity ids agree);
* **a live source** (``nvml``, ``nvidia-smi``, ``dcgm:URL``, ``prometheus:URL``) is keyed by its kind and target
  (``live:KIND:TARGET``): stable across restarts, so a restarted watcher that is handed again rows it already stored
  (a Prometheus catch-up, a clock stepped back) writes them once, while every new reading, which carries a new
  time, is written.
"""

from __future__ import annotations

from twinloop.ops.live.kinds import Built, parse_source
from twinloop.telemetry.ingest import default_source_key
from twinloop.telemetry.sources.base import Source

#: Config fields that pace or bound a read rather than select its data (reset to their defaults in a replay's key).
_PACING_FIELDS = ("period_s", "period_ms", "duration_s", "samples", "timeout_s")


def _unpaced(source: Source) -> Source:
    """``source`` with its pacing options at their defaults (a copy; only its key is taken)."""
    fields = type(source.config).model_fields
    reset = {name: fields[name].default for name in _PACING_FIELDS if name in fields}
    return type(source)(source.config.model_copy(update=reset))


def gpu_rows_source_key(spec: str, built: Built) -> str:
    """The source key of the GPU rows a watcher of ``spec`` writes (see the module docstring).

    Args:
        spec: ``twinloop watch``'s ``SOURCE`` (``KIND[:TARGET]``).
        built: what :func:`~twinloop.ops.live.kinds.build_source` built from it.
    """
    source = built.source
    if built.replay:
        return default_source_key(_unpaced(source))
    kind, _ = parse_source(spec)
    field = source.target_field
    target = getattr(source.config, field, None) if field else None  # the URL as normalized by the builder
    return f"live:{kind}:{target or ''}"
