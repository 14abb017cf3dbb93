import json
import pickle
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import AdapterReply, ThermalPath
from twinloop.ops.respond.adapters.commands import KubernetesAdapter, SlurmAdapter
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, record
from twinloop.ops.respond.adapters.nvml import NvmlAdapter


def test_slurm_dry_run_shows_commands_and_runs_nothing() -> None:
    calls: list[Sequence[str]] = []
    a = SlurmAdapter(runner=lambda argv: calls.append(argv))  # type: ignore[arg-type,func-returns-value]
    reply = a.apply(ActionRequest(ActionKind.DRAIN, "dc/r1/k2/n17", reason="xid 79"))
    assert reply.status == "dry_run"
    assert reply.detail == "scontrol update nodename=n17 state=drain 'reason=twinloop: xid 79'"
    assert a.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/4242")).detail == "scontrol requeue 4242"
    assert calls == []


def test_command_failure_reports_stderr() -> None:
    def runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "", "Invalid node name specified")

    reply = SlurmAdapter(dry_run=False, runner=runner).apply(ActionRequest(ActionKind.DRAIN, "dc/r1/k1/nX"))
    assert reply.status == "failed" and "Invalid node name" in reply.detail


def test_missing_binary_is_a_failure_not_a_crash() -> None:
    reply = KubernetesAdapter(dry_run=False).apply(ActionRequest(ActionKind.DRAIN, "dc/r1/k1/node-3"))
    # kubectl is not installed on test machines; where it is, the node does not exist: failed either way.
    assert reply.status == "failed"


@pytest.mark.parametrize("adapter", [SlurmAdapter(), KubernetesAdapter()])
def test_command_adapters_refuse_unsupported_kinds_and_pickle(adapter: SlurmAdapter) -> None:
    assert adapter.apply(ActionRequest(ActionKind.POWER_CAP, "dc/r1", 300.0)).status == "refused"
    assert pickle.loads(pickle.dumps(adapter)).dry_run is True


class FakeNvml:
    NVML_CLOCK_SM = 1

    def __init__(self) -> None:
        self.limits_mw = [700_000, 700_000]
        self.refuse = False

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: int) -> list[int]:
        return [200_000, 700_000]

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return self.limits_mw[h]

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return 1980

    def nvmlDeviceSetPowerManagementLimit(self, h: int, mw: int) -> None:
        if self.refuse:
            raise RuntimeError("Insufficient Permissions")
        self.limits_mw[h] = mw

    def nvmlDeviceSetGpuLockedClocks(self, h: int, lo: int, hi: int) -> None:
        pass

    def nvmlDeviceGetName(self, h: int) -> str:
        return ["NVIDIA H100 80GB HBM3", "NVIDIA Quadro K420"][h]


def test_nvml_adapter_gives_the_catalog_slowdown_of_the_model_nvml_names_and_no_coolant() -> None:
    """Before, the NVML adapter gave no thermal path: a GPU cooling fault under `watch --actuator nvml` was capped
    at the rule's fixed factor even while the GPU's own thermal control held its die under its slowdown."""
    a = NvmlAdapter(FakeNvml())
    assert a.thermal_path("site/r0/k0/n0/g0") == ThermalPath(89.0, None)  # h100-sxm in the catalog
    assert a.thermal_path("site/r0/k0/n0/g1") is None  # a model the catalog does not know
    assert a.thermal_path("site/r0/k0/n0") is None  # not a GPU


def test_nvml_adapter_speaks_watts_and_sets_milliwatts() -> None:
    nvml = FakeNvml()
    a = NvmlAdapter(nvml, dry_run=False)
    assert a.limits(ActionKind.POWER_CAP, "n1/g1") == (200.0, 700.0)
    assert a.current(ActionKind.POWER_CAP, "n1/g1") == 700.0
    assert a.apply(ActionRequest(ActionKind.POWER_CAP, "n1/g1", 450.0)).status == "applied"
    assert nvml.limits_mw == [700_000, 450_000]
    assert a.apply(ActionRequest(ActionKind.POWER_CAP, "n1", 500.0)).status == "applied"
    assert nvml.limits_mw == [500_000, 500_000]
    nvml.refuse = True
    reply = a.apply(ActionRequest(ActionKind.POWER_CAP, "n1/g0", 300.0))
    assert reply.status == "failed" and "Insufficient Permissions" in reply.detail
    assert NvmlAdapter(nvml).apply(ActionRequest(ActionKind.POWER_CAP, "n1/g0", 300.0)).status == "dry_run"


