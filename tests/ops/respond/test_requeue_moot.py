"""Issue 14, on halls nobody tuned on (`sweeps/new-user/`): a requeue that would move a job off a node the job has
already left is not done. On `large-hall` (seed 0) a CDU pump fault on one row opened 18 GPU incidents at once;
the first requeue moved the 1,024-GPU job off all their drained nodes, and then the other incidents' requeues
went on firing, one every 30 s as the rate limit let them: the job was restarted 5 times for nothing. On
`same-place` (seed 0) a PSU loss and a straggler on one node requeued the same job 30 s apart.
"""

from __future__ import annotations

from twinloop.ops.events import EventClass, Impact, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import AdapterReply
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .test_decisions import CheckpointAdapter

JOB = "dc/jobs/train"


class MovingAdapter(CheckpointAdapter):
    """A job on a set of nodes; a requeue restarts it without the drained ones (as the twin's scheduler does)."""

    def __init__(self, nodes: set[str], knows: bool = True) -> None:
        super().__init__(done_at_s=0.0)
        self.nodes = set(nodes)
        self.knows = knows
        self.requeues = 0

    def job_of(self, entity: str) -> str | None:
        return JOB if "/".join(entity.split("/")[:4]) in self.nodes else None

    def jobs_on(self, entity: str) -> tuple[str, ...] | None:
        if not self.knows:
            return None
        return (JOB,) if "/".join(entity.split("/")[:4]) in self.nodes else ()

    def _apply(self, request: ActionRequest) -> AdapterReply:
        reply = super()._apply(request)
        if request.kind == ActionKind.REQUEUE:
            self.requeues += 1
            self.nodes = {n for n in self.nodes if not self.settings.get((ActionKind.DRAIN, n))}
        return reply


def _gpu_incident(iid: int, gpu: str, cls: EventClass = EventClass.THERMAL_THROTTLE) -> Incident:
    impact = Impact(gpu_hours_at_risk=10.0, n_gpus=1, job_slowdown=0.5)
    return Incident(iid, cls, gpu, (gpu,), 0.0, 0.0, Severity.MAJOR, impact)


def _run(adapter: MovingAdapter, incidents: list[Incident], until_s: float = 240.0) -> Responder:
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, int(until_s) + 1, 5):
        adapter.now = float(t)
        r.handle(incidents, float(t), lambda *a, **k: None)
    return r


NODES = {f"dc/r1/k{k}/n{n}" for k in range(1, 5) for n in range(1, 5)}
HOT = [f"dc/r1/k{k}/n1/g3" for k in range(1, 5)]  # one GPU on each of four of the job's nodes


def test_a_requeue_for_a_node_the_job_has_left_is_not_done() -> None:
    adapter = MovingAdapter(NODES)
    r = _run(adapter, [_gpu_incident(i + 1, gpu) for i, gpu in enumerate(HOT)])
    drained = sorted(a.request.target for a in r.log if a.request.kind == ActionKind.DRAIN and a.status == "applied")
    assert drained == sorted("/".join(g.split("/")[:4]) for g in HOT)  # each hot GPU's node is kept free
    assert adapter.requeues == 1  # before: 4, one every 30 s
    moot = [a for a in r.log if a.request.kind == ActionKind.REQUEUE and a.detail.startswith("no action")]
    assert len(moot) == 3
    assert all("no longer runs on" in a.detail for a in moot)
    assert all(a.status == "refused" for a in moot)


def test_a_straggler_requeue_after_a_psu_requeue_of_the_same_node_is_not_done() -> None:
    adapter = MovingAdapter(NODES)
    adapter.supply_w = 100.0  # below the GPUs' 200 W floor: the power rule moves the job at once
    psu = Incident(1, EventClass.POWER_DELIVERY_FAULT, "dc/r1/k3/n1", ("dc/r1/k3/n1",), 0.0, 0.0, Severity.MAJOR)
    straggler = _gpu_incident(2, "dc/r1/k3/n1/g6", EventClass.STRAGGLER)
    _run(adapter, [psu, straggler])
    assert adapter.requeues == 1


def test_a_requeue_goes_ahead_where_the_cluster_cannot_tell_where_the_job_runs() -> None:
    adapter = MovingAdapter(NODES, knows=False)
    _run(adapter, [_gpu_incident(i + 1, gpu) for i, gpu in enumerate(HOT)])
    assert adapter.requeues == 4  # as before: a live cluster that cannot tell keeps the cautious answer
