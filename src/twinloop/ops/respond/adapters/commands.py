"""Slurm and Kubernetes adapters: they emit scheduler commands, and only run them when told to (dry run is the
default, so a first deployment shows what it *would* do).
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply, JobTiming, leaf
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def slurm_end_time_s(text: str, job: str) -> float | None:
    """``job``'s end time (Unix s: its start plus its time limit) in ``squeue --json`` output; None when absent,
    unlimited or not squeue's layout (``end_time`` is a number up to Slurm 22.05, ``{set, infinite, number}`` since).
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    for entry in jobs if isinstance(jobs, list) else []:
        if not isinstance(entry, dict) or str(entry.get("job_id")) != job:
            continue
        end = entry.get("end_time")
        if isinstance(end, dict):
            end = end.get("number") if end.get("set", True) and not end.get("infinite", False) else None
        if isinstance(end, int | float) and not isinstance(end, bool) and 0 < end < math.inf:
            return float(end)
    return None


@dataclass(frozen=True)
class AdmissionGate:
    """How a scheduler holds back new work at the site while running work goes on, and gives admission back: the
    objects that admit work (Kueue's ClusterQueues, Slurm's partitions), how to list the ones admitting now, and the
    command that holds or releases one (:meth:`CommandAdapter._admission` does the rest, the same for each).

    Attributes:
        system: the scheduler, in messages (``Kueue``, ``Slurm``).
        one: what one object is called (``ClusterQueue``, ``partition``).
        listing: the command line that lists them with their state.
        admitting: the names admitting work now in ``listing``'s output, in its order; or why that output cannot be
            read (a string, naming the field).
        switch: the command line that holds (True) or releases (False) the named one.
        needs: what a failed listing adds on what the hold needs.
    """

    system: str
    one: str
    listing: tuple[str, ...]
    admitting: Callable[[str], list[str] | str]
    switch: Callable[[str, bool], list[str]]
    needs: str

    def argv(self, hold: bool) -> list[str]:
        """The command line shown for a hold or a release (its dry run): :attr:`switch` on a placeholder name."""
        return self.switch(f"<each {self.one} admitting work>" if hold else f"<each {self.one} the loop held>", hold)


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run a scheduler command line (``kubectl``, ``scontrol``, ``squeue``...): its output captured, 30 s at most."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


