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
from dataclasses import replace
from typing import ClassVar

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


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
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
        self._runner = runner or _run
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

    def _apply(self, request: ActionRequest) -> AdapterReply:
        argv = self.argv(request)
        line = shlex.join(argv)
        if self.dry_run:
            return AdapterReply("dry_run", line)
        self.issued.append(argv)
        done = self._checked(argv)
        if isinstance(done, AdapterReply):
            return done
        if request.kind == ActionKind.REQUEUE and self.heartbeats is not None:
            # The job's restart time is measured from here to the `restarted` it records.
            note = self.heartbeats.note_requeue(request.target)
            return AdapterReply("applied", f"{line} ({note})" if note else line)
        return AdapterReply("applied", line)


class SlurmAdapter(CommandAdapter):
    """Slurm: drain/resume nodes, requeue jobs, and ask a job to checkpoint (SIGUSR1, the usual convention)."""

    name: ClassVar[str] = "slurm"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(
        {ActionKind.DRAIN, ActionKind.UNDRAIN, ActionKind.REQUEUE, ActionKind.CHECKPOINT}
    )

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
        """``scontrol``/``scancel`` command line for ``request``."""
        target = leaf(request.target)
        reason = f"twinloop: {request.reason or request.kind}"
        if request.kind == ActionKind.DRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=drain", f"reason={reason}"]
        if request.kind == ActionKind.UNDRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=resume"]
        if request.kind == ActionKind.REQUEUE:
            return ["scontrol", "requeue", target]
        return ["scancel", "--signal=USR1", "--batch", target]


def pod_of(job: str) -> tuple[str, str] | None:
    """``(namespace, pod)`` of a job named ``namespace.pod`` (what ``--jobs k8s`` names a GPU's pod); None otherwise.

    A namespace is a DNS label (no dots), so the first dot splits it from the pod's name, which may hold dots.
    """
    ns, dot, pod = leaf(job).partition(".")
    return (ns, pod) if dot and ns and pod else None


class KubernetesAdapter(CommandAdapter):
    """Kubernetes: cordon/drain and uncordon nodes; a job's requeue deletes its pod, for its controller to recreate.

    A job is a pod here (``--jobs k8s`` names each GPU's job ``namespace.pod`` from dcgm-exporter's labels). Deleting
    the pod of a Deployment, StatefulSet or JobSet is how an SRE restarts a wedged replica or worker: the controller
    makes a new one. A pod without a controller would be gone for good, so the requeue first asks for the pod's
    owners and refuses a bare pod.
    """

    name: ClassVar[str] = "k8s"
    supported: ClassVar[frozenset[ActionKind]] = frozenset({ActionKind.DRAIN, ActionKind.UNDRAIN, ActionKind.REQUEUE})

    def argv(self, request: ActionRequest) -> list[str]:
        """``kubectl`` command line for ``request`` (a requeue's target must name a pod: :meth:`_apply` checks)."""
        if request.kind == ActionKind.REQUEUE:
            ns, pod = pod_of(request.target) or ("", "")
            return ["kubectl", "delete", "pod", "--namespace", ns, pod, "--wait=false"]
        node = leaf(request.target)
        if request.kind == ActionKind.DRAIN:
            return ["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s"]
        return ["kubectl", "uncordon", node]

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.kind != ActionKind.REQUEUE:
            return super()._apply(request)
        found = pod_of(request.target)
        if found is None:
            return AdapterReply("refused", f"{request.target}: not a pod (namespace.pod, as --jobs k8s names them)")
        if self.dry_run:
            return super()._apply(request)
        ns, pod = found
        owners = self._checked(
            ["kubectl", "get", "pod", "--namespace", ns, pod, "-o", "jsonpath={.metadata.ownerReferences[*].kind}"]
        )
        if isinstance(owners, AdapterReply):
            return owners
        if not owners.stdout.strip():
            return AdapterReply("refused", f"{ns}/{pod} has no controller: deleting it would end it for good")
        return super()._apply(request)
