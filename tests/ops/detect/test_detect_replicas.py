"""A serving fleet's slow replica is found and named (issue 14); a healthy fleet's load spread is no straggler."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import JOB_LOSS, JOB_TOKENS, POWER_LIMIT, RANK_STEP_TIME, SM_CLOCK, TENSOR
from twinloop.ops.events import EventClass
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_UTIL as UTIL
from twinloop.twin.jobs import DECODE_STEP_FULL_S, DECODE_WEIGHT_SHARE
from twinloop.twin.trace import resolve_trace_path, serving_load

REPLICAS, TP = 8, 4  # two TP-4 replicas per node, four nodes
ENTS = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in range(1, 5) for g in range(8))
N = len(ENTS)
# Each replica's decode load from the packaged Azure trace, as the twin routes it (round-robin over the replicas).
LOAD = serving_load(resolve_trace_path("package:azure_conv_sample.csv", ""), REPLICAS, 8.0)
Slow = Callable[[float, np.ndarray], None]


def _steps(t: float) -> np.ndarray:
    """Each rank's decode step at its replica's load this second, s (a healthy fleet)."""
    load = np.clip(LOAD.decode_tokens[int(t) % LOAD.seconds] / 3000.0, 0.0, 1.0)
    step = DECODE_STEP_FULL_S * (DECODE_WEIGHT_SHARE + (1.0 - DECODE_WEIGHT_SHARE) * load)
    return np.repeat(step, TP).astype(np.float64)


def _straggler_roots(slow: Slow | None = None, fleet: bool = True, cap_node: str | None = None) -> set[str]:
    """Roots of the straggler incidents over 15 min of the fleet's (or, ``fleet`` False, a training job's) steps."""
    rng = np.random.default_rng(3)
    roots: set[str] = set()
    pipe = DetectionPipeline(ENTS, config=PipelineConfig(emit_info=False))
    pipe.replica_job("chat", replicas=fleet)
    for t in range(900):
        step = _steps(float(t))
        limit = np.full(N, 700.0)
        if slow is not None:
            slow(float(t), step)
        if cap_node is not None and t == 300:
            pipe.loop_setting(cap_node, True)
        fields = {RANK_STEP_TIME: step, SM_CLOCK: 1980.0 * (1.0 + 0.002 * rng.standard_normal(N)), POWER_LIMIT: limit}
        for u in pipe.step(float(t), fields, np.zeros(N, dtype=np.int64), ["chat"]):
            if u.event_class == EventClass.STRAGGLER and u.status == "open":
                roots.add(u.root)
    return roots


def _gpu_at_07(t: float, step: np.ndarray) -> None:
    if t >= 300:
        step[11] /= 0.7  # node 2, GPU 3: replica 2's fourth rank


def test_a_healthy_fleets_replicas_are_no_stragglers() -> None:
    # Their decode steps differ with their loads (the trace's requests, second by second): no alarm.
    assert _straggler_roots() == set()


def test_a_slow_gpu_in_a_serving_replica_is_named() -> None:
    # Before: a serving fleet's GPUs were never judged as stragglers (recall 0.00 on the serving-fleet hall).
    assert _straggler_roots(_gpu_at_07) == {"dc/r01/k01/n02/g3"}


def test_a_replica_slow_on_every_rank_is_rooted_at_its_node() -> None:
    def node_slow(t: float, step: np.ndarray) -> None:
        if t >= 300:
            step[24:32] *= 1.5  # node 4's two replicas: its host, not one GPU

    assert _straggler_roots(node_slow) == {"dc/r01/k01/n04"}


def test_a_replica_the_loop_capped_is_no_straggler() -> None:
    # The loop capped node 2 at t = 300 s (and told the pipeline): its replica's slower steps are expected.
    assert _straggler_roots(_gpu_at_07, cap_node="dc/r01/k01/n02") == set()


def test_a_training_job_keeps_its_own_straggler_rules() -> None:
    # The same slow rank in a synchronous job is the rank straggler it always was (the fleet rule is not asked).
    assert "dc/r01/k01/n02/g3" in _straggler_roots(_gpu_at_07, fleet=False)


def test_a_drained_replicas_incident_closes() -> None:
    # The loop drained the straggler's node at t = 500 s: its replica serves nothing and its ranks report no step.
    # Before: the rule kept firing on the last smoothed value it had, and the incident never closed.
    pipe = DetectionPipeline(ENTS, config=PipelineConfig(emit_info=False))
    pipe.replica_job("chat")
    rng = np.random.default_rng(3)
    updates = []
    for t in range(900):
        step = _steps(float(t))
        _gpu_at_07(float(t), step)
        if t >= 500:
            step[8:16] = np.nan  # node 2's two replicas out of service
        fields = {RANK_STEP_TIME: step, SM_CLOCK: 1980.0 * (1.0 + 0.002 * rng.standard_normal(N))}
        updates += pipe.step(float(t), fields, np.zeros(N, dtype=np.int64), ["chat"])
    stragglers = [u for u in updates if u.event_class == EventClass.STRAGGLER]
    assert {u.root for u in stragglers} == {"dc/r01/k01/n02/g3"}
    assert any(u.status == "closed" for u in stragglers)


def _hang_updates(hung: slice, dt_s: float = 1.0, fleet_tokens: bool = True) -> list[tuple[float, str, EventClass]]:
    """(time, root, class) of the job-hang incidents opened over 10 min of a TP-4 fleet on 4 nodes whose replica(s)
    at ``hung`` (GPU positions) spin in a stuck collective from 300 s: busy (60 % util), no tensor work, while the
    others serve (tensor 2-15 %, util 20-60 %); ``fleet_tokens`` False: the fleet as a whole serves nothing.
    """
    rng = np.random.default_rng(5)
    pipe = DetectionPipeline(ENTS, config=PipelineConfig(emit_info=False))
    pipe.replica_job("chat")
    opened = []
    for t in np.arange(0.0, 600.0, dt_s):
        tensor = rng.uniform(0.02, 0.15, N)
        util = 200.0 * 9.0 * tensor * rng.uniform(0.8, 1.0, N)  # decode: SM about 9x the tensor activity
        tokens = 5e4
        if t >= 300:
            tensor[hung], util[hung] = 0.0, 60.0
            tokens = tokens if fleet_tokens else 0.0
        fields = {TENSOR: tensor, UTIL: np.minimum(util, 100.0)}
        job = {JOB_TOKENS: np.array([tokens]), JOB_LOSS: np.array([10.0])}
        for u in pipe.step(float(t), fields, np.zeros(N, dtype=np.int64), ["chat"], job):
            if u.event_class == EventClass.JOB_HANG and u.status == "open" and u.root not in [o[1] for o in opened]:
                opened.append((float(t), u.root, u.event_class))
    return opened


def test_a_hung_replica_is_named_at_its_node_while_the_fleet_serves() -> None:
    # Replica 3 (node 2's GPUs 4-7) hangs: an incident at node 2, within the rule's 15 s (+5 s settling) at 1 s and
    # at 5 s cadence alike; never the fleet. Before: no rule saw one replica hang (the job's tokens/s stayed > 0).
    for dt_s in (1.0, 5.0):
        opened = _hang_updates(slice(12, 16), dt_s)
        assert [root for _, root, _ in opened] == ["dc/r01/k01/n02"], (dt_s, opened)
        assert 300.0 + 15.0 <= opened[0][0] <= 300.0 + 15.0 + 5.0 + dt_s, (dt_s, opened)


def test_a_whole_fleet_hang_is_the_jobs_not_a_replicas() -> None:
    # Every replica spins and the fleet serves nothing: the job's own hang rule fires (its incident at the job, the
    # fleet requeued), the replica rule does not.
    opened = _hang_updates(slice(0, N), fleet_tokens=False)
    assert [root for _, root, _ in opened] == ["dc/jobs/chat"], opened