def test_nvml_adapter_caps_only_the_gpu_named_as_the_nvml_source_names_it() -> None:
    """`twinloop watch nvml --actuator nvml` names GPUs `<prefix>/gpuN` (the NVML source, a site file): the adapter
    read no index from `gpu1` and capped every GPU of the node for an action on one."""
    nvml = FakeNvml()
    a = NvmlAdapter(nvml, dry_run=False)
    assert a.apply(ActionRequest(ActionKind.POWER_CAP, "site0/row0/rack0/vm/gpu1", 450.0)).status == "applied"
    assert nvml.limits_mw == [700_000, 450_000]
    assert a.current(ActionKind.POWER_CAP, "site0/row0/rack0/vm/gpu0") == 700.0


def test_k8s_requeue_deletes_the_jobs_pod_for_its_controller_to_recreate() -> None:
    # Before: a requeue was refused as unsupported on Kubernetes, so a hung pod stayed hung until someone came.
    shown = KubernetesAdapter().apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/serving.vllm-7f9c-2"))
    assert shown.status == "dry_run"
    assert shown.detail == "kubectl delete pod --namespace serving vllm-7f9c-2 --wait=false"
    calls: list[list[str]] = []

    def runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        owners = "ReplicaSet" if argv[1] == "get" else ""
        return subprocess.CompletedProcess(list(argv), 0, owners, "")

    reply = KubernetesAdapter(dry_run=False, runner=runner).apply(
        ActionRequest(ActionKind.REQUEUE, "dc/jobs/serving.vllm-7f9c-2")
    )
    assert reply.status == "applied"
    assert calls[0][:6] == ["kubectl", "get", "pod", "--namespace", "serving", "vllm-7f9c-2"]
    assert calls[1] == ["kubectl", "delete", "pod", "--namespace", "serving", "vllm-7f9c-2", "--wait=false"]


def test_k8s_requeue_refuses_a_bare_pod_and_a_job_that_names_no_pod() -> None:
    calls: list[list[str]] = []

    def bare(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    k8s = KubernetesAdapter(dry_run=False, runner=bare)
    reply = k8s.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/default.debug-shell"))
    assert reply.status == "refused" and "no controller" in reply.detail
    assert [c[1] for c in calls] == ["get"]  # asked, never deleted
    reply = k8s.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/4242"))
    assert reply.status == "refused" and "not a pod" in reply.detail


class Fleet:
    """What `--jobs k8s` tells the Kubernetes adapter: a two-pod vLLM Deployment and a bare pod."""

    pods: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {
        "serving.Deployment.vllm": (("serving", "vllm-7f9c-a"), ("serving", "vllm-7f9c-b"))
    }
    on: ClassVar[dict[str, tuple[str, str]]] = {
        "dc/r/k/n1/g0": ("serving", "vllm-7f9c-a"),
        "dc/r/k/n1/g1": ("serving", "vllm-7f9c-a"),
        "dc/r/k/n2/g0": ("serving", "vllm-7f9c-b"),
        "dc/r/k/n3/g0": ("default", "shell"),
    }

    def pod_on(self, gpu: str) -> tuple[str, str] | None:
        return self.on.get(gpu)

    def pods_of(self, job: str) -> tuple[tuple[str, str], ...]:
        return self.pods.get(job.rsplit("/", 1)[-1], ())

    def is_serving(self, job: str) -> bool | None:
        return True if job.endswith("Deployment.vllm") else None

    def replica_of(self, gpu: str) -> str | None:
        pod = self.on.get(gpu)
        return "/".join(pod) if pod is not None and pod[0] == "serving" else None


def _kubectl(calls: list[list[str]], owners: str = "ReplicaSet"):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, owners if argv[1] == "get" else "", "")

    return run


def test_k8s_restarts_one_replica_by_deleting_the_pod_on_its_gpu() -> None:
    # Before: restart_replica was refused as unsupported on Kubernetes; a hung vLLM replica stayed hung.
    shown = KubernetesAdapter(fleet=Fleet()).apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n2/g0"))
    assert shown.status == "dry_run"
    assert shown.detail == "kubectl delete pod --namespace serving vllm-7f9c-b --wait=false"
    calls: list[list[str]] = []
    k8s = KubernetesAdapter(dry_run=False, runner=_kubectl(calls), fleet=Fleet())
    assert k8s.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n2/g0")).status == "applied"
    assert calls[0][:6] == ["kubectl", "get", "pod", "--namespace", "serving", "vllm-7f9c-b"]
    assert calls[1] == ["kubectl", "delete", "pod", "--namespace", "serving", "vllm-7f9c-b", "--wait=false"]


