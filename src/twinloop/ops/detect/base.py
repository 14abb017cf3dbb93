"""The streaming detector base class: vectorized over entities, NaN-, gap-, skew- and flap-safe.

A detector sees one sample per entity per call, ``update(ts, values)`` with ``values`` of shape
``(n_entities,)``, and returns which entities are in alarm after this sample. The base class does everything
that makes a raw statistic safe to act on, so each variant only writes its statistic (``_step``):

* **sampling interval** — parameters are in seconds (half-lives, windows, persistence); they are converted to
  samples with the median of the recently observed intervals (or ``dt_s`` when given), so the same defaults
  work on 1 s telemetry and on a 1 min export;
* **NaN** — a NaN sample leaves that entity's state unchanged and is counted (``nan_count``);
* **clock skew** — a timestamp that is not after the previous one is dropped and counted
  (``out_of_order_count``); jittered intervals only move the median interval a little;
* **gaps** — an entity whose last good sample is older than ``gap_intervals`` intervals re-warms (its state is
  reset and it must see ``warmup_s`` of data again) instead of comparing across the hole;
* **warm-up** — no alarm before ``warmup_s`` of good samples since the last (re)start;
* **persistence** — an alarm needs ``k`` consecutive exceedances (``k = max(min_persistence,
  ceil(persistence_s / dt))``), so single outliers and a sensor toggling between two levels do not fire;
* **flapping** — a *jump* is a sample-to-sample change far beyond the entity's usual one (``jump_factor`` ×
  its EWMA of ``|dx|``); while the decayed jump count is at least ``flap_jumps`` the entity is flapping: no
  alarms, and its state re-warms, so a flapping sensor becomes the new normal rather than an alarm.

Change-point detectors (``kind == "change_point"``) re-warm an entity after it alarms: the new level becomes the
reference. Anomaly detectors keep alarming while the anomaly lasts.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError, unknown_name
from twinloop.ops.events import DetectionKind

#: z-score conventions shared by the z-score detectors.
CALM_Z = 3.0
Z_MAX = 1e3  # a change from a perfectly flat series has z ~ 1/floor; report it as 1000
CALM_VAR = 0.9733  # variance of a standard normal truncated to |z| < 3

F64 = NDArray[np.float64]
BoolArr = NDArray[np.bool_]


@dataclass(frozen=True)
class DetectorParams:
    """Parameters every detector has (seconds are converted with the observed sampling interval).

    Attributes:
        warmup_s: good data needed after a (re)start before alarms, s.
        min_warmup: ... and at least this many samples.
        persistence_s: an exceedance must last this long to alarm, s.
        min_persistence: ... and at least this many consecutive samples.
        gap_intervals: a hole longer than this many intervals re-warms the entity.
        gap_s: ... and longer than this, s (0: the intervals alone). A detector whose baseline spans hours keeps it
            across a shorter hole instead of going silent for a warm-up.
        dt_s: sampling interval, s; ``None`` = the median of the observed intervals.
        jump_factor: a change larger than this × the EWMA of ``|dx|`` is a jump.
        jump_rel: ... and larger than this fraction of the previous value's magnitude.
        flap_jumps: the entity is flapping while its decayed jump count is at least this.
        flap_half_life_s: half-life of the jump count, s.
        seed: seed of any random part (same seed, same output).
    """

    warmup_s: float = 30.0
    min_warmup: int = 10
    persistence_s: float = 5.0
    min_persistence: int = 2
    gap_intervals: float = 5.0
    gap_s: float = 0.0
    dt_s: float | None = None
    jump_factor: float = 8.0
    jump_rel: float = 0.02
    flap_jumps: float = 1.5
    flap_half_life_s: float = 30.0
    seed: int = 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError("detector", f.name, f"{v} (allowed: a finite number)")
        checks: list[tuple[str, bool, str]] = [
            ("warmup_s", self.warmup_s >= 0, ">= 0"),
            ("persistence_s", self.persistence_s >= 0, ">= 0"),
            ("min_persistence", self.min_persistence >= 1, ">= 1"),
            ("min_warmup", self.min_warmup >= 1, ">= 1"),
            ("gap_intervals", self.gap_intervals >= 1, ">= 1"),
            ("gap_s", self.gap_s >= 0, ">= 0"),
            ("dt_s", self.dt_s is None or self.dt_s > 0, "> 0 or None"),
            ("jump_factor", self.jump_factor > 1, "> 1"),
            ("jump_rel", self.jump_rel >= 0, ">= 0"),
            ("flap_jumps", self.flap_jumps > 1, "> 1"),
            ("flap_half_life_s", self.flap_half_life_s > 0, "> 0"),
        ]
        for name, ok, allowed in checks:
            if not ok:
                raise InputError("detector", name, f"{getattr(self, name)} (allowed {allowed})")


P = TypeVar("P", bound=DetectorParams)


def alpha_for(half_life_s: float, dt_s: float, min_samples: float = 1.0) -> float:
    """EWMA weight of one new sample for a half-life in seconds at interval ``dt_s``.

    The half-life is at least ``min_samples`` samples: a baseline must average several samples even on
    sparsely sampled data (a 300 s half-life on 1 min data would otherwise chase every sample).
    """
    # float(): a float power is typed Any (it may be complex); this one is real, the base being positive.
    return 1.0 - float(2.0 ** (-1.0 / max(half_life_s / dt_s, min_samples, 1e-12)))


def samples_for(seconds: float, dt_s: float, minimum: int = 1) -> int:
    """A duration in seconds as a whole number of samples (at least ``minimum``)."""
    return max(minimum, math.ceil(seconds / dt_s - 1e-9))


class Detector(ABC, Generic[P]):
    """Base class of streaming detectors; see the module docstring for what it guarantees.

    Subclasses set ``name``, ``kind`` and ``params_cls``, and implement ``_alloc`` (state arrays),
    ``_reset_entities`` (re-warm a mask of entities) and ``_step`` (update the state with the valid samples and
    return the score and the exceedance mask).

    Args:
        params: the parameters; ``None`` = defaults with ``overrides`` applied.
        **overrides: individual parameter values.
    """

    name: ClassVar[str]
    kind: ClassVar[DetectionKind]
    params_cls: ClassVar[type[DetectorParams]]
    vectorized: ClassVar[bool] = True

    def __init__(self, params: P | None = None, **overrides: Any) -> None:
        base = params if params is not None else self.params_cls()
        try:
            self.params: P = dataclasses.replace(base, **overrides)  # type: ignore[assignment]
        except TypeError as exc:
            raise InputError(f"detector {self.name}", "", str(exc)) from None
        self._init_state()

    def _init_state(self) -> None:
        self.n_entities = 0
        self._allocated = False
        self.nan_count: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.out_of_order_count = 0
        self.samples_seen = 0
        self.score: F64 = np.zeros(0)
        self._last_ts = -math.inf
        self._dts: list[float] = []
        self.dt_s = self.params.dt_s or 1.0

    # --- lifecycle ----------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (state, counters, the sampling interval)."""
        self._init_state()

    def _alloc_common(self, n: int) -> None:
        self.n_entities = n
        self.nan_count = np.zeros(n, dtype=np.int64)
        self.score = np.full(n, np.nan)
        self._count = np.zeros(n, dtype=np.int64)
        self._run = np.zeros(n, dtype=np.int64)
        self._last_valid_ts = np.full(n, -np.inf)
        self._prev_x = np.full(n, np.nan)
        self._mad_dx = np.full(n, np.nan)
        self._dx_n = np.zeros(n, dtype=np.int64)
        self._flap = np.zeros(n)
        self._alloc(n)
        self._allocated = True
        self._rates_changed()

    @abstractmethod
    def _alloc(self, n: int) -> None:
        """Allocate the variant's state arrays for ``n`` entities."""

    @abstractmethod
    def _reset_entities(self, mask: BoolArr) -> None:
        """Reset the variant's state of the entities in ``mask`` (they re-warm)."""

    @abstractmethod
    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        """Update state with ``x[valid]``; return (score, exceed) arrays of shape (n,)."""

    def _ready(self) -> BoolArr | None:
        """Extra per-entity readiness (e.g. a seasonal bucket seen often enough); ``None`` = all ready."""
        return None

    def _rates_changed(self) -> None:
        """Recompute sample-count parameters after the sampling interval changed."""
        p = self.params
        dt = self.dt_s
        self._warmup_n = samples_for(p.warmup_s, dt, p.min_warmup)
        self._k = samples_for(p.persistence_s, dt, p.min_persistence)
        self._gap_s = max(p.gap_intervals * dt, p.gap_s)
        self._flap_decay = 2.0 ** (-dt / p.flap_half_life_s)
        self._mad_alpha = alpha_for(10.0 * dt, dt)
        self._on_rates()

    def _on_rates(self) -> None:
        """Hook for variants to convert their own seconds to samples (``self.dt_s`` is current)."""

    def rewarm(self, mask: BoolArr) -> None:
        """Re-warm the entities in ``mask``: reset their state; alarms resume after the warm-up."""
        if not mask.any():
            return
        self._count[mask] = 0
        self._run[mask] = 0
        self._reset_entities(mask)

    # --- the update -----------------------------------------------------------------------------------------
    def update(self, ts: float, values: NDArray[np.float64]) -> BoolArr:
        """Feed one sample per entity; return the entities in alarm after it.

        Args:
            ts: sample time, s. A time not after the previous one is dropped (counted, no alarm).
            values: shape ``(n_entities,)``; NaN = missing. The entity count is fixed by the first call.

        Returns:
            bool array (n_entities,): alarm after persistence, warm-up, gap and flap handling. The raw score of
            this sample is in ``self.score`` (NaN where missing).
        """
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if not self._allocated:
            self._alloc_common(x.shape[0])
        elif x.shape[0] != self.n_entities:
            raise InputError(
                f"detector {self.name}", "values", f"{x.shape[0]} entities (allowed {self.n_entities}, as before)"
            )
        if not ts > self._last_ts:
            self.out_of_order_count += 1
            return np.zeros(self.n_entities, dtype=bool)
        if math.isfinite(self._last_ts):
            self._observe_dt(ts - self._last_ts)
        self._last_ts = ts
        self.samples_seen += 1

        valid = np.isfinite(x)
        self.nan_count += ~valid
        gap = valid & (ts - self._last_valid_ts > self._gap_s) & np.isfinite(self._last_valid_ts)
        if gap.any():
            self.rewarm(gap)
            self._prev_x[gap] = np.nan
            self._mad_dx[gap] = np.nan
            self._dx_n[gap] = 0
        self._last_valid_ts[valid] = ts

        flapping = self._update_flap(x, valid)
        self.rewarm(flapping & valid)

        score, exceed = self._step(ts, x, valid)
        self._count += valid
        ok = valid & (self._count > self._warmup_n) & ~flapping
        ready = self._ready()
        if ready is not None:
            ok &= ready
        exceed = exceed & ok
        self._run = np.where(exceed, self._run + 1, np.where(valid, 0, self._run))
        alarm = self._run >= self._k
        self.score = np.where(valid, score, np.nan)
        if self.kind == "change_point" and alarm.any():
            self.rewarm(alarm)
        return alarm

    def _observe_dt(self, dt: float) -> None:
        if self.params.dt_s is not None:
            return
        self._dts.append(dt)
        if len(self._dts) > 31:
            del self._dts[0]
        if len(self._dts) <= 8 or self.samples_seen % 8 == 0:
            new_dt = float(np.median(self._dts))
            if abs(new_dt - self.dt_s) > 1e-3 * self.dt_s:
                self.dt_s = new_dt
                if self._allocated:
                    self._rates_changed()

    def _update_flap(self, x: F64, valid: BoolArr) -> BoolArr:
        both = valid & np.isfinite(self._prev_x)
        dx = np.abs(np.where(both, x - self._prev_x, 0.0))
        limit = np.maximum(self.params.jump_factor * self._mad_dx, self.params.jump_rel * np.abs(self._prev_x))
        limit = np.where(np.isfinite(limit), limit, np.inf)
        # The usual |dx| needs a few deltas before anything can be called a jump.
        learned = self._dx_n >= 8
        jump = both & learned & (dx > limit)
        first = both & ~np.isfinite(self._mad_dx)
        self._mad_dx = np.where(first, dx, self._mad_dx)
        upd = both & ~first
        # Jumps teach the usual |dx| ten times slower: a flapping sensor stays jumpy for a while (suppressed),
        # yet a signal that really became more variable is learned as the new normal.
        rate = np.where(jump, 0.1 * self._mad_alpha, np.maximum(self._mad_alpha, 1.0 / (self._dx_n + 1.0)))
        self._dx_n += both
        winsorized = self._mad_dx + rate * (np.minimum(dx, limit) - self._mad_dx)
        self._mad_dx = np.where(upd, winsorized, self._mad_dx)
        self._flap = self._flap * self._flap_decay + jump
        np.copyto(self._prev_x, x, where=valid)
        return self._flap >= self.params.flap_jumps


