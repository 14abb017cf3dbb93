"""The respond stage: incidents in, guarded actions out, effects verified, failures never retried blindly.

Modes: ``observe`` records recommendations only; ``approve`` queues actions until a person approves or rejects
them; ``auto`` applies them. Each rule fires once per incident. After an action with an expected effect, the
responder reads the watched field on the target; if the effect has not appeared by ``within_s`` the previous
setting is restored (a recorded rollback). A rule marked ``until_closed`` holds its settings only while its
incident is open: when the incident closes, each setting nobody has changed since goes back to its previous
value (a recorded restore), drains are lifted and admission released.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from twinloop.ops.events import EventClass, Incident
from twinloop.ops.respond.actions import (
    INVERSE,
    SETTING_KINDS,
    ActionKind,
    ActionRequest,
    ActionResult,
    ActionStatus,
    Expectation,
)
from twinloop.ops.respond.adapters.base import ActionAdapter, ThermalPath
from twinloop.ops.respond.guards import SAFE_DIRECTION, GuardDecision, GuardRails
from twinloop.ops.respond.policy import MODE_ORDER, ActionTemplate, Mode, Policy, Rule, root_level
from twinloop.ops.respond.restart_cost import SERVING_STAYS, RestartChoice, choose_restart, write_pays
from twinloop.ops.respond.thermal_cap import (
    FOLLOW_EVERY_S,
    NotSettled,
    ThermalPathCap,
    followed_cap_w,
    own_control_holds,
    thermal_path_cap,
)
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE, TWINLOOP_FI_CDU_SUPPLY_TEMP

#: What a kept-back requeue's rule records for the actions that only served the requeue ({} = why it is kept back).
_KEPT_BACK_DETAIL = {
    ActionKind.REQUEUE: "{}",
    ActionKind.CHECKPOINT: "no checkpoint forced: {}",
    ActionKind.DRAIN: "no drain: the job stays on the node and a restart should find it ({})",
}

#: What moves a job off a node. Where a rule's forced checkpoint is skipped (:meth:`Responder._redo_cheaper`) they go
#: at once: their delay (the straggler rule's 30 s) only gave the write time, and every second of it the job computes
#: work the requeue throws away (round 1's halls: a background straggler's job requeued 30 s after a skipped write
#: lost those 30 s on top of its unsaved work).
_MOVES = frozenset({ActionKind.DRAIN, ActionKind.REQUEUE})

#: Setting kinds where a lower value is a colder coolant (a safer move for the GPUs, a costlier one for the plant).
_COLDER_KINDS = frozenset({ActionKind.CDU_SETPOINT, ActionKind.FACILITY_WATER})

#: Faults that slow a job down but let it compute: a requeue for one of them (rooted at a GPU or node) is only worth
#: it if the job runs faster elsewhere, so it is kept back when the adapter says it would run slower. A hang, an
#: SDC or a hardware error are not weighed: staying is not an option there.
_SLOWING = frozenset(
    {EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE, EventClass.POWER_DELIVERY_FAULT, EventClass.STRAGGLER}
)

#: A GPU's own thermal path failing (the `gpu-cooling-fault` rules): its requeue is priced like a straggler's, by what
#: the GPU costs its job (:meth:`Responder._cooling_slowdown`).
_COOLING_FAULT = frozenset({EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE})

#: Seconds of history before an action from which a ``trend`` expectation takes the pre-action slope.
TREND_WINDOW_S = 60.0


class Reader(Protocol):
    """``read(field, entity, aggregate, ago_s)``: a telemetry field over an entity's GPUs (``mean`` or ``max``),
    now or ``ago_s`` seconds ago; None when unknown.
    """

    def __call__(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        """The ``aggregate`` of ``field`` over ``entity``'s GPUs ``ago_s`` seconds ago (0: now); None when unknown."""


class CoolingTaker(Protocol):
    """Who takes a row's coolant when a rule hands it over (:class:`~.policy.HandOver`): the cooling optimizer."""

    @property
    def margin_c(self) -> float:
        """The margin to slowdown it keeps the GPUs at when heat comes (its precool margin), °C."""

    def slowdown_c(self, entity: str) -> float | None:
        """The lowest slowdown temperature among the GPUs of ``entity``'s row, °C, if it steers that row's coolant;
        None when it does not, or cannot tell.
        """

    def losing_ground(self, entity: str, read: Reader) -> bool:
        """Whether the CDU of ``entity``'s row cannot hold its setpoint (capacity-limited): its coolant keeps
        warming with the heat.
        """

    @property
    def approach_c(self) -> float:
        """Supply minus facility water the CDUs reach at best, °C: the facility water it keeps under their setpoints."""


def _start(
    read: Reader, target: str, expect: Expectation, aggregate: str, trend_per_s: float
) -> tuple[float, float] | None:
    """The watched field's value over ``target`` at the action (``aggregate``) and the slope a ``trend`` expectation
    extrapolates from it, per s (``trend_per_s``, from :func:`_trend_per_s`; 0 for ``level``); None when the field is
    not read there.
    """
    baseline = read(expect.field, target, aggregate)
    if baseline is None:
        return None
    return baseline, trend_per_s if expect.relative_to == "trend" else 0.0


def _trend_per_s(read: Reader, target: str, field: str, cooling: CoolingTaker | None) -> float:
    """The pre-action slope a ``trend`` expectation extrapolates past the action, per s: the part of the field's rise
    over the :data:`TREND_WINDOW_S` before it that goes on by itself (0 where none can be told).

    A die temperature follows its power within seconds (its RC: 0.45 s to 4.5 s in the catalog, under the 10 s
    between readings), so a die's rise over a minute is its coolant's warming plus ``R`` times its power's rise; only
    the coolant's goes on after the action (a capacity-limited loop keeps warming with the heat), a power ramp ends
    when the job reaches its power (hot-afternoon seed 2: the dies back from a dip, 120 -> 163 W mean in the minute
    before a CDU step, were credited "+44.91 down against its pre-action trend" 300 s later). It is read on the mean,
    the common mode a shared coolant moves (the hottest GPU jumps by degrees between readings at a steady 700 W), and
    serves an expectation on the maximum too: a coolant's warming lifts every die alike. ``R`` is the die's rise over
    its CDU's supply per watt at the action (the coolant's own rise through the cold plates follows power as fast).
    A row whose CDU holds its setpoint (``cooling``: the optimizer that steers it says it is not losing ground) has no
    trend of its own: its supply sits where its setpoint is (hot-afternoon seed 0: the dies' rise of a minute of
    setpoint relaxing, +0.14 C/s on the hottest, credited "+41.48"). Without a power reading, or with a rising power
    and no supply reading, the coolant's part cannot be told. Another field's trend is its mean's own.

    A trend is what held over the whole window: the slower of its two halves' rates, 0 where they disagree in sign.
    A capacity-limited loop warms at the rate its heat exceeds its capacity over its thermal mass, the same in both
    halves; a step (a pump losing flow lifts every die of its row at once: default seed 1, 4.2 C in one reading,
    extrapolated at 0.07 C/s) or an approach that is ending shows in one half only and does not go on.
    """
    temps = _window_means(read, field, target)
    if temps is None:
        return 0.0
    if field == DCGM_FI_DEV_GPU_TEMP:
        if cooling is not None and cooling.slowdown_c(target) is not None and not cooling.losing_ground(target, read):
            return 0.0
        powers = _window_means(read, DCGM_FI_DEV_POWER_USAGE, target)
        halves = None if powers is None else _coolant_halves(temps, powers, read(TWINLOOP_FI_CDU_SUPPLY_TEMP, target))
    else:
        halves = _coolant_halves(temps, [0.0, 0.0, 0.0], None)
    if halves is None or halves[0] * halves[1] <= 0:
        return 0.0
    return min(halves, key=abs) / (0.5 * TREND_WINDOW_S)


def _window_means(read: Reader, field: str, target: str) -> list[float] | None:
    """``field``'s mean over ``target`` now, half a trend window ago and a window ago; None if any is unknown."""
    values = [read(field, target, "mean", ago) for ago in (0.0, 0.5 * TREND_WINDOW_S, TREND_WINDOW_S)]
    known = [v for v in values if v is not None]
    return known if len(known) == len(values) else None


def _coolant_halves(t: list[float], p: list[float], supply_c: float | None) -> tuple[float, float] | None:
    """The rise of die temperatures ``t`` (now, half a window ago, a window ago) in each half of the window, less
    ``R`` times the rise of powers ``p`` then (``R``: the die over ``supply_c`` per watt now), newer half first; None
    when a half's part cannot be told (power rising with no supply reading).
    """
    if supply_c is not None and p[0] > 0:
        r_c_per_w = max(0.0, (t[0] - supply_c) / p[0])
        return (t[0] - t[1]) - r_c_per_w * (p[0] - p[1]), (t[1] - t[2]) - r_c_per_w * (p[1] - p[2])
    if p[0] > p[1] or p[1] > p[2]:
        return None
    return t[0] - t[1], t[1] - t[2]


