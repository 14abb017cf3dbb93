"""Named detector profiles per signal kind (``twinloop detect --profile latency|utilisation|temperature|generic|auto``).

The default detectors (``ewma_zscore`` + ``cusum`` with their stock parameters) are tuned for GPU telemetry
sampled every second or so: a 5 min half-life, 2-sample persistence and flap suppression. On minute- or
hour-sampled service metrics (the Numenta Anomaly Benchmark's request latency, CPU utilisation, temperatures)
those settings mean a half-life of one sample and a failure that *is* a burst of jumps being suppressed as
"flapping": on NAB's ``ec2_request_latency_system_failure`` they find 1 of 3 failure windows
(``docs/sections/calibration-detect.md``, "Real labelled series (NAB)").

A profile is a list of detectors with parameters plus a minimum spacing between reported alarms of one series.
Time spans are given in seconds *and* clamped to a range of samples, so one profile behaves sensibly on 1 s
GPU telemetry (the sample bound keeps a robust window's buffer small) and on 5 min or hourly exports (the
sample bound keeps a baseline from being one or two samples long).

The profiles are chosen from the signal's physics, not fitted to the windows of one series:

* **latency** — heavy-tailed, spiky; a failure shows as isolated extreme samples or a burst of them. Robust
  (median/MAD) z over about a day, one sample is enough (no persistence), no flap suppression (a jumpy latency
  *is* the failure), a high threshold because MAD-scaled latency tails are long. Road travel time, speed and
  occupancy get it too (``auto``): one road state, where an incident is short extreme 5-min averages.
* **utilisation** — bounded, bursty, failures as level shifts (a service stuck high or idle). Robust z over
  about a day with 2-sample persistence, plus CUSUM with a slow baseline for lasting shifts. Two floors keep a
  near-idle, quantised reading (an idle VM at 0.13 % whose values take a handful of levels) from turning one
  quantum into tens of sigmas: the robust scale is at least the series' own step (median non-zero change between
  successive samples, :func:`~twinloop.ops.detect.ewma_zscore.typical_step`), and both detectors' scale is at
  least :data:`UTILISATION_FLOOR_PCT` percentage points, so a z alarm needs a sustained departure of a few points
  of capacity. The absolute floor assumes percent (CloudWatch ``CPUUtilization``, DCGM/NVML utilisation); a 0–1
  fraction should be scaled to percent or run with ``generic``.
  The robust z alarms only on an excursion the series has not shown in about a week
  (:mod:`~twinloop.ops.detect.novelty_z`): an instance that runs a 20 min job to 60 % several times a day is
  not paged for it, but is for a job that runs twice as long, goes higher, or a level it never held.
* **generic** — ``auto``'s choice when no name says what the signal is: the utilisation detectors with the
  unit-free step floor only (no floor in percentage points, which would be meaningless for a count or a price). On a
  series with a strong daily or weekly cycle (found from the data) it judges each sample against the same time of
  earlier days instead, as ``count`` does, but without a floor that assumes counts.
* **temperature** — smooth, strongly autocorrelated, with routine dips of a few hours (load changes, idle
  periods); failures are excursions that *last* (a machine cooling down or overheating for half a day or
  more). Robust (median/MAD) z against about a week, so the baseline does not follow a failure that lasts a
  day or two, threshold 4, and the excursion must persist about 4 h before it alarms (routine dips end first).

Every profile also spaces alarms (one alarm per series per spacing, the first kept): an operator wants one
page per incident, and NAB charges every extra alarm as a false positive.

This is a first, physics-led choice checked on the few NAB series packaged in ``benchmarks/data/nab`` (see the
doc section for what was fitted on which series and what was predicted); it is not a validated model of these
signal kinds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.offline import DEFAULT_DETECTORS, SeriesBlock, detect_blocks
from twinloop.ops.detect.phase_z import PhaseZParams, has_strong_cycle
from twinloop.ops.events import Detection
from twinloop.telemetry.fields import canonical_field

#: (seconds, fewest samples, most samples): a span that adapts to the sampling interval within bounds.
Span = tuple[float, int, int]

DAY_S = 86400.0


@dataclass(frozen=True)
class DetectorSpec:
    """One detector of a profile.

    Attributes:
        name: registered detector name.
        params: fixed parameter overrides.
        spans: parameter name (a duration in s) → span, converted per series with :func:`span_seconds`.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    spans: Mapping[str, Span] = field(default_factory=dict)


