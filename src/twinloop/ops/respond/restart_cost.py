"""When to restart a job away from a straggler: now, at its own next checkpoint, or not at all.

A synchronous job runs at its slowest rank's pace, so a straggler costs the whole job the fraction ``s`` of its
throughput for as long as it stays. Moving the job off it costs a restart. Every option is priced in seconds of
the whole job's progress over the job's remaining time ``T`` (unknown: long enough for any restart to pay back):

* **now** (forced checkpoint, drain, requeue): the checkpoint write ``W`` and the restart ``R``
  (no work is lost: the requeue waits for the checkpoint); where the job's work since its last save ``u`` is known
  and less than ``W``, the restart without a new checkpoint, ``R + u`` (redoing ``u`` costs less than writing it:
  a job restarted a minute ago, under a slow file system);
* **at its own next checkpoint** in ``t`` (drain now, requeue once the job has saved): ``R + s·min(t, T)``,
  no extra write and no lost work (offered only if that checkpoint comes before the job ends);
* **never** (drain only, so no new work lands on the node): ``s·T``, offered only when ``T`` is known, or when
  ``s`` is 0 (the job waits for a slower rank anyway: moving it would buy nothing).

A restart that would land the job on slower GPUs than it runs on now (``pace``: the adapter's
:meth:`~twinloop.ops.respond.adapters.base.ActionAdapter.requeue_pace` below 1) costs more than staying whatever
``W``, ``R`` and ``T``: after it the job runs slower than with the straggler, so ``never`` wins outright.

The same pricing answers a node whose power supplies carry less than its GPUs' maximum power (the responder caps
it at what they carry): ``s`` is then the cap's shortfall, ``1 - cap/max`` (an upper bound near the maximum, where
dynamic power grows faster than the clock), and a node that cannot carry its GPUs' lowest limit has ``s`` = 1.

The cheapest wins; a tie goes to the less disruptive option. ``R`` is common to the first two, so choosing
between them needs only ``W``, ``t`` and ``s``: ``now`` exactly when ``s·t > W``. A GPU at half speed with the next
checkpoint more than ``2·W`` away is restarted at once; a 5 % straggler waits for a checkpoint up to ``20·W``
away. A straggler that costs its job nothing (``s`` = 0) is never worth a restart, whatever the cluster can tell. What
it cannot tell otherwise (no ``W``, no ``t``, no measured slowdown) gets ``now``, the response every
straggler had before this model (see docs/results.md, "Decisions (issue 14)"). The choice is made once per
incident, with the slowdown measured when the incident opened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from twinloop.ops.respond.adapters.base import JobTiming, RequeuePace

RestartWhen = Literal["now", "at_checkpoint", "never"]

#: From the least to the most disruptive: a tie in cost goes to the earlier one.
_ORDER: tuple[RestartWhen, ...] = ("never", "at_checkpoint", "now")
_URGENCY = {when: i for i, when in enumerate(_ORDER)}


@dataclass(frozen=True)
class RestartChoice:
    """The chosen option and, for the audit trail, why (the costs compared) and what it is expected to do."""

    when: RestartWhen
    why: str

    def more_urgent(self, other: RestartChoice) -> RestartChoice:
        """The more disruptive of two choices (a straggler on several jobs: the one that needs it most)."""
        return self if _URGENCY[self.when] >= _URGENCY[other.when] else other


def choose_restart(
    slowdown: float | None,
    timing: JobTiming | None,
    pace: RequeuePace | None = None,
    cause: str = "straggler costs the job",
) -> RestartChoice:
    """Price the options for a fault that costs its job ``slowdown`` (fraction of throughput) and pick one.

    Args:
        slowdown: fraction of the job's throughput the fault costs (0: the job waits for a slower rank
            anyway); None when not measured.
        timing: the job's checkpoint write, restart, next checkpoint and remaining time, where known.
        pace: the job's pace after a requeue over its pace now, where known.
        cause: what costs the job ``slowdown``, for the audit line (``straggler costs the job``).

    Returns:
        The cheapest option, with the costs compared in its ``why``.
    """
    if pace is not None and pace.slower:
        return RestartChoice("never", f"{pace.kept_back()}; expects: no new work on the node")
    t = timing or JobTiming()
    write_s, next_s = t.checkpoint_write_s, t.next_checkpoint_in_s
    if slowdown is not None and slowdown <= 0.0 and (write_s is None or next_s is None):
        # No restart can pay for a straggler that costs nothing, whatever the (unknown) restart costs.
        return RestartChoice("never", _explain("never", 0.0, {"never": 0.0}, t, cause))
    if slowdown is None or write_s is None or next_s is None:
        given = (("slowdown", slowdown), ("checkpoint write", write_s), ("next checkpoint", next_s))
        missing = ", ".join(n for n, v in given if v is None)
        return RestartChoice("now", f"restart cost unknown ({missing} unknown): restart now")
    restart_s = t.restart_s if t.restart_s is not None else 0.0
    remaining_s = t.remaining_s if t.remaining_s is not None else math.inf
    redo_s = t.unsaved_s if t.unsaved_s is not None else math.inf
    costs: dict[RestartWhen, float] = {"now": min(write_s, redo_s) + restart_s}
    if next_s < remaining_s:
        costs["at_checkpoint"] = restart_s + slowdown * next_s
    if slowdown <= 0.0:
        costs["never"] = 0.0  # the job waits for a slower rank anyway: moving it buys nothing now
    elif t.remaining_s is not None and t.restart_s is not None:
        costs["never"] = slowdown * remaining_s
    best = min(_ORDER, key=lambda w: (costs.get(w, math.inf), _URGENCY[w]))
    return RestartChoice(best, _explain(best, slowdown, costs, t, cause))


def _explain(best: RestartWhen, slowdown: float, costs: dict[RestartWhen, float], t: JobTiming, cause: str) -> str:
    """One line for the audit trail: the slowdown, each option's cost in job-seconds, the choice and its effect."""
    names: dict[RestartWhen, str] = {
        "now": "checkpoint+restart now",
        "at_checkpoint": "restart at its own checkpoint",
        "never": "no restart",
    }
    priced = ", ".join(f"{names[w]} {costs[w]:.0f}s" for w in reversed(_ORDER) if w in costs)
    horizon = "unknown remaining time" if t.remaining_s is None else f"{t.remaining_s:.0f}s left"
    restart = "" if t.restart_s is None else f" after a ~{t.restart_s:.0f}s restart"
    if best == "now":
        effect = f"job at full speed{restart}"
    elif best == "at_checkpoint":
        effect = f"job at full speed{restart} following its checkpoint in {t.next_checkpoint_in_s or 0.0:.0f}s"
    elif slowdown <= 0.0:
        effect = "job keeps its pace (it waits for a slower rank anyway); no new work on the node"
    else:
        effect = f"job keeps {slowdown:.1%} slower until it ends; no new work on the node"
    lost = f"job-seconds lost: {priced} -> {best}"
    return f"{cause} {slowdown:.1%} ({horizon}); {lost}; expects: {effect}"
