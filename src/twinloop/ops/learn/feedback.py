"""Feedback: detector thresholds and policy choices that adapt from outcomes and from people's labels.

* :class:`ThresholdTuner` — each alarm source (a detector or rule, per event class) has a threshold
  multiplier. Labels arrive late ("that incident was a false alarm" / "you missed one"); the tuner keeps
  exponentially-forgotten counts of true and false alarms and misses, and steps the multiplier up when the
  estimated precision falls below its target, down when misses pile up — always inside fixed bounds.
* :class:`RuleOutcomeLearner` — each policy rule's actions either showed their expected effect (``verified``)
  or were rolled back. A Beta posterior per (rule, event class) tracks the success rate; a rule whose
  posterior mean drops below ``min_success`` after ``min_outcomes`` is switched off for that class, so the
  responder stops repeating an action that does not work. Both are deterministic given their inputs.

:func:`rule_outcomes` reads the judged actions of a responder log back to their (rule, event class), and
:func:`learned_policy` is the policy without the (rule, class) pairs a learner has switched off, so the next run's
responder no longer applies them. :mod:`twinloop.lab.feedback_eval` evaluates both learners on twin runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from twinloop.ops.events import EventClass
from twinloop.ops.respond.actions import ActionResult
from twinloop.ops.respond.policy import Policy

# The reason texts the responder writes: "<rule> on incident <id> (<class> at <root>)" on a rule's request, and
# "rollback of action <id>..." on the undo of a request whose effect did not appear.
_RULE_REASON = re.compile(r"^(?P<rule>\S+) on incident -?\d+ \((?P<cls>[a-z_]+) at ")
_ROLLBACK_REASON = re.compile(r"^rollback of action (?P<id>\d+)")


@dataclass
class _Counts:
    true_alarms: float = 0.0
    false_alarms: float = 0.0
    misses: float = 0.0


@dataclass
class ThresholdTuner:
    """Threshold multipliers per alarm source, adapted from delayed labels.

    Attributes:
        target_precision: wanted share of alarms that are true.
        step: relative change of the multiplier per update (0.1 = ±10 %).
        forget: weight kept by old counts at each new label (exponential forgetting).
        min_labels: labels needed before a source's multiplier moves.
        bounds: the multiplier never leaves this range.
    """

    target_precision: float = 0.95
    step: float = 0.1
    forget: float = 0.98
    min_labels: int = 5
    bounds: tuple[float, float] = (0.5, 3.0)
    _counts: dict[str, _Counts] = field(default_factory=dict)
    _mult: dict[str, float] = field(default_factory=dict)
    _pending: dict[int, str] = field(default_factory=dict)

    def multiplier(self, source: str) -> float:
        """Current threshold multiplier of ``source`` (1.0 until labels say otherwise)."""
        return self._mult.get(source, 1.0)

    @property
    def multipliers(self) -> dict[str, float]:
        """Every source whose multiplier has been updated, with its multiplier."""
        return dict(self._mult)

    @property
    def n_pending(self) -> int:
        """Alarms still waiting for their label."""
        return len(self._pending)

    def alarm(self, alarm_id: int, source: str) -> None:
        """Remember that ``source`` raised alarm ``alarm_id``, so a later label can find its source."""
        self._pending[alarm_id] = source

    def label(self, alarm_id: int, true_alarm: bool) -> float:
        """A person (or ground truth) labels an earlier alarm; returns the source's new multiplier."""
        source = self._pending.pop(alarm_id)
        c = self._decay(source)
        if true_alarm:
            c.true_alarms += 1
        else:
            c.false_alarms += 1
        return self._update(source)

    def missed(self, source: str) -> float:
        """A fault ``source`` should have caught went undetected; returns the new multiplier."""
        self._decay(source).misses += 1
        return self._update(source)

    def _decay(self, source: str) -> _Counts:
        c = self._counts.setdefault(source, _Counts())
        c.true_alarms *= self.forget
        c.false_alarms *= self.forget
        c.misses *= self.forget
        return c

    def _update(self, source: str) -> float:
        c = self._counts[source]
        labels = c.true_alarms + c.false_alarms + c.misses
        m = self.multiplier(source)
        if labels >= self.min_labels * self.forget**self.min_labels:
            alarms = c.true_alarms + c.false_alarms
            precision = c.true_alarms / alarms if alarms else 1.0
            recall = c.true_alarms / (c.true_alarms + c.misses) if c.true_alarms + c.misses else 1.0
            if precision < self.target_precision and precision <= recall:
                m *= 1 + self.step
            elif recall < self.target_precision:
                m *= 1 - self.step
        lo, hi = self.bounds
        self._mult[source] = min(max(m, lo), hi)
        return self._mult[source]