@dataclass(frozen=True)
class DetectorProfile:
    """A named set of detectors for one kind of signal.

    Attributes:
        name: profile name (``--profile``).
        detectors: the detectors and their parameters.
        min_spacing: alarms of one series closer than this to the last kept alarm are dropped (``None``: all).
        summary: one line for ``--help`` and the docs.
        periodic: detectors run *instead* of ``detectors`` on a series with a strong daily or weekly cycle
            (:func:`~twinloop.ops.detect.phase_z.has_strong_cycle` over the file, with the first one's ``min_acf``
            and ``periods_s``); empty: never.
    """

    name: str
    detectors: tuple[DetectorSpec, ...]
    min_spacing: Span | None
    summary: str
    periodic: tuple[DetectorSpec, ...] = ()

    @property
    def detector_names(self) -> list[str]:
        """The detectors' names, in order (what ``--json`` reports as ``detectors``)."""
        return [d.name for d in self.detectors]


def span_seconds(span: Span, dt_s: float) -> float:
    """A span in seconds at sampling interval ``dt_s``: ``seconds`` clamped to ``[lo, hi]`` samples."""
    seconds, lo, hi = span
    n = min(max(seconds / dt_s, float(lo)), float(hi))
    return n * dt_s


_NO_FLAP = {"flap_jumps": 1e9}

#: Every named profile keeps a detector's state across a hole in the data shorter than a day (the stock rule, for 1 s
#: GPU telemetry, re-warms after 5 missing intervals). Their baselines span a day or more (robust windows of a day or a
#: week, a CUSUM half-life of 12 h, the same phase of earlier days), so after a shorter hole most of the baseline still
#: describes the series, while a re-warm costs 6-24 h of silence. NAB's road series have a hole of 25 min or more every
#: few hours (nights, sensor drop-outs): with the stock rule the detectors were warming up for a third or more of
#: those files and missed failures soon after a hole (docs/sections/calibration-detect.md, "Holes in the time axis").
_HOLE: dict[str, Span] = {"gap_s": (DAY_S, 5, 2000)}

#: Scale floor of the utilisation profile, in percentage points of capacity. With its z threshold of 6 an alarm
#: needs a departure of at least 3 points held for two samples, and CUSUM (allowance 0.5 σ) accumulates only
#: shifts above a quarter of a point: less than that is no incident on a 0–100 % utilisation, whatever the
#: series' noise. Chosen from that, not fitted: on the fitted NAB CPU series any value from 0.05 to 1 gives the
#: same alarms (docs/sections/calibration-detect.md).
UTILISATION_FLOOR_PCT = 0.5


def _level_shift_detectors(floor: float) -> tuple[DetectorSpec, ...]:
    """The utilisation and generic profiles' detectors, with a scale floor of ``floor`` in the series' unit.

    Robust z over ~1 day (2 samples, scale floored at the series' step and at ``floor``), alarming only on
    excursions the series has not shown in about a week (:mod:`~twinloop.ops.detect.novelty_z`: no level held as
    long, up to a day, as high or as low; a week so that a weekday routine outlives a quiet weekend), plus a slow
    CUSUM (scale floored at ``floor``); ``floor`` = 0 means no floor in the series' unit (``generic``).
    """
    abs_floor = max(floor, 1e-9)  # the detectors' own default floor is 1e-9
    return (
        DetectorSpec(
            "novelty_z",
            {"robust": True, "threshold": 6.0, "min_persistence": 2, "smooth_s": 0.0, "step_floor": 1.0,
             "min_std_abs": abs_floor, "novelty_margin": 2.0, **_NO_FLAP},
            {"window_s": (DAY_S, 60, 2000), "refresh_s": (3600.0, 1, 60), "warmup_s": (DAY_S / 4, 30, 600),
             "persistence_s": (0.0, 2, 2), "record_window_s": (7 * DAY_S, 60, 2016),
             "max_hold_s": (DAY_S, 60, 2000), **_HOLE},
        ),
        DetectorSpec(
            "cusum",
            {"h": 30.0, "min_persistence": 3, "min_std_abs": abs_floor, **_NO_FLAP},
            {"half_life_s": (DAY_S / 2, 30, 2000), "warmup_s": (DAY_S / 4, 30, 600), "persistence_s": (0.0, 3, 3),
             **_HOLE},
        ),
    )  # fmt: skip


