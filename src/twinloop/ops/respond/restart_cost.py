"""When to restart a job away from a straggler: now, at its own next checkpoint, or not at all.

A synchronous job runs at its slowest rank's pace, so a straggler costs the whole job the fraction ``s`` of its
throughput for as long as it stays. Moving the job off it costs a restart. Every option is priced in seconds of
the whole job's progress over the job's remaining time ``T`` (unknown: long enough for any restart to pay back):

* **now** (forced checkpoint, drain, requeue): the checkpoint write ``W`` and the restart ``R``
  (no work is lost: the requeue waits for the checkpoint); where the job's work since its last save ``u`` is known
  and its write does not pay (:func:`write_pays`: ``u·(1 − p) < W·(1 − q)``, with the chances of a failure during
  the write and before the next save; ``u < W`` where the job's failure rate is unknown), the restart without a new
  checkpoint, ``R + u`` (redoing ``u`` costs less than writing it: a job restarted a minute ago, under a slow file
  system); otherwise ``R + W·(1 − q) + p·u``;
* **at its own next checkpoint** in ``t`` (drain now, requeue once the job has saved): ``R + s·min(t, T)``,
  no extra write and no lost work (offered only if that checkpoint comes before the job ends). ``t`` is wall time
  at the job's pace now: frameworks save at iteration counts, so a job slowed by ``s`` reaches its save
  ``1/(1 − s)`` later than at full speed, and over that wait it loses ``s·t``. The twin's adapter reports ``t`` at
  the job's pace (the straggler included); a job heartbeat's ``t`` comes from the cadence of past saves, made at
  the pace before the straggler (``JobTiming.next_checkpoint_at_full_pace``), so it is stretched by ``1/(1 − s)``
  here. That is still short by what the job lost between the straggler's onset and now (the cadence credits that
  time at full pace): the price of waiting stays a lower bound;
* **never** (drain only, so no new work lands on the node): ``s·T``, offered only when ``T`` is known, or when
  ``s`` is 0 (the job waits for a slower rank anyway: moving it would buy nothing).

A restart that would land the job on slower GPUs than it runs on now (``pace``: the adapter's
:meth:`~twinloop.ops.respond.adapters.base.ActionAdapter.requeue_pace` below 1) costs more than staying whatever
``W``, ``R`` and ``T``: after it the job runs slower than with the straggler, so ``never`` wins outright.

The same pricing answers a node whose power supplies carry less than its GPUs' maximum power (the responder caps
it at what they carry): ``s`` is then the cap's shortfall, ``1 - cap/max`` (an upper bound near the maximum, where
dynamic power grows faster than the clock), and a node that cannot carry its GPUs' lowest limit has ``s`` = 1.

And a GPU whose own thermal path fails (the ``gpu-cooling-fault`` rules): ``s`` is what that GPU costs its job now,
measured as for a straggler (its rank against the job's slowest other; 0 when the job waits for a slower rank anyway,
as a GPU its own thermal control holds under slowdown in a power-bound job does: round 5's `thermal-move` requeued
such an H200 job onto an H100 node, -6.6 % goodput, because only a slower requeue was kept back). The rule's own cap
comes later, only once the die reaches its slowdown; a job kept then is priced again with ``s`` the larger of the
measured slowdown and the cap's shortfall below the GPU's limit before it (``1 - cap/limit``, an upper bound as for a
short supply). Where the detector measures no slowdown the job is checkpointed and requeued at once, as before.

The cheapest wins; a tie goes to the less disruptive option. ``R`` is common to the first two, so choosing
between them needs only ``W``, ``t`` and ``s``: ``now`` exactly when ``s·t > W``. A GPU at half speed with the next
checkpoint more than ``2·W`` away is restarted at once; a 5 % straggler waits for a checkpoint up to ``20·W``
away. A straggler that costs its job nothing (``s`` = 0) is never worth a restart, whatever the cluster can tell. What
it cannot tell otherwise (no ``W``, no ``t``, no measured slowdown) gets ``now``, the response every
straggler had before this model (see docs/results.md, "Decisions (issue 14)"). The choice is made once per
incident, with the slowdown measured when the incident opened; only a cooling fault's job kept (``never``) is priced
again, when its GPU comes to cost it more (a larger measured slowdown, or the cap), so a move decided stands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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


#: A serving fleet keeps no training state to restart from: a bad GPU or node is answered by draining the node, which
#: takes out that node's replica while the fleet keeps serving.
SERVING_STAYS = RestartChoice("never", "a serving fleet is not restarted; expects: its replica on the node drained")


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
    if t.next_checkpoint_at_full_pace and next_s > 0.0:
        next_s = next_s / (1.0 - slowdown) if slowdown < 1.0 else math.inf  # at the job's pace now
        t = replace(t, next_checkpoint_in_s=next_s, next_checkpoint_at_full_pace=False)
    restart_s = t.restart_s if t.restart_s is not None else 0.0
    remaining_s = t.remaining_s if t.remaining_s is not None else math.inf
    costs: dict[RestartWhen, float] = {"now": _now_cost_s(t, write_s) + restart_s}
    if 0.0 < next_s < remaining_s:
        # (next_s 0: nothing unsaved, so "its own checkpoint" is now, and waiting for the one after would
        # leave the job on the faulty node a whole save interval)
        costs["at_checkpoint"] = restart_s + slowdown * next_s
    if slowdown <= 0.0:
        costs["never"] = 0.0  # the job waits for a slower rank anyway: moving it buys nothing now
    elif t.remaining_s is not None and t.restart_s is not None:
        costs["never"] = slowdown * remaining_s
    best = min(_ORDER, key=lambda w: (costs.get(w, math.inf), _URGENCY[w]))
    return RestartChoice(best, _explain(best, slowdown, costs, t, cause))


def interruption_chance(rate_per_s: float | None, span_s: float | None) -> float:
    """The chance of at least one interruption in ``span_s`` at ``rate_per_s`` (Poisson); 0 when either is unknown."""
    if rate_per_s is None or span_s is None or rate_per_s <= 0.0 or span_s <= 0.0:
        return 0.0
    return 1.0 - math.exp(-rate_per_s * span_s)


def write_pays(timing: JobTiming, write_fails: float = 0.0) -> tuple[bool, str] | None:
    """Whether a forced checkpoint before a requeue is worth its write, with the costs compared; None when the job's
    unsaved work ``u`` or write ``W`` is unknown (then it is written, as before).

    In job-seconds lost against no fault, for a job with ``u`` s of work since its last save:

    * **skip** (requeue at once): the restart redoes ``u``;
    * **write** (then requeue): the write stops the job ``W``; with chance ``p`` the job is interrupted before the
      write completes, and ``u`` is lost as well (the time spent writing bounded by ``W``).

    A later failure, with chance ``q`` before the job's next save after the restart, throws away the work since its
    restart in either case; the job that wrote restarted ``W`` later, so it loses ``W`` less. So
    ``E[skip] = u + q·x`` and ``E[write] = W + p·u + q·(x − W)`` (``x`` the work at risk, the same for both), and::

        write  exactly when  u·(1 − p) >= W·(1 − q)     (a tie writes)

    ``p = q = 0`` gives the old rule ``u ≥ W``; a write that cannot complete (``p`` = 1) never pays; a job sure to
    fail before its next save (``q`` = 1) writes whatever it has. ``q`` is the chance of an interruption over the
    job's checkpoint interval at its failure rate (:attr:`JobTiming.interruptions_per_s`, e.g. job heartbeats'
    restarts nobody asked for), ``p`` over the write at that rate, raised to ``write_fails`` where the caller knows
    the fault itself threatens the write. Unknown rates count as 0. At a realistic rate the correction is small (the
    planner's Llama-3-calibrated rate, ``plan.failures.job_rate_per_h``, gives a 256-GPU job an interruption every
    ~33 h: ``q`` ≈ 0.5 % over a 10-min interval); a job that keeps failing (one every 20 min: ``q`` = 0.39 over
    10 min, ``p`` = 0.07 over a 90 s write) writes from ``u`` = 0.65·``W`` on.
    """
    u, w = timing.unsaved_s, timing.checkpoint_write_s
    if u is None or w is None:
        return None
    p, q = _chances(timing, write_fails)
    pays = u * (1.0 - p) >= w * (1.0 - q)  # a tie writes, as `u >= W` did
    # Three significant figures: at a realistic failure rate both chances are well under 1 % (0.1 % read "0%").
    risk = ""
    if p or q:
        risk = f", chance {p * 100:.3g}% the job fails during the write and {q * 100:.3g}% before its next save"
    return pays, f"{u:.0f}s of work since its last save against its {w:.0f}s checkpoint write{risk}"


def _chances(timing: JobTiming, write_fails: float = 0.0) -> tuple[float, float]:
    """(``p``, ``q``) of :func:`write_pays`: an interruption during the write, and before the next save."""
    rate = timing.interruptions_per_s
    return max(write_fails, interruption_chance(rate, timing.checkpoint_write_s)), interruption_chance(
        rate, timing.checkpoint_interval_s
    )


def _now_cost_s(timing: JobTiming, write_s: float) -> float:
    """The expected job-seconds a restart now loses besides the restart itself: the cheaper of the write,
    ``W·(1 − q) + p·u``, and the redo, ``u`` (:func:`write_pays`); the write where ``u`` is unknown.
    """
    u = timing.unsaved_s
    if u is None:
        return write_s
    p, q = _chances(timing)
    return min(write_s * (1.0 - q) + p * u, u)


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
