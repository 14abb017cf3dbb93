"""The ``--jobs k8s`` job source groups GPU pods by their top controller; the k8s actuator acts on those fleets.

kubectl is answered from ``tests/fixtures/k8s/gpu_workloads.json`` (synthetic answers in kubectl's ``-o json``
layout): a vLLM Deployment of two pods, a LeaderWorkerSet of two groups (SGLang: leader and worker pods), a JobSet,
a PyTorchJob, a StatefulSet annotated as training and a bare pod.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.live.actuators import JobLookup, make_actuator
from twinloop.ops.live.k8s_fleet import KubernetesJobs, OwnerRef, controller_of, parse_owner, parse_pods
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "k8s" / "gpu_workloads.json"
ANSWERS: dict[str, Any] = json.loads(FIXTURE.read_text())["answers"]

#: Each GPU (one per node, two on node01) and the pod dcgm-exporter labels it with.
PODS = {
    "dc/r/k/node01/gpu0": ("serving", "vllm-llama-7f9c6d8b5-2xkqp"),
    "dc/r/k/node01/gpu1": ("serving", "vllm-llama-7f9c6d8b5-2xkqp"),
    "dc/r/k/node02/gpu0": ("serving", "vllm-llama-7f9c6d8b5-9wzrt"),
    "dc/r/k/node03/gpu0": ("serving", "sglang-ds-0"),
    "dc/r/k/node04/gpu0": ("serving", "sglang-ds-0-1"),
    "dc/r/k/node05/gpu0": ("serving", "sglang-ds-1"),
    "dc/r/k/node06/gpu0": ("ml", "pretrain-workers-0-0-x7k2p"),
    "dc/r/k/node07/gpu0": ("ml", "pretrain-workers-0-1-m4q8d"),
    "dc/r/k/node08/gpu0": ("ml", "finetune-worker-0"),
    "dc/r/k/node09/gpu0": ("ml", "trainer-0"),
    "dc/r/k/node10/gpu0": ("default", "debug-shell"),
}
GPUS = (*PODS, "dc/r/k/node11/gpu0")  # node11's GPU holds no pod
LABELS = {g: {"pod": pod, "namespace": ns, "Hostname": g.split("/")[3]} for g, (ns, pod) in PODS.items()}


class Kubectl:
    """A fake kubectl answering ``get`` from the fixture (NotFound otherwise) and recording every command."""

    def __init__(self, answers: dict[str, Any] | None = None, deny: tuple[str, ...] = ()) -> None:
        self.answers = ANSWERS if answers is None else answers
        self.deny = deny
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        key = " ".join(argv[1:])
        if any(d in key for d in self.deny):
            return subprocess.CompletedProcess(list(argv), 1, "", 'Error from server (Forbidden): "x" is forbidden')
        if argv[1] == "get" and argv[2] == "pod":  # the adapter's owner check of one pod
            owners = [] if argv[4] == "default" else ["ReplicaSet"]
            return subprocess.CompletedProcess(list(argv), 0, " ".join(owners), "")
        if argv[1] in ("delete", "cordon", "uncordon", "exec"):
            return subprocess.CompletedProcess(list(argv), 0, "", "")
        if key in self.answers:
            return subprocess.CompletedProcess(list(argv), 0, json.dumps(self.answers[key]), "")
        return subprocess.CompletedProcess(list(argv), 1, "", f"Error from server (NotFound): {argv[3]!r} not found")


def fleet(kubectl: Kubectl | None = None) -> tuple[KubernetesJobs, Kubectl]:
    k = kubectl or Kubectl()
    jobs = KubernetesJobs(runner=k)
    jobs(GPUS, LABELS)
    return jobs, k


def test_the_pods_of_one_controller_are_one_job() -> None:
    """Before, each pod was a job of its own: a two-pod vLLM Deployment was two unrelated jobs, and the loop could
    never tell one replica from the fleet."""
    k = Kubectl()
    jobs = KubernetesJobs(runner=k)
    found = jobs(GPUS, LABELS)
    assert found.job_ids == (
        "default.debug-shell",  # a bare pod keeps its own name
        "ml.JobSet.pretrain",  # Pod -> Job -> JobSet
        "ml.PyTorchJob.finetune",
        "ml.StatefulSet.trainer",
        "serving.Deployment.vllm-llama",  # Pod -> ReplicaSet -> Deployment
        "serving.LeaderWorkerSet.sglang-ds",  # worker Pod -> StatefulSet -> leader Pod -> StatefulSet -> LWS
    )
    np.testing.assert_array_equal(found.job_index, [4, 4, 4, 5, 5, 5, 1, 1, 2, 3, 0, -1])
    assert jobs.pods_of("dc/jobs/serving.Deployment.vllm-llama") == (
        ("serving", "vllm-llama-7f9c6d8b5-2xkqp"),
        ("serving", "vllm-llama-7f9c6d8b5-9wzrt"),
    )
    assert jobs.pod_on("dc/r/k/node07/gpu0") == ("ml", "pretrain-workers-0-1-m4q8d")
    assert jobs.pods_of("dc/jobs/nope") == () and jobs.pod_on("dc/r/k/node11/gpu0") is None
    # Owners are asked once each, and remembered while a pod names them.
    asked = len(k.calls)
    jobs(GPUS, LABELS)
    assert [c[2] for c in k.calls[asked:]] == ["pods"] * 3


def test_serving_by_controller_kind_unless_the_pods_say_otherwise() -> None:
    jobs, _ = fleet()
    said = {j: jobs.is_serving(f"dc/jobs/{j}") for j in jobs._fleets}
    assert said == {
        "serving.Deployment.vllm-llama": True,
        "serving.LeaderWorkerSet.sglang-ds": True,
        "ml.JobSet.pretrain": False,
        "ml.PyTorchJob.finetune": False,
        "ml.StatefulSet.trainer": False,  # a StatefulSet serves, but its pods say `twinloop.io/workload: training`
        "default.debug-shell": None,  # unknown, as before
    }
    assert jobs.is_serving("dc/jobs/never-seen") is None


def test_a_replica_is_a_pod_or_a_leaderworkerset_group() -> None:
    jobs, _ = fleet()
    assert (
        jobs.replica_of("dc/r/k/node01/gpu0")
        == jobs.replica_of("dc/r/k/node01/gpu1")
        == "serving/vllm-llama-7f9c6d8b5-2xkqp"
    )
    assert jobs.replica_of("dc/r/k/node02/gpu0") == "serving/vllm-llama-7f9c6d8b5-9wzrt"
    # An LWS group's leader and worker are one replica (deleting either restarts the group).
    assert (
        jobs.replica_of("dc/r/k/node03/gpu0")
        == jobs.replica_of("dc/r/k/node04/gpu0")
        != jobs.replica_of("dc/r/k/node05/gpu0")
    )
    assert jobs.replica_of("dc/r/k/node06/gpu0") is None  # a JobSet's rank is no serving replica
    assert jobs.replica_of("dc/r/k/node10/gpu0") is None


def test_without_kubectl_each_pod_is_its_own_job_as_before_and_it_is_said_once() -> None:
    told: list[str] = []

    def missing(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("kubectl")

    jobs = KubernetesJobs(runner=missing, warn=told.append)
    found = jobs(GPUS, LABELS)
    jobs(GPUS, LABELS)
    assert "serving.vllm-llama-7f9c6d8b5-2xkqp" in found.job_ids and len(found.job_ids) == 10
    assert len(told) == 3 and all("--jobs k8s" in t for t in told)  # once per namespace, not per refresh
    assert jobs.is_serving("dc/jobs/serving.vllm-llama-7f9c6d8b5-2xkqp") is None


def test_an_owner_kubectl_may_not_read_ends_the_chain_there() -> None:
    # No RBAC on Deployments: the ReplicaSet is the top controller known, still one job for its pods, and serving.
    jobs, _ = fleet(Kubectl(deny=("get ReplicaSet.v1.apps",)))
    assert "serving.ReplicaSet.vllm-llama-7f9c6d8b5" in jobs._fleets
    assert len(jobs.pods_of("serving.ReplicaSet.vllm-llama-7f9c6d8b5")) == 2
    assert jobs.is_serving("serving.ReplicaSet.vllm-llama-7f9c6d8b5") is True


def test_a_cycle_of_owners_ends() -> None:
    answers = dict(ANSWERS)
    rs = "get ReplicaSet.v1.apps vllm-llama-7f9c6d8b5 --namespace serving -o json"
    loop = json.loads(json.dumps(answers[rs]))
    loop["metadata"]["ownerReferences"][0].update(kind="ReplicaSet", name="vllm-llama-7f9c6d8b5")
    answers[rs] = loop
    jobs, _ = fleet(Kubectl(answers))
    assert "serving.ReplicaSet.vllm-llama-7f9c6d8b5" in jobs._fleets


def test_owner_references_read_the_controller_or_nothing() -> None:
    first = {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    meta = {
        "ownerReferences": [first, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}]
    }
    assert controller_of(meta) == OwnerRef("apps/v1", "ReplicaSet", "rs")
    assert OwnerRef("apps/v1", "ReplicaSet", "rs").resource == "ReplicaSet.v1.apps"
    assert OwnerRef("v1", "Pod", "p").resource == "Pod"
    assert controller_of({"ownerReferences": [{"kind": "ReplicaSet"}, 7]}) is None
    assert controller_of({"ownerReferences": "ReplicaSet"}) is None
    assert parse_owner("not json") is None and parse_owner("[]") is None
    try:
        parse_pods('{"kind": "Status"}')
    except InputError as exc:
        assert "items" in str(exc)
    else:
        raise AssertionError("a document with no items must be an error")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_refs = st.lists(
    st.dictionaries(st.sampled_from(["apiVersion", "kind", "name", "controller", "uid"]), _json, max_size=5),
    max_size=3,
)
_pod = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "name": _json | st.text(min_size=1, max_size=6),
                "ownerReferences": _refs | _json,
                "annotations": _json,
                "labels": _json,
                "namespace": _json,
            },
        )
    },
)


@settings(max_examples=200)
@given(st.one_of(_json, st.lists(_pod, max_size=4).map(lambda items: {"items": items})), _refs | _json)
def test_kubectl_json_never_crashes_the_job_source(doc: Any, owners: Any) -> None:
    """Malformed or missing ownerReferences (or any JSON at all) give an InputError, None or a bare pod: never a
    crash of the watch."""
    text = json.dumps(doc)
    try:
        pods = parse_pods(text)
    except InputError:
        pods = {}
    assert all(p.owner is None or isinstance(p.owner, OwnerRef) for p in pods.values())
    owner = parse_owner(json.dumps({"metadata": {"ownerReferences": owners}}))
    assert owner is None or isinstance(owner, OwnerRef)
    answers = {"get pods --namespace serving -o json": doc}
    jobs = KubernetesJobs(runner=Kubectl(answers))
    found = jobs(GPUS[:3], LABELS)
    assert len(found.job_index) == 3 and all(j >= 0 for j in found.job_index)


def _incident(iid: int, cls: EventClass, root: str, members: tuple[str, ...]) -> Incident:
    return Incident(iid, cls, root, members, 0.0, 0.0, Severity.MAJOR)


def _actuator() -> tuple[Any, Kubectl, list[str]]:
    k = Kubectl()
    lookup = JobLookup(KubernetesJobs(runner=k))
    lookup(GPUS, LABELS)
    shown: list[str] = []
    act = make_actuator("k8s", shown.append, jobs=lookup)
    act.real._runner = k
    return act, k, shown


def test_a_hung_vllm_replica_is_restarted_alone_and_a_hung_jobset_requeued_whole() -> None:
    """The default policy live on Kubernetes. Before, `is_serving` answered None and `restart_replica` was refused
    as unsupported: a hung replica of a vLLM Deployment got the rank-hang rule, a requeue of "the job" that deleted
    only that pod (the fleet unseen), and a GPU fault of a serving fleet could requeue it."""
    act, k, shown = _actuator()
    r = Responder(default_policy(), act, mode="auto")
    node01 = ("dc/r/k/node01/gpu0", "dc/r/k/node01/gpu1")
    out = r.handle([_incident(1, EventClass.JOB_HANG, "dc/r/k/node01", node01)], 0.0, lambda *a, **kw: None)
    assert [(x.request.kind, x.request.target, x.status) for x in out] == [
        (ActionKind.RESTART_REPLICA, "dc/r/k/node01/gpu0", "applied")
    ]
    assert shown == ["dry run: kubectl delete pod --namespace serving vllm-llama-7f9c6d8b5-2xkqp --wait=false"]
    assert k.calls[-2][:3] == ["kubectl", "get", "pod"]  # a lone pod's owners are asked before it is deleted
    assert k.calls[-1] == [
        "kubectl",
        "delete",
        "pod",
        "--namespace",
        "serving",
        "vllm-llama-7f9c6d8b5-2xkqp",
        "--wait=false",
    ]
    # A JobSet's rank hung: every rank waits on it, so the whole job is requeued (all its GPU pods deleted).
    node06 = ("dc/r/k/node06/gpu0",)
    out = r.handle([_incident(2, EventClass.JOB_HANG, "dc/r/k/node06", node06)], 100.0, lambda *a, **kw: None)
    assert [(x.request.kind, x.request.target, x.status) for x in out] == [
        (ActionKind.REQUEUE, "dc/jobs/ml.JobSet.pretrain", "applied")
    ]
    assert k.calls[-1] == ["kubectl", "delete", "pod", "--namespace", "ml", "pretrain-workers-0-0-x7k2p",
                           "pretrain-workers-0-1-m4q8d", "--wait=false", "--ignore-not-found"]  # fmt: skip


def test_a_gpu_fault_of_a_serving_fleet_neither_checkpoints_nor_requeues_it() -> None:
    act, k, _ = _actuator()
    r = Responder(default_policy(), act, mode="auto")
    gpu = "dc/r/k/node02/gpu0"
    out = r.handle([_incident(1, EventClass.THERMAL_THROTTLE, gpu, (gpu,))], 0.0, lambda *a, **kw: None)
    fleet_wide = [x for x in out if x.request.kind in (ActionKind.CHECKPOINT, ActionKind.REQUEUE)]
    assert fleet_wide and all(x.status == "refused" and "serving fleet" in x.detail for x in fleet_wide)
    assert not [c for c in k.calls if c[1] in ("delete", "exec")]  # nor signalled: the responder refuses first


def test_a_bare_pod_is_never_restarted_as_a_replica() -> None:
    act, k, _ = _actuator()
    reply = act.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/node10/gpu0"))
    assert reply.status == "refused" and "no controller" in reply.detail
    assert not [c for c in k.calls if c[1] == "delete"]
    reply = act.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/node11/gpu0"))
    assert reply.status == "refused" and "no pod known" in reply.detail


def test_a_static_pod_and_a_bad_workload_annotation() -> None:
    """A static pod's mirror is "owned" by its Node: no controller recreates it, so it stays its own job. An
    annotation value other than serving|training is said once (file: the pod, field: the annotation, allowed values)
    and the controller's kind decides."""
    answers = dict(ANSWERS)
    pods = json.loads(json.dumps(answers["get pods --namespace serving -o json"]))
    pods["items"][0]["metadata"]["annotations"] = {"twinloop.io/workload": "inference"}
    answers["get pods --namespace serving -o json"] = pods
    node = {"apiVersion": "v1", "kind": "Node", "name": "node11", "controller": True}
    static = {"metadata": {"name": "etcd-node11", "namespace": "kube-system", "ownerReferences": [node]}}
    answers["get pods --namespace kube-system -o json"] = {"kind": "List", "items": [static]}
    told: list[str] = []
    jobs = KubernetesJobs(runner=Kubectl(answers), warn=told.append)
    labels = {**LABELS, "dc/r/k/node11/gpu0": {"pod": "etcd-node11", "namespace": "kube-system"}}
    for _ in range(2):
        found = jobs(GPUS, labels)
    assert "kube-system.etcd-node11" in found.job_ids
    assert jobs.is_serving("serving.Deployment.vllm-llama") is True
    assert told == [
        "--jobs k8s: pod serving/vllm-llama-7f9c6d8b5-2xkqp: annotation twinloop.io/workload='inference' ignored"
        " (allowed: serving, training); its controller's kind decides whether it serves"
    ]