#: The count profile's detector for a series with a strong daily or weekly cycle (:mod:`~twinloop.ops.detect.phase_z`):
#: a value far (6 robust scales) from the same phase of the last 4 cycles (±15 min), held for an hour, the scale
#: floored at the series' step and at Poisson noise (``sqrt`` of the baseline count). An hour because a news burst
#: or a retry storm in a count decays within minutes, while lost or surging traffic that matters (an outage, a
#: holiday, an event) holds for hours. The profile runs generic's novelty z beside it: a burst to a level the series
#: has not shown in a week is worth an alarm even when it does not hold an hour (on NAB's held-out GOOG tweets the
#: hour alone missed such a burst; docs/sections/calibration-detect.md).
_PHASE_Z = DetectorSpec(
    "phase_z",
    {"threshold": 6.0, "min_persistence": 2, "step_floor": 1.0, "poisson_floor": 1.0, "cycles": 4, "min_acf": 0.25,
     **_NO_FLAP},
    {"phase_halfwidth_s": (900.0, 1, 6), "refresh_s": (6 * 3600.0, 1, 288), "warmup_s": (DAY_S, 24, 2000),
     "persistence_s": (3600.0, 2, 288), **_HOLE},
)  # fmt: skip

#: ``generic``'s detector for a series with a strong daily or weekly cycle: the count profile's same-phase robust z
#: without the Poisson floor. ``generic`` does not know a signal is a count, and ``sqrt`` of the baseline is no scale
#: for a price or a ratio (0.55 for a cost of 0.3, wider than its whole daily swing). On such a series a z against
#: the last days has the daily swing as its scale and misses an hour that is normal for the night but not for noon
#: (NAB's hourly ad-exchange prices; docs/sections/calibration-detect.md, "generic judges a cyclic series").
#: Its hour of persistence is counted in time down to one sample: an hourly sample is already an hour's aggregate
#: (the count profile asks for two samples, two hours on hourly data).
_PHASE_Z_ANY_UNIT = DetectorSpec(
    _PHASE_Z.name,
    {**_PHASE_Z.params, "poisson_floor": 0.0, "min_persistence": 1},
    {**_PHASE_Z.spans, "persistence_s": (3600.0, 1, 288)},
)

