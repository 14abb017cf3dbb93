"""The loop runner over a cluster that is not the twin: a scripted cluster on synthetic telemetry."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tests.ops.respond.conftest import MemoryAdapter

from twinloop.lab.detector_data import Fault, SyntheticCluster, fleet_entities
from twinloop.ops.detect.rules import TEMP, GpuLimits
from twinloop.ops.events import EventClass, Incident
from twinloop.ops.learn.precool import RowHeatForecast, load_models
from twinloop.ops.ports import END, Cluster, PollResult, Sample, Topology
from twinloop.ops.respond.actions import ActionKind, ActionResult
from twinloop.ops.runner import LoopRunner, StepOutput

ENTITIES = fleet_entities(1, 2)  # 128 GPUs: dc/r00/k00..k01


class ScriptedCluster:
    """Synthetic telemetry, one sample a second for ``seconds``, with a gap (None) every ``idle_every`` polls."""

    def __init__(self, faults: tuple[Fault, ...] = (), seconds: int = 200, idle_every: int = 0) -> None:
        self.sim = SyntheticCluster(ENTITIES, faults, seed=3)
        self.seconds = seconds
        self.idle_every = idle_every
        self.t = 0
        self.polls = 0
        self._adapter = MemoryAdapter()
        self.reads: list[tuple[str, str]] = []

    @property
    def adapter(self) -> MemoryAdapter:
        return self._adapter

    def topology(self) -> Topology:
        return Topology(tuple(ENTITIES), GpuLimits.default(len(ENTITIES)), liquid_rows=("dc/r00",))

    def poll(self) -> PollResult:
        self.polls += 1
        if self.idle_every and self.polls % self.idle_every == 0:
            return None
        if self.t >= self.seconds:
            return END
        s = self.sim.sample(float(self.t))
        self.t += 1
        warn = ("gap before this sample",) if self.t == 50 else ()
        return Sample(s.ts, s.fields, s.job_index, s.job_ids, s.job_fields, warnings=warn)

    def read(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        self.reads.append((field, entity))
        return 60.0 if field == TEMP else None

    def now_s(self) -> float:
        return float(self.t)


def test_a_scripted_cluster_satisfies_the_port() -> None:
    assert isinstance(ScriptedCluster(), Cluster)


def test_construction_reads_nothing() -> None:
    cluster = ScriptedCluster()
    LoopRunner(cluster)
    assert cluster.polls == 0 and cluster.reads == []


def test_detection_only_opens_the_fault_and_acts_on_nothing() -> None:
    cluster = ScriptedCluster((Fault("xid", (5,), 100.0, None, 79.0),))
    seen: list[Incident] = []
    runner = LoopRunner(cluster, mode=None, on_incidents=lambda s, u: seen.extend(u))
    summary = runner.run()
    assert summary.stopped == "end" and summary.samples == 200 and summary.last_ts == 199.0
    assert runner.responder is None and runner.optimizer is None and runner.actions == ()
    (hw,) = [i for i in runner.incidents.values() if i.event_class == EventClass.GPU_HARDWARE_ERROR]
    assert ENTITIES[5] in (hw.root, *hw.members) and 100.0 <= hw.start_ts <= 102.0
    assert {i.incident_id for i in seen} == set(runner.incidents)
    assert runner.warnings == [(49.0, "gap before this sample")]
    assert cluster.adapter.applied == []


def test_auto_mode_acts_through_the_clusters_adapter_and_reports_each_action_once() -> None:
    cluster = ScriptedCluster((Fault("xid", (5,), 100.0, None, 79.0),), seconds=400)
    reported: list[ActionResult] = []
    runner = LoopRunner(cluster, mode="auto", on_actions=lambda s, a: reported.extend(a))
    outputs: list[StepOutput] = []
    while isinstance(sample := cluster.poll(), Sample):
        outputs.append(runner.step(sample))
    assert runner.actions and [a for o in outputs for a in o.actions] == list(runner.actions) == reported
    assert all(a.request.target == "dc" or a.request.target.startswith("dc/") for a in runner.actions)
    assert cluster.adapter.applied  # it reached the cluster
    # The cooling optimizer ran on the topology's liquid row after its warm-up, reading through the port.
    assert ("DCGM_FI_DEV_GPU_TEMP", "dc/r00") in cluster.reads
    assert any(a.request.reason.startswith("cooling optimizer") for a in runner.actions)


def test_approve_mode_waits_for_a_person() -> None:
    cluster = ScriptedCluster((Fault("xid", (5,), 100.0, None, 79.0),), seconds=300)
    runner = LoopRunner(cluster, mode="approve", optimize_cooling=False)
    runner.run()
    assert runner.pending and cluster.adapter.applied == []
    first = min(runner.pending)
    result = runner.approve(first)
    assert result.status == "applied" and cluster.adapter.applied
    rest = sorted(runner.pending)
    if rest:
        assert runner.reject(rest[0]).status == "rejected"
    more = runner.step(Sample(300.0, cluster.sim.sample(300.0).fields))
    assert result in more.actions  # the answer is reported with the next step


def test_run_stops_on_duration_max_samples_and_stop_and_waits_when_idle() -> None:
    naps: list[float] = []
    cluster = ScriptedCluster(idle_every=3)
    summary = LoopRunner(cluster, mode=None).run(duration_s=30, idle_s=0.5, sleep=naps.append)
    assert summary.stopped == "duration" and cluster.now_s() == 30 and summary.samples == 30
    assert naps and set(naps) == {0.5}
    assert LoopRunner(ScriptedCluster(), mode=None).run(max_samples=7).samples == 7
    calls = iter(range(100))
    summary = LoopRunner(ScriptedCluster(), mode=None).run(stop=lambda: next(calls) >= 4)
    assert summary.stopped == "stop" and summary.samples == 4


def test_without_rack_heat_precooling_stays_off() -> None:
    cluster = ScriptedCluster(seconds=400)
    heat = RowHeatForecast(*load_models())
    runner = LoopRunner(cluster, forecast=heat)
    runner.run()
    assert heat.online is None and heat.rise_w("dc/r00") == 0.0
    assert not any("forecast to arrive" in a.request.reason for a in runner.actions)


def _ids(updates: Sequence[Incident]) -> list[int]:
    return [u.incident_id for u in updates]


def test_the_same_samples_give_the_same_loop() -> None:
    faults = (Fault("xid", (5,), 100.0, None, 79.0), Fault("thermal", tuple(range(64)), 150.0, None, 1.0))
    runs = []
    for _ in range(2):
        runner = LoopRunner(ScriptedCluster(faults, seconds=300))
        runner.run()
        runs.append(
            (sorted(runner.incidents), [(a.ts, a.request.kind, a.request.target, a.status) for a in runner.actions])
        )
    assert runs[0] == runs[1] and runs[0][1]
    assert np.isfinite([a[0] for a in runs[0][1]]).all()


def test_duplicate_and_out_of_order_samples_reach_no_stage() -> None:
    cluster = ScriptedCluster()
    seen: list[float] = []
    runner = LoopRunner(cluster, on_sample=lambda s: seen.append(s.ts))
    samples = [cluster.poll() for _ in range(5)]
    assert all(isinstance(s, Sample) for s in samples)
    for s in (*samples, samples[2], samples[4]):
        assert isinstance(s, Sample)
        runner.step(s)
    bad = runner.step(Sample(float("nan"), samples[0].gpu))  # type: ignore[union-attr]
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0] and runner.dropped == 3 and bad.incidents == ()
    assert "dropped" in bad.warnings[-1] and len(runner.warnings) == 3


def test_the_loops_own_setpoint_moves_are_told_to_the_detectors_where_the_cluster_reports_none(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A live cluster has no control system's write log: the optimizer's relaxing steps (its GPUs at 60 C, the row is
    # relaxed from 300 s) must reach the detectors from the loop itself, with the time each was set.
    cluster = ScriptedCluster(seconds=420)
    runner = LoopRunner(cluster)
    runner.start()
    told: list[tuple[str, float, float | None]] = []
    original = runner.pipeline.commanded_setpoint

    def spy(cdu: str, setpoint_c: float, at_s: float | None = None) -> int:
        told.append((cdu, setpoint_c, at_s))
        return original(cdu, setpoint_c, at_s)

    monkeypatch.setattr(runner.pipeline, "commanded_setpoint", spy)
    runner.run()
    moves = [a for a in runner.actions if a.request.kind == ActionKind.CDU_SETPOINT and a.status == "applied"]
    assert len(moves) == 2  # at 300 and 360 s
    assert told == [(m.request.target, m.request.value, m.ts) for m in moves]