def test_heartbeats_are_written_and_read_under_the_controllers_name(tmp_path: Path) -> None:
    """The job's name survives its pods' restarts: a job writes `twinloop job-event` under it, the loop reads it."""
    from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, record

    jobs, _ = fleet()
    (job,) = [j for j in jobs._fleets if "PyTorchJob" in j]
    path = record(tmp_path, job, "checkpoint-done", ts=50.0)
    assert path.name == "ml.PyTorchJob.finetune.jsonl"
    assert JobHeartbeats(tmp_path, clock=lambda: 60.0).checkpoint_done(f"dc/jobs/{job}", 40.0) is True


def test_observe_mode_sees_the_same_serving_fleets() -> None:
    """`--actuator none --jobs k8s` (observe, the default actuator) tells a serving fleet as `--actuator k8s` does:
    the loop's detection and its recorded decisions must not change with the actuator."""
    jobs, _ = fleet()
    none = make_actuator("none", jobs=JobLookup(jobs))
    assert none.is_serving("dc/jobs/serving.Deployment.vllm-llama") is True
    assert none.is_serving("dc/jobs/ml.JobSet.pretrain") is False
    assert make_actuator("none").is_serving("dc/jobs/serving.Deployment.vllm-llama") is None


def test_a_straggler_of_a_jobset_is_checkpointed_by_signal_and_requeued_once_its_heartbeat_says_so(
    tmp_path: Path,
) -> None:
    """Issue 14's "checkpoint before requeue, confirmed" on Kubernetes. Before, the k8s adapter refused every
    checkpoint: the straggler rule's forced checkpoint was refused, and its requeue waited for a save nobody asked for
    until its timeout sent it to a person."""
    k = _straggler_checkpointed_then_requeued(tmp_path, "ml.JobSet.pretrain")
    signals = [c for c in k.calls if c[1] == "exec"]
    assert signals == [
        ["kubectl", "exec", "--namespace", "ml", pod, "--", "sh", "-c", "kill -s USR1 1"]
        for pod in ("pretrain-workers-0-0-x7k2p", "pretrain-workers-0-1-m4q8d")
    ]