PROFILES: dict[str, DetectorProfile] = {
    p.name: p
    for p in (
        DetectorProfile(
            "default",
            tuple(DetectorSpec(n) for n in DEFAULT_DETECTORS),
            None,
            "today's defaults: ewma_zscore + cusum, stock parameters (GPU telemetry at ~1 s)",
        ),
        DetectorProfile(
            "latency",
            (
                DetectorSpec(
                    "ewma_zscore",
                    {"robust": True, "threshold": 8.0, "min_persistence": 1, "persistence_s": 0.0, "smooth_s": 0.0,
                     **_NO_FLAP},
                    {"window_s": (DAY_S, 60, 2000), "refresh_s": (3600.0, 1, 60), "warmup_s": (DAY_S / 4, 30, 600),
                     **_HOLE},
                ),
            ),
            (DAY_S / 4, 30, 2000),
            "request latency / durations: robust z over ~1 day, single-sample alarms, no flap suppression",
        ),
        DetectorProfile(
            "utilisation",
            _level_shift_detectors(UTILISATION_FLOOR_PCT),
            (DAY_S / 4, 30, 2000),
            "CPU / GPU utilisation in %: robust z over ~1 day (2 samples) on excursions not seen in ~a week + slow "
            f"CUSUM for level shifts, scale floored at the series' step and {UTILISATION_FLOOR_PCT} points",
        ),
        DetectorProfile(
            "temperature",
            (
                DetectorSpec(
                    "ewma_zscore",
                    {"robust": True, "threshold": 4.0, "smooth_s": 0.0, **_NO_FLAP},
                    {"window_s": (7 * DAY_S, 48, 2000), "refresh_s": (3600.0, 1, 60),
                     "warmup_s": (DAY_S / 2, 24, 600), "persistence_s": (4 * 3600.0, 3, 288), **_HOLE},
                ),
            ),
            (DAY_S / 2, 24, 2000),
            "temperatures: robust z over ~7 days, an excursion must last ~4 h (slow failures, not routine dips)",
        ),
        DetectorProfile(
            "count",
            _level_shift_detectors(0.0),
            (DAY_S / 4, 30, 2000),
            "event counts / traffic (requests, tweets, trips): with a strong daily or weekly cycle, a robust z "
            "against the same time of day or week held for an hour, plus generic's novelty z for levels never seen; "
            "without one, generic's detectors",
            periodic=(_PHASE_Z, _level_shift_detectors(0.0)[0]),
        ),
        DetectorProfile(
            "generic",
            _level_shift_detectors(0.0),
            (DAY_S / 4, 30, 2000),
            "unknown signal: the utilisation detectors (novelty-gated robust z + CUSUM), unit-free step floor only; "
            "with a strong daily or weekly cycle, a robust z against the same time of earlier days (no count floor) "
            "with the novelty z",
            periodic=(_PHASE_Z_ANY_UNIT, _level_shift_detectors(0.0)[0]),
        ),
    )
}  # fmt: skip

#: ``auto``: words in a field name, unit or file name → profile. First match wins, in this order. A word matches
#: anywhere in a hint (so CloudWatch's ``CPUUtilization`` and ``ReadLatency`` match too); a unit suffix (``_c``,
#: ``_ms``) only at the end of a hint (less its file extension), so ``rds_cpu_utilization_cc0c53.csv`` is not taken
#: for a temperature.
#:
#: Road-state readings (NAB's ``TravelTime_*``, ``speed_*``, ``occupancy_*``) are latency-like: one road state seen as
#: travel time, speed (length / travel time) or occupancy (grows with density = flow / speed), where an incident is
#: short extreme intervals, often single 5-min averages between normal ones.
#:
#: Counts (requests, tweets, trips) have no entry: they get ``generic``. The ``count`` profile (``phase_z``, the
#: same-phase baseline) did not beat ``generic`` on the held-out NAB tweet series (GOOG for its first design, IBM for
#: its second; docs/sections/calibration-detect.md), so it is opt-in (``--profile count``), not an ``auto`` choice.
AUTO_HINTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("temperature", ("temp", "celsius", "degc", "fahrenheit", "thermal"), ("_c",)),
    (
        "latency",
        ("latency", "duration", "rtt", "delay", "response", "ttft", "tpot", "ttfb", "elapsed", "traveltime", "speed",
         "occupancy"),
        ("_ms", "_s"),
    ),
    ("utilisation", ("util", "cpu", "usage", "percent", "pct", "load", "busy"), ("_pct",)),
)  # fmt: skip

#: Words that contain a hint word without meaning it (``attempts`` is a count, not a temperature; ``tempdb`` a
#: database; ``http_responses_5xx`` a count of responses, not a response time; a fan's or pump's speed is no road
#: state); they are blanked out of a hint before matching. Chosen from the words, not from any scored series.
AUTO_FALSE_FRIENDS = ("attempt", "template", "tempo", "tempdb", "responses", "fan_speed", "fanspeed", "pump_speed")

PROFILE_NAMES = (*PROFILES, "auto")