@dataclass(frozen=True)
class _Watch:
    action_id: int
    request: ActionRequest
    expect: Expectation
    baseline: float
    slope_per_s: float
    start_ts: float
    previous_value: float | None
    #: The mean's baseline and pre-action slope, for an expectation on the maximum (None otherwise).
    mean_start: tuple[float, float] | None = None
    #: The highest the watched die temperature can go, °C (its row's slowdown: its GPU's own clock control holds it
    #: there), past which no trend is extrapolated; None when unknown (``trend`` die expectations only).
    ceiling_c: float | None = None

    @property
    def due_ts(self) -> float:
        return self.start_ts + self.expect.within_s

    def moved(self, read: Reader, now: float) -> tuple[float, str] | None:
        """Change in the expected direction, and the aggregate it was read on: of the level since the action, or
        (``trend``) the larger of that and how much the field's rate in the second half of the window fell short of
        its pre-action trend (:func:`_trend_per_s`: its coolant's warming, not its power's), times the window (a
        capacity-limited coolant loop keeps warming after a good action, only slower). An expectation on the maximum
        is met by the mean as well (``mean_start``: its baseline and slope): a GPU its own thermal control holds at its
        slowdown pins the maximum while a colder coolant cools every other GPU (mixed_hall seed 0: a colder facility
        water for a throttling air row was rolled back, "moved only +0.03", and set again by the optimizer 80 s later).
        """
        starts = [(self.expect.aggregate, self.baseline, self.slope_per_s)]
        if self.mean_start is not None:
            starts.append(("mean", *self.mean_start))
        moves = [
            (m, agg) for agg, base, slope in starts if (m := self._moved_on(read, now, agg, base, slope)) is not None
        ]
        return max(moves) if moves else None

    def _moved_on(self, read: Reader, now: float, aggregate: str, baseline: float, slope: float) -> float | None:
        e = self.expect
        value = read(e.field, self.request.target, aggregate)
        if value is None:
            return None
        sign = -1.0 if e.direction == "down" else 1.0
        level = sign * (value - baseline)
        if e.relative_to == "level":
            return level
        half = 0.5 * (now - self.start_ts)
        mid = read(e.field, self.request.target, aggregate, half)
        if mid is None or half <= 0:
            return level
        rate_after = (value - mid) / half
        credit = sign * (rate_after - slope) * e.within_s
        if self.ceiling_c is not None and e.direction == "down":
            # No credit for holding a die below a temperature its trend could not take it past (b200-hall: a
            # die held at its slowdown read as "+41.75 below its pre-action trend").
            credit = min(credit, self.ceiling_c - value)
        return max(level, credit)


@dataclass(frozen=True)
class _FromThermalPath(ActionRequest):
    """A power cap whose value is read off its GPU's thermal path when it is submitted (after the rule's
    ``after_s``, once the die has settled), or else ``fallback_scale`` times the present limit.
    """

    fallback_scale: float | None = None


@dataclass(frozen=True)
class _PathCap:
    """A thermal-path cap that follows its GPU's coolant: when it is next due, the reason it was set for, the limit
    before it (never exceeded), the limit last set, and its path's settled readings: the last one, when, and the
    sum and count of their ``R``.
    """

    due_s: float
    reason: str
    ceiling_w: float
    last_w: float
    fallback_scale: float | None = None
    known: ThermalPathCap | None = None
    known_at_s: float = 0.0
    r_sum_c_per_w: float = 0.0
    r_reads: int = 0

    def read(self, found: ThermalPathCap, now: float) -> _PathCap:
        """With one more settled reading of the path."""
        return replace(
            self,
            known=found,
            known_at_s=now,
            r_sum_c_per_w=self.r_sum_c_per_w + found.resistance_c_per_w,
            r_reads=self.r_reads + 1,
        )

    def path_cap(self, coolant_c: float, now: float) -> ThermalPathCap:
        """The cap at ``coolant_c`` from the mean ``R`` of the settled readings: ``R`` is the path's (its interface
        and cold plate) and one reading of it scatters by several % with the job's power swings (mixed_hall: 0.103-
        0.117 C/W for a path of 0.106), so the mean of every reading holds the die nearer its target than the last.
        """
        assert self.known is not None
        r_mean = self.r_sum_c_per_w / max(self.r_reads, 1)
        return replace(self.known, resistance_c_per_w=r_mean).at_coolant(coolant_c, now - self.known_at_s)


def _read_path(
    state: _PathCap,
    read: Reader,
    gpu: str,
    slowdown_c: float,
    coolant_c: float,
    limits: tuple[float, float],
    now: float,
) -> tuple[_PathCap, ThermalPathCap | str]:
    """``state`` with the path read once more where its die has settled, and the cap at ``coolant_c`` from the mean
    ``R`` of its readings so far (a die still moving follows with the ``R`` it has), or why there is none yet.
    """
    known = state.known is not None  # then a bursty die is not read over the longer window
    found = thermal_path_cap(read, gpu, coolant_c, slowdown_c, limits, bursty=not known)
    if isinstance(found, ThermalPathCap):
        state = state.read(found, now)
    if state.known is not None:
        return state, state.path_cap(coolant_c, now)
    return state, found


@dataclass(frozen=True)
class _Gate:
    """An action waiting for its jobs' checkpoints to be reported complete (a requeue must not throw work away)."""

    request: ActionRequest
    until_closed: bool
    mode: Mode
    jobs: tuple[str, ...]
    since_ts: float
    earliest_ts: float
    deadline_ts: float


