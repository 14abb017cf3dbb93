"""A co-tenant explains a straggler (issue 14): a GPU of a job that runs more compute processes than the job's ranks
there is slowed by someone else's process; the incident is rooted at that GPU, names the processes and the slowdown,
and goes to a person instead of moving the job.
"""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.ops.detect.co_tenant import SOURCE
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.events import Detection, EventClass, Impact, Incident, Severity
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_GPU_COMPUTE_PROCESSES,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_RANK_STEP_TIME,
)
from twinloop.telemetry.sources.nvml_processes import ComputeProcess, encode

from ..respond.conftest import MemoryAdapter

GPUS = [f"dc/r1/k2/n1/g{i}" for i in range(8)]
NOTEBOOK = ComputeProcess(4242, 8192.0, "jupyter-kernel")


def _run(processes: bool, slow_from_s: float = 60.0, seconds: int = 150, gpus: list[str] = GPUS) -> list[Incident]:
    """Eight GPUs of one job; the rank on GPU 3 takes 40 % longer from ``slow_from_s``; with ``processes`` a second
    process runs on GPU 3 then (the count as NVML gives it), and the pipeline is told who it is."""
    p = DetectionPipeline(gpus, config=PipelineConfig(emit_info=False))
    k = gpus.index("dc/r1/k2/n1/g3")
    out: list[Incident] = []
    for t in range(seconds):
        slow = t >= slow_from_s
        rank = np.ones(len(gpus))
        rank[k] = 1.4 if slow else 1.0
        n = len(gpus)
        fields = {DCGM_FI_DEV_SM_CLOCK: np.full(n, 1980.0), DCGM_FI_DEV_POWER_MGMT_LIMIT: np.full(n, 700.0),
                  TWINLOOP_FI_RANK_STEP_TIME: rank}  # fmt: skip
        if processes:
            count = np.ones(len(gpus))
            count[k] = 2.0 if slow else 1.0
            fields[TWINLOOP_FI_GPU_COMPUTE_PROCESSES] = count
            procs = (ComputeProcess(1003, 61440.0, "python3"),) + ((NOTEBOOK,) if slow else ())
            p.compute_processes({"dc/r1/k2/n1/g3": encode(procs)})
        job_fields = {
            TWINLOOP_FI_JOB_STEP_TIME: np.array([1.4 if slow else 1.0]),
            TWINLOOP_FI_JOB_PROGRESS: np.array([t]),
        }
        out += p.step(float(t), fields, np.zeros(len(gpus), dtype=np.int64), ["train"], job_fields)
    return out


def _opened(updates: list[Incident]) -> dict[int, Incident]:
    return {u.incident_id: u for u in updates if u.status == "open"}


def test_a_straggler_with_a_foreign_process_on_its_gpu_is_the_co_tenant_rooted_at_the_gpu() -> None:
    (inc,) = _opened(_run(processes=True)).values()
    assert inc.event_class is EventClass.STRAGGLER and inc.root == "dc/r1/k2/n1/g3"
    assert {d.source for d in inc.evidence} == {SOURCE}
    detail = inc.evidence[0].detail
    assert "co-tenant on dc/r1/k2/n1/g3: 2 compute processes for the job's 1 rank there" in detail
    assert "pid 4242 (jupyter-kernel, 8192 MiB)" in detail and "%" in detail


def test_the_same_slowdown_without_a_foreign_process_is_a_straggler_as_before() -> None:
    incidents = _opened(_run(processes=False)).values()
    assert {i.root for i in incidents} == {"dc/r1/k2/n1/g3", "dc/jobs/train"}
    assert SOURCE not in {d.source for i in incidents for d in i.evidence}


def test_the_explanation_does_not_depend_on_the_order_of_the_gpus() -> None:
    shuffled = [GPUS[i] for i in (5, 3, 0, 7, 1, 6, 2, 4)]
    (inc,) = _opened(_run(processes=True, gpus=shuffled)).values()
    assert inc.root == "dc/r1/k2/n1/g3" and {d.source for d in inc.evidence} == {SOURCE}


def _incident(source: str, detail: str = "") -> Incident:
    root = "dc/r1/k2/n1/g3"
    det = Detection(10.0, root, source, 9.0, "anomaly", EventClass.STRAGGLER, "k", detail)
    impact = Impact(gpu_hours_at_risk=8.0, n_gpus=1, job_slowdown=0.3)
    return Incident(1, EventClass.STRAGGLER, root, (root,), 10.0, 10.0, Severity.MINOR, impact, (det,), 1)


def test_a_co_tenant_is_priced_as_a_straggler_and_every_action_names_its_processes() -> None:
    # Moving the job off the co-tenant's GPU pays as it does off a straggler (benchmarks/decisions_co_tenant.py); what
    # differs is what a person reads: the GPU, the processes on it and the slowdown, in every action's reason.
    adapter = MemoryAdapter()
    why = "co-tenant on dc/r1/k2/n1/g3: 2 compute processes ...: pid 4242 (jupyter-kernel, 8192 MiB); +40 %"
    r = Responder(default_policy(), adapter, mode="auto")
    out = [a for t in range(0, 200, 5) for a in r.handle([_incident(SOURCE, why)], float(t), lambda *a, **k: None)]
    assert {str(a.request.kind) for a in out} >= {"drain", "requeue"}
    assert all(why in a.request.reason for a in out)


def test_a_straggler_without_the_cause_is_still_moved() -> None:
    adapter = MemoryAdapter()
    r = Responder(default_policy(), adapter, mode="auto")
    out = [
        a
        for t in range(0, 200, 5)
        for a in r.handle([_incident("rule:rank_straggler")], float(t), lambda *a, **k: None)
    ]
    assert {str(a.request.kind) for a in out} >= {"drain", "requeue"}
    assert not any("co-tenant" in a.request.reason for a in out)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_the_jobs_own_process_count_is_checked(bad: object) -> None:
    from twinloop.errors import InputError

    with pytest.raises(InputError, match=r"own_processes_per_gpu: .* \(allowed: an integer >= 1\)"):
        DetectionPipeline(GPUS, config=PipelineConfig(own_processes_per_gpu=bad))  # type: ignore[arg-type]
