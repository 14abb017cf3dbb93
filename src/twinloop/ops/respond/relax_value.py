"""What relaxing a row's cooling saves against what the warmer coolant costs its GPUs: the optimizer's referee.

The cooling optimizer (:mod:`twinloop.ops.respond.cooling_optimizer`) relaxes a row with margin: a warmer CDU
setpoint, then less pump flow. Warmer coolant is not free: every GPU's static (leakage) power grows with its die
temperature, by ``static_w_per_c`` W per °C from the fitted power model (the catalog's cold idle power times the
fitted leakage growth; :attr:`~twinloop.ops.detect.rules.GpuLimits.static_w_per_c`, 0.53 W/°C on an H100). A GPU
below its power limit pays it in watts at the same clock; a GPU at its limit pays it in clock at the same watts
(the leakage takes that share of the budget from the clocked power). By the fitted model, above the voltage floor
(~1.1 GHz on an H100, where dense training at 500-700 W runs) the work that clock does is worth less than the
watts (0.27-0.34 W of work per °C against 0.53 W: dynamic power grows faster than the clock;
``tests/ops/respond/test_relax_value.py``), so ``n_gpus · static_w_per_c`` per °C bounds the cost either way and
the referee needs no telling which GPUs are power-bound. Known limit: a GPU capped below the voltage floor (300-450
W for a dense GEMM) loses 0.84-1.41 W of work per °C, up to 2.7x what it is priced at.

What each move saves, from the site's own telemetry:

* **a warmer setpoint**: a CDU's own power does not depend on its supply temperature; the plant saves only when the
  facility water can warm, and the optimizer holds the facility water at the coldest CDU setpoint minus the
  approach. So warming a row above the coldest setpoint saves nothing, and warming the coldest rows (all of them,
  or the facility water cannot move) saves what the plant spends less per °C of facility water. That slope is
  measured, not modelled: the plant's power less the pumps' (``COOLING_POWER − Σ CDU_PUMP_POWER``) per W of heat
  the CDUs carry (``Σ CDU_HEAT_LOAD``), just before and one period after each facility-water rise the optimizer
  makes. Once the chiller carries nothing (the economizer alone holds the water) a rise saves nothing and the
  slope reads 0. A slope measured at one weather holds until the plant's power per W of heat rises above what it
  was then by more than one degree's cost (the afternoon brought the chiller back): then it is measured again.
  Until a rise has been measured, warming is allowed (it is how the first measurement is made).
* **less flow**: the pump's power goes with the cube of the flow (``P·(1 − (1 − step/flow)³)``); the row's coolant
  warms by half its rise ``Q/(ṁ·c_p)`` (the mean GPU sits halfway along its rack's loop), which grows as 1/flow.
  Less flow also shrinks what the CDU's exchanger can carry (in proportion below its design flow), and a row that
  is relaxed when a pump fault comes meets it with less: a cut is made only while the exchanger would still carry
  the row's heat on half its flow (``CDU_VALVE``, the share of the exchanger's capacity in use, times
  ``flow/(flow − step)``, at most ``flow_reserve`` = 0.5): a CDU's pumps are N+1, and one of two failing halves
  the flow. The reserve is an engineering choice, not fitted. (Measured without it, ``default`` seed 2: the
  training row's flow relaxed to 0.7 while its job ramped up, then its pump degradation made a second cooling
  incident and the rules drove its CDU to 22 °C and the facility water to 19 °C.)

**At the power budget** (facility power at :data:`~twinloop.ops.detect.facility_rules.BUDGET_FRACTION` of the
budget in force or above: a utility cap, a failed feed) the site's power capping holds facility power, cooling
included, to the budget by capping the GPUs. Then every watt the plant spends is a watt the GPUs lose, and every
watt of leakage too: both come out of the same budget, so the clock a GPU loses per watt under the cap is the same
factor on either side and cancels (to first order), and watts against watts is the exact comparison whatever the
GPUs' clock per watt. A colder facility water than the GPUs need is then bought with GPU clock: 1 °C costs the
plant's measured slope times its heat (:meth:`RelaxValue.warmer_under_budget`), against which it spares every GPU of
the site 1 °C of leakage. The slope is measured on any facility-water move (a rule's step down as well as the
optimizer's rises): in the chiller's blend it is the heat over (blend width x COP), tens of kW per °C on a
600 kW hall, against a few hundred W of leakage. A move inside the chiller's saturation (it carries all the heat at
both ends) reads 0 though the way back to a warmer water the plant ran at saves: so the plant's power per W of heat
is also kept for each whole degree of facility water it ran at within :data:`MEMORY_S`, and a warming is priced by
the best chord from now to one of those (what going back there saves per °C), the last move's slope where there is
none. With neither (nothing measured, or the slope forgotten as the heat grew) a warming does not pay at the budget:
its leakage is certain, its saving is not.

None of this is tuned: the slopes come from the catalog's fitted model and the site's telemetry, and a move is
made when its saving exceeds its cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.ops.detect.facility_rules import BUDGET_FRACTION, SITE_FACILITY_POWER, SITE_POWER_BUDGET
from twinloop.ops.detect.rules import CDU_FLOW, CDU_HEAT_LOAD, CDU_VALVE, GpuLimits
from twinloop.ops.ports import F64
from twinloop.telemetry.fields import (
    TWINLOOP_FI_CDU_PUMP_POWER,
    TWINLOOP_FI_COOLING_POWER,
    TWINLOOP_FI_FACILITY_WATER_TEMP,
)

CDU_PUMP_POWER = TWINLOOP_FI_CDU_PUMP_POWER
COOLING_POWER = TWINLOOP_FI_COOLING_POWER
FACILITY_WATER_TEMP = TWINLOOP_FI_FACILITY_WATER_TEMP
#: Specific heat of water, J/(kg·°C); CDU flow is reported in L/min (1 kg per L).
CP_WATER_J_PER_KG_C = 4186.0
L_PER_MIN_TO_KG_PER_S = 1.0 / 60.0
#: How long the plant's power per W of heat at a facility water it ran at is kept for pricing a way back there, s. The
#: wet-bulb, which sets the chiller's share and COP, moves at most ~1.5 °C in an hour outside a weather event (see
#: :mod:`twinloop.ops.detect.facility_rules`), a fraction of the chiller's blend.
MEMORY_S = 3600.0


@dataclass(frozen=True)
class Verdict:
    """A relaxing move's predicted saving and cost (W), and whether it is made."""

    pays: bool
    saving_w: float
    cost_w: float
    why: str


