"""Where the twin's scheduler would put a job requeued now, and how fast it would run there against now.

A synchronous job runs at its slowest rank's pace. Requeued, it goes back to the scheduler with its own nodes
free again (drained and down nodes excluded) and lands where the placement policy picks from what the scheduler
sees right now (the same rack headroom and coolant it would see at its next step). In a hall of several GPU
models that can be slower GPUs than the job runs on now, faulty one included (mixed_hall: an H100 with a cooling
fault is still faster than the A100s the requeue gives the job).

Both paces use each GPU model's own rates (:mod:`twinloop.twin.gpu_rates`) and every GPU's straggle factor. The
present pace takes each GPU at its clock now (a faulty GPU under its cap or thermal limit); the predicted one
takes a GPU the job keeps at its clock now and a new one at the clock the job's GPUs run at now (their median, up to
``f_max``: a job at its power limit stays there on new GPUs, and the median is not moved by the one slow GPU it would
leave; a slow GPU at the power limit runs a higher clock than the median, so a kept GPU keeps its own). The new GPUs
at their full clock instead, the most a requeue could give, read a power-bound job's requeue as a third faster than
staying wherever it landed: on ``sweeps/new-user/thermal-move.yaml`` an H200 job at 0.73 of its clock was requeued
onto an H100 node for a GPU 2.5 % under the rest (pace 1.33) and ran 2.1 % slower there (−6.6 % goodput over 5
seeds). A requeue onto the job's own GPUs reads exactly 1.

A requeued job starts again only through the scheduler's admission under the facility power budget. Where that
would not let it back in now (:func:`admission_wait`), its pace after the requeue is 0: at a site held at its budget
the power it frees goes to the jobs that stay (the facility's capping lifts their caps), so it waits for as long as
the site stays there. On ``sweeps/new-user/budget-heatwave.yaml`` seed 4 a 64-GPU job requeued for a 3.9 %
straggler at 1226 s never ran again in the 25 min left (loop off it ran on with the straggler to the end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.respond.adapters.base import RequeuePace
from twinloop.twin.gpu_rates import gpu_work_rates
from twinloop.twin.jobs import Job, Phase

if TYPE_CHECKING:
    from twinloop.twin.engine import Twin


def requeue_nodes(twin: Twin, job: Job, without: NDArray[np.int64] | None = None) -> NDArray[np.int64] | None:
    """The nodes the twin's scheduler would give ``job`` if it were requeued now, ``without`` those nodes (the
    ones a rule would drain first); None if it would wait.
    """
    s = twin.scheduler
    usable = ((s.node_owner < 0) | (s.node_owner == job.index)) & ~s.node_drained & ~s.node_down
    if without is not None:
        usable[without] = False
    free = np.flatnonzero(usable)
    return s.choose(job.spec.gpus, twin.cluster_view(free, job))


def _slowest_rate(twin: Twin, job: Job, gpus: NDArray[np.int64], clock_x: NDArray[np.float64]) -> float:
    """The slowest of ``gpus``' work rates for ``job`` at relative clocks ``clock_x`` (straggle factors in)."""
    rate = gpu_work_rates(clock_x, job.profile.compute_fraction, twin.topo.gpu_kind[gpus], job.rates)
    return float((rate * twin.straggle_factors()[gpus]).min())


def _in_words(twin: Twin, gpus: NDArray[np.int64]) -> str:
    """``64 h100-sxm + 128 a100-sxm-80gb``: the GPUs per model, in the hall's order of models."""
    counts = np.bincount(twin.topo.gpu_kind[gpus], minlength=len(twin.topo.kinds))
    return " + ".join(f"{int(n)} {k.name}" for n, k in zip(counts, twin.topo.kinds, strict=True) if n)


def admission_wait(twin: Twin, job: Job) -> str | None:
    """Why the twin's scheduler would not admit ``job`` again if it were requeued now, in words; None when it would.

    Admission is held, or the site's power after the job leaves plus the job's admission estimate is over the
    admitted fraction of the budget. What leaves is at most the job's GPU power times the site's PUE now (its GPUs go
    idle, its hosts stay on: an upper bound, so a close call lets the requeue go ahead, as before), and nothing while
    the facility's power capping holds the GPUs under their maximum: the jobs that stay take the power back.
    """
    s, chain = twin.scheduler, twin.chain
    if s.admission_held:
        return "admission is held"
    capping = chain.facility_limit_w < chain.limit_max_w
    freed_w = 0.0 if capping else float(twin.physics.gpus.power_w[job.gpus].sum()) * twin.pue
    est_w = twin.admission_estimate_w(job)
    if s.admit(est_w, twin.facility_w - freed_w, chain.budget_w):
        return None
    limit_w = s.spec.admission_fraction * chain.budget_w
    held = (
        "the facility's capping holds the GPUs, so the others take what it frees"
        if capping
        else (f"less at most {freed_w / 1e3:.0f} kW it frees")
    )
    return (
        f"the site draws {twin.facility_w / 1e3:.0f} kW ({held}); with its {est_w / 1e3:.0f} kW admission estimate"
        f" that is over the {limit_w / 1e3:.0f} kW admitted ({s.spec.admission_fraction:.0%} of the"
        f" {chain.budget_w / 1e3:.0f} kW budget)"
    )


def _clocks_after(gpus: NDArray[np.int64], now_x: NDArray[np.float64], new: NDArray[np.int64]) -> NDArray[np.float64]:
    """The clock each of ``new`` would run the job at: a GPU the job keeps at its clock now (``now_x`` over ``gpus``),
    any other at the median of the job's clocks now (the median: the one slow GPU the job may leave does not move it).
    """
    x = np.full(new.size, float(np.median(now_x)))
    order = np.argsort(gpus)
    at = np.searchsorted(gpus, new, sorter=order).clip(0, gpus.size - 1)
    kept = gpus[order[at]] == new
    x[kept] = now_x[order[at[kept]]]
    return x


def requeue_pace(twin: Twin, job: Job, without: NDArray[np.int64] | None = None) -> RequeuePace | None:
    """``job``'s pace if requeued now (``without`` those nodes) over its pace now: 0 where admission would hold it
    in the queue (:func:`admission_wait`); None for a job not computing (nothing to compare) or one that would wait
    for nodes (when it would start again the twin cannot tell here).
    """
    if job.kind != "training" or job.phase != Phase.SUSTAINED or job.gpus.size == 0:
        return None
    waits = admission_wait(twin, job)
    if waits is not None:
        return RequeuePace(0.0, "", waits)
    nodes = requeue_nodes(twin, job, without)
    if nodes is None:
        return None
    topo = twin.topo
    new = np.concatenate([np.arange(topo.node_start[n], topo.node_start[n] + topo.node_gpus[n]) for n in nodes])
    new = new[: job.spec.gpus].astype(np.int64)  # the twin starts a job on its nodes' first GPUs
    ph = twin.physics
    now_x = np.minimum(ph.x_of_g(ph.gpus.g[job.gpus]).astype(np.float64), 1.0)
    present = _slowest_rate(twin, job, job.gpus, now_x)
    predicted = _slowest_rate(twin, job, new, _clocks_after(job.gpus, now_x, new))
    return RequeuePace(predicted / max(present, 1e-9), _in_words(twin, new))
