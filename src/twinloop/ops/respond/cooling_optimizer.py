"""Cooling optimizer: run the coolant as warm as the hottest GPUs allow, and colder ahead of known heat.

Incident rules push cooling to its maximum when a row is in trouble; this controller does the everyday part and
relaxes those pushes once the trouble has passed. Every ``period_s`` it looks at each row's hottest GPU:

* above ``target_gpu_temp_c``: tighten the row: a colder CDU setpoint, and flow back up to its design point if
  it was relaxed below it; flow above the design point only once the setpoint no longer helps (the CDU cannot hold
  its setpoint, being capacity-limited: a colder setpoint only makes the chiller work harder for nothing; or the
  setpoint is at its lower limit). A colder setpoint lowers every GPU's coolant degree for degree, while more flow
  lowers only the rack's coolant rise (``Q/(ṁ·c_p)``, a degree or two at design flow, shrinking as 1/flow) for
  pump power that grows as flow cubed. While a GPU or node of the row has its own open thermal fault (``local``;
  its rule caps it), only if the row's mean GPU is within ``band_c`` of the target: one hot GPU never drives a
  row's coolant; but where that fault slows its job now (``pace``: the GPU sets the job's pace, and its clock, held
  by its own thermal control, follows its coolant), the row goes back to its design point and no further, as for
  precooling: relaxing was a saving on GPUs with margin, and that GPU has none (sweeps/new-user/thermal-move.yaml:
  a row relaxed 30 -> 37 C before a thermal-interface fault stayed there, the faulty GPU's clock 0.683 -> 0.637 of
  a 256-GPU job's pace);
* not above the target, no precooling (below), and no open heat-wave or cooling incident holding the row (``hold``:
  relaxing would undo its rule's move): flow above the design point (an incident rule's push, or a capacity-limited
  minute) comes back one notch while the CDU holds its setpoint, even inside the band, since otherwise a row whose
  hottest GPU sits in the band would keep it for good; and below ``target - band_c``, in the same period, a warmer
  CDU setpoint, up to ``supply_max_c`` (the setpoint is what lets the facility water warm); once there, less pump
  flow, down to ``flow_floor``, as pump power goes with the cube of the flow. A setpoint an incident rule made
  colder is given back first, one step a period up to where the row was before the push, while its hottest GPU plus
  the step stays under the target (not the band: the row was at rest there before the incident, with the margin it
  had): otherwise the rule's -4 C stays for good on a row whose hottest GPU sits in the band after the incident
  (default seed 0: the pump fault's 26 C came back only once the hottest GPU held under 71 C, a minute later).
  Every relaxing move is judged on the
  row's hottest GPU at its working heat, the highest reading over the last ``relax_hold_s`` (a peak hold): a job
  pausing for a checkpoint write cools its GPUs for a few tens of seconds and is back at full power within seconds;
  tightening reacts to the reading now;
* heat forecast to arrive within the forecast horizon (a job starting, from the queue and the planner; see
  :mod:`twinloop.ops.learn.precool`), a rise above ``precool_fraction`` of the row's load now, **and predicted to
  bring the row's GPUs within ``precool_margin_c`` of their slowdown temperature**
  (:class:`~twinloop.ops.learn.precool.ArrivalTemperature`: each GPU's temperature now plus its thermal resistance
  times the power it would gain at its power limit, plus the coolant's warming): precool by one tightening notch per
  period until it arrives, but no colder (no faster) than the row's setpoint (flow) when the optimizer started, its
  design point: beyond that is for GPUs that are hot now, not for heat that may come. Heat that the prediction says
  the GPUs carry with margin to spare is left to the everyday rule (it tightens once a GPU passes the target):
  precooling for it costs cooling energy and buys nothing. Without an arrival model (``arrival=None``) any forecast
  rise precools, as before.

The facility water setpoint follows the coldest row: ``min(CDU setpoints) - approach_c``, so a warmer supply lets
the economizer carry heat the chiller would otherwise pay for, while no CDU is ever floored above its own
setpoint. Every move is an :class:`~twinloop.ops.respond.actions.ActionRequest` submitted through the
responder, so the guard rails (limits, steps, rate limits) and the loop's mode apply to it as to any other.

With ``CoolingOptimizerConfig(referee=True)`` and a :class:`~twinloop.ops.respond.relax_value.RelaxValue`, every
relaxing move is priced first: a warmer setpoint only for the rows at the coldest setpoint and only while the facility
water's measured saving beats their GPUs' extra leakage; otherwise less flow, when the pump's saving beats the leakage
and the exchanger keeps half its capacity spare. Off by default: with the incident rules it cost more than it saved on
cooling-plant and default (docs/calibration.md, "What relaxing the coolant costs the GPUs").

The gains (target, band, steps) are engineering choices, not fitted: the target stays 14 C under the H100's
slowdown temperature, and one notch per minute is slower than the coolant loop's own time constant. The precool
margin (5 C) is a guess too, not fitted to a scenario: it covers the software thermal slowdown a GPU may engage a
few degrees under its slowdown temperature (not published by NVIDIA), the sensor's 1 C steps and the prediction's
error (R from the catalog, heat spread over the row); a relaxing setpoint adds at most one step (1 C) a period,
and the prediction is made again every period.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from twinloop.ops.detect.rules import CDU_SUPPLY
from twinloop.ops.detect.rules import TEMP as GPU_TEMP
from twinloop.ops.learn.precool import ArrivalTemperature
from twinloop.ops.ports import F64
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
from twinloop.ops.respond.adapters.base import ancestor
from twinloop.ops.respond.history import read_back
from twinloop.ops.respond.relax_value import RelaxValue
from twinloop.ops.respond.responder import Reader, Responder

#: A CDU whose supply is more than this above its setpoint cannot hold it (capacity-limited), °C.
HOLDING_C = 0.5


def _holds(supply_c: float | None, setpoint_c: float) -> bool:
    """Whether a CDU holds its setpoint: its supply within :data:`HOLDING_C` of it (no reading: taken as holding)."""
    return supply_c is None or supply_c <= setpoint_c + HOLDING_C


#: ``forecast(row) -> W``: the heat load the row is expected to gain within the forecast horizon (0 if none).
HeatForecast = Callable[[str], float]
#: ``hold(row) -> reason``: why the row's cooling must not be relaxed now (an open heat-wave or cooling incident
#: whose rule tightened it), or None.
RelaxHold = Callable[[str], str | None]
#: ``local(row) -> reason``: an open thermal fault of one GPU or node in the row (its own rule caps that GPU), or None;
#: as ``pace``: one that slows its job now (the detector's measured ``job_slowdown``), or None.
LocalFault = Callable[[str], str | None]


@dataclass(frozen=True)
class CoolingOptimizerConfig:
    """Settings of the cooling optimizer (temperatures in C, flows as fractions of nominal, times in s)."""

    target_gpu_temp_c: float = 75.0
    band_c: float = 4.0
    period_s: float = 60.0
    warmup_s: float = 300.0
    setpoint_step_c: float = 1.0
    supply_max_c: float = 38.0
    flow_step: float = 0.1
    flow_floor: float = 0.6
    approach_c: float = 3.0
    precool_fraction: float = 0.1
    precool_margin_c: float = 5.0
    #: Price every relaxing move with :class:`RelaxValue` (when one is given). Off: measured worse on 5 seeds of
    #: cooling-plant and default (docs/calibration.md, "What relaxing the coolant costs the GPUs").
    referee: bool = False
    #: A row is relaxed on its hottest GPU held over this long (a peak hold), tightened on its hottest GPU now. A
    #: training job pauses for tens of seconds and comes back at full power within seconds: a synchronous checkpoint
    #: write (10-30 s in the packaged scenarios; docs/calibration.md takes 30 s, and Llama 3's ETTR above 90 % implies
    #: writes well under a minute), a data-loader stall. The hold covers such a pause (up to a minute) and the die's
    #: return to its working heat once the job computes again (three time constants of an H100's thermal path, 18 s
    #: each: ~1 min). An engineering choice from those durations, not fitted to a scenario.
    relax_hold_s: float = 120.0

    def __post_init__(self) -> None:
        if self.precool_margin_c < 0:
            raise ValueError(f"cooling optimizer: precool_margin_c {self.precool_margin_c} (allowed: >= 0)")
        if self.band_c <= 0 or self.period_s <= 0 or self.setpoint_step_c <= 0 or self.flow_step <= 0:
            raise ValueError("cooling optimizer: band_c, period_s and steps must be > 0")
        if not 0 < self.flow_floor <= 1:
            raise ValueError(f"cooling optimizer: flow_floor {self.flow_floor} (allowed: (0, 1])")
        if self.relax_hold_s < 0:
            raise ValueError(f"cooling optimizer: relax_hold_s {self.relax_hold_s} (allowed: >= 0)")


class CoolingOptimizer:
    """Proposes cooling moves for ``rows`` (CDU ids) on ``site`` through a :class:`Responder`."""

    def __init__(
        self,
        responder: Responder,
        site: str,
        rows: Sequence[str],
        config: CoolingOptimizerConfig | None = None,
        forecast: HeatForecast | None = None,
        load: Callable[[str], float] | None = None,
        hold: RelaxHold | None = None,
        local: LocalFault | None = None,
        arrival: ArrivalTemperature | None = None,
        value: RelaxValue | None = None,
        shared: Sequence[str] = (),
        pace: LocalFault | None = None,
    ) -> None:
        self.responder = responder
        self.site = site
        self.rows = tuple(rows)
        #: Rows on the same facility water the optimizer does not steer (air handlers): the facility water it sets
        #: must still let them reach their supply setpoint.
        self.shared = tuple(shared)
        self.config = config or CoolingOptimizerConfig()
        self.forecast = forecast
        self.load = load
        self.hold = hold
        self.local = local
        #: A local thermal fault that sets its job's pace: its GPU's clock follows the coolant it sees.
        self.pace = pace
        self.arrival = arrival
        self.value = value if self.config.referee else None
        #: Prices the coolant in GPU watts while the site is at its power budget (referee or not).
        self.pricing = value
        self._budget: str | None = None  # why the coolant is priced in GPU watts this period (None: not at budget)
        self._warm: dict[str, str] | None = None  # rows whose setpoint may warm this period (None: no referee)
        self._next_ts = self.config.warmup_s
        self._design: dict[str, tuple[float, float]] = {}  # (setpoint, flow) of each row when first seen
        self._pushed: dict[str, float] = {}  # row -> its setpoint before an incident rule made it colder
        self._log_seen = 0  # how far the responder's log has been read for incident rules' setpoint moves

    @property
    def margin_c(self) -> float:
        """The margin to slowdown the optimizer keeps ahead of heat (its precool margin), °C: a coolant rule that
        hands a row over (:class:`~twinloop.ops.respond.policy.HandOver`) acts once the row's hottest GPU is within it.
        """
        return self.config.precool_margin_c

    @property
    def approach_c(self) -> float:
        """Supply minus facility water the CDUs reach at best (its configuration), °C: it keeps the facility water
        this far under the coldest supply setpoint, and a coolant rule's colder water goes no further.
        """
        return self.config.approach_c

    def slowdown_c(self, entity: str) -> float | None:
        """The lowest slowdown temperature among the GPUs of ``entity``'s row, °C, from the arrival model's limits;
        None for a row it does not steer, or without an arrival model (then a coolant rule acts as before).
        """
        row = ancestor(entity, 2)
        if row is None or row not in self.rows or self.arrival is None:
            return None
        return self.arrival.slowdown_c(row)

    def losing_ground(self, entity: str, read: Reader) -> bool:
        """Whether the CDU of ``entity``'s row cannot hold its setpoint (supply above it by more than
        :data:`HOLDING_C`): capacity-limited, its coolant warms with the heat, so a rise of its GPUs is a ramp, not a
        step. False for a row it does not steer, or without a supply reading.
        """
        row = ancestor(entity, 2)
        if row is None or row not in self.rows:
            return False
        setpoint = self._current(ActionKind.CDU_SETPOINT, row)
        return setpoint is not None and not _holds(read(CDU_SUPPLY, row), setpoint)

    def _current(self, kind: ActionKind, target: str) -> float | None:
        return self.responder.adapter.current(kind, target)

    def _move(self, kind: ActionKind, target: str, value: float, why: str, now: float, read: Reader) -> ActionResult:
        request = ActionRequest(kind, target, value, reason=f"cooling optimizer: {why}")
        return self.responder.submit(request, now, read)

    def observe(self, gpu: Mapping[str, F64], site: Mapping[str, Any] | None = None) -> None:
        """Hand the latest sample's per-GPU and site fields to the arrival model and the referee (call every sample;
        no-op without them).
        """
        if self.arrival is not None:
            self.arrival.observe(gpu)
        if self.pricing is not None:
            self.pricing.observe(gpu, site)

    def step(self, now: float, read: Reader) -> list[ActionResult]:
        """One control period (call every step; it acts every ``period_s``)."""
        if now < self._next_ts:
            return []
        self._next_ts = now + self.config.period_s
        out: list[ActionResult] = []
        if self.pricing is not None:
            self.pricing.period(now)
        self._budget = self._at_budget()
        self._warm = self._warming(read)
        self._note_pushes()
        for row in self.rows:
            out.extend(self._row(row, now, read))
        out.extend(self._facility_water(now, read))
        return out

    def _row(self, row: str, now: float, read: Reader) -> list[ActionResult]:
        """One row's moves this period: tighten (hot now, or heat coming that precooling buys something for),
        else relax.
        """
        c = self.config
        hottest = read(GPU_TEMP, row, "max")
        setpoint = self._current(ActionKind.CDU_SETPOINT, row)
        flow = self._current(ActionKind.CDU_FLOW, row)
        if hottest is None or setpoint is None or flow is None:
            return []
        self._design.setdefault(row, (setpoint, flow))
        local = self.local(row) if self.local is not None else None
        rise_w = self.forecast(row) if self.forecast else 0.0
        load_w = self.load(row) if self.load else 0.0
        # A forecast is never exactly zero: only a rise that matters against today's load counts as heat coming.
        coming = rise_w > c.precool_fraction * max(load_w, 1.0)
        buys = self._precool_buys(row, rise_w, load_w, read, bool(local)) if coming else None
        hot = hottest > c.target_gpu_temp_c
        if self._budget is not None:
            hot = hottest > self._budget_limit_c(row)  # colder only for GPUs near their slowdown (see _give_back)
        if hot and local:
            # The hottest GPU has its own thermal fault (its rule caps it): the row's coolant is for the row.
            # Tighten only if the row as a whole runs warm (its mean GPU within the band of the target).
            mean = read(GPU_TEMP, row, "mean")
            hot = mean is not None and mean > c.target_gpu_temp_c - c.band_c
        holding = _holds(read(CDU_SUPPLY, row), setpoint)
        slowing = self.pace(row) if local and self.pace is not None else None
        if hot or buys is not None or slowing is not None:
            why = f"hottest GPU {hottest:.1f} C" if buys is None else f"{rise_w / 1e3:.0f} kW forecast to arrive{buys}"
            if not hot and buys is None:
                why = f"{slowing}: its GPU's clock follows its coolant, back to the design point"
            return self._tighten(row, setpoint, flow, hot, holding, f"tighten: {why}", now, read)
        if self._held(row) and not self._sets_facility_water(row):
            return []
        return self._relax(row, setpoint, flow, self._working_c(row, hottest, read), holding, now, read)

    def _working_c(self, row: str, hottest: float, read: Reader) -> float:
        """The row's hottest GPU at its working heat, °C: the highest of its hottest-GPU readings now and back to
        ``relax_hold_s`` ago (:func:`~.history.read_back`). A job paused for a checkpoint write leaves its GPUs cool
        for a few tens of seconds and takes its heat back within seconds: relaxing on that dip (default seed 4 with
        saves at iteration counts: 31 -> 33 C during a write, a pump fault 79 s later) is a move an operator would
        veto. Relaxing waits until the row has stayed cool over the whole hold.
        """
        held = read_back(read, GPU_TEMP, row, "max", self.config.relax_hold_s)
        return max([hottest, *(value for _, value in held)])

    def _tighten(
        self, row: str, setpoint: float, flow: float, hot: bool, holding: bool, why: str, now: float, read: Reader
    ) -> list[ActionResult]:
        """A colder setpoint (if the CDU holds it), flow back to the design point, beyond it only when the setpoint
        no longer helps; precooling (``hot`` False) never beyond the design point.
        """
        c, design = self.config, self._design[row]
        out: list[ActionResult] = []
        sp = setpoint - c.setpoint_step_c
        sp_min = (self.responder.adapter.limits(ActionKind.CDU_SETPOINT, row) or (sp, setpoint))[0]
        flow_max = (self.responder.adapter.limits(ActionKind.CDU_FLOW, row) or (0.0, flow))[1]
        if not (hot and (not holding or sp < sp_min - 1e-9)):
            flow_max = min(flow_max, design[1])
        if flow + 1e-9 < flow_max:
            out.append(self._move(ActionKind.CDU_FLOW, row, flow + c.flow_step, why, now, read))
        if holding and (hot or sp >= design[0] - 1e-9):
            out.append(self._move(ActionKind.CDU_SETPOINT, row, sp, why, now, read))
        return out

    def _relax(
        self, row: str, setpoint: float, flow: float, hottest: float, holding: bool, now: float, read: Reader
    ) -> list[ActionResult]:
        """Flow above the design point back (while the CDU holds its setpoint and no GPU is over the target, even
        inside the band); an incident rule's colder setpoint given back toward where it was while the step keeps the
        hottest GPU under the target; else, with the band's margin, a warmer setpoint up to ``supply_max_c`` in the
        same period; then less flow, down to the floor. ``hottest`` is the row's hottest GPU at its working heat
        (held over ``relax_hold_s``: :meth:`_working_c`).
        """
        c, design_flow = self.config, self._design[row][1]
        out: list[ActionResult] = []
        if flow > design_flow + 1e-9 and holding and hottest <= c.target_gpu_temp_c:
            why = f"relax: flow {flow:.2f} above its design point {design_flow:.2f}, hottest GPU {hottest:.1f} C"
            out.append(self._move(ActionKind.CDU_FLOW, row, max(flow - c.flow_step, design_flow), why, now, read))
        if self._sets_facility_water(row):
            return out + self._give_back(row, setpoint, hottest, now, read)
        before = self._pushed_from(row, setpoint)
        if before is not None and holding and hottest + c.setpoint_step_c <= c.target_gpu_temp_c:
            value = min(setpoint + c.setpoint_step_c, before)
            why = (
                f"give back an incident rule's colder setpoint ({before:.1f} C before it): hottest GPU {hottest:.1f}"
                f" C + {c.setpoint_step_c:g} C <= {c.target_gpu_temp_c:.1f} C"
            )
            return [*out, self._move(ActionKind.CDU_SETPOINT, row, value, why, now, read)]
        if hottest >= c.target_gpu_temp_c - c.band_c:
            return out
        why = f"relax: hottest GPU {hottest:.1f} C < {c.target_gpu_temp_c - c.band_c:.1f} C"
        warm = self._warm is None or row in self._warm
        if warm and setpoint + c.setpoint_step_c <= c.supply_max_c:
            paid = f"; {self._warm[row]}" if self._warm else ""
            out.append(self._move(ActionKind.CDU_SETPOINT, row, setpoint + c.setpoint_step_c, why + paid, now, read))
        elif not out and flow - c.flow_step >= c.flow_floor - 1e-9:
            verdict = self.value.less_flow(row, flow, c.flow_step) if self.value is not None else None
            if verdict is None or verdict.pays:
                paid = f"; {verdict.why}" if verdict is not None else ""
                out.append(self._move(ActionKind.CDU_FLOW, row, flow - c.flow_step, why + paid, now, read))
        return out

    def _note_pushes(self) -> None:
        """Remember, per row, the setpoint it had before an incident rule made it colder (the highest such, over
        every push since the row was last back there), from the responder's log since the last period.
        """
        log = self.responder.log
        for result in log[self._log_seen :]:
            request, before = result.request, result.previous_value
            row = ancestor(request.target, 2)
            pushed = request.kind == ActionKind.CDU_SETPOINT and result.status == "applied"
            if not pushed or result.source != "incident" or row is None or row not in self.rows or before is None:
                continue
            if request.value is not None and request.value < before:
                self._pushed[row] = max(before, self._pushed.get(row, before))
        self._log_seen = len(log)

    def _pushed_from(self, row: str, setpoint: float) -> float | None:
        """The setpoint ``row`` had before an incident rule's colder one, while it is still colder; None once it is
        back there (forgotten then) or was never pushed.
        """
        before = self._pushed.get(row)
        if before is not None and setpoint >= before - 1e-9:
            del self._pushed[row]
            return None
        return before

    def _warming(self, read: Reader) -> dict[str, str] | None:
        """The rows whose setpoint may warm this period, each with the referee's reason; None without a referee.

        A warmer setpoint saves only through the facility water, which follows the coldest setpoint: so only the
        rows at the coldest setpoint, only if every one of them can warm (its hottest GPU below the band, no row
        held, the facility water below its upper limit), and only if the facility water's measured saving exceeds
        those rows' GPUs' leakage (:meth:`RelaxValue.warmer_setpoint`). Any other warmer setpoint costs the GPUs
        leakage (or clock at their power limit) for nothing; those rows relax their pump flow instead.
        """
        if self.value is None:
            return None
        c = self.config
        setpoints = {row: self._current(ActionKind.CDU_SETPOINT, row) for row in self.rows}
        known = {row: sp for row, sp in setpoints.items() if sp is not None}
        fw = self._current(ActionKind.FACILITY_WATER, self.site)
        limits = self.responder.adapter.limits(ActionKind.FACILITY_WATER, self.site)
        if not known or self._any_held():
            return {}
        if fw is not None and limits is not None and fw >= limits[1] - 1e-9:
            return {}
        coldest = min(known.values())
        binding = tuple(row for row, sp in known.items() if sp <= coldest + 1e-9)
        for row in binding:
            now_c = read(GPU_TEMP, row, "max")
            hottest = None if now_c is None else self._working_c(row, now_c, read)
            at_max = known[row] + c.setpoint_step_c > c.supply_max_c
            if hottest is None or hottest >= c.target_gpu_temp_c - c.band_c or at_max:
                return {}
        verdict = self.value.warmer_setpoint(binding, c.setpoint_step_c)
        return {row: verdict.why for row in binding} if verdict.pays else {}

    def _precool_buys(self, row: str, rise_w: float, load_w: float, read: Reader, local: bool) -> str | None:
        """Why precooling ``row`` for ``rise_w`` of heat coming is worth it (a suffix for the action's reason), or
        None when the arrival model predicts its GPUs stay more than ``precool_margin_c`` under slowdown.

        While a GPU or node of the row has its own thermal fault (``local``), the row's mean GPU is predicted, not its
        hottest: that GPU's rule caps it, and one GPU never drives a row's coolant. Without an arrival model, or when
        it cannot predict (no GPU reported), the forecast alone decides (as before the arrival model): precool.
        """
        if self.arrival is None:
            return ""
        supply = read(CDU_SUPPLY, row)
        predicted = self.arrival.predict_c(row, rise_w, load_w, supply, "mean" if local else "max")
        slowdown = self.arrival.slowdown_c(row)
        if predicted is None or slowdown is None:
            return ""
        limit = slowdown - self.config.precool_margin_c
        if predicted < limit:
            return None
        which = "mean" if local else "hottest"
        return f", {which} GPU predicted {predicted:.1f} C >= {limit:.1f} C (slowdown {slowdown:.0f} C - margin)"

    def _held(self, row: str) -> str | None:
        return self.hold(row) if self.hold is not None else None

    def _any_held(self) -> bool:
        """Whether an open incident holds any row on the facility water tightened, the air rows the optimizer does not
        steer included: a warmer water warms them all (mixed_hall seed 0: 11 C set by the rule for the A100 air row's
        throttling, warmed to 13 C by the follow 65 s later while that row's incident was open).
        """
        return any(self._held(row) for row in (*self.rows, *self.shared))

    def _at_budget(self) -> str | None:
        """Why the coolant is priced in GPU watts this period: the site at its power budget and a warmer facility water
        saving the plant more than it costs the site's GPUs in leakage (:meth:`RelaxValue.warmer_under_budget`); None
        otherwise, or without pricing.
        """
        if self.pricing is None:
            return None
        why = self.pricing.at_budget()
        if why is None:
            return None
        verdict = self.pricing.warmer_under_budget(self.config.setpoint_step_c)
        return f"{why}: {verdict.why}" if verdict.pays else None

    def _budget_limit_c(self, row: str) -> float:
        """The hottest GPU temperature up to which ``row`` needs no colder coolant while the site is at its power
        budget: its slowdown temperature less the precool margin (the margin the coolant rules and precooling keep;
        the optimizer's target where the slowdown is unknown). Below it the GPUs are held by the budget's power cap,
        not by heat, and a colder coolant only spares them leakage.
        """
        slowdown = self.slowdown_c(row)
        return self.config.target_gpu_temp_c if slowdown is None else slowdown - self.config.precool_margin_c

    def _give_back(self, row: str, setpoint: float, hottest: float, now: float, read: Reader) -> list[ActionResult]:
        """At the power budget, a coldest row warmed by its hottest GPU's margin below :meth:`_budget_limit_c` in whole
        setpoint steps, in one period (the guard's step limit bounds it): the plant's saving goes to the GPUs. Several
        steps only as far as the facility water the plant was read at (:meth:`RelaxValue.read_up_to_c`, plus the
        approach): there the saving was measured; beyond it one step a period, each priced on the last one's measured
        saving: the saving stops once the economizer carries all the heat while the GPUs' leakage goes on (on
        sweeps/new-user/budget-heatwave.yaml seeds 2-4 the row went 7 C warmer in one or two periods). Only a measured
        saving pays (:meth:`RelaxValue.warmer_under_budget`; :meth:`_at_budget` is None otherwise).
        """
        c = self.config
        limit = self._budget_limit_c(row)
        steps = (limit - hottest) // c.setpoint_step_c
        if steps < 1 or setpoint + c.setpoint_step_c > c.supply_max_c:
            return []
        read_up_to = self.pricing.read_up_to_c() if self.pricing is not None else None
        measured = setpoint if read_up_to is None else read_up_to + c.approach_c
        value = min(setpoint + steps * c.setpoint_step_c, max(setpoint + c.setpoint_step_c, measured), c.supply_max_c)
        why = f"give back: hottest GPU {hottest:.1f} C, {limit - hottest:.1f} C under {limit:.1f} C; {self._budget}"
        return [self._move(ActionKind.CDU_SETPOINT, row, value, why, now, read)]

    def _sets_facility_water(self, row: str) -> bool:
        """Whether ``row`` is at the coldest setpoint (it sets the facility water) while the site is at its power budget
        and a warmer facility water pays (:meth:`_at_budget`). Then its relaxing is no longer held by an open cooling
        incident (the rule's colder step bought margin the capped GPUs no longer need: on b200-hall the row rule's
        steps for a CDU capacity loss left the facility water at 16 C for the utility cap that followed, the chiller
        carrying the heat out of the GPUs' share, -1.1 % training goodput on 5/5 seeds), and it warms by its hottest
        GPU's margin in one period (:meth:`_give_back`), not one step.
        """
        if self._budget is None:
            return False
        setpoints = [self._current(ActionKind.CDU_SETPOINT, r) for r in self.rows]
        mine = self._current(ActionKind.CDU_SETPOINT, row)
        known = [sp for sp in setpoints if sp is not None]
        return mine is not None and bool(known) and mine <= min(known) + 1e-9

    def _facility_water(self, now: float, read: Reader) -> list[ActionResult]:
        """Facility water at the coldest supply setpoint minus the approach (no CDU or air handler floored above its
        setpoint), the air-cooled rows on the same water included: following the CDUs alone raised it to 32 C over
        an air row set for 22 C on sweeps/new-user/mixed-shifted.yaml (the reactive CDUs had relaxed to 36 C), while
        that row's own cooling incident was open and its A100s throttled (thermal-throttled GPU-s about 6x loop off).
        """
        setpoints = [self._current(ActionKind.CDU_SETPOINT, row) for row in self.rows]
        fw = self._current(ActionKind.FACILITY_WATER, self.site)
        known = [s for s in setpoints if s is not None]
        if fw is None or not known:
            return []
        known += [s for s in (self._current(ActionKind.CDU_SETPOINT, row) for row in self.shared) if s is not None]
        want = min(known) - self.config.approach_c
        limits = self.responder.adapter.limits(ActionKind.FACILITY_WATER, self.site)
        if limits is not None:
            want = min(max(want, limits[0]), limits[1])
        if abs(want - fw) < 1e-6:
            return []
        if want > fw and self._budget is None and self._any_held():
            return []  # a warmer facility water relaxes every row: not while an incident holds one tightened
        if want > fw and self.pricing is not None:
            self.pricing.facility_water_rise()  # the plant before the rise: its saving is measured next period
        why = f"follow the coldest supply setpoint {min(known):.1f} C minus {self.config.approach_c:.1f} C approach"
        return [self._move(ActionKind.FACILITY_WATER, self.site, want, why, now, read)]