def running_alpha(alpha: float, count: NDArray[np.int64]) -> F64:
    """Per-entity EWMA weight that starts as a running mean (1/n) and settles at ``alpha``."""
    return np.maximum(alpha, 1.0 / np.maximum(count + 1, 1))


class ZSmoother:
    """EWMA of a clipped z-score: a lone outlier cannot carry it over the threshold, a lasting shift does."""

    def __init__(self, n: int) -> None:
        self.zs = np.zeros(n)

    def reset(self, mask: BoolArr) -> None:
        """Zero the smoothed z of the entities in ``mask`` (they re-warm)."""
        self.zs[mask] = 0.0

    def __call__(self, z: F64, valid: BoolArr, alpha: float, clip: float) -> F64:
        """Fold ``z`` clipped to ±``clip`` into the EWMA (weight ``alpha``) where valid; the smoothed z per entity."""
        self.zs = np.where(valid, self.zs + alpha * (np.clip(z, -clip, clip) - self.zs), self.zs)
        return self.zs


REGISTRY: dict[str, type[Detector[Any]]] = {}

D = TypeVar("D", bound=type[Detector[Any]])


def register(cls: D) -> D:
    """Class decorator: add a detector variant to :data:`REGISTRY` under ``cls.name``."""
    REGISTRY[cls.name] = cls
    return cls


def make_detector(name: str, source: str = "--detector", **params: Any) -> Detector[Any]:
    """A registered detector by name, with parameter overrides.

    Raises:
        InputError: unknown name (with close matches) or bad parameter.
    """
    from twinloop.ops.detect import load_variants

    load_variants()
    if name not in REGISTRY:
        raise unknown_name(source, "", "detector", name, REGISTRY)
    return REGISTRY[name](**params)