def test_a_jobsets_rank_0_confirms_its_checkpoint_under_its_pods_name_and_the_requeue_goes_ahead(
    tmp_path: Path,
) -> None:
    """`twinloop job-event checkpoint-done --dir DIR` with no --job in a pod records under `namespace.pod`. Before, the
    loop read only the controller's `ml.JobSet.pretrain.jsonl`: the requeue waited for a confirmation that never came
    and went to a person at its timeout."""
    _straggler_checkpointed_then_requeued(tmp_path, "ml.pretrain-workers-0-0-x7k2p")


def _straggler_checkpointed_then_requeued(tmp_path: Path, recorded_as: str) -> Kubectl:
    """A JobSet's straggler, live: SIGUSR1 to its pods at 0 s, rank 0 records its save under ``recorded_as`` at 40 s,
    the requeue goes ahead then (asserted); returns the kubectl that saw the commands.
    """
    from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, record

    now = [0.0]
    k = Kubectl()
    lookup = JobLookup(KubernetesJobs(runner=k))
    lookup(GPUS, LABELS)
    shown: list[str] = []
    act = make_actuator("k8s", shown.append, JobHeartbeats(tmp_path, clock=lambda: now[0]), lookup)
    act.real._runner = k
    r = Responder(default_policy(), act, mode="auto")
    gpu = "dc/r/k/node06/gpu0"  # a rank of the JobSet `pretrain`, two pods on node06 and node07
    incident = _incident(1, EventClass.STRAGGLER, gpu, (gpu,))
    log: list[tuple[float, ActionKind, str]] = []
    for t in range(0, 121, 5):
        now[0] = float(t)
        if t == 40:  # rank 0 records its save, after the SIGUSR1 asked at 0 s
            record(tmp_path, recorded_as, "checkpoint_done", 38.0)
        out = r.handle([incident], float(t), lambda *a, **kw: None)
        log.extend((float(t), x.request.kind, x.status) for x in out)
    assert log == [(0.0, ActionKind.CHECKPOINT, "applied"), (30.0, ActionKind.DRAIN, "applied"),
                   (40.0, ActionKind.REQUEUE, "applied")]  # fmt: skip
    signals = [c for c in k.calls if c[1] == "exec"]
    assert len(signals) == 2
    assert shown[0] == "dry run: " + "; ".join(shlex.join(s) for s in signals)
    assert k.calls.index(signals[-1]) < k.calls.index(
        ["kubectl", "delete", "pod", "--namespace", "ml", "pretrain-workers-0-0-x7k2p", "pretrain-workers-0-1-m4q8d",
         "--wait=false", "--ignore-not-found"]
    )  # fmt: skip
    requeue = next(x for x in r.log if x.request.kind == ActionKind.REQUEUE)
    assert requeue.request.reason.endswith("checkpoint of dc/jobs/ml.JobSet.pretrain confirmed")
    return k
