"""Site-level rules over facility fields (one value per step for the whole site).

* ``cooling_efficiency`` → cooling degradation at the site: the PUE (``TWINLOOP_FI_PUE``, or facility power /
  IT power) rose ``pue_rise`` above its slow baseline at steady IT load (PUE also rises when the load falls)
  for ``pue_persistence_s``. A heat wave or a failing chiller
  shows here first: the plant holds the coolant temperature (so no GPU runs hotter) by spending much more
  power on cooling.
  Once firing, the rule keeps firing until the PUE has been back in its calm band (less than half of
  ``pue_rise`` above the baseline) for ``pue_persistence_s``, whatever the IT load does meanwhile: a plant that
  swings about the threshold (its controller chasing a hot GPU, round 5's ``mixed-shifted``) is one incident,
  not one per swing. The baseline learns only while calm, so a lasting shift would freeze it for good and the
  rule would page on every swing forever (a chiller staged differently, a season). A PUE whose 10-minute
  average (over job phases and the controller's swings) has stood out of the calm band for ``pue_accept_s``
  (default: ``baseline_half_life_s``, an hour) is the plant's new level: the baseline takes that average and
  the incident closes; only a further rise fires again. The horizon is the baseline's own memory: a level the
  plant has kept for as long as the baseline remembers is what that baseline would report had it kept
  learning, and an operator paged once has had that hour to act on it.
  A facility-water setpoint change (``TWINLOOP_FI_FACILITY_WATER_SETPOINT``: the loop or an operator moving it)
  shifts the plant's efficiency on purpose: the PUE part holds off ``fw_holdoff_s`` and its baseline follows
  the new level meanwhile.
  The outdoor wet-bulb (``TWINLOOP_FI_WETBULB_TEMP``) ``wetbulb_rise_c`` above its slow baseline is the same
  class: the plant loses economizer hours and chiller COP (a few % per °C) and its margin for the IT heat.
  The diurnal wet-bulb swing moves at most ~1.5 °C per hour, so 5 °C above the hour's baseline is a weather
  event (a heat wave, a front), seen at once even where the plant's PUE moves less than ``pue_rise`` (a plant
  already on its chiller on a hot afternoon). ``weather_since_s`` says when the wet-bulb left its calm band (half
  of ``wetbulb_rise_c`` above the baseline), ``weather_firing`` whether the wet-bulb part fires now: the pipeline
  tells a weather event apart from a plant incident that was already open before the weather turned.
* ``power_budget`` → facility power excursion: facility power above ``budget_fraction`` of the power budget in
  force (``TWINLOOP_FI_POWER_BUDGET``), or the budget cut by ``budget_drop`` or more (a utility demand response
  or a failed feed: the site must shed load before it reaches the new cap). Severity then follows the margin.

The power rule needs ``persistence_s`` of its condition, the cooling ones ``pue_persistence_s``. Thresholds are
guesses (a PUE step of 0.1 at steady load within an hour is far beyond the diurnal drift of an economized plant;
95 % of the budget leaves a few seconds to cap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from twinloop.ops.events import EventClass
from twinloop.telemetry.fields import (
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_FACILITY_WATER_SETPOINT,
    TWINLOOP_FI_IT_POWER,
    TWINLOOP_FI_POWER_BUDGET,
    TWINLOOP_FI_PUE,
    TWINLOOP_FI_WETBULB_TEMP,
)

SITE_PUE = TWINLOOP_FI_PUE
SITE_FACILITY_POWER = TWINLOOP_FI_FACILITY_POWER
SITE_IT_POWER = TWINLOOP_FI_IT_POWER
SITE_POWER_BUDGET = TWINLOOP_FI_POWER_BUDGET
SITE_WETBULB = TWINLOOP_FI_WETBULB_TEMP
SITE_FW_SETPOINT = TWINLOOP_FI_FACILITY_WATER_SETPOINT
#: Half-life of the slow IT-load and PUE averages, s: ten minutes average job phases and the plant controller's
#: swings out, yet follow a new level within the hour.
SLOW_HALF_LIFE_S = 600.0
#: Facility power at this fraction of the budget in force is "at the budget" (the site's power capping is about to
#: hold, or holds, the GPUs to it): a guess leaving a few seconds to cap, shared with the cooling optimizer's pricing.
BUDGET_FRACTION = 0.95


def _value(fields: Mapping[str, object], name: str) -> float:
    v = fields.get(name)
    if v is None:
        return math.nan
    arr = np.asarray(v, dtype=np.float64).reshape(-1)
    return float(arr[0]) if arr.size else math.nan


def _ewma(state: float, x: float, alpha: float) -> float:
    return x if not math.isfinite(state) else state + alpha * (x - state)


class FacilityRules:
    """The site rules; ``update`` returns the classes firing now with their scores."""

    def __init__(
        self,
        pue_rise: float = 0.1,
        baseline_half_life_s: float = 3600.0,
        warmup_s: float = 300.0,
        budget_fraction: float = BUDGET_FRACTION,
        persistence_s: float = 10.0,
        pue_persistence_s: float = 15.0,
        pue_half_life_s: float = 10.0,
        it_tolerance: float = 0.1,
        budget_drop: float = 0.1,
        wetbulb_rise_c: float = 5.0,
        fw_holdoff_s: float = 180.0,
        pue_accept_s: float | None = None,
    ) -> None:
        self.pue_rise = pue_rise
        self.baseline_half_life_s = baseline_half_life_s
        #: How long the PUE stays out of its calm band before the baseline takes its level, s (see the module).
        self.pue_accept_s = baseline_half_life_s if pue_accept_s is None else pue_accept_s
        self.warmup_s = warmup_s
        self.budget_fraction = budget_fraction
        self.persistence_s = persistence_s
        self.pue_persistence_s = pue_persistence_s
        self.pue_half_life_s = pue_half_life_s
        self.it_tolerance = it_tolerance
        self.budget_drop = budget_drop
        self.wetbulb_rise_c = wetbulb_rise_c
        self.fw_holdoff_s = fw_holdoff_s
        self._wb_base = math.nan
        #: When the wet-bulb left its calm band (NaN while calm), s; whether its rule fires at the last update, and
        #: the wet-bulb's rise over its baseline then, °C.
        self.weather_since_s = math.nan
        self.weather_firing = False
        self.weather_rise_c = 0.0
        self._fw_setpoint = math.nan
        self._fw_holdoff_until = -math.inf
        self._base = math.nan
        self._it_slow = math.nan
        self._last_ts = -math.inf
        self._it_fast = math.nan
        self._pue_fast = math.nan
        self._pue_slow = math.nan
        #: Since when the PUE is in its calm band (NaN while out of it), s; since when its 10-minute average is out of
        #: that band (NaN while in it), s; whether its rule fires at the last update.
        self._pue_calm_from_s = math.nan
        self._pue_since_s = math.nan
        self._pue_firing = False
        self._budget_ref = math.nan
        self.margin_w = math.inf
        self._age_s = 0.0
        self._since: dict[str, float] = {}

    def _persist(self, key: str, cond: bool, ts: float, need_s: float) -> bool:
        if not cond:
            self._since.pop(key, None)
            return False
        start = self._since.setdefault(key, ts)
        return ts - start >= need_s

    def update(self, ts: float, dt_s: float, fields: Mapping[str, object]) -> dict[EventClass, float]:
        """Advance one step; ``fields`` holds site field values (scalars or 1-element arrays).

        ``dt_s`` is used for the first call only; afterwards the interval between calls is (site fields often
        come less often than GPU fields).
        """
        out: dict[EventClass, float] = {}
        # Site fields may come less often than GPU fields: the rates follow this source's own interval.
        if math.isfinite(self._last_ts) and ts > self._last_ts:
            dt_s = min(ts - self._last_ts, 60.0)
        self._last_ts = ts
        fast, slow = 1.0 - 2.0 ** (-dt_s / self.pue_half_life_s), 1.0 - 2.0 ** (-dt_s / SLOW_HALF_LIFE_S)
        it, it_steady = self._it_load(fields, fast, slow)
        holding = self._fw_holding(ts, fields)
        pue = _value(fields, SITE_PUE)
        if not math.isfinite(pue):
            fac = _value(fields, SITE_FACILITY_POWER)
            pue = fac / it if math.isfinite(fac) and math.isfinite(it) and it > 0 else math.nan
        if math.isfinite(pue):
            rise = self._pue_step(ts, dt_s, pue, (fast, slow), it_steady, holding)
            if rise is not None:
                out[EventClass.COOLING_DEGRADATION] = rise
        wb_rise = self._weather_step(ts, dt_s, fields)
        if wb_rise is not None:
            out.setdefault(EventClass.COOLING_DEGRADATION, wb_rise)
        excursion = self._budget_step(ts, fields)
        if excursion is not None:
            out[EventClass.FACILITY_POWER_EXCURSION] = excursion
        return out

    def _it_load(self, fields: Mapping[str, object], fast: float, slow: float) -> tuple[float, bool]:
        """The IT power now, and whether it is steady (its short average within ``it_tolerance`` of the 10-minute
        one). The IT average reacts as fast as the PUE average, so a load step is seen as unsteady before it can
        read as a PUE rise.
        """
        it = _value(fields, SITE_IT_POWER)
        if not math.isfinite(it):
            return it, True
        self._it_fast = _ewma(self._it_fast, it, fast)
        self._it_slow = _ewma(self._it_slow, it, slow)
        # PUE depends on the IT load (cooling has fixed parts): only a PUE rise at steady load means worse
        # cooling efficiency.
        return it, abs(self._it_fast - self._it_slow) <= self.it_tolerance * max(self._it_slow, 1.0)

    def _fw_holding(self, ts: float, fields: Mapping[str, object]) -> bool:
        """Whether a facility-water setpoint change within ``fw_holdoff_s`` holds the PUE part off."""
        fw = _value(fields, SITE_FW_SETPOINT)
        if math.isfinite(fw):
            if math.isfinite(self._fw_setpoint) and abs(fw - self._fw_setpoint) > 0.05:
                self._fw_holdoff_until = ts + self.fw_holdoff_s
            self._fw_setpoint = fw
        return ts < self._fw_holdoff_until

    def _pue_step(
        self, ts: float, dt_s: float, pue: float, rates: tuple[float, float], it_steady: bool, holding: bool
    ) -> float | None:
        """The PUE part (module docstring): the rise while it fires, else None."""
        fast, slow = rates
        self._age_s += dt_s
        # Iteration-scale load swings average out; the steady-IT check guards against job phases.
        self._pue_fast = _ewma(self._pue_fast, pue, fast)
        self._pue_slow = _ewma(self._pue_slow, pue, slow)
        rise = self._pue_fast - self._base if math.isfinite(self._base) else 0.0
        warm = self._age_s >= self.warmup_s
        calm = rise < 0.5 * self.pue_rise
        if not calm:
            self._pue_calm_from_s = math.nan
        elif not math.isfinite(self._pue_calm_from_s):
            self._pue_calm_from_s = ts
        # Calm for as long as a rise must last to fire: a controller's swing through the band is no end.
        settled = calm and ts - self._pue_calm_from_s >= self.pue_persistence_s
        # The shift's clock runs on the 10-minute average: swings and brief dips do not restart it.
        shifted = math.isfinite(self._base) and self._pue_slow - self._base >= 0.5 * self.pue_rise
        if not shifted or not warm or holding:
            self._pue_since_s = math.nan
        elif not math.isfinite(self._pue_since_s):
            self._pue_since_s = ts
        if ts - self._pue_since_s >= self.pue_accept_s:  # a lasting shift: the plant's new level
            self._base, self._pue_since_s, self._pue_calm_from_s = self._pue_slow, math.nan, ts
            rise, calm, settled, self._pue_firing = 0.0, True, True, False
        onset = it_steady and rise >= self.pue_rise  # a rise at a changing load may be the load's
        worse = warm and not holding and (onset or (self._pue_firing and not settled))
        self._pue_firing = self._persist("pue", worse, ts, self.pue_persistence_s)
        if not math.isfinite(self._base):
            self._base = self._pue_fast
        elif not warm or holding or calm:  # the baseline learns only while calm
            a = 1.0 - 2.0 ** (-dt_s / (self.baseline_half_life_s if warm and not holding else 30.0))
            self._base += a * (self._pue_fast - self._base)
        return rise if self._pue_firing else None

    def _weather_step(self, ts: float, dt_s: float, fields: Mapping[str, object]) -> float | None:
        """The wet-bulb part: the rise over its baseline while it fires, else None."""
        wb = _value(fields, SITE_WETBULB)
        self.weather_firing = False
        if not math.isfinite(wb):
            return None
        wb_rise = wb - self._wb_base if math.isfinite(self._wb_base) else 0.0
        warm = self._age_s >= self.warmup_s
        hotter = warm and wb_rise >= self.wetbulb_rise_c
        self.weather_firing = self._persist("wetbulb", hotter, ts, self.pue_persistence_s)
        self.weather_rise_c = wb_rise
        calm = wb_rise < 0.5 * self.wetbulb_rise_c
        if calm:
            self.weather_since_s = math.nan
        elif not math.isfinite(self.weather_since_s):
            self.weather_since_s = ts
        if not math.isfinite(self._wb_base):
            self._wb_base = wb
        elif not warm or calm:
            a = 1.0 - 2.0 ** (-dt_s / (self.baseline_half_life_s if warm else 30.0))
            self._wb_base += a * (wb - self._wb_base)
        return wb_rise if self.weather_firing else None

    def _budget_step(self, ts: float, fields: Mapping[str, object]) -> float | None:
        """The power-budget part: facility power over the budget while it fires, else None."""
        fac, budget = _value(fields, SITE_FACILITY_POWER), _value(fields, SITE_POWER_BUDGET)
        if not (math.isfinite(fac) and math.isfinite(budget) and budget > 0):
            return None
        self.margin_w = budget - fac
        near = fac >= self.budget_fraction * budget
        if not math.isfinite(self._budget_ref):
            self._budget_ref = budget
        cut = budget <= (1.0 - self.budget_drop) * self._budget_ref
        firing = self._persist("budget", near or cut, ts, self.persistence_s)
        if not cut:  # the reference follows raised budgets, not cuts
            self._budget_ref = budget
        return fac / budget if firing else None