class CommandAdapter(ActionAdapter):
    """Common part: build argv per action, show it (dry run) or run it and report failures with stderr."""

    def __init__(
        self,
        dry_run: bool = True,
        runner: Runner | None = None,
        job_timing: Callable[[str], JobTiming | None] | None = None,
        heartbeats: JobHeartbeats | None = None,
    ) -> None:
        self.dry_run = dry_run
        self._runner = runner or run_command
        self._job_timing = job_timing
        self.heartbeats = heartbeats
        self.issued: list[list[str]] = []

    def job_timing(self, job: str) -> JobTiming | None:
        """From the ``job_timing`` callable the site gives (its jobs' checkpoint cadence, restart time, time
        limit), else from the jobs' ``heartbeats``; None without either (then a straggler gets the response for an
        unknown restart cost).
        """
        if self._job_timing is not None:
            return self._job_timing(job)
        return None if self.heartbeats is None else self.heartbeats.timing(job)

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """From the jobs' ``heartbeats`` (their ``.jsonl`` or touched ``.checkpoint`` files); None without them
        (then a requeue waiting on the checkpoint goes to a person at its timeout).
        """
        return None if self.heartbeats is None else self.heartbeats.checkpoint_done(job, since_ts)

    @abstractmethod
    def argv(self, request: ActionRequest) -> list[str]:
        """The command line for a supported request."""

    def _checked(self, argv: list[str]) -> subprocess.CompletedProcess[str] | AdapterReply:
        """Run ``argv``; a ``failed`` reply (with its stderr) where it could not run or exited non-zero."""
        line = shlex.join(argv)
        try:
            done = self._runner(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return AdapterReply("failed", f"{line}: {exc}")
        if done.returncode != 0:
            return AdapterReply("failed", f"{line}: exit {done.returncode}: {done.stderr.strip()[:200]}")
        return done

    def _issue(self, argv: list[str]) -> AdapterReply | None:
        """Record ``argv`` as issued and run it: its ``failed`` reply, or None when it ran."""
        self.issued.append(argv)
        done = self._checked(argv)
        return done if isinstance(done, AdapterReply) else None

    def _admission(self, request: ActionRequest, gate: AdmissionGate, held: list[str]) -> AdapterReply:
        """Hold: ``gate``'s hold on every object its listing says admits work (work already running goes on); the
        ones that took it are added to ``held``. Release: ``gate``'s release on the ones in ``held`` only (never an
        operator's hold), each removed as it takes it. Applied only if every command took, else failed, naming the
        ones that did not (a hold's are not in ``held``: the next release gives back exactly what was held).
        """
        hold = request.kind == ActionKind.HOLD_ADMISSION
        if self.dry_run:
            return AdapterReply("dry_run", shlex.join(gate.argv(hold)))
        if hold:
            listed = self._checked(list(gate.listing))
            if isinstance(listed, AdapterReply):
                return AdapterReply("failed", f"{listed.detail} ({gate.needs})")
            found = gate.admitting(listed.stdout)
            if isinstance(found, str):
                return AdapterReply("failed", f"{shlex.join(gate.listing)}: {found}")
            if not found:
                return AdapterReply("refused", f"no {gate.system} {gate.one} admits work: nothing to hold")
            names = found
        else:
            names = list(held)
            if not names:
                return AdapterReply("refused", f"no {gate.one} held by the loop: nothing to release")
        failed: list[str] = []
        for name in names:
            done = self._issue(gate.switch(name, hold))
            if done is not None:
                failed.append(done.detail)
            elif hold:
                if name not in held:  # held before, put back since (by hand, or a scheduler restart)
                    held.append(name)
            else:
                held.remove(name)
        verb = "held" if hold else "released"
        if failed:
            return AdapterReply("failed", "; ".join([f"{verb} {len(names) - len(failed)} of {len(names)}", *failed]))
        return AdapterReply("applied", f"{gate.one}s {verb}: {', '.join(names)}")

    def _apply(self, request: ActionRequest) -> AdapterReply:
        argv = self.argv(request)
        line = shlex.join(argv)
        if self.dry_run:
            return AdapterReply("dry_run", line)
        failed = self._issue(argv)
        if failed is not None:
            return failed
        if request.kind == ActionKind.REQUEUE and self.heartbeats is not None:
            # The job's restart time is measured from here to the `restarted` it records.
            note = self.heartbeats.note_requeue(request.target)
            return AdapterReply("applied", f"{line} ({note})" if note else line)
        return AdapterReply("applied", line)


def partitions_admitting(text: str) -> list[str] | str:
    """The partitions admitting work (``State=UP``) in ``scontrol --json show partition`` output, in its order; or
    why the text cannot be read, naming the field (one partition whose state cannot be read fails the whole listing:
    a hold that skipped it would leave it admitting and say it held the site).

    A partition's state is ``partitions[].partition.state``, a list such as ``["UP"]`` (data_parser v0.0.39+, Slurm
    23.02+), or ``partitions[].state``, a string (openapi v0.0.38, Slurm 22.05: SchedMD/slurm
    ``src/plugins/openapi/v0.0.38/partitions.c``); v0.0.37 (Slurm 21.08, ``v0.0.37/partitions.c``) writes none: that
    fails here, naming the field.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return "not JSON"
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list):
        return "no `partitions` list"
    out: list[str] = []
    for i, entry in enumerate(parts):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            return f"partitions[{i}].name: not a partition name"
        inner = entry.get("partition")
        state = inner.get("state") if isinstance(inner, dict) and "state" in inner else entry.get("state")
        states = [state] if isinstance(state, str) else state
        if not isinstance(states, list) or not states or not all(isinstance(x, str) for x in states):
            return f"partitions[{i}] ({name}): no state (`partition.state` since Slurm 23.02, `state` in 22.05)"
        if "UP" in (x.upper() for x in states) and name not in out:
            out.append(name)
    return out


def _partition_state(partition: str, hold: bool) -> list[str]:
    return ["scontrol", "update", f"PartitionName={partition}", f"State={'DOWN' if hold else 'UP'}"]


#: Admission on Slurm: ``State=DOWN`` on each partition that is ``UP`` (``--all``: hidden ones too), ``UP`` on release.
SLURM_ADMISSION = AdmissionGate(
    system="Slurm",
    one="partition",
    listing=("scontrol", "--all", "--json", "show", "partition"),
    admitting=partitions_admitting,
    switch=_partition_state,
    needs="holding admission reads the partitions' states with `scontrol --json`: Slurm 22.05 or later",
)


class SlurmAdapter(CommandAdapter):
    """Slurm: drain/resume nodes, requeue jobs, ask a job to checkpoint (SIGUSR1, the usual convention), and hold
    and release the site's admission of new work on its partitions.

    A hold sets ``State=DOWN`` on every partition that is ``UP`` (``scontrol --all --json show partition``, hidden
    partitions included): in scontrol's words (https://slurm.schedmd.com/scontrol.html, partition ``State``), on a
    DOWN partition "new jobs may be queued [...] but queued jobs may not be allocated nodes and run", and "jobs
    already running on the partition continue to run". DRAIN would instead deny new submissions (they fail at
    ``sbatch``) while queued jobs still start, INACTIVE both: DOWN is the hold. A partition an operator set DOWN,
    DRAIN or INACTIVE is not touched, and the release sets ``State=UP`` only on the partitions this adapter held
    (:attr:`held_partitions`). The updates need root or a Slurm administrator, as the node drains do.

    A ``slurmctld`` restart without ``-R`` gives every partition its ``slurm.conf`` state back
    (https://slurm.schedmd.com/slurmctld.html, ``-R``: "No other node or partition state will be preserved"), so it
    lifts a hold; the release then sets ``UP`` on partitions that are up already, which changes nothing.
    """

    name: ClassVar[str] = "slurm"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(
        {
            ActionKind.DRAIN,
            ActionKind.UNDRAIN,
            ActionKind.REQUEUE,
            ActionKind.CHECKPOINT,
            ActionKind.HOLD_ADMISSION,
            ActionKind.RELEASE_ADMISSION,
        }
    )

    def __init__(
        self,
        dry_run: bool = True,
        runner: Runner | None = None,
        job_timing: Callable[[str], JobTiming | None] | None = None,
        heartbeats: JobHeartbeats | None = None,
    ) -> None:
        super().__init__(dry_run, runner, job_timing, heartbeats)
        #: The partitions this adapter held (a release gives back only these, never an operator's DOWN or DRAIN).
        self.held_partitions: list[str] = []

    def job_timing(self, job: str) -> JobTiming | None:
        """As :meth:`CommandAdapter.job_timing`; with job heartbeats, the remaining time is the job's end time in
        ``squeue --json`` (its time limit) less now (unknown when squeue cannot tell).
        """
        timing = super().job_timing(job)
        if timing is None or timing.remaining_s is not None or self.heartbeats is None:
            return timing
        target = leaf(job)
        try:
            done = self._runner(["squeue", "--json", "--jobs", target])
        except (OSError, subprocess.TimeoutExpired):
            return timing
        end_s = slurm_end_time_s(done.stdout, target) if done.returncode == 0 else None
        if end_s is None:
            return timing
        return replace(timing, remaining_s=max(end_s - self.heartbeats.clock(), 0.0))

    def argv(self, request: ActionRequest) -> list[str]:
        """``scontrol``/``scancel`` command line for ``request`` (a hold or a release: one per partition, shown on a
        placeholder name; :meth:`_apply` lists them).
        """
        if request.kind in (ActionKind.HOLD_ADMISSION, ActionKind.RELEASE_ADMISSION):
            return SLURM_ADMISSION.argv(request.kind == ActionKind.HOLD_ADMISSION)
        target = leaf(request.target)
        reason = f"twinloop: {request.reason or request.kind}"
        if request.kind == ActionKind.DRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=drain", f"reason={reason}"]
        if request.kind == ActionKind.UNDRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=resume"]
        if request.kind == ActionKind.REQUEUE:
            return ["scontrol", "requeue", target]
        return ["scancel", "--signal=USR1", "--batch", target]

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.kind in (ActionKind.HOLD_ADMISSION, ActionKind.RELEASE_ADMISSION):
            return self._admission(request, SLURM_ADMISSION, self.held_partitions)
        return super()._apply(request)


def pod_of(job: str) -> tuple[str, str] | None:
    """``(namespace, pod)`` of a job named ``namespace.pod`` (what ``--jobs k8s`` names a pod without a controller);
    None otherwise (a controller's ``namespace.Kind.name`` included: its pods come from the job source).

    A namespace is a DNS label (no dots), so the first dot splits it from the pod's name, which may hold dots; a pod's
    name is lower-case, a kind CamelCase.
    """
    ns, dot, pod = leaf(job).partition(".")
    return (ns, pod) if dot and ns and pod and not pod[:1].isupper() else None


class PodFleet(Protocol):
    """What the Kubernetes adapter asks the ``--jobs k8s`` job source (``ops/live/k8s_fleet.KubernetesJobs``)."""

    def pod_on(self, gpu: str) -> tuple[str, str] | None:
        """``(namespace, pod)`` holding ``gpu``; None when unknown."""

    def pods_of(self, job: str) -> tuple[tuple[str, str], ...]:
        """The GPU pods of ``job``; empty when unknown."""

    def is_serving(self, job: str) -> bool | None:
        """Whether ``job`` is a serving fleet; None when unknown."""

    def replica_of(self, gpu: str) -> str | None:
        """A key equal for the GPUs of one serving replica; None when ``gpu``'s job is not a serving fleet."""


def _delete_pods(ns: str, pods: Sequence[str]) -> list[str]:
    # --wait=false: the loop's step does not block on the pod's grace period; its controller recreates it.
    return ["kubectl", "delete", "pod", "--namespace", ns, *pods, "--wait=false"]


#: What ``kubectl exec`` runs in a pod to ask its trainer to checkpoint: SIGUSR1 to the container's PID 1. Through
#: the shell's own ``kill``: a ``kill`` program is not in every image (Debian's comes with procps, which its slim
#: images leave out); a POSIX ``sh`` is.
SIGNAL_CHECKPOINT = ("sh", "-c", "kill -s USR1 1")


def _signal_pod(ns: str, pod: str) -> list[str]:
    # kubectl exec takes one pod: one command per pod. It runs in the pod's default container (the annotation
    # kubectl.kubernetes.io/default-container, else the first one).
    return ["kubectl", "exec", "--namespace", ns, pod, "--", *SIGNAL_CHECKPOINT]


#: Kueue's ClusterQueues (``kueue.x-k8s.io``): their ``spec.stopPolicy`` (Kueue 0.6+) ``Hold`` admits no new
#: workload while admitted ones run on; ``None`` (or unset) admits.
_CLUSTER_QUEUES = "clusterqueues.kueue.x-k8s.io"
_LIST_QUEUES = ("kubectl", "get", _CLUSTER_QUEUES, "-o", "json")


def _stop_policy(queue: str, policy: str) -> list[str]:
    return [
        "kubectl",
        "patch",
        _CLUSTER_QUEUES,
        queue,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"stopPolicy": policy}}),
    ]