class RelaxValue:
    """Prices the cooling optimizer's relaxing moves per row; call :meth:`observe` on every sample.

    Args:
        gpu_ids: GPU ids ``site/row/...`` in the order of the samples' per-GPU arrays.
        limits: the GPUs' limits; their ``static_w_per_c`` (None: unknown, every move allowed as before).
        flow_reserve: the largest share of its exchanger's capacity a CDU may use after a flow cut.
    """

    def __init__(self, gpu_ids: tuple[str, ...], limits: GpuLimits, flow_reserve: float = 0.5) -> None:
        self.flow_reserve = flow_reserve
        self._row_of = np.array(["/".join(gid.split("/")[:2]) for gid in gpu_ids])
        self._slope = limits.static_w_per_c
        self._gpu: Mapping[str, F64] = {}
        self._site: Mapping[str, Any] = {}
        self._before: tuple[float, float] | None = None  # (facility water °C, plant W per W) before a rise
        self._last: tuple[float, float] | None = None  # the same at the last period (a move by anyone since)
        self._seen: dict[int, tuple[float, float]] = {}  # whole °C of facility water -> (plant W per W, when)
        #: Plant power saved per °C of facility water per W of heat (measured), and the ratio it was measured at.
        self.plant_slope: float | None = None
        self._measured_at = 0.0

    def observe(self, gpu: Mapping[str, F64], site: Mapping[str, Any] | None) -> None:
        """Keep the latest sample's per-GPU fields (the CDU fields broadcast per GPU) and site fields."""
        self._gpu = gpu
        self._site = site or {}

    def cost_w_per_c(self, row: str) -> float | None:
        """What 1 °C warmer coolant costs ``row``'s GPUs, W (None when the slope is unknown)."""
        if self._slope is None:
            return None
        return float(self._slope[self._row_of == row].sum())

    def _row_field(self, field: str, row: str) -> float | None:
        values = self._gpu.get(field)
        if values is None:
            return None
        picked = values[self._row_of == row]
        picked = picked[np.isfinite(picked)]
        return float(picked[0]) if picked.size else None

    def _site_field(self, field: str) -> float | None:
        value = self._site.get(field)
        if value is None:
            return None
        v = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        return v if np.isfinite(v) else None

    def _plant(self) -> tuple[float, float, float] | None:
        """(facility water °C, plant power less pumps per W of CDU heat, CDU heat W) now, or None."""
        fw, cooling = self._site_field(FACILITY_WATER_TEMP), self._site_field(COOLING_POWER)
        pumps, heat = self._gpu.get(CDU_PUMP_POWER), self._gpu.get(CDU_HEAT_LOAD)
        if fw is None or cooling is None or pumps is None or heat is None:
            return None
        rows = np.unique(self._row_of)
        per_row = [(self._row_field(CDU_PUMP_POWER, r), self._row_field(CDU_HEAT_LOAD, r)) for r in rows]
        pump_w = sum(p for p, _ in per_row if p is not None)
        heat_w = sum(h for _, h in per_row if h is not None)
        if heat_w <= 0:
            return None
        return fw, (cooling - pump_w) / heat_w, heat_w

    def period(self, now_s: float = 0.0) -> None:
        """Once per control period, before any move: finish the measurement of the last facility-water move, keep the
        plant's power per W of heat at this facility water (``now_s``: when), and forget a slope the plant has moved
        away from.
        """
        plant = self._plant()
        if plant is None:
            return
        fw, ratio, heat_w = plant
        self._seen[round(fw)] = (ratio, now_s)
        self._seen = {deg: seen for deg, seen in self._seen.items() if now_s - seen[1] <= MEMORY_S}
        if self._before is not None:
            fw0, ratio0 = self._before
            self._before = None
            if fw - fw0 > 0.5:
                self.plant_slope = max(ratio0 - ratio, 0.0) / (fw - fw0)
                self._measured_at = ratio
        elif self._last is not None and abs(fw - self._last[0]) > 0.5:
            # A move since the last period by anyone (a rule's colder step): the same slope, read the other way.
            fw0, ratio0 = self._last
            self.plant_slope = max((ratio0 - ratio) / (fw - fw0), 0.0)
            self._measured_at = ratio
        self._last = (fw, ratio)
        cost = self.cost_w_per_c_all()
        if self.plant_slope is not None and cost is not None and (ratio - self._measured_at) * heat_w > cost:
            self.plant_slope = None  # the plant spends more per W than when measured: the chiller is back

    def cost_w_per_c_all(self) -> float | None:
        """What 1 °C warmer coolant costs every GPU of the site, W (None when unknown)."""
        return None if self._slope is None else float(self._slope.sum())

    def read_up_to_c(self) -> float | None:
        """The warmest facility water the plant was read at within :data:`MEMORY_S`, °C (whole degrees); None before any
        reading. Up to it a warmer water's saving is measured (a chord of :meth:`warmer_under_budget`); beyond it, only
        extrapolated from a slope the economizer's take-over bends.
        """
        return float(max(self._seen)) if self._seen else None

    def facility_water_rise(self) -> None:
        """The optimizer raises the facility water now: the plant's state before the rise, for :meth:`period`."""
        plant = self._plant()
        self._before = None if plant is None else (plant[0], plant[1])

    def warmer_setpoint(self, rows: tuple[str, ...], step_c: float) -> Verdict:
        """Warming ``rows`` (the rows at the coldest setpoint, all of them) by ``step_c``: the facility water's
        saving against the rows' GPUs' leakage.
        """
        costs = [self.cost_w_per_c(r) for r in rows]
        plant = self._plant()
        if any(c is None for c in costs) or plant is None or self.plant_slope is None:
            return Verdict(True, float("nan"), float("nan"), "facility water's saving not measured yet")
        cost = sum(c for c in costs if c is not None) * step_c
        saving = self.plant_slope * plant[2] * step_c
        why = f"facility water saves {saving / 1e3:.2f} kW, GPUs' leakage costs {cost / 1e3:.2f} kW"
        return Verdict(saving > cost, saving, cost, why)

    def at_budget(self) -> str | None:
        """Why the site is at its power budget now (facility power at :data:`BUDGET_FRACTION` of the budget in force or
        above), in words; None when it is not, or either is not reported.
        """
        facility_w, budget_w = self._site_field(SITE_FACILITY_POWER), self._site_field(SITE_POWER_BUDGET)
        if facility_w is None or budget_w is None or budget_w <= 0 or facility_w < BUDGET_FRACTION * budget_w:
            return None
        return f"site at its power budget ({facility_w / 1e3:.0f} of {budget_w / 1e3:.0f} kW)"

    def warmer_under_budget(self, step_c: float) -> Verdict:
        """A ``step_c`` warmer facility water while the site is at its power budget: what the plant spends less (its
        measured slope times its heat), which the GPUs get back, against the leakage it adds on every GPU of the site.
        Both are GPU watts under the budget (see the module docstring). A saving not measured (no slope, or one
        forgotten since the plant's power per W rose) does not pay: the leakage is certain and comes out of the GPUs'
        budget, while the plant, its chiller saturated in the heat that brought the site to its budget, may save
        nothing (sweeps/new-user/budget-heatwave.yaml: "a move measures it" warmed the row 5 °C in five unmeasured
        steps, each slope forgotten as the heat wave grew, and the capped GPUs ran slower for it). Outside the
        budget a first move still measures (:meth:`warmer_setpoint`); a rule's colder step measures it too.
        """
        cost_per_c, plant = self.cost_w_per_c_all(), self._plant()
        unmeasured = Verdict(False, float("nan"), float("nan"), "plant's saving per C not measured")
        if plant is None:
            return unmeasured
        fw, ratio, heat_w = plant
        chords = [(ratio - r) / (deg - fw) for deg, (r, _) in self._seen.items() if deg - fw >= 0.5]
        slope = max(chords) if chords else self.plant_slope
        if cost_per_c is None or slope is None:
            return unmeasured
        saving, cost = max(slope, 0.0) * heat_w * step_c, cost_per_c * step_c
        why = f"plant saves the GPUs {saving / 1e3:.2f} kW, their leakage costs {cost / 1e3:.2f} kW"
        return Verdict(saving > cost, saving, cost, why)

    def less_flow(self, row: str, flow: float, step: float) -> Verdict:
        """Cutting ``row``'s flow from ``flow`` to ``flow − step`` (fractions of nominal): the pump's saving against
        the leakage of the GPUs' warmer coolant.
        """
        cost_per_c = self.cost_w_per_c(row)
        pump_w, heat_w = self._row_field(CDU_PUMP_POWER, row), self._row_field(CDU_HEAT_LOAD, row)
        flow_l_min = self._row_field(CDU_FLOW, row)
        if cost_per_c is None or pump_w is None or heat_w is None or not flow_l_min or flow <= step:
            return Verdict(True, float("nan"), float("nan"), "pump or row heat not reported")
        saving = pump_w * (1.0 - ((flow - step) / flow) ** 3)
        rise_c = heat_w / (flow_l_min * L_PER_MIN_TO_KG_PER_S * CP_WATER_J_PER_KG_C)
        cost = cost_per_c * 0.5 * rise_c * (flow / (flow - step) - 1.0)
        why = f"pump saves {saving / 1e3:.2f} kW, GPUs' leakage costs {cost / 1e3:.2f} kW"
        valve = self._row_field(CDU_VALVE, row)
        if valve is not None:
            used = valve * min(flow, 1.0) / min(flow - step, 1.0)
            if used > self.flow_reserve:
                why = f"exchanger {used:.0%} used after the cut (> {self.flow_reserve:.0%}: no reserve for a pump)"
                return Verdict(False, saving, cost, why)
        return Verdict(saving > cost, saving, cost, why)
