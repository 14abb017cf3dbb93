"""Site files, job sources and actuators of the live watcher."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path
from typing import ClassVar

import duckdb
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.live.actuators import DryRunFirst, JobLookup, make_actuator
from twinloop.ops.live.jobs import JobMap, expand_hostlist, k8s_jobs, load_job_file, parse_squeue_json, slurm_jobs
from twinloop.ops.live.site import load_site, place_gpus
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply, JobTiming, RequeuePace, ThermalPath

GPUS = ("s/r/k/node01/gpu0", "s/r/k/node01/gpu1", "s/r/k/node02/gpu0", "s/r/k/node03/gpu0")


def test_hostlist_expansion() -> None:
    assert expand_hostlist("node[01-03,07],gpu-a1") == ["node01", "node02", "node03", "node07", "gpu-a1"]
    assert expand_hostlist("a[1-2]b") == ["a1b", "a2b"]
    with pytest.raises(ValueError):
        expand_hostlist("node[01-")


@given(st.text(max_size=40))
def test_hostlist_never_crashes_otherwise(text: str) -> None:
    with contextlib.suppress(ValueError):
        expand_hostlist(text)


def test_squeue_json_running_jobs_only() -> None:
    doc = {"jobs": [{"job_id": 42, "job_state": ["RUNNING"], "nodes": "node[01-02]"},
                    {"job_id": 43, "job_state": "PENDING", "nodes": ""}]}  # fmt: skip
    jobs = slurm_jobs(GPUS, runner=lambda argv: json.dumps(doc))
    assert jobs.job_ids == ("42",)
    np.testing.assert_array_equal(jobs.job_index, [0, 0, 0, -1])
    with pytest.raises(InputError, match="jobs"):
        parse_squeue_json("{}")
    with pytest.raises(InputError, match="not JSON"):
        parse_squeue_json("nope")


def test_job_file_and_k8s_labels(tmp_path: Path) -> None:
    f = tmp_path / "jobs.yaml"
    f.write_text("train: [node01]\neval: [node03/gpu0]\n")
    jobs = load_job_file(f, GPUS)
    assert jobs == JobMap(("eval", "train"), jobs.job_index)
    np.testing.assert_array_equal(jobs.job_index, [1, 1, -1, 0])
    f.write_text("train: node01\n")
    with pytest.raises(InputError, match="train"):
        load_job_file(f, GPUS)
    k = k8s_jobs(GPUS, {GPUS[0]: {"pod": "p1", "namespace": "ml"}, GPUS[2]: {"pod": "p1", "namespace": "ml"}})
    assert k.job_ids == ("ml.p1",)
    np.testing.assert_array_equal(k.job_index, [0, -1, 0, -1])


def test_site_file_places_hosts_and_validates(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("site: dc1\nliquid_rows: [row1]\nhosts:\n  node01: {row: row1, rack: r1, cdu: cdu-a, pdu: p3}\n")
    labels = {GPUS[0]: {"Hostname": "node01", "gpu": "0", "modelName": "NVIDIA H200"},
              GPUS[2]: {"Hostname": "node02", "gpu": "0"}}  # fmt: skip
    topo, mapping = place_gpus([GPUS[0], GPUS[2]], labels, load_site(site))
    assert mapping[GPUS[0]] == "dc1/row1/r1/node01/gpu0" and mapping[GPUS[2]] == "dc1/row0/rack0/node02/gpu0"
    assert topo.cdu_of_rack == {"dc1/row1/r1": "cdu-a"} and topo.pdu_of_node == {"dc1/row1/r1/node01": "p3"}
    assert topo.liquid_rows == ("dc1/row1",)
    assert topo.limits.tdp_w.shape == (2,)
    site.write_text("site: dc1\nliquid_rows: [row1]\nair_rows: [row2]\n")  # the optimizer keeps row2's air supplied
    assert place_gpus([GPUS[0]], labels, load_site(site))[0].air_rows == ("dc1/row2",)
    site.write_text("site: dc1\nliquid_rows: [row1]\nair_rows: [row1]\n")
    with pytest.raises(InputError, match=r"air_rows.*row1 also in liquid_rows"):
        load_site(site)
    site.write_text("site: dc1\nhosts:\n  node01: {rack: r1, colour: blue}\n")
    with pytest.raises(InputError, match=r"hosts\.node01\.colour"):
        load_site(site)
    site.write_text("hosts: [1, 2\n")
    with pytest.raises(InputError, match="malformed YAML"):
        load_site(site)


def test_actuators_show_the_dry_run_then_act_and_report_failures() -> None:
    shown: list[str] = []
    k8s = make_actuator("k8s", shown.append)
    failing = subprocess.CompletedProcess(["kubectl"], 1, "", 'Error from server (NotFound): nodes "n9" not found')
    k8s.real.dry_run = False  # type: ignore[attr-defined]
    k8s.real._runner = lambda argv: failing  # type: ignore[attr-defined]
    reply = k8s.apply(ActionRequest(ActionKind.DRAIN, "dc/r/k/n9"))
    assert shown == ["dry run: kubectl cordon n9"]
    assert reply.status == "failed" and "NotFound" in reply.detail
    none = make_actuator("none")
    assert none.apply(ActionRequest(ActionKind.POWER_CAP, "a/b/c/d/gpu0", 300.0)).status == "dry_run"
    with pytest.raises(InputError, match="actuator"):
        make_actuator("ipmi")
    with pytest.raises(InputError, match="NVML"):
        make_actuator("nvml")  # no GPU driver on this machine


class _Answering(ActionAdapter):
    """A real adapter with an answer of its own to every question the responder asks."""

    name: ClassVar[str] = "answering"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def supply_limit_w(self, target: str) -> float | None:
        return 321.0

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        return True

    def job_timing(self, job: str) -> JobTiming | None:
        return JobTiming(checkpoint_write_s=30.0)

    def is_serving(self, job: str) -> bool | None:
        return False

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        return RequeuePace(0.5, "8 a100-sxm-80gb")

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        return ThermalPath(89.0, 31.5)

    def job_of(self, entity: str) -> str | None:
        return "dc/jobs/train"

    def jobs_on(self, entity: str) -> tuple[str, ...] | None:
        return ("dc/jobs/train",)

    def cdu_of(self, entity: str) -> str | None:
        return "dc/r/cdu7"

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        return (200.0, 700.0)

    def current(self, kind: ActionKind, target: str) -> float | None:
        return 650.0

    def _apply(self, request: ActionRequest) -> AdapterReply:
        return AdapterReply("applied", "ok")


def test_the_dry_run_wrapper_passes_every_question_to_the_real_adapter() -> None:
    # Before, checkpoint_done, job_timing, supply_limit_w, is_serving, job_of and cdu_of answered with the base
    # class's defaults: `twinloop watch --actuator slurm` could never confirm a checkpoint before a requeue (and
    # later jobs_on, added with the moot-requeue check, was not passed on either).
    real = _Answering()
    wrapped = DryRunFirst(_Answering(), real, lambda _m: None)
    questions = [n for n, f in vars(ActionAdapter).items() if callable(f) and not n.startswith("_") and n != "apply"]
    assert len(questions) >= 9
    args = {"resolve": ("job", Incident(1, EventClass.STRAGGLER, "dc/r/k/n1/g0", (), 0.0, 0.0, Severity.MINOR)),
            "checkpoint_done": ("dc/jobs/train", 0.0), "limits": (ActionKind.POWER_CAP, "g"),
            "current": (ActionKind.POWER_CAP, "g")}  # fmt: skip
    for name in questions:
        a = args.get(name, ("dc/r/k/n1",))
        assert getattr(wrapped, name)(*a) == getattr(real, name)(*a), name


def test_the_dry_run_wrapper_names_the_jobs_on_a_node_from_the_job_source() -> None:
    """With `--jobs`, which jobs run on a node (the responder's check that a requeue still moves its job off the
    incident's node) comes from the job source, as a GPU's job does."""
    jobs = JobLookup(lambda ids, _labels: JobMap.from_hosts(ids, {"42": ["node01"]}))
    jobs(("dc/r/k/node01/g0", "dc/r/k/node02/g0"), {})
    wrapped = DryRunFirst(_Answering(), _Answering(), lambda _m: None, jobs)
    assert wrapped.jobs_on("dc/r/k/node01") == ("dc/jobs/42",)
    assert wrapped.jobs_on("dc/r/k/node02") == ()


def test_k8s_requeues_a_hung_pod_named_by_the_job_source_without_heartbeats() -> None:
    """`--jobs k8s` names each GPU's pod; the k8s actuator requeues "the incident's job" by deleting that pod (its
    controller recreates it). Before, the job source reached the actuator only with `--job-heartbeats`, and a k8s
    requeue was refused as unsupported: a wedged pod stayed wedged until a person came."""
    jobs = JobLookup(k8s_jobs)
    jobs(("dc/r/k/n1/g0", "dc/r/k/n2/g0"), {"dc/r/k/n1/g0": {"pod": "vllm-7f9c-2", "namespace": "serving"}})
    shown: list[str] = []
    k8s = make_actuator("k8s", shown.append, jobs=jobs)
    hang = Incident(1, EventClass.JOB_HANG, "dc/r/k/n1/g0", (), 0.0, 0.0, Severity.MAJOR)
    (job,) = k8s.resolve("job", hang)
    assert job == "dc/jobs/serving.vllm-7f9c-2"
    ran: list[list[str]] = []

    def kubectl(argv: list[str]) -> subprocess.CompletedProcess[str]:
        ran.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "ReplicaSet" if argv[1] == "get" else "", "")

    k8s.real._runner = kubectl  # type: ignore[attr-defined]
    assert k8s.apply(ActionRequest(ActionKind.REQUEUE, job)).status == "applied"
    assert shown == ["dry run: kubectl delete pod --namespace serving vllm-7f9c-2 --wait=false"]
    assert ran[-1] == ["kubectl", "delete", "pod", "--namespace", "serving", "vllm-7f9c-2", "--wait=false"]


def test_learned_thresholds_resume_after_a_restart(tmp_path: Path) -> None:
    from twinloop.ops.live.actuators import NoActuator
    from twinloop.ops.live.cluster import LiveOptions, SourceCluster
    from twinloop.ops.live.watcher import Watcher
    from twinloop.ops.records import LiveRecords
    from twinloop.telemetry.sources.files import FileConfig, FileSource

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    LiveRecords(con).set_state("threshold_scale", {"rule:power_throttle": 1.3, "not-a-source": 2.0})
    fix = Path(__file__).resolve().parents[2] / "fixtures" / "h100" / "nvml_1hz_idle_to_caps.csv"
    cluster = SourceCluster(FileSource(FileConfig(path=str(fix))), NoActuator(), LiveOptions(cadence_s=1.0))
    w = Watcher(cluster, LiveRecords(con))
    w.start()
    assert dict(w.loop.pipeline.config.threshold_scale) == {"rule:power_throttle": 1.3}
    assert w.tuner.multiplier("rule:power_throttle") == 1.3
    (rule,) = [r for r in w.loop.pipeline.hw_rules if r.name == "power_throttle"]
    assert type(rule).__name__ == "CappedPowerThrottleRule"
    assert rule.clock_drop == pytest.approx(0.10 * 1.3)  # type: ignore[attr-defined]
    cluster.close()
