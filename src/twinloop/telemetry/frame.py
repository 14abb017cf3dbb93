"""Frame: a batch of telemetry samples in long form, columnar (NumPy) and convertible to Arrow.

A frame holds N samples ``(ts, entity, field, value)`` as four NumPy columns. Entities and fields are
dictionary-encoded (``entity_idx`` indexes ``entities``, ``field_idx`` indexes ``fields``), which is how
they travel to Arrow (``DictionaryArray``) and DuckDB without a Python loop over rows.

Time: ``ts_s`` is **float64 seconds since the Unix epoch, UTC** (the twin uses its simulated clock on the
same axis). Float seconds keep 1 µs resolution for present-day epochs, which is finer than any source
(NVML at 100 ms, DCGM at 1 ms).

Arrow long form (``Frame.to_arrow`` / ``Frame.from_arrow``)::

    ts: float64 (epoch s, UTC) | entity: dictionary<int32, string> | field: dictionary<int16, string> |
    value: float64

Entity labels (job, model, gpu kind, UUID, ...) ride along in ``labels`` and in the Arrow schema metadata
key ``twinloop.labels`` (JSON).

A dense producer (the twin: every entity × every field at each step) builds a frame with
:meth:`Frame.from_dense`; a wide table comes back with :meth:`Frame.to_dense`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from twinloop.errors import InputError

LABELS_META_KEY = b"twinloop.labels"
#: Most distinct field names one frame may hold (``field_idx`` is int16).
MAX_FIELDS = int(np.iinfo(np.int16).max)

LONG_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.float64()),
        pa.field("entity", pa.dictionary(pa.int32(), pa.string())),
        pa.field("field", pa.dictionary(pa.int16(), pa.string())),
        pa.field("value", pa.float64()),
    ]
)


@dataclass(frozen=True, eq=False)
class Frame:
    """N telemetry samples in long, dictionary-encoded columnar form.

    Attributes:
        ts_s: (N,) float64 timestamps, seconds since the Unix epoch (UTC).
        entity_idx: (N,) int32 indexes into ``entities``.
        field_idx: (N,) int16 indexes into ``fields``.
        value: (N,) float64 values in the field's fixed unit (see ``fields.py``).
        entities: entity ids, hierarchical ``site/row/rack/node/gpu``.
        fields: field names.
        labels: entity id → labels (``job``, ``model``, ``gpu_kind``, ``UUID`` ...); may be partial.
        source: where the samples came from (file, URL, device), for error messages.
        lines: (N,) int64 line/record numbers in ``source`` per sample, or ``None``.
    """

    ts_s: NDArray[np.float64]
    entity_idx: NDArray[np.int32]
    field_idx: NDArray[np.int16]
    value: NDArray[np.float64]
    entities: tuple[str, ...]
    fields: tuple[str, ...]
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    source: str = ""
    lines: NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        # field_idx is int16 (the store's dictionary type): more names would wrap and mislabel samples silently.
        if len(self.fields) > MAX_FIELDS:
            raise InputError(
                self.source or "telemetry",
                "field",
                f"{len(self.fields)} distinct field names (allowed: <= {MAX_FIELDS})",
            )

    def __len__(self) -> int:
        return int(self.ts_s.shape[0])

    # ----- constructors -------------------------------------------------------------------------------
    @classmethod
    def from_long(
        cls,
        ts_s: Sequence[float] | NDArray[np.float64],
        entity: Sequence[str],
        field_name: Sequence[str],
        value: Sequence[float] | NDArray[np.float64],
        labels: Mapping[str, Mapping[str, str]] | None = None,
        source: str = "",
        lines: Sequence[int] | NDArray[np.int64] | None = None,
    ) -> Frame:
        """A frame from parallel per-row sequences (entity and field as strings)."""
        ents, e_idx = np.unique(np.asarray(entity, dtype=object).astype(str), return_inverse=True)
        flds, f_idx = np.unique(np.asarray(field_name, dtype=object).astype(str), return_inverse=True)
        return cls(
            ts_s=np.asarray(ts_s, dtype=np.float64).reshape(-1),
            entity_idx=e_idx.astype(np.int32).reshape(-1),
            field_idx=f_idx.astype(np.int16).reshape(-1),
            value=np.asarray(value, dtype=np.float64).reshape(-1),
            entities=tuple(str(e) for e in ents),
            fields=tuple(str(f) for f in flds),
            labels=dict(labels or {}),
            source=source,
            lines=None if lines is None else np.asarray(lines, dtype=np.int64).reshape(-1),
        )

    @classmethod
    def from_dense(
        cls,
        ts_s: float | Sequence[float] | NDArray[np.float64],
        entities: Sequence[str],
        columns: Mapping[str, NDArray[np.float64]],
        labels: Mapping[str, Mapping[str, str]] | None = None,
        source: str = "",
    ) -> Frame:
        """A frame from a dense grid: T timestamps × E entities for each field.

        Args:
            ts_s: one timestamp (T = 1) or (T,) timestamps, epoch seconds UTC.
            entities: the E entity ids.
            columns: field name → array of shape (E,) (when T = 1) or (T, E).
            labels: optional entity labels.
            source: where the data came from.

        Rows come out field-major (all samples of one field together), which keeps each field in
        contiguous runs in the store.
        """
        ts = np.atleast_1d(np.asarray(ts_s, dtype=np.float64))
        n_t, n_e = ts.shape[0], len(entities)
        names = tuple(columns)
        per_field = n_t * n_e
        values = np.empty(per_field * len(names), dtype=np.float64)
        for k, name in enumerate(names):
            col = np.asarray(columns[name], dtype=np.float64)
            if col.size != per_field:
                raise ValueError(f"column {name}: {col.shape} does not match {n_t} timestamps x {n_e} entities")
            values[k * per_field : (k + 1) * per_field] = col.reshape(-1)
        ts_block = np.repeat(ts, n_e)
        ent_block = np.tile(np.arange(n_e, dtype=np.int32), n_t)
        return cls(
            ts_s=np.tile(ts_block, len(names)),
            entity_idx=np.tile(ent_block, len(names)),
            field_idx=np.repeat(np.arange(len(names), dtype=np.int16), per_field),
            value=values,
            entities=tuple(entities),
            fields=names,
            labels=dict(labels or {}),
            source=source,
        )

    @classmethod
    def empty(cls, source: str = "") -> Frame:
        """A frame with no samples."""
        return cls(
            ts_s=np.empty(0),
            entity_idx=np.empty(0, dtype=np.int32),
            field_idx=np.empty(0, dtype=np.int16),
            value=np.empty(0),
            entities=(),
            fields=(),
            source=source,
        )

    @classmethod
    def concat(cls, frames: Sequence[Frame]) -> Frame:
        """One frame holding all samples of ``frames`` (entity/field dictionaries merged)."""
        frames = [f for f in frames if len(f)]
        if not frames:
            return cls.empty()
        if len(frames) == 1:
            return frames[0]
        ent_map: dict[str, int] = {}
        fld_map: dict[str, int] = {}
        e_parts, f_parts = [], []
        labels: dict[str, Mapping[str, str]] = {}
        for fr in frames:
            e_lut = np.array([ent_map.setdefault(e, len(ent_map)) for e in fr.entities], dtype=np.int32)
            f_lut = np.array([fld_map.setdefault(f, len(fld_map)) for f in fr.fields], dtype=np.int16)
            e_parts.append(e_lut[fr.entity_idx] if len(e_lut) else fr.entity_idx)
            f_parts.append(f_lut[fr.field_idx] if len(f_lut) else fr.field_idx)
            labels.update(fr.labels)
        has_lines = all(fr.lines is not None for fr in frames)
        return cls(
            ts_s=np.concatenate([f.ts_s for f in frames]),
            entity_idx=np.concatenate(e_parts).astype(np.int32),
            field_idx=np.concatenate(f_parts).astype(np.int16),
            value=np.concatenate([f.value for f in frames]),
            entities=tuple(ent_map),
            fields=tuple(fld_map),
            labels=labels,
            source=frames[0].source,
            lines=np.concatenate([f.lines for f in frames if f.lines is not None]) if has_lines else None,
        )

    # ----- selection ----------------------------------------------------------------------------------
    def take(self, mask_or_index: NDArray[np.bool_] | NDArray[np.int64]) -> Frame:
        """The subset of rows selected by a boolean mask or index array (dictionaries unchanged)."""
        return Frame(
            ts_s=self.ts_s[mask_or_index],
            entity_idx=self.entity_idx[mask_or_index],
            field_idx=self.field_idx[mask_or_index],
            value=self.value[mask_or_index],
            entities=self.entities,
            fields=self.fields,
            labels=self.labels,
            source=self.source,
            lines=None if self.lines is None else self.lines[mask_or_index],
        )

    def with_fields(self, fields: tuple[str, ...]) -> Frame:
        """The same rows with the field dictionary replaced (used to canonicalize alias names)."""
        return Frame(
            self.ts_s, self.entity_idx, self.field_idx, self.value, self.entities, fields, self.labels,
            self.source, self.lines,
        )  # fmt: skip

    def entity_names(self) -> NDArray[np.str_]:
        """(N,) entity id per row."""
        return np.asarray(self.entities, dtype=str)[self.entity_idx] if self.entities else np.empty(0, dtype=str)

    def field_names(self) -> NDArray[np.str_]:
        """(N,) field name per row."""
        return np.asarray(self.fields, dtype=str)[self.field_idx] if self.fields else np.empty(0, dtype=str)

    def line_of(self, row: int) -> int | None:
        """The source line of ``row`` (or ``None`` when the source has no lines)."""
        return None if self.lines is None else int(self.lines[row])

    # ----- Arrow --------------------------------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        """The long-form Arrow table (schema :data:`LONG_SCHEMA`, labels in schema metadata)."""
        ent = pa.DictionaryArray.from_arrays(
            pa.array(self.entity_idx, pa.int32()), pa.array(list(self.entities), pa.string())
        )
        fld = pa.DictionaryArray.from_arrays(
            pa.array(self.field_idx, pa.int16()), pa.array(list(self.fields), pa.string())
        )
        meta = {LABELS_META_KEY: json.dumps({k: dict(v) for k, v in self.labels.items()}).encode()}
        return pa.Table.from_arrays(
            [pa.array(self.ts_s, pa.float64()), ent, fld, pa.array(self.value, pa.float64())],
            schema=LONG_SCHEMA.with_metadata(meta),
        )

    @classmethod
    def from_arrow(cls, table: pa.Table, source: str = "") -> Frame:
        """A frame from a long Arrow table with columns ts, entity, field, value (dictionary or plain)."""
        missing = {"ts", "entity", "field", "value"} - set(table.column_names)
        if missing:
            raise ValueError(f"{source or 'table'}: missing columns {sorted(missing)}")
        ts_col = table.column("ts")
        if pa.types.is_timestamp(ts_col.type):
            ts_col = ts_col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            ts = ts_col.to_numpy().astype(np.float64) / 1e6
        else:
            ts = ts_col.to_numpy().astype(np.float64)

        def encode(name: str) -> tuple[tuple[str, ...], NDArray[np.int64]]:
            col = table.column(name).combine_chunks()
            if not pa.types.is_dictionary(col.type):
                col = col.dictionary_encode()
            return tuple(str(x) for x in col.dictionary.to_pylist()), col.indices.to_numpy(zero_copy_only=False)

        ents, e_idx = encode("entity")
        flds, f_idx = encode("field")
        labels: dict[str, Mapping[str, str]] = {}
        meta = table.schema.metadata or {}
        if LABELS_META_KEY in meta:
            labels = json.loads(meta[LABELS_META_KEY])
        return cls(
            ts_s=ts,
            entity_idx=e_idx.astype(np.int32),
            field_idx=f_idx.astype(np.int16),
            value=table.column("value").to_numpy().astype(np.float64),
            entities=ents,
            fields=flds,
            labels=labels,
            source=source,
        )

    # ----- dense --------------------------------------------------------------------------------------
    def to_dense(self, field_name: str) -> tuple[NDArray[np.float64], tuple[str, ...], NDArray[np.float64]]:
        """One field as a (T, E) grid: (timestamps, entities, values with NaN where no sample)."""
        if field_name not in self.fields:
            return np.empty(0), (), np.empty((0, 0))
        sel = self.field_idx == self.fields.index(field_name)
        ts_u, t_idx = np.unique(self.ts_s[sel], return_inverse=True)
        e_u, e_idx = np.unique(self.entity_idx[sel], return_inverse=True)
        grid = np.full((ts_u.shape[0], e_u.shape[0]), np.nan)
        grid[t_idx, e_idx] = self.value[sel]
        return ts_u, tuple(self.entities[i] for i in e_u), grid