@dataclass
class RuleOutcomeLearner:
    """Success rate of each policy rule per event class, from verified vs rolled-back actions.

    Attributes:
        min_outcomes: outcomes needed before a rule can be switched off.
        min_success: posterior-mean success rate below which the rule is switched off.
        prior: Beta(prior, prior) prior on the success rate.
    """

    min_outcomes: int = 3
    min_success: float = 0.3
    prior: float = 1.0
    _wins: dict[tuple[str, str], float] = field(default_factory=dict)
    _losses: dict[tuple[str, str], float] = field(default_factory=dict)

    def observe(self, rule: str, event_class: str, result: ActionResult) -> None:
        """Fold in one judged action (``verified`` counts as a success, ``rolled_back`` as a failure)."""
        self.observe_status(rule, event_class, result.status)

    def observe_status(self, rule: str, event_class: str, status: str) -> None:
        """:meth:`observe` from the status alone (other statuses are not a judgment and are ignored)."""
        key = (rule, event_class)
        if status == "verified":
            self._wins[key] = self._wins.get(key, 0.0) + 1
        elif status == "rolled_back":
            self._losses[key] = self._losses.get(key, 0.0) + 1

    def success_rate(self, rule: str, event_class: str) -> float:
        """Posterior mean success rate."""
        w = self._wins.get((rule, event_class), 0.0)
        lo = self._losses.get((rule, event_class), 0.0)
        return (w + self.prior) / (w + lo + 2 * self.prior)

    def observe_log(self, actions: Iterable[ActionResult]) -> int:
        """Fold in every judged action of a responder log (see :func:`rule_outcomes`); returns how many."""
        outcomes = rule_outcomes(actions)
        for rule, event_class, result in outcomes:
            self.observe(rule, event_class, result)
        return len(outcomes)

    @property
    def judged(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(rule, event class) → (verified, rolled back) counts so far."""
        keys = sorted(self._wins.keys() | self._losses.keys())
        return {k: (self._wins.get(k, 0.0), self._losses.get(k, 0.0)) for k in keys}

    def allowed(self, rule: str, event_class: str) -> bool:
        """False once a rule has shown, often enough, that it does not help with this class."""
        n = self._wins.get((rule, event_class), 0.0) + self._losses.get((rule, event_class), 0.0)
        return n < self.min_outcomes or self.success_rate(rule, event_class) >= self.min_success


def rule_outcomes(actions: Iterable[ActionResult]) -> list[tuple[str, str, ActionResult]]:
    """(rule, event class, result) for every ``verified`` or ``rolled_back`` action of a responder log.

    A rollback names the action it undoes; the rule and class come from that action's request. Actions no
    policy rule made (the cooling optimizer's) are left out.
    """
    log = list(actions)
    by_id = {a.action_id: a for a in log}
    out: list[tuple[str, str, ActionResult]] = []
    for a in log:
        if a.status not in ("verified", "rolled_back"):
            continue
        reason = a.request.reason
        undo = _ROLLBACK_REASON.match(reason)
        if undo is not None:
            original = by_id.get(int(undo.group("id")))
            reason = original.request.reason if original is not None else ""
        m = _RULE_REASON.match(reason)
        if m is not None:
            out.append((m.group("rule"), m.group("cls"), a))
    return out


def learned_policy(policy: Policy, learner: RuleOutcomeLearner) -> Policy:
    """``policy`` without the (rule, event class) pairs ``learner`` has switched off.

    A rule left with no class is dropped; a policy left with no rule runs in ``observe`` mode (it recommends the
    original rules and applies nothing).
    """
    rules = []
    for rule in policy.rules:
        when = tuple(c for c in rule.when if learner.allowed(rule.name, EventClass(c).value))
        if when:
            rules.append(rule if when == rule.when else rule.model_copy(update={"when": when}))
    if not rules:
        return policy.model_copy(update={"mode": "observe"})
    return policy.model_copy(update={"rules": tuple(rules)})