def auto_match(hints: Sequence[str]) -> tuple[str, str, str] | None:
    """What ``auto`` picks from ``hints`` and why: (profile, the word or unit suffix matched, the hint holding it);
    ``None`` when no hint names a kind. First match wins, in :data:`AUTO_HINTS` order, after the false friends
    (:data:`AUTO_FALSE_FRIENDS`) are blanked and a file extension dropped.
    """
    for profile, words, suffixes in AUTO_HINTS:
        for hint in hints:
            name = hint.lower().rsplit(".", 1)[0] if hint.lower().endswith((".csv", ".parquet")) else hint.lower()
            for friend in AUTO_FALSE_FRIENDS:
                name = name.replace(friend, "~")
            hit = next((w for w in words if w in name), None) or next((x for x in suffixes if name.endswith(x)), None)
            if hit:
                return profile, hit, hint
    return None


def select_profile(name: str, hints: Sequence[str] = ()) -> DetectorProfile:
    """The profile called ``name``; for ``auto``, the first whose hint word occurs in ``hints`` (field names,
    units, the file name; :func:`auto_match`), else ``generic`` (robust z + CUSUM without a floor in a unit the
    signal may not have, the safest choice for an unknown service metric).

    Raises:
        InputError: unknown profile name.
    """
    if name == "auto":
        match = auto_match(hints)
        return PROFILES[match[0] if match else "generic"]
    if name not in PROFILES:
        raise InputError("--profile", "", f"{name!r} (allowed: {', '.join(PROFILE_NAMES)})")
    return PROFILES[name]


#: Longest median sampling interval, s, at which ``twinloop detect`` with no option keeps the ``default``
#: detectors: their EWMA half-life (300 s, :class:`~twinloop.ops.detect.ewma_zscore.EwmaZScoreParams`) then
#: still spans at least 5 samples, the telemetry they were tuned for (GPU and facility readings at 1-60 s).
#: Slower series (5 min CloudWatch, hourly exports) get the ``auto`` kind profile instead.
TELEMETRY_MAX_DT_S = 60.0

#: File layouts that are GPU telemetry whatever their cadence: nvidia-smi's own CSV always; the telemetry
#: schema (``ts, entity, field, value`` or ``ts, entity, <FIELD>...``), a saved Prometheus answer or a twinloop
#: DuckDB store when its fields are DCGM / twinloop fields.
TELEMETRY_LAYOUTS = ("nvidia-smi",)
SCHEMA_LAYOUTS = ("long", "wide-entity", "prometheus", "store")


@dataclass(frozen=True)
class ProfileChoice:
    """The profile ``twinloop detect`` runs when neither ``--profile`` nor ``--detector`` is given, and why.

    Attributes:
        profile: the profile chosen.
        reason: one line saying why (cadence, layout, names), for the CLI's summary.
    """

    profile: DetectorProfile
    reason: str


def median_dt_s(blocks: Sequence[SeriesBlock]) -> float:
    """The median of the blocks' own median sampling intervals, s (``nan`` when no block has two samples)."""
    dts = [_dt(b) for b in blocks if b.ts.size >= 2]
    return float(np.median(dts)) if dts else math.nan


def choose_profile(blocks: Sequence[SeriesBlock], layout: str, hints: Sequence[str] = ()) -> ProfileChoice:
    """The profile for a file read by :func:`~twinloop.ops.detect.offline.read_series`, chosen from the data.

    GPU / high-rate telemetry keeps ``default`` (today's detectors, stock parameters: the twin's and ``watch``'s
    results do not move): nvidia-smi's CSV, the telemetry schema with DCGM or twinloop field names, or a median
    sampling interval of at most :data:`TELEMETRY_MAX_DT_S`. Anything slower is a service or facility metric
    (5 min CloudWatch, hourly exports), where the default pages several times a day (docs/sections/
    calibration-detect.md, NAB): it gets ``auto``'s kind profile, picked from ``hints`` (file and field names),
    ``generic`` when no name says what the signal is.

    Args:
        blocks: the series read.
        layout: :attr:`~twinloop.ops.detect.offline.InputReport.layout`.
        hints: field names, units, the file name (for ``auto``).
    """
    dt_s = median_dt_s(blocks)
    if layout in TELEMETRY_LAYOUTS:
        return ProfileChoice(PROFILES["default"], f"{layout} layout: GPU telemetry")
    if layout in SCHEMA_LAYOUTS and any(canonical_field(b.field) for b in blocks):
        return ProfileChoice(PROFILES["default"], f"{layout} layout with DCGM / twinloop fields: GPU telemetry")
    if not dt_s > TELEMETRY_MAX_DT_S:  # NaN (a single sample) stays with the default too
        return ProfileChoice(PROFILES["default"], f"sampled every {dt_s:.3g} s (<= {TELEMETRY_MAX_DT_S:g} s)")
    match = auto_match(hints)
    if match:
        why = f"{match[1]!r} in {match[2]!r}"
    else:
        why = "no name says the kind (say it: --profile utilisation, latency, temperature or count)"
    prof = PROFILES[match[0] if match else "generic"]
    return ProfileChoice(prof, f"sampled every {dt_s:.3g} s (> {TELEMETRY_MAX_DT_S:g} s): auto, {why}")


