"""A lasting shift of the plant's PUE is one site incident, accepted as the new level after the rule's horizon.

Round 5's ``mixed-shifted``: from a GPU's thermal-interface fault on, the site cooling PID chased that GPU and the
plant's PUE stood ~0.15 above its baseline, swinging with the controller. The baseline learned only while calm, so
it never learned the new level: the rule fired and stopped around its threshold for the rest of the run, one site
``cooling_degradation`` incident after another. The site fields come every 5 s here, as the twin sends them.
"""

from __future__ import annotations

import numpy as np

from twinloop.ops.detect.facility_rules import SITE_FACILITY_POWER, SITE_IT_POWER, FacilityRules
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.events import EventClass, Incident

from .test_detect_stragglers import ENTITIES, N, healthy

IT_W = 6.0e5
SITE_EVERY_S = 5
HORIZON_S = FacilityRules().baseline_half_life_s  # the documented horizon: the slow baseline's half-life
#: The horizon counts from when the PUE's 10-minute average leaves the calm band: a +0.15 step takes it out within
#: ~6 minutes (0.05 / 0.15 of the way).
LAG_S = 600.0


def _site_incidents(pue_at: np.ndarray) -> list[Incident]:
    """Every site cooling-degradation incident (last snapshot) of a pipeline fed a steady job and this PUE."""
    rng = np.random.default_rng(0)
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=False))
    last: dict[int, Incident] = {}
    job = np.zeros(N, dtype=np.int64)
    for t in range(pue_at.size):
        site = {SITE_IT_POWER: IT_W, SITE_FACILITY_POWER: IT_W * pue_at[t]} if t % SITE_EVERY_S == 0 else None
        for inc in pipe.step(float(t), healthy(float(t), rng), job, ["train"], site_fields=site):
            if inc.event_class == EventClass.COOLING_DEGRADATION and inc.root == "dc":
                last[inc.incident_id] = inc
    return sorted(last.values(), key=lambda i: i.start_ts)


def _firing(pue_at: np.ndarray) -> np.ndarray:
    """Per site sample, whether the PUE rule fires (steady IT load, no weather)."""
    rules = FacilityRules()
    ts = np.arange(0, pue_at.size, SITE_EVERY_S)
    fired = [
        EventClass.COOLING_DEGRADATION
        in rules.update(float(t), float(SITE_EVERY_S), {SITE_IT_POWER: IT_W, SITE_FACILITY_POWER: IT_W * pue_at[t]})
        for t in ts
    ]
    return np.array(fired)


def _swinging_shift(t: np.ndarray, start_s: float, rise: float) -> np.ndarray:
    """PUE 1.20, then ``rise`` higher from ``start_s`` with the plant controller's swing (±0.07, 15 min)."""
    on = t >= start_s
    swing = 0.07 * np.sin(2.0 * np.pi * (t - start_s) / 900.0)
    return 1.20 + np.where(on, rise + swing, 0.0)


def test_a_lasting_pue_shift_is_one_incident_that_closes_after_the_horizon() -> None:
    start = 600
    t = np.arange(start + int(HORIZON_S) + 1800)
    incidents = _site_incidents(_swinging_shift(t, start, 0.15))
    # Before: the rule fired and stopped with the swing, 7 incidents in the run, never accepting the new level.
    assert len(incidents) == 1, [(i.start_ts, i.end_ts) for i in incidents]
    inc = incidents[0]
    assert start <= inc.start_ts <= start + 60
    # It lasts while the PUE stays raised, then the baseline takes the new level and the incident closes.
    assert start + HORIZON_S <= inc.end_ts <= start + HORIZON_S + LAG_S
    assert inc.status == "closed"


def test_after_the_new_level_is_accepted_only_a_further_rise_fires() -> None:
    start, second = 600, 600 + int(HORIZON_S) + 1200
    t = np.arange(second + 900)
    pue = _swinging_shift(t, start, 0.15) + np.where(t >= second, 0.15, 0.0)
    fired = _firing(pue)
    ts = np.arange(0, t.size, SITE_EVERY_S)
    assert not fired[ts < start].any()
    assert fired[(ts >= start + 60) & (ts < start + HORIZON_S)].all()  # one stretch, no flicker
    assert not fired[(ts > start + HORIZON_S + LAG_S) & (ts < second)].any()  # the new level is the baseline now
    assert fired[(ts >= second + 60) & (ts < second + 600)].all()  # a further rise is news again


def test_a_controller_swinging_through_the_calm_band_is_one_stretch_and_is_accepted_too() -> None:
    # A fast swing (±0.11 every 2 min about +0.13): the PUE dips into its calm band for 10 s of each period.
    start = 600
    t = np.arange(start + int(HORIZON_S) + 1800)
    pue = 1.20 + np.where(t >= start, 0.13 + 0.11 * np.sin(2.0 * np.pi * (t - start) / 120.0), 0.0)
    fired = _firing(pue)
    ts = np.arange(0, t.size, SITE_EVERY_S)
    # Before: 45 one-persistence blasts, one per swing, until the run's end.
    assert fired[(ts >= start + 60) & (ts < start + HORIZON_S)].all()
    assert not fired[ts > start + HORIZON_S + LAG_S].any()


def test_a_brief_pue_rise_still_fires_at_once_and_ends_with_the_rise() -> None:
    t = np.arange(2400)
    pue = 1.20 + np.where((t >= 900) & (t < 1200), 0.15, 0.0)  # five minutes of a worse plant
    fired = _firing(pue)
    ts = np.arange(0, t.size, SITE_EVERY_S)
    first = int(ts[fired.argmax()])
    assert fired.any() and 900 < first <= 900 + 60
    assert fired[(ts >= 960) & (ts < 1200)].all()
    assert not fired[ts >= 1260].any()
    incidents = _site_incidents(pue)
    assert len(incidents) == 1 and 900 < incidents[0].start_ts <= 960