def admitting_queues(text: str) -> list[str] | None:
    """The ClusterQueues admitting work (``stopPolicy`` unset or ``None``) in ``kubectl get clusterqueues -o json``
    output; None when the text is not that layout.
    """
    try:
        items = json.loads(text).get("items")
    except (ValueError, AttributeError):
        return None
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        spec, meta = (item.get(k) if isinstance(item, dict) else None for k in ("spec", "metadata"))
        name = meta.get("name") if isinstance(meta, dict) else None
        policy = spec.get("stopPolicy", "None") if isinstance(spec, dict) else "None"
        if isinstance(name, str) and policy in (None, "None"):
            out.append(name)
    return out


def _kueue_admitting(text: str) -> list[str] | str:
    found = admitting_queues(text)
    return "not a list of ClusterQueues" if found is None else found


#: Admission on Kubernetes: ``stopPolicy: Hold`` on each Kueue ClusterQueue admitting work, ``None`` on release.
KUEUE_ADMISSION = AdmissionGate(
    system="Kueue",
    one="ClusterQueue",
    listing=_LIST_QUEUES,
    admitting=_kueue_admitting,
    switch=lambda queue, hold: _stop_policy(queue, "Hold" if hold else "None"),
    needs="holding admission needs Kueue's ClusterQueues",
)