def _dt(block: SeriesBlock) -> float:
    if block.ts.size < 2:
        return 1.0
    d = np.diff(block.ts)
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def space_alarms(detections: Sequence[Detection], spacing_s: float) -> list[Detection]:
    """Keep one alarm per (entity, source) per ``spacing_s``: an alarm within ``spacing_s`` after the last kept
    one of its series is dropped. ``detections`` must be sorted by time.
    """
    last: dict[tuple[str, str], float] = {}
    out = []
    for d in detections:
        key = (d.entity, d.source)
        t = last.get(key)
        if t is None or d.ts - t >= spacing_s:
            out.append(d)
            last[key] = d.ts
    return out


def detect_with_profile(
    blocks: Sequence[SeriesBlock], profile: DetectorProfile, progress: Callable[[int], None] | None = None
) -> list[Detection]:
    """Run a profile's detectors over each block (spans converted at the block's own sampling interval), then
    space the alarms. Detections sorted by time, like :func:`~twinloop.ops.detect.offline.detect_blocks`.
    """
    out: list[Detection] = []
    for block in blocks:
        dt = _dt(block)
        found: list[Detection] = []
        for spec in _specs_for(block, profile, dt):
            params = dict(spec.params)
            for key, span in spec.spans.items():
                params[key] = span_seconds(span, dt)
            found.extend(detect_blocks([block], [spec.name], progress=progress, **params))
        found.sort(key=lambda d: (d.ts, d.entity, d.detector))
        if profile.min_spacing is not None:
            found = space_alarms(found, span_seconds(profile.min_spacing, dt))
        out.extend(found)
    out.sort(key=lambda d: (d.ts, d.entity, d.detector))
    return out


def _specs_for(block: SeriesBlock, profile: DetectorProfile, dt: float) -> tuple[DetectorSpec, ...]:
    """The profile's periodic detectors when it has some and the block has a strong cycle, else its detectors."""
    if not profile.periodic:
        return profile.detectors
    spec = profile.periodic[0]
    params = {k: v for k, v in spec.params.items() if k in ("min_acf", "periods_s")}
    if has_strong_cycle(block.ts, block.values, dt, PhaseZParams(**params)):
        return profile.periodic
    return profile.detectors


def profile_steps(blocks: Sequence[SeriesBlock], profile: DetectorProfile) -> int:
    """Time steps :func:`detect_with_profile` will report to ``progress`` (for a progress bar's total)."""
    return sum(int(b.ts.size) for b in blocks) * len(profile.detectors)


__all__ = [
    "AUTO_FALSE_FRIENDS",
    "AUTO_HINTS",
    "PROFILES",
    "PROFILE_NAMES",
    "SCHEMA_LAYOUTS",
    "TELEMETRY_LAYOUTS",
    "TELEMETRY_MAX_DT_S",
    "UTILISATION_FLOOR_PCT",
    "DetectorProfile",
    "DetectorSpec",
    "ProfileChoice",
    "choose_profile",
    "detect_with_profile",
    "median_dt_s",
    "profile_steps",
    "select_profile",
    "space_alarms",
    "span_seconds",
]