def test_k8s_refuses_to_restart_a_bare_pod_or_a_gpu_with_no_known_pod() -> None:
    calls: list[list[str]] = []
    k8s = KubernetesAdapter(dry_run=False, runner=_kubectl(calls, owners=""), fleet=Fleet())
    reply = k8s.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n3/g0"))
    assert reply.status == "refused" and "default/shell has no controller" in reply.detail
    assert [c[1] for c in calls] == ["get"]  # asked, never deleted
    reply = k8s.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n9/g0"))
    assert reply.status == "refused" and "no pod known" in reply.detail
    reply = KubernetesAdapter().apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n2/g0"))
    assert reply.status == "refused" and "needs --jobs k8s" in reply.detail


def test_slurm_still_refuses_a_replica_restart() -> None:
    reply = SlurmAdapter().apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc/r/k/n2/g0"))
    assert reply.status == "refused" and "does not support restart_replica" in reply.detail


def test_k8s_requeue_of_a_controllers_job_deletes_all_its_gpu_pods() -> None:
    calls: list[list[str]] = []
    k8s = KubernetesAdapter(dry_run=False, runner=_kubectl(calls), fleet=Fleet())
    reply = k8s.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/serving.Deployment.vllm"))
    assert reply.status == "applied"
    # One command; no owner check (the job was named from its pods' controller); a pod already replaced is no error.
    assert calls == [["kubectl", "delete", "pod", "--namespace", "serving", "vllm-7f9c-a", "vllm-7f9c-b",
                      "--wait=false", "--ignore-not-found"]]  # fmt: skip
    reply = k8s.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/ml.JobSet.gone"))
    assert reply.status == "refused" and "job source saw" in reply.detail
    reply = KubernetesAdapter().apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/serving.Deployment.vllm"))
    assert reply.status == "refused"  # without --jobs k8s nobody knows its pods


def test_k8s_tells_a_serving_fleet_and_its_replicas_from_the_job_source() -> None:
    from twinloop.ops.events import EventClass, Incident, Severity

    k8s = KubernetesAdapter(fleet=Fleet())
    assert k8s.is_serving("dc/jobs/serving.Deployment.vllm") is True
    assert k8s.is_serving("dc/jobs/default.shell") is None
    assert KubernetesAdapter().is_serving("dc/jobs/serving.Deployment.vllm") is None
    members = ("dc/r/k/n1/g0", "dc/r/k/n1/g1", "dc/r/k/n2/g0", "dc/r/k/n3/g0")
    incident = Incident(1, EventClass.JOB_HANG, "dc/r/k", members, 0.0, 0.0, Severity.MAJOR)
    assert k8s.resolve("replica", incident) == ["dc/r/k/n1/g0", "dc/r/k/n2/g0"]  # one GPU per serving pod


EXEC_USR1 = ["--", "sh", "-c", "kill -s USR1 1"]


def test_k8s_checkpoint_signals_pid_1_of_the_pod_of_a_pods_job() -> None:
    # Before: refused as unsupported, so every forced checkpoint on Kubernetes was refused and a requeue waiting on
    # it went to a person at its timeout.
    request = ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/ml.trainer-0")
    assert KubernetesAdapter().argv(request) == ["kubectl", "exec", "--namespace", "ml", "trainer-0", *EXEC_USR1]
    shown = KubernetesAdapter().apply(request)
    assert shown == AdapterReply("dry_run", "kubectl exec --namespace ml trainer-0 -- sh -c 'kill -s USR1 1'")
    calls: list[list[str]] = []
    # A bare pod is signalled too (nothing is deleted): no owner check, one exec.
    reply = KubernetesAdapter(dry_run=False, runner=_kubectl(calls, owners="")).apply(request)
    assert reply.status == "applied"
    assert calls == [["kubectl", "exec", "--namespace", "ml", "trainer-0", *EXEC_USR1]]


