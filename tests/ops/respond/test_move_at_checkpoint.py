"""A node the loop capped is left as soon as the job's checkpoint is confirmed (issue 14, `default` scenario).

The PSU and GPU-cooling rules cap a node or GPU, checkpoint the job, drain the node and requeue the job once the
checkpoint is written. The requeue used to wait a fixed 30 s as well (a delay from before the checkpoint gate):
with a 20 s write the job went back to computing on the capped node for 10 s, where a node that kept 1 of its 6
PSUs tripped its power brake twice more (traced over seeds 0-4 of `default`, benchmarks/psu_response_trace.py:
2 of its 4 PSU trips and 80 power-throttled GPU-s per seed).
"""

from __future__ import annotations

from dataclasses import replace

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .test_decisions import CheckpointAdapter, _drive


def _moves(incident: Incident, done_at_s: float) -> tuple[list[tuple[float, str]], list[tuple[float, ActionKind]]]:
    """Requeues (time, status) and applied actions (time, kind), stepping the responder every 5 s."""
    adapter = CheckpointAdapter(done_at_s=done_at_s, supply_w=150.0)
    r = Responder(default_policy(), adapter, mode="auto")
    requeues = _drive(r, adapter, incident, 120)
    applied = [(x.ts, x.request.kind) for x in r.log if x.status == "applied"]
    return requeues, applied


def test_short_supplies_requeue_when_the_checkpoint_is_confirmed() -> None:
    node = Incident(1, EventClass.POWER_DELIVERY_FAULT, "dc/r1/k2/n1", ("dc/r1/k2/n1",), 0.0, 0.0, Severity.MAJOR)
    requeues, applied = _moves(node, done_at_s=20.0)
    assert requeues == [(20.0, "applied")]
    # Drain keeps new work off the node (the running job goes on), so it comes with the cap, before the requeue.
    assert applied[:3] == [(0.0, ActionKind.POWER_CAP), (0.0, ActionKind.CHECKPOINT), (0.0, ActionKind.DRAIN)]


def test_a_capped_hot_gpu_is_left_when_the_checkpoint_is_confirmed() -> None:
    gpu = "dc/r1/k2/n1/g3"
    hot = Incident(1, EventClass.COOLING_DEGRADATION, gpu, (gpu,), 0.0, 0.0, Severity.MAJOR)
    requeues, applied = _moves(hot, done_at_s=20.0)
    assert requeues == [(20.0, "applied")]
    assert (0.0, ActionKind.DRAIN) in applied


def test_an_unconfirmed_checkpoint_still_holds_the_requeue() -> None:
    node = Incident(1, EventClass.POWER_DELIVERY_FAULT, "dc/r1/k2/n1", ("dc/r1/k2/n1",), 0.0, 0.0, Severity.MAJOR)
    requeues, _ = _moves(node, done_at_s=45.0)
    assert requeues == [(45.0, "applied")]


def test_no_requeue_before_the_checkpoint_request_even_with_an_old_checkpoint() -> None:
    # A checkpoint completed before the incident is no confirmation: the gate asks for one since its request.
    node = Incident(1, EventClass.POWER_DELIVERY_FAULT, "dc/r1/k2/n1", ("dc/r1/k2/n1",), 0.0, 0.0, Severity.MAJOR)
    requeues, _ = _moves(node, done_at_s=-5.0)
    assert requeues == []  # until the 300 s timeout hands it to a person


def test_no_requeue_for_an_incident_that_closes_as_its_checkpoint_is_confirmed() -> None:
    """The PSUs came back in the same poll as the checkpoint: the node is healthy again, the job stays."""
    node = Incident(1, EventClass.POWER_DELIVERY_FAULT, "dc/r1/k2/n1", ("dc/r1/k2/n1",), 0.0, 0.0, Severity.MAJOR)
    adapter = CheckpointAdapter(done_at_s=20.0, supply_w=150.0)
    r = Responder(default_policy(), adapter, mode="auto")
    r.handle([node], 0.0, lambda *a, **k: None)
    adapter.now = 20.0
    closed = r.handle([replace(node, status="closed")], 20.0, lambda *a, **k: None)
    assert ActionKind.REQUEUE not in [x.request.kind for x in closed]
    assert (ActionKind.UNDRAIN, "restored") in [(x.request.kind, x.status) for x in closed]
