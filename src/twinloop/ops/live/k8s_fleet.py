"""Kubernetes jobs as their controllers see them (``--jobs k8s``): the pods of one controller are one job, each pod a
replica.

dcgm-exporter labels each GPU's series with the pod holding it (``pod``, ``namespace``). A pod's name changes every
time its controller recreates it, and a serving fleet is many pods: naming each pod a job hid the fleet from the
responder (no proportionality check could tell one replica from the whole fleet) and lost a job's heartbeats at its
first restart. So each pod's ``ownerReferences`` are followed up to the top controller (Pod -> ReplicaSet ->
Deployment; Pod -> StatefulSet; Pod -> StatefulSet -> leader Pod -> StatefulSet -> LeaderWorkerSet; Pod -> Job ->
JobSet; Pod -> PyTorchJob...) and the job is named ``NAMESPACE.Kind.NAME`` (``serving.Deployment.vllm-llama``).

The name keeps the two properties the loop needs of a job id: no ``/`` (it is the leaf of ``<site>/jobs/<id>`` and
the heartbeat file ``<id>.jsonl``), and it reads back unambiguously. A namespace is a DNS label (no dots), and a pod
name is lower-case (RFC 1123), so ``NS.Kind.NAME`` (the kind is CamelCase) cannot be mistaken for the ``NS.POD`` a
pod without a controller keeps.

Whether a job is a serving fleet: the pods' annotation ``twinloop.io/workload: serving|training`` where set, else by
its controller's kind (:data:`SERVING_KINDS`, :data:`BATCH_KINDS`), else unknown (None).

Where kubectl cannot answer (not installed, no RBAC to list pods), each pod stays its own job ``NS.POD``, as before,
and the failure is reported once on the watcher's stream.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.live.jobs import JobMap, json_list, pod_labelled
from twinloop.ops.respond.adapters.base import leaf
from twinloop.ops.respond.adapters.commands import Runner, run_command
from twinloop.ops.say_once import SayOnce

#: The pod annotation that says what a workload is, overriding its controller's kind.
WORKLOAD_ANNOTATION = "twinloop.io/workload"
#: Its values, and whether each is a serving fleet.
WORKLOAD_VALUES = {"serving": True, "training": False}
#: Long-running controllers: their pods are replicas behind a router.
SERVING_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "StatefulSet", "LeaderWorkerSet", "InferenceService", "RayService"}
)
#: Controllers that run to completion: their pods are ranks of one synchronous job.
BATCH_KINDS = frozenset(
    {"Job", "CronJob", "JobSet", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob"}
    | {"RayJob"}
)
#: The label LeaderWorkerSet puts on every pod of one group (a leader and its workers: one serving replica).
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
#: How many owners up a pod's chain is followed (LeaderWorkerSet's worker pods are four below it).
MAX_OWNER_DEPTH = 8


@dataclass(frozen=True)
class OwnerRef:
    """One ``metadata.ownerReferences`` entry: who manages an object."""

    api_version: str
    kind: str
    name: str

    @property
    def resource(self) -> str:
        """The owner as kubectl's ``TYPE[.VERSION][.GROUP]`` (``ReplicaSet.v1.apps``; a core kind alone): a CRD's kind
        is then never mistaken for another group's kind of the same name.
        """
        group, slash, version = self.api_version.rpartition("/")
        return f"{self.kind}.{version}.{group}" if slash else self.kind


@dataclass(frozen=True)
class PodInfo:
    """What the job source needs of one pod: its controller, its workload annotation, its LeaderWorkerSet group."""

    namespace: str
    name: str
    owner: OwnerRef | None
    workload: str | None = None
    group: str | None = None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def controller_of(metadata: Any) -> OwnerRef | None:
    """The managing owner in an object's ``metadata``: the reference marked ``controller: true``, else the first one
    (clients that do not set the flag); None when there is none or none is a well-formed reference (a malformed entry
    is skipped, never a crash: the pod is then taken as bare, which only makes the loop more careful).
    """
    refs = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    found = []
    for ref in refs if isinstance(refs, list) else []:
        if not isinstance(ref, dict):
            continue
        api, kind, name = _text(ref.get("apiVersion")), _text(ref.get("kind")), _text(ref.get("name"))
        if api and kind and name:
            owner = OwnerRef(api, kind, name)
            if ref.get("controller") is True:
                return owner
            found.append(owner)
    return found[0] if found else None


def _pod(item: Any) -> PodInfo | None:
    meta = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(meta, dict) or not _text(meta.get("name")):
        return None
    notes, labels = meta.get("annotations"), meta.get("labels")
    workload = notes.get(WORKLOAD_ANNOTATION) if isinstance(notes, dict) else None
    group = labels.get(LWS_GROUP_LABEL) if isinstance(labels, dict) else None
    return PodInfo(
        _text(meta.get("namespace")) or "default",
        meta["name"],
        controller_of(meta),
        _text(workload),
        _text(group),
    )


def parse_pods(text: str, source: str = "kubectl get pods -o json") -> dict[str, PodInfo]:
    """Pods by name from ``kubectl get pods -o json`` (a ``List``); an item that is not a pod with a name is skipped.

    Raises:
        InputError: not JSON, or no ``items`` list.
    """
    pods = (_pod(item) for item in json_list(text, "items", source, "kubectl get pods -o json"))
    return {p.name: p for p in pods if p is not None}


def parse_owner(text: str) -> OwnerRef | None:
    """The controller of the object in ``kubectl get TYPE NAME -o json`` output; None when it has none, or the output
    is not an object's JSON.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return controller_of(doc.get("metadata")) if isinstance(doc, dict) else None