class Responder:
    """Turns incidents into actions under a policy, through guard rails, on one adapter."""

    def __init__(
        self, policy: Policy, adapter: ActionAdapter, guards: GuardRails | None = None, mode: Mode | None = None
    ) -> None:
        self.policy = policy
        self.adapter = adapter
        self.guards = guards or GuardRails()
        self.mode: Mode = mode or policy.mode
        self.log: list[ActionResult] = []
        self._fired: set[tuple[int, str]] = set()
        self._pending: dict[int, ActionRequest] = {}
        self._pending_held: dict[int, int] = {}  # pending action id -> incident whose closing restores it
        self._watches: list[_Watch] = []
        self._held: dict[int, list[ActionResult]] = {}  # incident id -> applied actions to restore on closing
        self._delayed: list[tuple[float, ActionRequest, bool, Mode]] = []  # (due, request, until_closed, mode)
        self._gates: list[_Gate] = []  # waiting for a confirmed checkpoint
        self._restarts: dict[int, RestartChoice] = {}  # incident id -> when its job is moved off (`restart` rules)
        # Cooling faults whose job stays (restart `never`): incident -> the slowdown that choice priced; incident -> the
        # most its GPU's thermal-path cap costs the job (1 - cap/limit before); incidents to price again at the next
        # poll (capped since); incident -> the rule fired before a costlier slowdown moved the job (its actions done).
        self._priced: dict[int, float] = {}
        self._cap_costs: dict[int, float] = {}
        self._reask: set[int] = set()
        self._escalated: dict[int, Rule] = {}
        self._admission_waits: set[int] = set()  # incidents kept with their job only while admission would hold it
        self._slowing: set[int] = set()  # incidents whose requeue is weighed by the job's pace after it
        self._open: dict[int, Incident] = {}  # every open incident as last seen
        self._explained: set[tuple[int, str]] = set()  # (incident, rule) recorded as explained by an ancestor's
        # Restores the step limit cut short: (due, the full undo, the value the last step set, the action undone).
        self._restoring: list[tuple[float, ActionRequest, float, int]] = []
        # Thermal-path caps that follow their GPU's coolant: (incident, GPU) -> its state.
        self._path_caps: dict[tuple[int, str], _PathCap] = {}
        #: Takes a row a rule hands over (the runner sets its cooling optimizer); None: every rule acts.
        self.cooling: CoolingTaker | None = None
        # Rules handed over for open incidents, asked again every poll: (incident, rule) -> the incident as last seen.
        self._handed: dict[tuple[int, str], Incident] = {}

    # ------------------------------------------------------------------ incidents → actions
    def handle(self, incidents: Iterable[Incident], now: float, read: Reader) -> list[ActionResult]:
        """Apply the policy to open incidents (and submit delayed actions now due; call every step); returns the
        results recorded at ``now``.
        """
        out: list[ActionResult] = []
        batch = list(incidents)
        self._drop_waiting_of_closed(batch)
        batch += self._asked_again(batch)
        due = [d for d in self._delayed if d[0] <= now]
        self._delayed = [d for d in self._delayed if d[0] > now]
        for _, request, until_closed, mode in due:
            out.append(self._submit_for(request, until_closed, now, read, mode))
        out.extend(self._continue_restores(now) + self._follow_path_caps(now, read))
        out.extend(self._open_gates(now, read))
        for incident in batch:
            iid = incident.incident_id
            if incident.status == "open":
                self._open[iid] = incident
            else:
                self._open.pop(iid, None)
            if incident.status == "merged" and incident.merged_into is not None:
                self._held.setdefault(incident.merged_into, []).extend(self._held.pop(iid, []))
                if iid in self._slowing:
                    self._slowing.add(incident.merged_into)
                for i, (t, req, hold, mode) in enumerate(self._delayed):
                    if req.incident_id == iid:
                        self._delayed[i] = (t, replace(req, incident_id=incident.merged_into), hold, mode)
                self._gates = [
                    replace(g, request=replace(g.request, incident_id=incident.merged_into))
                    if g.request.incident_id == iid
                    else g
                    for g in self._gates
                ]
            if incident.status != "open":  # its delayed and gated actions went in _drop_waiting_of_closed
                self._restarts.pop(iid, None)
                for priced in (self._priced, self._cap_costs, self._escalated):
                    priced.pop(iid, None)
                self._reask.discard(iid)
                self._admission_waits.discard(iid)
                self._slowing.discard(iid)
                out.extend(self._restore(iid, now))
                continue
            if incident.event_class in _SLOWING and root_level(incident.root) in ("gpu", "node"):
                self._slowing.add(iid)
            if iid in self._admission_waits:  # asked again each poll: the wait ends when admission reopens
                self._admission_waits.discard(iid)
                self._restarts.pop(iid, None)
            self._reprice_cooling(incident)
            explained = self._explained_by(incident)
            for rule in self.policy.rules_for(incident.event_class, incident.severity, incident.root):
                if rule.supply is not None and self._supply(incident) != rule.supply:
                    continue
                if rule.restart is not None and self._restart(incident).when != rule.restart:
                    continue
                if rule.serving is not None and self._serving(incident) != rule.serving:
                    continue
                key = (iid, rule.name)
                if key in self._fired:
                    continue
                if explained is not None:
                    out.extend(self._record_explained(rule, incident, explained, now))
                    continue
                wait, note = self._held_back(rule, incident, read)
                if wait is not None:
                    if key not in self._handed:
                        out.extend(self._refuse_rule(rule, incident, wait, now))
                    self._handed[key] = incident
                    continue
                self._handed.pop(key, None)
                self._fired.add(key)
                out.extend(self._fire(rule, incident, note, now, read))
        return out

    def _fire(self, rule: Rule, incident: Incident, note: str, now: float, read: Reader) -> list[ActionResult]:
        """Every action of ``rule`` for ``incident`` (``note`` adds to their reason), submitted, delayed or gated."""
        out: list[ActionResult] = []
        iid = incident.incident_id
        mode = self._mode_for(rule)
        kept_back = self._requeue_kept_back(rule, incident)
        no_write = self._redo_cheaper(rule, incident)
        earlier = self._escalated.pop(iid, None)
        done = {(t.kind, t.target) for t in earlier.actions} if earlier is not None else set()
        # CDU -> the setpoint it has after this firing, for a `supply_need` action of the rule (read only then).
        supply: dict[str, float] = {}
        reads_supply = any(t.value_from == "supply_need" for t in rule.actions)
        for template in rule.actions:
            if (template.kind, template.target) in done:
                continue  # done by the rule that kept the job (its cap, its drain)
            if kept_back is not None and template.kind in _KEPT_BACK_DETAIL:
                detail = _KEPT_BACK_DETAIL[template.kind].format(kept_back)
                out.extend(self._refuse_all(rule, template, incident, detail, now))
                continue
            requests = self._requests(rule, template, incident, note, supply)
            if not requests:
                reason = self._rule_reason(rule, incident, note)
                unresolved = ActionRequest(template.kind, incident.root, reason=reason, incident_id=iid)
                detail = f"cannot resolve target: no {template.target} for {incident.root}"
                out.append(self._record(unresolved, "refused", now, detail, guard=False))
            for request in requests:
                fleet = self._fleet_wide(request, incident)
                if fleet is not None:
                    out.append(self._record(request, "refused", now, f"no action: {fleet}", guard=False))
                    continue
                pending = self._unjudged(request) if _relative(template) else None
                if pending is not None:
                    out.append(self._record(request, "refused", now, f"no action: {pending}", guard=False))
                    continue
                if no_write is not None and template.kind == ActionKind.CHECKPOINT:
                    out.append(self._record(request, "refused", now, f"no action: {no_write}", guard=False))
                    continue
                if no_write is not None and template.after_checkpoint:
                    request = replace(request, reason=f"{request.reason}; {no_write}")
                if template.after_checkpoint and no_write is None:
                    jobs = tuple(self.adapter.resolve("job", incident))
                    self._gates.append(
                        _Gate(
                            request,
                            rule.until_closed,
                            mode,
                            jobs,
                            now,
                            now + template.after_s,
                            now + max(template.after_s, template.checkpoint_timeout_s),
                        )
                    )
                elif template.after_s > 0 and not (no_write is not None and template.kind in _MOVES):
                    self._delayed.append((now + template.after_s, request, rule.until_closed, mode))
                else:
                    out.append(self._submit_for(request, rule.until_closed, now, read, mode))
                    if reads_supply and template.kind == ActionKind.CDU_SETPOINT:
                        supply[request.target] = self._setpoint_after(out[-1])
        return out

    def _setpoint_after(self, result: ActionResult) -> float:
        """The CDU setpoint ``result`` leaves: the value it set or recommends; where it was refused (a CDU whose own
        controller owns its setpoint, a step awaiting its verdict) the setpoint it has.
        """
        request = result.request
        current = self.adapter.current(request.kind, request.target)
        if result.status == "refused" or request.value is None:
            return current if current is not None else math.nan
        return request.value

    def _held_back(self, rule: Rule, incident: Incident, read: Reader) -> tuple[str | None, str]:
        """Whether ``rule`` waits now, asked again every poll while ``incident`` is open: (the audit line of its
        actions not taken, None when it acts; the note its actions carry). It waits while every relative step it
        would take is on a setting an earlier incident's step still awaits its verdict on (:meth:`_unjudged`), or
        while its row is left to the cooling optimizer (:meth:`_hand_over`).
        """
        steps = [r for t in rule.actions if _relative(t) for r in self._requests(rule, t, incident)]
        judged = [self._unjudged(r) for r in steps]
        if steps and all(w is not None for w in judged):
            return f"no action yet: {'; '.join(dict.fromkeys(str(w) for w in judged))}", ""
        held, note = self._hand_over(rule, incident, read)
        if held:
            return (
                f"no action: {note}: the cooling optimizer steers the row, tightening once its hottest GPU is hot",
                note,
            )
        return None, note

    def _unjudged(self, request: ActionRequest) -> str | None:
        """Why a relative step of ``request``'s setting waits: another incident's step on the same setting still
        awaits its verdict (its expectation's window); None when none does. A second step stacked on the first
        before its effect is known compounds it whatever it did: on sweeps/new-user/b200-hall.yaml a row's
        `cooling-degradation` rule fired on each of five incidents the row's capacity loss opened and closed in
        11 min, stepping its CDU from 30 to 18 C and facility water from 26 to 12 C on a CDU that could not hold
        its setpoint; loop off, one incident.
        """
        for w in self._watches:
            same = (w.request.kind, w.request.target) == (request.kind, request.target)
            if same and w.request.incident_id >= 0 and w.request.incident_id != request.incident_id:
                return (
                    f"{w.request.kind} of {w.request.target} was stepped by action {w.action_id} for incident"
                    f" {w.request.incident_id} at {w.start_ts:.0f}s, judged at {w.due_ts:.0f}s: no second step"
                    " before the first is judged"
                )
        return None

    def _asked_again(self, batch: list[Incident]) -> list[Incident]:
        """The open incidents not in ``batch`` to be asked again now: those with a rule handed over (a row's margin
        shrinks between the incident's updates), then those whose job stays only while admission would hold it
        (:meth:`_restart`); handed-over ones closing or merged in ``batch`` are forgotten.
        """
        seen = {i.incident_id for i in batch}
        gone = {i.incident_id for i in batch if i.status != "open"}
        self._handed = {key: inc for key, inc in self._handed.items() if key[0] not in gone}
        again = {inc.incident_id: inc for inc in self._handed.values() if inc.incident_id not in seen}
        for iid in sorted(self._admission_waits | self._reask):
            if iid in self._open and iid not in seen:
                again.setdefault(iid, self._open[iid])
        return list(again.values())

    def _hand_over(self, rule: Rule, incident: Incident, read: Reader) -> tuple[bool, str]:
        """Whether ``rule`` leaves ``incident``'s row to the cooling optimizer now (:class:`~.policy.HandOver`), and
        the margin read, in words ("" for a rule without ``hand_over``). The rule acts where no optimizer takes the
        row or the margin cannot be read, and as soon as the hottest GPU would be within the margin by the end of the
        rule's verify window (``expect.within_s``) at its recent rise (a ramp, not a step: see below).
        """
        spec = rule.hand_over
        if spec is None or self.cooling is None:
            return False, ""
        slowdown = self.cooling.slowdown_c(incident.root)
        hottest = read(DCGM_FI_DEV_GPU_TEMP, incident.root, "max")
        if slowdown is None or hottest is None:
            return False, ""
        within_c = spec.margin_c if spec.margin_c is not None else self.cooling.margin_c
        horizon_s = rule.expect.within_s if rule.expect is not None else TREND_WINDOW_S
        # The rise it would add by the end of the window. A CDU that cannot hold its setpoint (capacity-limited)
        # keeps warming with the heat: any rise is a ramp, and the last minute's rate is kept up for the window.
        # One that holds it cannot: a rise is a die settling on new work or on the coolant's step, so it counts
        # only as far as it also shows over the last window (the smaller of the two). Cooling-plant seed 0's pump
        # degradation on a CDU holding its setpoint: +2 C in 20 s, then flat at 74.8 C, which the minute's rate
        # alone made +18 C in 300 s; default's, on a capacity-limited CDU, ramps to the software slowdown.
        root = incident.root
        losing = self.cooling.losing_ground(root, read)
        rises = [self._rise_c(read, root, hottest, back_s, horizon_s) for back_s in (TREND_WINDOW_S, horizon_s)]
        known = [r for r in rises if r is not None]
        rise_c = (known[0] if losing else min(known)) if known else 0.0
        margin = slowdown - hottest
        ahead = margin - rise_c
        words = (
            f"margin {margin:.1f} C to slowdown {slowdown:.0f} C (hottest GPU {hottest:.1f} C; {ahead:.1f} C in"
            f" {horizon_s:g} s at its recent rise{'; its CDU cannot hold its setpoint' if losing else ''};"
            f" acts within {within_c:g} C)"
        )
        return ahead > within_c, words

    @staticmethod
    def _rise_c(read: Reader, entity: str, hottest: float, lookback_s: float, horizon_s: float) -> float | None:
        """The hottest GPU's rise over the last ``lookback_s`` scaled to ``horizon_s``, °C (0 falling, None unknown)."""
        past = read(DCGM_FI_DEV_GPU_TEMP, entity, "max", lookback_s)
        return None if past is None else max(hottest - past, 0.0) * horizon_s / lookback_s

    def _explained_by(self, incident: Incident) -> Incident | None:
        """An open incident of the same class rooted above ``incident``'s GPU on its own node, rack or row (the same
        coolant loop and power feed): the GPU runs hot, or short, with its neighbours, and that incident's rule acts
        for all of them; a rule for the one GPU (its own thermal path failing: cap, drain, requeue) does not apply.
        None for other incidents. A site-wide incident (a heat wave) explains nothing here, nor one of another class
        (a GPU's thermal throttle inside its row's cooling incident is its own fault: no masking). On
        `sweeps/new-user/large-hall.yaml` a CDU pump fault on one row opened, 8 s after the row's incident, 15-18
        incidents at its hottest GPUs, and the GPU rule drained each node for good and restarted the 1,024-GPU job.
        """
        if root_level(incident.root) != "gpu":
            return None
        for other in self._open.values():
            above = root_level(other.root) in ("row", "rack", "node") and incident.root.startswith(other.root + "/")
            if above and other.event_class == incident.event_class and other.incident_id != incident.incident_id:
                return other
        return None

    def _record_explained(self, rule: Rule, incident: Incident, by: Incident, now: float) -> list[ActionResult]:
        """The audit line of each action ``rule`` does not take for ``incident``, once; the rule is asked again at
        the incident's next update (``by`` may have closed by then).
        """
        key = (incident.incident_id, rule.name)
        if key in self._explained or key in self._fired:
            return []
        self._explained.add(key)
        detail = f"no action: incident {by.incident_id} ({by.event_class} at {by.root}) covers it and is handled there"
        return self._refuse_rule(rule, incident, detail, now)

    def _refuse_rule(self, rule: Rule, incident: Incident, detail: str, now: float) -> list[ActionResult]:
        """Every action of ``rule`` for ``incident``, recorded as refused with ``detail`` (nothing actuated)."""
        return [result for t in rule.actions for result in self._refuse_all(rule, t, incident, detail, now)]

    def _refuse_all(
        self, rule: Rule, template: ActionTemplate, incident: Incident, detail: str, now: float
    ) -> list[ActionResult]:
        """``template``'s requests for ``incident``, recorded as refused with ``detail`` (nothing actuated)."""
        return [
            self._record(request, "refused", now, detail, guard=False)
            for request in self._requests(rule, template, incident)
        ]

    def _drop_waiting_of_closed(self, incidents: list[Incident]) -> None:
        """Forget the delayed and gated actions of incidents that close now, before any of them is submitted: a
        requeue whose checkpoint is confirmed in the same poll as its incident closes would move a job off a node
        that is healthy again.
        """
        closing = {i.incident_id for i in incidents if i.status not in ("open", "merged")}
        if closing:
            self._delayed = [d for d in self._delayed if d[1].incident_id not in closing]
            self._gates = [g for g in self._gates if g.request.incident_id not in closing]

    def _requeue_kept_back(self, rule: Rule, incident: Incident) -> str | None:
        """Why ``rule``'s requeue would be kept back (a fault that only slows the job, whose requeue would run it
        slower where it lands, without the nodes the rule drains), asked once when the rule fires; None when it
        would go ahead, and for rules without a requeue. Then the rule's requeue is not done, nor what only served
        it (:data:`_KEPT_BACK_DETAIL`): its forced checkpoint (the job stays, so the write would stop it for
        nothing; its own checkpoints go on) and its drain (a restart for any other cause, a failure elsewhere, must
        find the node again, since every other placement is slower: mixed_hall seed 0, a host failure at 6135 s
        restarted `pretrain` with a drained node excluded, on 184 H100 + 8 A100 at about half its pace). The pace is
        asked without the nodes the rule would drain, so the node is not drained and undrained on every incident.
        """
        if incident.incident_id not in self._slowing:
            return None
        if not any(t.kind == ActionKind.REQUEUE or t.unless_kept_back for t in rule.actions):
            return None
        drains = [t for t in rule.actions if t.kind == ActionKind.DRAIN]
        drained = tuple(node for t in drains for node in self.adapter.resolve(t.target, incident))
        for job in self.adapter.resolve("job", incident):
            pace = self.adapter.requeue_pace(job, drained)
            if pace is not None and pace.slower:
                return pace.kept_back()
        return None

    def _redo_cheaper(self, rule: Rule, incident: Incident) -> str | None:
        """Why ``rule``'s forced checkpoint is not worth writing (then its requeue goes without waiting for one), or
        None. A checkpoint before a requeue saves the job's work since its last save, ``u``, and stops it for the
        write, ``W``; a failure before the job's next save after the restart (chance ``q``) loses ``W`` less for a
        job that wrote, and one during the write (chance ``p``) loses ``u`` too: the write pays exactly when
        ``u·(1 − p) ≥ W·(1 − q)`` (:func:`~.restart_cost.write_pays`, derived there; ``u ≥ W`` where the job's failure
        rate is unknown). Where it does not pay for every job of the incident (a job restarted a minute ago, a slow
        file system), redoing the work after the restart costs less than writing it. Only for rules that force a
        checkpoint and requeue after it; unknown ``u`` or ``W`` keeps the checkpoint.
        """
        kinds = {t.kind for t in rule.actions}
        requeues = any(t.kind == ActionKind.REQUEUE and t.after_checkpoint for t in rule.actions)
        if ActionKind.CHECKPOINT not in kinds or not requeues:
            return None
        why = []
        for job in self.adapter.resolve("job", incident):
            t = self.adapter.job_timing(job)
            priced = None if t is None else write_pays(t)
            if priced is None or priced[0]:
                return None
            why.append(f"{job}: {priced[1]}")
        if not why:
            return None
        return f"{'; '.join(why)}: requeue without a forced checkpoint (redoing that work costs less)"

    def _fleet_wide(self, request: ActionRequest, incident: Incident) -> str | None:
        """Why ``request`` is no action on a serving fleet, or None: a requeue of the whole fleet for a fault on one
        of its GPUs or nodes (disproportionate: the node's drain takes out that replica), and a checkpoint of it
        (a serving replica keeps no training state to save; asking would also start the guard's back-off on the
        job, holding back its next incident's actions).
        """
        if request.kind == ActionKind.CHECKPOINT and self.adapter.is_serving(request.target) is True:
            return f"{request.target} is a serving fleet: it keeps no training state to checkpoint"
        if request.kind != ActionKind.REQUEUE or root_level(incident.root) not in ("gpu", "node"):
            return None
        if self.adapter.is_serving(request.target) is not True:
            return None
        return (
            f"{request.target} is a serving fleet; a fault at {incident.root} takes out that node's replica (its"
            " drain), not the whole fleet"
        )

    def _open_gates(self, now: float, read: Reader) -> list[ActionResult]:
        """Submit the gated actions whose jobs reported their checkpoint; at the timeout, hand them to a person."""
        out: list[ActionResult] = []
        keep: list[_Gate] = []
        for g in self._gates:
            if now < g.earliest_ts:
                keep.append(g)
                continue
            done = [self.adapter.checkpoint_done(job, g.since_ts) for job in g.jobs]
            if all(d is True for d in done):
                why = f"{g.request.reason}; checkpoint of {', '.join(g.jobs) or 'no job'} confirmed"
                out.append(self._submit_for(replace(g.request, reason=why), g.until_closed, now, read, g.mode))
            elif now >= g.deadline_ts:
                state = "unknown" if any(d is None for d in done) else "not complete"
                why = f"{g.request.reason}; checkpoint {state} after {now - g.since_ts:.0f}s: escalated to a person"
                mode = min(g.mode, "approve", key=MODE_ORDER.index)
                out.append(self._submit_for(replace(g.request, reason=why), g.until_closed, now, read, mode))
            else:
                keep.append(g)
        self._gates = keep
        return out

    def _serving(self, incident: Incident) -> bool:
        """Whether the incident's job is a serving fleet (any of its jobs, where it names several); unknown: no."""
        return any(self.adapter.is_serving(job) is True for job in self.adapter.resolve("job", incident))

    def _supply(self, incident: Incident) -> str:
        """``short`` when the incident's node's working supplies carry less than its GPUs' maximum power limit,
        ``carried`` when they carry it (an adapter that cannot tell gets ``short``).
        """
        for node in self.adapter.resolve("node", incident):
            carried_w = self.adapter.supply_limit_w(node)
            limits = self.adapter.limits(ActionKind.POWER_CAP, node)
            if carried_w is None or limits is None or carried_w < limits[1]:
                return "short"  # unknown is taken as short: the cautious rule
        return "carried"

    def _restart(self, incident: Incident) -> RestartChoice:
        """When moving the incident's job(s) off its node pays (:func:`choose_restart`), decided once per incident
        (a later step must not pick a second option and fire its rule too; a cooling fault's kept job is priced again,
        :meth:`_reprice_cooling`); the most urgent over its jobs. A straggler costs its job the slowdown the detector
        measured; a short supply the cap's shortfall; a GPU whose thermal path fails what :meth:`_cooling_slowdown`
        says (unmeasured: checkpoint and restart now, as before the pricing). A serving fleet is never restarted
        (:data:`SERVING_STAYS`): draining the node takes out its replica there. The move's pace is asked without the
        incident's nodes: the job leaves them, so a placement that would put it back there is not the one it gets.
        """
        known = self._restarts.get(incident.incident_id)
        if known is not None:
            return known
        slowdown, cause = incident.impact.job_slowdown, "straggler costs the job"
        if incident.event_class == EventClass.POWER_DELIVERY_FAULT:
            slowdown, cause = self._supply_shortfall(incident), "the supply cap costs the job at most"
        if incident.event_class in _COOLING_FAULT:
            slowdown, cause = self._cooling_slowdown(incident)
            if slowdown is None:
                # Not measured: checkpoint and requeue as before, the requeue's pace judged when the rule fires.
                choice = RestartChoice("now", f"{cause}: not measured: checkpoint and restart now, as before")
                self._restarts[incident.incident_id] = choice
                return choice
            self._priced[incident.incident_id] = slowdown
        jobs = self.adapter.resolve("job", incident)
        away = tuple(self.adapter.resolve("node", incident))
        choices, waits = [], False
        for job in jobs:
            if self.adapter.is_serving(job) is True:
                choices.append(SERVING_STAYS)
                continue
            pace = self.adapter.requeue_pace(job, away)
            waits = waits or (pace is not None and bool(pace.waits))
            choices.append(choose_restart(slowdown, self.adapter.job_timing(job), pace, cause))
        choice = choices[0] if choices else choose_restart(slowdown, None, cause=cause)
        for other in choices[1:]:
            choice = choice.more_urgent(other)
        self._restarts[incident.incident_id] = choice
        if choice.when == "never" and waits:
            # Kept with its job only because admission would hold it in the queue now: a hold or a budget cut is
            # temporary (power-events seed 0: a PSU loss 8 s before the utility cap ended kept the job on a node
            # capped at 200 W for the 700 s of its repair), so the choice is asked again until it changes.
            self._admission_waits.add(incident.incident_id)
        return choice

    def _cooling_slowdown(self, incident: Incident) -> tuple[float | None, str]:
        """What a GPU with a failing thermal path costs its job, as a fraction of its throughput, and the audit's
        words for it: the slowdown the detector measured (its rank against the job's slowest other, 0 when the job
        waits for a slower rank anyway: a GPU its own thermal control holds under slowdown in a power-bound job), or,
        once the rule's own thermal-path cap is applied, the cap's shortfall below the GPU's limit before it
        (``1 - cap/limit``, an upper bound as for a short supply) where that is more. The cap comes only once the die
        reaches its slowdown (:func:`~.thermal_cap.own_control_holds`), after the choice was first made, so a job kept
        is priced again then (:meth:`_reprice_cooling`). None where the detector measured nothing (no pace of the
        job's ranks): then the job is checkpointed and requeued as before.
        """
        measured = incident.impact.job_slowdown
        capped = self._cap_costs.get(incident.incident_id)
        if measured is None:
            return None, "what the faulty GPU costs the job"
        if capped is not None and capped > measured:
            return capped, "the faulty GPU's thermal-path cap costs the job at most"
        return measured, "the faulty GPU costs the job"

    def _reprice_cooling(self, incident: Incident) -> None:
        """A cooling fault whose job stays (restart ``never``) is priced again when it would cost the job more than the
        choice priced: the detector measured a larger slowdown (a new update of the incident), or the rule's own cap
        was applied since (the die reached its slowdown; :meth:`_note_cap`). Then moving may pay: the choice is made
        afresh, and a costlier one fires its rule, less the actions the rule that kept the job did (its cap, its
        drain). Only from ``never``: a move decided stands, as a straggler's does.
        """
        iid = incident.incident_id
        self._reask.discard(iid)
        known, priced = self._restarts.get(iid), self._priced.get(iid)
        if incident.event_class not in _COOLING_FAULT or known is None or known.when != "never" or priced is None:
            return
        slowdown, _ = self._cooling_slowdown(incident)
        if slowdown is None or slowdown <= priced:
            return
        del self._restarts[iid]
        kept = [r for r in self.policy.rules if r.restart == "never" and (iid, r.name) in self._fired]
        if kept:
            self._escalated[iid] = kept[0]

    def _note_cap(self, incident_id: int, cap_w: float, ceiling_w: float) -> None:
        """Record a thermal-path cap applied on an incident's GPU: what it costs the job at most (``1 - cap/limit``
        before), and, for a job kept with it, a new price at the next poll.
        """
        if ceiling_w <= 0 or not cap_w < ceiling_w:
            return
        cost = 1.0 - cap_w / ceiling_w
        if cost > self._cap_costs.get(incident_id, 0.0):
            self._cap_costs[incident_id] = cost
            if incident_id in self._priced and incident_id in self._open:
                self._reask.add(incident_id)

    def _supply_shortfall(self, incident: Incident) -> float | None:
        """The most a cap at what the incident's nodes' working supplies carry can cost the job: ``1 - cap/max`` on
        the worst node, 1 where the supplies cannot carry the GPUs' lowest limit (the node trips whatever the cap);
        None when the adapter cannot tell (then the job moves at once, the cautious answer). Near the maximum the
        clock falls more slowly than the power (dynamic power grows faster than the clock), so this errs toward
        moving the job at once.
        """
        worst: float | None = None
        for node in self.adapter.resolve("node", incident):
            carried_w = self.adapter.supply_limit_w(node)
            limits = self.adapter.limits(ActionKind.POWER_CAP, node)
            if carried_w is None or limits is None or limits[1] <= 0:
                return None
            short = 1.0 if carried_w < limits[0] else min(1.0, max(0.0, 1.0 - carried_w / limits[1]))
            worst = short if worst is None else max(worst, short)
        return worst

    def _mode_for(self, rule: Rule) -> Mode:
        """The stricter of the responder's mode and the rule's own."""
        if rule.mode is None:
            return self.mode
        return min(self.mode, rule.mode, key=MODE_ORDER.index)

    def _submit_for(
        self, request: ActionRequest, until_closed: bool, now: float, read: Reader, mode: Mode
    ) -> ActionResult:
        """Submit an incident's request; remember it for restoring when its incident closes (``until_closed``). A
        requeue for a fault that only slows the job is kept back when the job would run slower where it lands.
        """
        if isinstance(request, _FromThermalPath):
            request = self._thermal_path_value(request, read, now)
        left = self._left_already(request)
        if left is not None:
            return self._record(request, "refused", now, left, guard=False)
        if request.kind == ActionKind.REQUEUE and request.incident_id in self._slowing:
            pace = self.adapter.requeue_pace(request.target)
            if pace is not None and pace.slower:
                return self._record(request, "refused", now, pace.kept_back(), guard=False)
        result = self.submit(request, now, read, mode)
        path = self._path_caps.get((request.incident_id, request.target))
        if request.kind == ActionKind.POWER_CAP and result.status == "applied" and path is not None:
            cap_w = result.request.value if result.request.value is not None else path.last_w
            self._note_cap(request.incident_id, cap_w, path.ceiling_w)
        retry_at_s = result.extra.get("retry_at_s")
        if result.status == "refused" and retry_at_s is not None and request.incident_id >= 0:
            # The budget was spent (by an earlier action or the cooling optimizer): try again once it frees,
            # unless the incident closes first.
            self._delayed.append((max(retry_at_s, now), request, until_closed, mode))
        if until_closed and result.status == "applied":
            self._held.setdefault(request.incident_id, []).append(result)
        elif until_closed and result.status == "pending":
            self._pending_held[result.action_id] = request.incident_id
        return result

    def _left_already(self, request: ActionRequest) -> str | None:
        """Why a requeue that would move its job off its incident's GPU or node is moot: the job runs on none of the
        incident's entities any more (a requeue for another incident already moved it off, or a restart did); None
        when it still runs there, for other requests and incidents, and where the adapter cannot tell. On
        `sweeps/new-user/large-hall.yaml` (seed 0) 18 GPU incidents of one row's pump fault each requeued the 1,024-GPU
        job, one every 30 s as the rate limit let them through: 5 restarts where the first had moved it off them all.
        """
        incident = self._open.get(request.incident_id)
        if request.kind != ActionKind.REQUEUE or incident is None or root_level(incident.root) not in ("gpu", "node"):
            return None
        places = (incident.root, *incident.members)  # a merged incident's members are the survivor's
        found = [self.adapter.jobs_on(entity) for entity in places]
        if all(jobs is not None and request.target not in jobs for jobs in found):
            return f"no action: {request.target} no longer runs on {places[0]} (already moved off it)"
        return None

    def _thermal_path_value(self, request: _FromThermalPath, read: Reader, now: float) -> ActionRequest:
        """The power cap ``request.target``'s own thermal path carries (:mod:`.thermal_cap`), never above its present
        limit, with the figure and its inputs in the reason; the fallback factor where the cluster cannot tell. A
        cap from the path then follows the GPU's coolant (:meth:`_follow_path_caps`), from after the rule's verify
        window. A die its GPU's own thermal control holds under its slowdown (:func:`~.thermal_cap.own_control_holds`)
        or not settled yet is read again by the follower (no cap now); a GPU whose cap already follows
        its coolant is left to it (a fallback factor on a capped GPU compounded: mixed_hall seed 2, 450 -> 315 W
        for the rest of the run).
        """
        path = self.adapter.thermal_path(request.target)
        limits = self.adapter.limits(ActionKind.POWER_CAP, request.target)
        current = self.adapter.current(ActionKind.POWER_CAP, request.target)
        watched = [state for (_, gpu), state in self._path_caps.items() if gpu == request.target]
        followed = bool(watched)
        held = None
        if path is None or limits is None:
            found: ThermalPathCap | str = f"no slowdown threshold or coolant reading for {request.target}"
        elif followed:
            capped = _differs(watched[0].last_w, watched[0].ceiling_w)
            found = (
                "its thermal-path cap already follows its coolant"
                if capped
                else "its thermal path is watched: capped once its die reaches its slowdown"
            )
        else:
            held = own_control_holds(read, request.target, path.slowdown_temp_c)
            found = held or self._path_figure(read, request.target, path, limits)
        value: float | None
        if (followed or held is not None or isinstance(found, NotSettled)) and current is not None:
            value, why = current, found if followed else f"{found}: read again in {FOLLOW_EVERY_S:g} s"
            if not followed:
                self._path_caps[(request.incident_id, request.target)] = _PathCap(
                    now, request.reason, current, current, fallback_scale=request.fallback_scale
                )
        elif isinstance(found, ThermalPathCap):
            value, why = found.cap_w, found.why()
            if current is not None and value > current:
                value, why = current, f"{why}: above the present {current:g} W limit, which stays"
            first_s = max(FOLLOW_EVERY_S, request.expect.within_s if request.expect else 0.0)
            ceiling = current if current is not None else found.limits_w[1]
            self._path_caps[(request.incident_id, request.target)] = _PathCap(
                now + first_s, request.reason, ceiling, value
            ).read(found, now)
        else:
            scale = request.fallback_scale
            value = None if current is None or scale is None else current * scale
            why = f"{found}: fell back to {scale:g} x the present limit" if scale is not None else found
        base = ActionRequest(request.kind, request.target, value, request.duration_s, incident_id=request.incident_id)
        return replace(base, reason=f"{request.reason}: {why}", expect=request.expect)

    @staticmethod
    def _path_figure(read: Reader, gpu: str, path: ThermalPath, limits: tuple[float, float]) -> ThermalPathCap | str:
        """The cap ``gpu``'s path carries at its coolant now, or why there is none (no coolant reading included)."""
        if path.coolant_temp_c is None:
            return f"no coolant reading for {gpu}"
        return thermal_path_cap(read, gpu, path.coolant_temp_c, path.slowdown_temp_c, limits)

    def _follow_path_caps(self, now: float, read: Reader) -> list[ActionResult]:
        """Every :data:`~.thermal_cap.FOLLOW_EVERY_S`, each thermal-path cap is read again off its GPU (under the cap
        its readings still give its own R) at the coolant it sees now, and moved where that differs by more than
        the reading's resolution in die temperature; never above the limit it had before the first cap. The ``R``
        is the mean of the path's settled readings (:meth:`_PathCap.path_cap`), so a die still heating or cooling
        (no new reading) follows too; with none yet, the cap is left as it is. It follows after its incident closes
        too (the cap took the incident's evidence away, not the fault), until the cap is back at its limit before
        (a repaired path) or someone else changes the setting. On mixed_hall a cap fixed at 5 min held the faulty
        H100 at 480 W while its coolant cooled by 7 C, below what its path carried, and the synchronous job with it.
        A die that bursty work keeps moving is read over the longer window (:data:`~.thermal_cap.BURSTY_WINDOW_S`)
        only until its path has a first ``R``: then it follows with that, as a training GPU's moving die always did
        (reading a training GPU's iterations over it too moved mixed_hall seed 0's cap later, -0.5 % `pretrain`).
        A GPU not capped yet is capped only once its die reaches its slowdown threshold: till then its own thermal
        control holds it, at a faster pace than a cap would.
        """
        out: list[ActionResult] = []
        for (iid, gpu), state in list(self._path_caps.items()):
            current = self.adapter.current(ActionKind.POWER_CAP, gpu)
            if current is None or _differs(current, state.last_w):
                del self._path_caps[(iid, gpu)]  # not the loop's setting any more
                continue
            path = self.adapter.thermal_path(gpu)
            limits = self.adapter.limits(ActionKind.POWER_CAP, gpu)
            if now < state.due_s or path is None or limits is None:
                continue
            state = replace(state, due_s=now + FOLLOW_EVERY_S)
            found: ThermalPathCap | str = f"no coolant reading for {gpu}"
            if path.coolant_temp_c is not None:
                state, found = _read_path(state, read, gpu, path.slowdown_temp_c, path.coolant_temp_c, limits, now)
            self._path_caps[(iid, gpu)] = state
            capped = _differs(state.last_w, state.ceiling_w)
            if not capped and own_control_holds(read, gpu, path.slowdown_temp_c):
                continue
            if isinstance(found, ThermalPathCap):
                value = followed_cap_w(found, current, state.ceiling_w)
                why = f"follows its coolant: {found.why()}; at most {state.ceiling_w:g} W, its limit before the cap"
            elif path.coolant_temp_c is None and not capped and state.fallback_scale is not None:
                value = current * state.fallback_scale
                why = f"its die reached its {path.slowdown_temp_c:g} C slowdown: {found}: fell back to"
                why += f" {state.fallback_scale:g} x the present limit"
            else:
                continue
            if value is None:
                continue
            why = f"{state.reason}: {why}"
            result = self.submit(ActionRequest(ActionKind.POWER_CAP, gpu, value, 0.0, why, iid), now, read)
            out.append(result)
            if result.status == "applied" and result.request.value is not None:
                self._path_caps[(iid, gpu)] = replace(state, last_w=result.request.value)
                self._note_cap(iid, result.request.value, state.ceiling_w)
        return out

    def _rule_reason(self, rule: Rule, incident: Incident, note: str = "") -> str:
        """Why ``rule``'s actions for ``incident`` are asked for: the rule, the incident, its restart choice, ``note``
        (an audit line even for an action whose target cannot be resolved).
        """
        reason = f"{rule.name} on incident {incident.incident_id} ({incident.event_class} at {incident.root})"
        if rule.restart is not None:
            reason += f": {self._restart(incident).why}"
        # What a detection found beyond its class (a co-tenant's GPU, processes, slowdown), for the person reading it.
        details = dict.fromkeys(d.detail for d in incident.evidence if d.detail)
        reason += "".join(f": {d}" for d in details)
        return f"{reason}: {note}" if note else reason

    def _requests(
        self,
        rule: Rule,
        template: ActionTemplate,
        incident: Incident,
        note: str = "",
        supply: dict[str, float] | None = None,
    ) -> list[ActionRequest]:
        expect = None
        if rule.expect is not None:
            e = rule.expect
            expect = Expectation(e.field, e.direction, e.within_s, e.min_change, e.aggregate, e.relative_to)
        reason = self._rule_reason(rule, incident, note)
        requests: list[ActionRequest] = []
        for target in self.adapter.resolve(template.target, incident):
            value: float | None = template.value
            need = ""
            if template.value_from == "thermal_path":  # read off the GPU when submitted (_thermal_path_value)
                expects = expect if template.kind in SETTING_KINDS else None
                later = _FromThermalPath(template.kind, target, None, template.duration_s, reason, incident.incident_id)
                requests.append(replace(later, expect=expects, fallback_scale=template.scale))
                continue
            if template.value_from == "supply_limit":
                value = self.adapter.supply_limit_w(target)  # None: the guard refuses an unknown value
            elif template.value_from == "supply_need":
                planned = supply if supply is not None else self._planned_setpoints(rule, incident)
                value, need = self._water_for(template, target, planned)
            elif template.change is not None or template.scale is not None:
                current = self.adapter.current(template.kind, target)
                if current is None:
                    value = None  # the guard refuses a relative change of an unknown setting
                else:
                    value = (
                        current + template.change if template.change is not None else current * (template.scale or 1)
                    )
            requests.append(
                ActionRequest(
                    kind=template.kind,
                    target=target,
                    value=value,
                    duration_s=template.duration_s,
                    reason=f"{reason}; {need}" if need else reason,
                    incident_id=incident.incident_id,
                    expect=expect if template.kind in SETTING_KINDS else None,
                )
            )
        return requests

    def _planned_setpoints(self, rule: Rule, incident: Incident) -> dict[str, float]:
        """CDU -> the setpoint ``rule`` would ask for ``incident`` (for its actions recorded as not taken)."""
        return {
            r.target: r.value
            for t in rule.actions
            if t.kind == ActionKind.CDU_SETPOINT
            for r in self._requests(rule, t, incident)
            if r.value is not None
        }

    def _water_for(self, template: ActionTemplate, site: str, supply: dict[str, float]) -> tuple[float | None, str]:
        """Facility water for a ``supply_need`` action and why: no colder than the rule's CDU setpoints need (their
        lowest minus the CDUs' approach, the cooling optimizer's), never warmer than now, at most ``change`` colder.
        A flat -4 C on every `cooling-degradation` firing took the water colder than its CDU could use (hot-afternoon:
        a CDU set to 34 C on 27 C water with a 3 C approach, the water to 25 C and held there for 21 min). Without a
        known approach or setpoint the step is ``change``, as before.
        """
        current = self.adapter.current(template.kind, site)
        if current is None:
            return None, ""  # the guard refuses an unknown setting
        step = current + (template.change or 0.0)  # the policy requires a negative change with supply_need
        setpoints = [v for v in supply.values() if math.isfinite(v)]
        approach = self.cooling.approach_c if self.cooling is not None else None
        if approach is None or not setpoints:
            return step, ""
        lowest = min(setpoints)
        need = lowest - approach
        why = f"supply setpoint {lowest:.1f} C needs facility water at most {need:.1f} C ({approach:.1f} C approach)"
        return min(current, max(need, step)), why

    def submit(self, request: ActionRequest, now: float, read: Reader, mode: Mode | None = None) -> ActionResult:
        """Guard, then (by ``mode``, default the responder's) record, queue or apply one request; also for
        requests no incident made (the cooling optimizer's).
        """
        mode = mode or self.mode
        if request.kind in SETTING_KINDS and request.value is None:
            return self._record(request, "refused", now, f"current {request.kind} of {request.target} unknown")
        limits = self.adapter.limits(request.kind, request.target)
        current = self.adapter.current(request.kind, request.target)
        decision = self.guards.check(request, now, limits, current)
        if not decision.allowed:
            extra = {} if decision.retry_at_s is None else {"retry_at_s": decision.retry_at_s}
            return self._record(decision.request, "refused", now, decision.refusal, guard=False, extra=extra)
        value = decision.request.value
        unchanged = value is not None and current is not None and not _differs(value, current)
        if request.kind in SETTING_KINDS and unchanged:
            detail = f"no action: {request.kind} of {request.target} is already {current:g}"
            return self._record(decision.request, "refused", now, detail, guard=False)
        if request.kind == ActionKind.DRAIN and current == 1.0:
            # Each new incident at a drained node (a straggler kept until its job ends) asked again.
            detail = f"no action: {request.target} is already drained"
            return self._record(decision.request, "refused", now, detail, guard=False)
        if mode == "observe":
            return self._record(decision.request, "recommended", now, clamped=decision.clamped)
        if mode == "approve":
            result = self._record(decision.request, "pending", now, clamped=decision.clamped)
            self._pending[result.action_id] = decision.request
            return result
        return self._execute(decision.request, now, read, current, decision.clamped)

    def _execute(
        self, request: ActionRequest, now: float, read: Reader, current: float | None, clamped: bool = False
    ) -> ActionResult:
        expect = request.expect
        # Before the move: whether its row's CDU holds its setpoint is judged at the setpoint it had.
        trend = 0.0
        if expect is not None and expect.relative_to == "trend":
            trend = _trend_per_s(read, request.target, expect.field, self.cooling)
        reply = self.adapter.apply(request)
        result = self._record(request, reply.status, now, reply.detail, current, clamped)
        if reply.status == "applied" and expect is not None:
            start = _start(read, request.target, expect, expect.aggregate, trend)
            if start is not None:
                mean = _start(read, request.target, expect, "mean", trend) if expect.aggregate == "max" else None
                ceiling = None
                if expect.relative_to == "trend" and expect.field == DCGM_FI_DEV_GPU_TEMP and self.cooling is not None:
                    ceiling = self.cooling.slowdown_c(request.target)
                watch = _Watch(result.action_id, request, expect, *start, now, current, mean, ceiling)
                self._watches.append(watch)
        return result

    # ------------------------------------------------------------------ approvals
    @property
    def pending(self) -> dict[int, ActionRequest]:
        """Actions waiting for a person (approve mode), by action id."""
        return dict(self._pending)

    def approve(self, action_id: int, now: float, read: Reader) -> ActionResult:
        """A person approved a pending action: check the guard rails again (time has passed) and apply it."""
        request = self._pending.pop(action_id)
        held_by = self._pending_held.pop(action_id, None)
        current = self.adapter.current(request.kind, request.target)
        decision = self.guards.check(request, now, self.adapter.limits(request.kind, request.target), current)
        if not decision.allowed:
            return self._record(request, "refused", now, decision.refusal, guard=False)
        result = self._execute(decision.request, now, read, current, decision.clamped)
        if held_by is not None and result.status == "applied":
            self._held.setdefault(held_by, []).append(result)
        return result

    def reject(self, action_id: int, now: float) -> ActionResult:
        """A person rejected a pending action."""
        self._pending_held.pop(action_id, None)
        return self._record(self._pending.pop(action_id), "rejected", now, "rejected by operator")

    # ------------------------------------------------------------------ verification and rollback
    def verify(self, now: float, read: Reader) -> list[ActionResult]:
        """Judge every watched action whose time has come; roll back those whose effect did not appear."""
        out: list[ActionResult] = []
        keep: list[_Watch] = []
        for w in self._watches:
            if now < w.due_ts:
                keep.append(w)
                continue
            best = w.moved(read, now)
            moved = None if best is None else best[0]
            if best is not None and best[0] >= w.expect.min_change:
                against = "the action"
                if w.expect.relative_to == "trend" and w.slope_per_s != 0:
                    against = f"its pre-action trend ({w.slope_per_s:+.3f}/s)"
                elif w.expect.relative_to == "trend":  # no steady coolant trend before it (_trend_per_s)
                    against = "the action (no steady pre-action trend)"
                detail = f"{best[1]} {w.expect.field} {best[0]:+.2f} {w.expect.direction} against {against}"
                out.append(self._record(w.request, "verified", now, detail, extra={"of_action": w.action_id}))
                continue
            why = "no effect" if moved is None else f"{w.expect.field} moved only {moved:+.2f}"
            if self._keep(w, now, read):
                # Undoing a cooling or safety move while the problem it met is still there makes it worse (a
                # rollback once cut coolant flow with the GPU 12.5 C above its trend): keep it and say so.
                detail = f"expected effect missing ({why}); kept: undoing it would cut cooling or protection while"
                detail += f" {w.expect.field} keeps getting worse"
                judged = {"of_action": float(w.action_id)}
                out.append(self._record(w.request, "failed", now, detail, guard=False, extra=judged))
                continue
            out.append(self._rollback(w, now, why))
        self._watches = keep
        return out

    def _keep(self, w: _Watch, now: float, read: Reader) -> bool:
        """A move toward safety (more coolant flow, a colder coolant, less power or clock) while its watched field
        is worse than when it was made (``trend`` expectations: than its pre-action trend would have taken it) by
        more than ``max(min_change, 1)``: the problem is growing faster than before,
        and undoing the move would add to it. A move that merely had no effect is rolled back as before.
        """
        req, prev = w.request, w.previous_value
        if req.value is None or prev is None:
            return False
        safe = SAFE_DIRECTION.get(req.kind, -1 if req.kind in _COLDER_KINDS else 0)
        if safe == 0 or (req.value - prev) * safe <= 0:
            return False
        value = read(w.expect.field, req.target, w.expect.aggregate)
        if value is None:
            return True  # blind: do not cut cooling on no evidence
        expected = w.baseline + (w.slope_per_s * (now - w.start_ts) if w.expect.relative_to == "trend" else 0.0)
        if w.ceiling_c is not None and w.expect.direction == "down":
            expected = min(expected, max(w.ceiling_c, w.baseline))
        worse = value - expected if w.expect.direction == "down" else expected - value
        return worse > max(w.expect.min_change, 1.0)

    def _restore(self, incident_id: int, now: float) -> list[ActionResult]:
        """Undo the held actions of a closed incident, newest first; a setting changed since is left alone."""
        out: list[ActionResult] = []
        for result in reversed(self._held.pop(incident_id, [])):
            req = result.request
            self._watches = [w for w in self._watches if w.action_id != result.action_id]
            why = f"incident {incident_id} closed: restore after action {result.action_id}"
            if req.kind in SETTING_KINDS:
                current = self.adapter.current(req.kind, req.target)
                if result.previous_value is None or current is None or req.value is None:
                    continue
                if _differs(current, req.value):
                    out.append(self._record(req, "superseded", now, f"{why}: setting changed since, left as is"))
                    continue
                undo = replace(req, value=result.previous_value, expect=None, reason=why)
            elif req.kind in INVERSE:
                undo = replace(req, kind=INVERSE[req.kind], value=None, expect=None, reason=why)
            else:
                continue  # a checkpoint or requeue has nothing to restore
            out.append(self._undo_step(undo, now, result.action_id))
        return out

    def _undo_step(self, undo: ActionRequest, now: float, of_action: int) -> ActionResult:
        """One guarded step of a restore (``undo.reason`` says why): refused, or applied by :meth:`_apply_undo`."""
        decision = self._guard_undo(undo, now)
        if not decision.allowed:
            extra: dict[str, float] = {"of_action": float(of_action)}
            return self._record(undo, "refused", now, f"{undo.reason}: {decision.refusal}", guard=False, extra=extra)
        return self._apply_undo(undo, decision, now, of_action)

    def _apply_undo(self, undo: ActionRequest, decision: GuardDecision, now: float, of_action: int) -> ActionResult:
        """Apply a guarded restore; one the step limit cut short goes on one step per ``min_interval_s`` (a node
        left at the first step's 450 W after its 200 W cap, for the rest of the run, read as a throttle).
        """
        step = decision.request
        reply = self.adapter.apply(step)
        status: ActionStatus = "restored" if reply.status in ("applied", "dry_run") else "failed"
        if status == "restored" and decision.clamped and undo.kind in SETTING_KINDS and step.value is not None:
            due = now + self.guards.config.min_interval_s
            self._restoring.append((due, undo, step.value, of_action))
        return self._record(step, status, now, reply.detail, clamped=decision.clamped, extra={"of_action": of_action})

    def _continue_restores(self, now: float) -> list[ActionResult]:
        """The next step of each restore the step limit cut short, unless the setting was changed since."""
        due = [r for r in self._restoring if r[0] <= now]
        self._restoring = [r for r in self._restoring if r[0] > now]
        out = []
        for _, undo, last_value, of_action in due:
            current = self.adapter.current(undo.kind, undo.target)
            if current is None or _differs(current, last_value):
                why = f"{undo.reason}: setting changed since, left as is"
                out.append(self._record(undo, "superseded", now, why, guard=False, extra={"of_action": of_action}))
                continue
            out.append(self._undo_step(undo, now, of_action))
        return out

    def _guard_undo(self, undo: ActionRequest, now: float) -> GuardDecision:
        """Restores and rollbacks pass the guard too (hardware range, step limit, finite values; issue 19: a
        restore once raised a node's cap 200 -> 700 W in one step). A clamped restore moves one step toward the
        earlier value and goes on one step per ``min_interval_s`` (:meth:`_continue_restores`) until it is there,
        unless the setting is changed meanwhile; a clamped rollback stays at its step (the safe side).
        """
        limits = self.adapter.limits(undo.kind, undo.target)
        current = self.adapter.current(undo.kind, undo.target) if undo.value is not None else None
        return self.guards.check(undo, now, limits, current, undo=True)

    def _rollback(self, w: _Watch, now: float, why: str) -> ActionResult:
        if w.request.kind in SETTING_KINDS and w.previous_value is not None:
            undo = replace(
                w.request, value=w.previous_value, expect=None, reason=f"rollback of action {w.action_id}: {why}"
            )
        elif w.request.kind in INVERSE:
            undo = replace(
                w.request,
                kind=INVERSE[w.request.kind],
                value=None,
                expect=None,
                reason=f"rollback of action {w.action_id}",
            )
        else:
            detail = f"expected effect missing ({why}) and no way to undo it"
            return self._record(w.request, "failed", now, detail, extra={"of_action": w.action_id})
        decision = self._guard_undo(undo, now)
        if not decision.allowed:
            detail = f"rollback of action {w.action_id} refused: {decision.refusal}"
            return self._record(undo, "refused", now, detail, guard=False, extra={"of_action": w.action_id})
        undo = decision.request
        reply = self.adapter.apply(undo)
        status: ActionStatus = "rolled_back" if reply.status in ("applied", "dry_run") else "failed"
        for held in self._held.values():  # nothing left to restore when its incident closes
            held[:] = [r for r in held if r.action_id != w.action_id]
        return self._record(undo, status, now, f"{why}; {reply.detail}", extra={"of_action": w.action_id})

    def _record(
        self,
        request: ActionRequest,
        status: ActionStatus,
        now: float,
        detail: str = "",
        previous: float | None = None,
        clamped: bool = False,
        guard: bool = True,
        extra: dict[str, float] | None = None,
    ) -> ActionResult:
        result = ActionResult(len(self.log), request, status, now, detail, previous, clamped, dict(extra or {}))
        self.log.append(result)
        if guard:  # only what reached a target (or its adapter) counts: a guard refusal must not back off itself
            self.guards.record(result)
        return result


def _relative(template: ActionTemplate) -> bool:
    """A step from the current setting (``change`` or ``scale``), not an absolute value."""
    return template.change is not None or (template.scale is not None and template.value_from is None)


def _differs(current: float, value: float) -> bool:
    """Whether a setting read back as ``current`` is no longer ``value`` (what the loop last set)."""
    return abs(current - value) > 1e-6 * max(1.0, abs(value))