def test_k8s_checkpoint_of_a_controllers_job_signals_every_gpu_pod() -> None:
    request = ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/serving.Deployment.vllm")
    k8s = KubernetesAdapter(fleet=Fleet())
    assert k8s.checkpoint_argvs(request) == [
        ["kubectl", "exec", "--namespace", "serving", "vllm-7f9c-a", *EXEC_USR1],
        ["kubectl", "exec", "--namespace", "serving", "vllm-7f9c-b", *EXEC_USR1],
    ]
    shown = k8s.apply(request)
    assert shown.status == "dry_run" and shown.detail.count("kubectl exec") == 2 and "; " in shown.detail
    calls: list[list[str]] = []
    reply = KubernetesAdapter(dry_run=False, runner=_kubectl(calls), fleet=Fleet()).apply(request)
    assert reply.status == "applied"
    assert calls == k8s.checkpoint_argvs(request)  # one exec per pod, nothing else


def test_k8s_checkpoint_reports_each_pod_that_did_not_take_the_signal() -> None:
    calls: list[list[str]] = []

    def one_gone(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        if argv[4] == "vllm-7f9c-a":  # replaced since the job source's last look
            return subprocess.CompletedProcess(list(argv), 1, "", 'Error from server (NotFound): pods "vllm-7f9c-a"')
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    k8s = KubernetesAdapter(dry_run=False, runner=one_gone, fleet=Fleet())
    reply = k8s.apply(ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/serving.Deployment.vllm"))
    assert reply.status == "failed"
    assert reply.detail == (
        "signalled 1 of 2 pods of dc/jobs/serving.Deployment.vllm;"
        " gone since the job source's last look: serving/vllm-7f9c-a"
    )
    assert len(calls) == 2  # the other rank was still asked

    def forbidden(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "", 'pods "x" is forbidden: cannot create pods/exec')

    k8s = KubernetesAdapter(dry_run=False, runner=forbidden, fleet=Fleet())
    reply = k8s.apply(ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/serving.Deployment.vllm"))
    assert reply.status == "failed" and reply.detail.startswith("signalled 0 of 2 pods")
    assert "kubectl exec --namespace serving vllm-7f9c-b" in reply.detail and "forbidden" in reply.detail


def test_k8s_checkpoint_refuses_a_job_whose_pods_it_does_not_know() -> None:
    calls: list[list[str]] = []
    k8s = KubernetesAdapter(dry_run=False, runner=_kubectl(calls), fleet=Fleet())
    reply = k8s.apply(ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/4242"))  # a Slurm-style id names no pod
    assert reply.status == "refused" and "not a pod or a controller's job the job source saw" in reply.detail
    reply = k8s.apply(ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/ml.JobSet.gone"))
    assert reply.status == "refused" and "dc/jobs/ml.JobSet.gone" in reply.detail
    reply = KubernetesAdapter().apply(ActionRequest(ActionKind.CHECKPOINT, "dc/jobs/serving.Deployment.vllm"))
    assert reply.status == "refused" and "--jobs k8s" in reply.detail  # without the job source nobody knows its pods
    assert calls == []


class JobSetFleet(Fleet):
    """A JobSet's two ranks, each its own GPU pod."""

    pods: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {
        "ml.JobSet.pretrain": (("ml", "pretrain-workers-0-0-x7k2p"), ("ml", "pretrain-workers-0-1-m4q8d"))
    }


def test_k8s_confirms_a_controllers_checkpoint_from_what_a_pod_recorded_under_its_own_name(tmp_path: Path) -> None:
    """`twinloop job-event` with no --job in a pod records under `namespace.pod`. Before, only the controller's own
    file counted: the requeue waited for a confirmation that never came and went to a person at its timeout."""
    job = "dc/jobs/ml.JobSet.pretrain"
    beats = JobHeartbeats(tmp_path, clock=lambda: 200.0)
    k8s = KubernetesAdapter(heartbeats=beats, fleet=JobSetFleet())
    record(tmp_path, "ml.pretrain-workers-0-0-x7k2p", "checkpoint_done", 90.0)
    assert k8s.checkpoint_done(job, 100.0) is False  # rank 0's save is older than the ask
    assert KubernetesAdapter(heartbeats=beats).checkpoint_done(job, 100.0) is False  # no job source: its file only
    record(tmp_path, "ml.pretrain-workers-0-0-x7k2p", "checkpoint_start", 100.0)
    record(tmp_path, "ml.pretrain-workers-0-0-x7k2p", "checkpoint_done", 130.0)
    assert k8s.checkpoint_done(job, 100.0) is True
    assert KubernetesAdapter(heartbeats=beats).checkpoint_done(job, 100.0) is False
    assert k8s.checkpoint_done(job, 131.0) is False
    assert k8s.checkpoint_done("dc/jobs/ml.JobSet.other", 100.0) is False  # another job's pods are not its own
    # Its timing too: the pod's saves, and the loop's requeue (recorded under the job's name) to the new pod's restart.
    record(tmp_path, "ml.JobSet.pretrain", "requeued", 150.0)
    record(tmp_path, "ml.pretrain-workers-0-1-m4q8d", "restarted", 170.0)
    timing = k8s.job_timing(job)
    assert timing is not None and timing.checkpoint_write_s == 30.0 and timing.restart_s == 20.0
    assert timing.checkpoint_interval_s == 40.0
    # A directory it cannot read still answers unknown, as the base class does.
    gone = KubernetesAdapter(heartbeats=JobHeartbeats(tmp_path / "none"), fleet=JobSetFleet())
    assert gone.checkpoint_done(job, 100.0) is None and gone.job_timing(job) is None


def _kueue(calls: list[list[str]], queues: dict[str, str | None], fail_patch: str = ""):  # type: ignore[no-untyped-def]
    """A kubectl that lists Kueue ClusterQueues (name -> stopPolicy, None: unset) and patches them."""

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        if argv[1] == "get":
            items = [
                {"metadata": {"name": n}, "spec": {} if p is None else {"stopPolicy": p}} for n, p in queues.items()
            ]
            return subprocess.CompletedProcess(list(argv), 0, json.dumps({"items": items}), "")
        if argv[3] == fail_patch:
            return subprocess.CompletedProcess(list(argv), 1, "", "forbidden")
        queues[argv[3]] = json.loads(argv[-1])["spec"]["stopPolicy"]
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    return run


def test_k8s_holds_admission_on_the_kueue_cluster_queues_it_finds_open_and_releases_only_those() -> None:
    # Before: hold_admission and release_admission were refused on Kubernetes (a facility power excursion's rule
    # held nothing back); Kueue's ClusterQueue `stopPolicy: Hold` stops admitting workloads, admitted ones run on.
    shown = KubernetesAdapter().apply(ActionRequest(ActionKind.HOLD_ADMISSION, "dc"))
    assert shown.status == "dry_run" and '"stopPolicy": "Hold"' in shown.detail
    calls: list[list[str]] = []
    queues: dict[str, str | None] = {
        "train": None,
        "batch": "None",
        "frozen": "Hold",
    }  # an operator's hold stays theirs
    k8s = KubernetesAdapter(dry_run=False, runner=_kueue(calls, queues))
    reply = k8s.apply(ActionRequest(ActionKind.HOLD_ADMISSION, "dc"))
    assert reply.status == "applied" and "train" in reply.detail and "batch" in reply.detail
    assert queues == {"train": "Hold", "batch": "Hold", "frozen": "Hold"}
    assert calls[1] == ["kubectl", "patch", "clusterqueues.kueue.x-k8s.io", "train", "--type", "merge", "-p",
                        '{"spec": {"stopPolicy": "Hold"}}']  # fmt: skip
    assert k8s.apply(ActionRequest(ActionKind.RELEASE_ADMISSION, "dc")).status == "applied"
    assert queues == {"train": "None", "batch": "None", "frozen": "Hold"}  # the one the loop did not hold stays held
    again = k8s.apply(ActionRequest(ActionKind.RELEASE_ADMISSION, "dc"))
    assert again.status == "refused" and "held by the loop" in again.detail


def test_k8s_admission_hold_says_why_when_kueue_is_missing_or_a_patch_fails() -> None:
    def no_kueue(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        err = 'error: the server doesn\'t have a resource type "clusterqueues"'
        return subprocess.CompletedProcess(list(argv), 1, "", err)

    reply = KubernetesAdapter(dry_run=False, runner=no_kueue).apply(ActionRequest(ActionKind.HOLD_ADMISSION, "dc"))
    assert reply.status == "failed" and "clusterqueues" in reply.detail and "Kueue" in reply.detail
    calls: list[list[str]] = []
    queues: dict[str, str | None] = {"a": None, "b": None}
    k8s = KubernetesAdapter(dry_run=False, runner=_kueue(calls, queues, fail_patch="b"))
    reply = k8s.apply(ActionRequest(ActionKind.HOLD_ADMISSION, "dc"))
    assert reply.status == "failed" and "held 1 of 2" in reply.detail and "forbidden" in reply.detail
    assert k8s.apply(ActionRequest(ActionKind.RELEASE_ADMISSION, "dc")).status == "applied"  # the one it held
    assert queues == {"a": "None", "b": None}