class KubernetesAdapter(CommandAdapter):
    """Kubernetes: cordon/drain and uncordon nodes; a job's requeue deletes its pods and a replica's restart deletes
    its one pod, for their controller to recreate; a job is asked to checkpoint by SIGUSR1 to each of its pods; the
    site's admission is held and released on Kueue's ClusterQueues (``stopPolicy``: :data:`KUEUE_ADMISSION`).

    With ``fleet`` (``--jobs k8s``) a job is a controller's pods (``namespace.Kind.name``, each pod a replica):
    :meth:`is_serving` answers from the controller's kind, a requeue deletes every GPU pod of the job (each of a batch
    job's ranks must restart; a serving fleet is requeued only when it hangs whole: the responder refuses a whole-fleet
    requeue for one GPU's or node's fault) and ``restart_replica`` deletes the one pod holding the incident's GPU. A
    job named ``namespace.pod`` (a pod with no controller, or a job file) is that pod. Deleting the pod of a
    Deployment, StatefulSet or JobSet is how an SRE restarts a wedged replica or worker: the controller makes a new
    one. A pod without a controller would be gone for good, so deleting a single pod first asks for its owners and
    refuses a bare pod.

    A checkpoint is Slurm's convention (``scancel --signal=USR1 --batch``) on a pod: ``kubectl exec --namespace NS
    POD -- sh -c 'kill -s USR1 1'``, SIGUSR1 to PID 1 of the pod's default container, the entrypoint, in every GPU
    pod of the job (each rank gets it, as Lightning- and torchrun-style handlers expect on Slurm too; the job
    confirms the save through its heartbeats). PID 1 must handle SIGUSR1: the trainer itself (``exec python
    train.py`` as a wrapper's last line), or a wrapper that traps it and forwards it to the ranks, as a Slurm batch
    script does for ``scancel --batch``. A shell wrapper that does not forward signals, or torchrun as PID 1 (its
    agent handles TERM, INT, HUP and QUIT, not USR1), leaves the ranks unasked; with ``shareProcessNamespace: true``
    PID 1 is the pod's pause process, so that must stay off. A PID 1 with no SIGUSR1 handler never sees the signal
    (the kernel drops a signal a PID namespace's init does not handle): a pod that cannot save is not ended by the
    ask, and its requeue waits for a checkpoint that never comes, then goes to a person. A bare pod is signalled too
    (nothing is deleted). The image needs ``sh``; the exec needs RBAC ``create`` on ``pods/exec``.
    """

    name: ClassVar[str] = "k8s"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(
        {
            ActionKind.DRAIN,
            ActionKind.UNDRAIN,
            ActionKind.REQUEUE,
            ActionKind.RESTART_REPLICA,
            ActionKind.CHECKPOINT,
            ActionKind.HOLD_ADMISSION,
            ActionKind.RELEASE_ADMISSION,
        }
    )

    def __init__(
        self,
        dry_run: bool = True,
        runner: Runner | None = None,
        job_timing: Callable[[str], JobTiming | None] | None = None,
        heartbeats: JobHeartbeats | None = None,
        fleet: PodFleet | None = None,
    ) -> None:
        super().__init__(dry_run, runner, job_timing, heartbeats)
        self.fleet = fleet
        #: The ClusterQueues this adapter held (a release gives back only these, never an operator's hold).
        self.held_queues: list[str] = []

    def _pod_jobs(self, job: str) -> list[str]:
        """The ``namespace.pod`` ids of a controller's job's GPU pods the job source saw (a pod's own job: none).

        A pod records its heartbeats under that name when it is not told its controller's (``twinloop job-event``
        with no ``--job``: the pod does not know its controller's kind and name without downward-API wiring).
        """
        if self.fleet is None or pod_of(job) is not None:
            return []
        return [f"{ns}.{pod}" for ns, pod in self.fleet.pods_of(job)]

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """As :meth:`CommandAdapter.checkpoint_done`; for a controller's job whose own file has not confirmed it, a
        ``checkpoint_done`` any of its pods (the job source's, at its last look) recorded under ``namespace.pod`` at
        or after ``since_ts`` confirms it too (rank 0 usually writes it). A pod replaced since is not among them:
        its save, if any, is not counted. None only when no file could be read.
        """
        own = super().checkpoint_done(job, since_ts)
        if own is True or self.heartbeats is None:
            return own
        pods = [self.heartbeats.checkpoint_done(pod, since_ts) for pod in self._pod_jobs(job)]
        if True in pods:
            return True
        return False if own is False or False in pods else None

    def job_timing(self, job: str) -> JobTiming | None:
        """As :meth:`CommandAdapter.job_timing`; from heartbeats, a controller's job's events are its own file's and
        its present pods' (``namespace.pod``): the loop records ``requeued`` under the job's name, the new pod its
        ``restarted`` under its own. A pod's history goes with it when it is replaced.
        """
        if self._job_timing is not None or self.heartbeats is None:
            return super().job_timing(job)
        return self.heartbeats.timing(job, self._pod_jobs(job))

    def is_serving(self, job: str) -> bool | None:
        """From the job source's view of the job's controller; None without ``--jobs k8s``."""
        return None if self.fleet is None else self.fleet.is_serving(job)

    def _replicas_of(self, incident: Incident) -> list[str]:
        """One member GPU per serving replica (its pod; a LeaderWorkerSet's group) the job source knows; without
        it, the base class's one GPU per node.
        """
        if self.fleet is None:
            return super()._replicas_of(incident)
        first: dict[str, str] = {}
        for gpu in incident.members:
            key = self.fleet.replica_of(gpu)
            if key is not None:
                first.setdefault(key, gpu)
        return sorted(first.values())

    def _pods(self, request: ActionRequest) -> tuple[str, list[str]] | str:
        """The namespace and pods ``request`` acts on (a requeue's or a checkpoint's: the job's; a restart's: the
        GPU's), or why none.
        """
        if request.kind == ActionKind.RESTART_REPLICA:
            found = None if self.fleet is None else self.fleet.pod_on(request.target)
            if found is None:
                return f"{request.target}: no pod known on this GPU (needs --jobs k8s)"
            return found[0], [found[1]]
        single = pod_of(request.target)
        if single is not None:
            return single[0], [single[1]]
        pods = () if self.fleet is None else self.fleet.pods_of(request.target)
        if not pods:
            return f"{request.target}: not a pod or a controller's job the job source saw (--jobs k8s names them)"
        return pods[0][0], [p for _, p in pods]  # a controller's pods share its namespace

    def checkpoint_argvs(self, request: ActionRequest) -> list[list[str]] | str:
        """One ``kubectl exec`` per pod of ``request``'s job, each signalling its PID 1 to checkpoint; or why there
        is none (a job that names no pod, a controller's job the job source has not seen).
        """
        found = self._pods(request)
        if isinstance(found, str):
            return found
        ns, pods = found
        return [_signal_pod(ns, pod) for pod in pods]

    def argv(self, request: ActionRequest) -> list[str]:
        """``kubectl`` command line for ``request`` (a deletion's pods must be known: :meth:`_apply` checks). A
        checkpoint: its first pod's command (:meth:`checkpoint_argvs` has one per pod; :meth:`_apply` runs them all).
        """
        if request.kind == ActionKind.CHECKPOINT:
            signals = self.checkpoint_argvs(request)
            return signals[0] if not isinstance(signals, str) else _signal_pod("", "")
        if request.kind in (ActionKind.HOLD_ADMISSION, ActionKind.RELEASE_ADMISSION):  # one patch per queue
            return KUEUE_ADMISSION.argv(request.kind == ActionKind.HOLD_ADMISSION)
        if request.kind in (ActionKind.REQUEUE, ActionKind.RESTART_REPLICA):
            found = self._pods(request)
            ns, pods = found if not isinstance(found, str) else ("", [""])
            if request.kind == ActionKind.REQUEUE and pod_of(request.target) is None:
                # A pod replaced since the job source's last look is gone already: not a failure of the requeue.
                return [*_delete_pods(ns, pods), "--ignore-not-found"]
            return _delete_pods(ns, pods)
        node = leaf(request.target)
        if request.kind == ActionKind.DRAIN:
            return ["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s"]
        return ["kubectl", "uncordon", node]

    def _checkpoint(self, request: ActionRequest) -> AdapterReply:
        """Signal every pod of the job; applied only if each one took it, else failed, naming the pods that did
        not (a pod replaced since the job source's last look is gone: its rank restarted without the save).
        """
        signals = self.checkpoint_argvs(request)
        if isinstance(signals, str):
            return AdapterReply("refused", signals)
        lines = "; ".join(shlex.join(argv) for argv in signals)
        if self.dry_run:
            return AdapterReply("dry_run", lines)
        gone: list[str] = []
        failed: list[str] = []
        # Every pod is asked even after one fails: the ranks that take it save what they can.
        for argv in signals:
            done = self._issue(argv)
            if done is not None and "(NotFound)" in done.detail:
                gone.append(f"{argv[3]}/{argv[4]}")
            elif done is not None:
                failed.append(done.detail)
        if not gone and not failed:
            return AdapterReply("applied", lines)
        why = [f"signalled {len(signals) - len(gone) - len(failed)} of {len(signals)} pods of {request.target}"]
        if gone:
            why.append(f"gone since the job source's last look: {', '.join(gone)}")
        why.extend(failed)
        return AdapterReply("failed", "; ".join(why))

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.kind in (ActionKind.HOLD_ADMISSION, ActionKind.RELEASE_ADMISSION):
            return self._admission(request, KUEUE_ADMISSION, self.held_queues)
        if request.kind == ActionKind.CHECKPOINT:
            return self._checkpoint(request)
        if request.kind not in (ActionKind.REQUEUE, ActionKind.RESTART_REPLICA):
            return super()._apply(request)
        found = self._pods(request)
        if isinstance(found, str):
            return AdapterReply("refused", found)
        ns, pods = found
        # A controller's job was named from its pods' controller references: only a lone pod is asked again.
        if self.dry_run or (request.kind == ActionKind.REQUEUE and pod_of(request.target) is None):
            return super()._apply(request)
        owners = self._checked(
            ["kubectl", "get", "pod", "--namespace", ns, pods[0], "-o", "jsonpath={.metadata.ownerReferences[*].kind}"]
        )
        if isinstance(owners, AdapterReply):
            return owners
        if not owners.stdout.strip():
            return AdapterReply("refused", f"{ns}/{pods[0]} has no controller: deleting it would end it for good")
        return super()._apply(request)