def controller_job(job: str) -> tuple[str, str, str] | None:
    """``(namespace, kind, name)`` of a job named ``NS.Kind.NAME``; None for a pod's ``NS.POD`` or anything else."""
    ns, _, rest = leaf(job).partition(".")
    kind, dot, name = rest.partition(".")
    return (ns, kind, name) if ns and dot and name and kind[:1].isupper() else None


@dataclass(frozen=True)
class _Fleet:
    """One job's pods (``(namespace, pod)``, sorted) and whether it serves."""

    pods: tuple[tuple[str, str], ...]
    serving: bool | None


class KubernetesJobs:
    """The ``--jobs k8s`` job source: each GPU's pod (dcgm-exporter's labels) grouped by its top controller.

    Called by the cluster every ``jobs_every_s`` with the GPUs and their labels; it lists the pods of each namespace
    seen (``kubectl get pods --namespace NS -o json``) and asks for each owner above them once
    (``kubectl get TYPE NAME --namespace NS -o json``; remembered while a pod still names it). It then answers the
    Kubernetes adapter's questions from its last answer: :meth:`pod_on`, :meth:`pods_of`, :meth:`is_serving`,
    :meth:`replica_of`.

    Args:
        runner: runs a kubectl command line (tests give a recorded one).
        warn: told once per distinct failure (the watcher's progress stream).
    """

    def __init__(self, runner: Runner | None = None, warn: Callable[[str], None] | None = None) -> None:
        self._runner = runner or run_command
        self._say = SayOnce(warn)
        self._owners: dict[tuple[str, str, str], OwnerRef | None] = {}  # (ns, TYPE, name) -> its controller
        self._pod_on: dict[str, tuple[str, str]] = {}
        self._job_on: dict[str, str] = {}
        self._replica_on: dict[str, str] = {}
        self._fleets: dict[str, _Fleet] = {}

    def __call__(self, gpu_ids: Sequence[str], labels: Mapping[str, Mapping[str, Any]]) -> JobMap:
        """Jobs per GPU (see the module docstring); a GPU without a pod label holds no job."""
        pod_on = {g: p for g in gpu_ids if (p := pod_labelled(labels.get(g, {}))) is not None}
        listed = {ns: self._list(ns) for ns in sorted({ns for ns, _ in pod_on.values()})}
        used: dict[tuple[str, str, str], OwnerRef | None] = {}
        job_of_pod: dict[tuple[str, str], str] = {}
        members: dict[str, list[tuple[str, str]]] = {}
        for ns, pod in sorted(set(pod_on.values())):
            info = listed[ns].get(pod)
            top = None if info is None else self._top(info, listed[ns], used)
            job = f"{ns}.{top.kind}.{top.name}" if top else f"{ns}.{pod}"
            job_of_pod[(ns, pod)] = job
            members.setdefault(job, []).append((ns, pod))
        self._owners = used  # forget owners no pod names any more (a Deployment's old ReplicaSets)
        self._pod_on = pod_on
        self._fleets = {
            job: _Fleet(tuple(pods), _serving(job, [listed[ns].get(pod) for ns, pod in pods]))
            for job, pods in members.items()
        }
        self._job_on = {g: job_of_pod[p] for g, p in pod_on.items()}
        self._replica_on = {g: _replica_key(job_of_pod[p], p, listed[p[0]].get(p[1])) for g, p in pod_on.items()}
        job_ids = tuple(sorted(self._fleets))
        index = {j: i for i, j in enumerate(job_ids)}
        found = [index[self._job_on[g]] if g in self._job_on else -1 for g in gpu_ids]
        return JobMap(job_ids, np.array(found, dtype=np.int64))

    def pod_on(self, gpu: str) -> tuple[str, str] | None:
        """``(namespace, pod)`` holding ``gpu`` at the last refresh; None when none was labelled."""
        return self._pod_on.get(gpu)

    def pods_of(self, job: str) -> tuple[tuple[str, str], ...]:
        """The GPU pods of ``job`` (``site/jobs/<id>`` or ``<id>``) at the last refresh; empty when unknown."""
        fleet = self._fleets.get(leaf(job))
        return () if fleet is None else fleet.pods

    def is_serving(self, job: str) -> bool | None:
        """Whether ``job`` is a serving fleet (see the module docstring); None when unknown."""
        fleet = self._fleets.get(leaf(job))
        return None if fleet is None else fleet.serving

    def replica_of(self, gpu: str) -> str | None:
        """The serving replica holding ``gpu`` (its pod; a LeaderWorkerSet's group), as a key equal for the GPUs of
        one replica; None when ``gpu``'s job is not known to be a serving fleet.
        """
        job = self._job_on.get(gpu)
        return self._replica_on.get(gpu) if job is not None and self._fleets[job].serving is True else None

    def _list(self, ns: str) -> dict[str, PodInfo]:
        """The namespace's pods; empty (each of its GPU pods then its own job) where kubectl cannot tell."""
        argv = ["kubectl", "get", "pods", "--namespace", ns, "-o", "json"]
        done = self._ask(argv, "the namespace's pods are named one job each")
        if done is None:
            return {}
        try:
            pods = parse_pods(done, " ".join(argv))
        except InputError as exc:
            self._say(f"--jobs k8s: {exc}; the namespace's pods are named one job each")
            return {}
        for p in pods.values():
            if p.workload is not None and p.workload not in WORKLOAD_VALUES:
                self._say(
                    f"--jobs k8s: pod {ns}/{p.name}: annotation {WORKLOAD_ANNOTATION}={p.workload!r} ignored (allowed:"
                    f" {', '.join(WORKLOAD_VALUES)}); its controller's kind decides whether it serves"
                )
        return pods

    def _top(
        self, info: PodInfo, pods: Mapping[str, PodInfo], used: dict[tuple[str, str, str], OwnerRef | None]
    ) -> OwnerRef | None:
        """The pod's top controller, following owners up; the last one reached where kubectl cannot say more."""
        ref, top = info.owner, None
        for _ in range(MAX_OWNER_DEPTH):  # a bound, not a count: a cycle of owners must not hang the watch
            if ref is None or (ref.kind == "Node" and ref.api_version == "v1"):
                break  # a static pod's mirror is "owned" by its node: only its kubelet restarts it, no controller
            top = ref
            if ref.kind == "Pod" and ref.api_version == "v1":  # LeaderWorkerSet: a worker set owned by its leader pod
                owner = pods[ref.name].owner if ref.name in pods else None
            else:
                owner = self._owner(info.namespace, ref, used)
            ref = owner
        return top

    def _owner(self, ns: str, ref: OwnerRef, used: dict[tuple[str, str, str], OwnerRef | None]) -> OwnerRef | None:
        key = (ns, ref.resource, ref.name)
        if key not in used:
            if key in self._owners:
                used[key] = self._owners[key]
            else:
                argv = ["kubectl", "get", ref.resource, ref.name, "--namespace", ns, "-o", "json"]
                done = self._ask(argv, f"its pods' job is named after the {ref.kind}")
                if done is None:
                    return None  # not remembered: asked again at the next refresh
                used[key] = parse_owner(done)
        return used[key]

    def _ask(self, argv: list[str], otherwise: str) -> str | None:
        """The stdout of kubectl; None where it could not run or failed, said once per command and namespace (not
        per object: one missing RBAC rule must not flood the stream) with ``otherwise``, what the job source does then.
        """
        try:
            done = self._runner(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
        else:
            if done.returncode == 0:
                return done.stdout
            why = f"exit {done.returncode}: {done.stderr.strip()[:200]}"
        what = " ".join(argv[:3])  # kubectl get TYPE
        self._say(f"--jobs k8s: {' '.join(argv)}: {why}; {otherwise}", key=f"{what} {argv[-3]}")
        return None


def _replica_key(job: str, pod: tuple[str, str], info: PodInfo | None) -> str:
    """The serving replica ``pod`` belongs to: the pod itself, or its LeaderWorkerSet group (a leader and its workers:
    deleting any of them recreates the whole group under LWS's default ``restartPolicy: RecreateGroupOnPodRestart``,
    kubernetes-sigs/lws ``api/leaderworkerset/v1`` types; so two of its GPUs must not restart it twice).
    """
    found = controller_job(job)
    if info is not None and info.group is not None and found is not None and found[1] == "LeaderWorkerSet":
        return f"{job}#{info.group}"
    return "/".join(pod)


def _serving(job: str, pods: Sequence[PodInfo | None]) -> bool | None:
    """The pods' workload annotation where they agree on one, else by the controller's kind; None when unknown."""
    said = {p.workload for p in pods if p is not None and p.workload in WORKLOAD_VALUES}
    if len(said) == 1:
        return WORKLOAD_VALUES[said.pop()]
    if said:
        return None  # the pods disagree: a person should look, not the loop guess
    found = controller_job(job)
    kind = None if found is None else found[1]
    return True if kind in SERVING_KINDS else False if kind in BATCH_KINDS else None
