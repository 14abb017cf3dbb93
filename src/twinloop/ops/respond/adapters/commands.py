"""Slurm and Kubernetes adapters: they emit scheduler commands, and only run them when told to (dry run is the
default, so a first deployment shows what it *would* do).
"""

from __future__ import annotations

import shlex
import subprocess
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply, JobTiming

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
#: ``marker(job) -> t``: when the job last reported a completed checkpoint (the loop's clock, s), None if never.
CheckpointMarker = Callable[[str], float | None]


def heartbeat_file_marker(directory: str | Path) -> CheckpointMarker:
    """A job heartbeat convention: the job touches ``<directory>/<job>.checkpoint`` when a checkpoint is
    complete; its modification time (Unix time, the live loop's clock) is the marker.
    """
    root = Path(directory)

    def marker(job: str) -> float | None:
        try:
            return (root / f"{_leaf(job)}.checkpoint").stat().st_mtime
        except OSError:
            return None

    return marker


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


def _leaf(entity: str) -> str:
    """The scheduler's name for an entity: the last path component (node or job id)."""
    return entity.rstrip("/").rsplit("/", 1)[-1]


class CommandAdapter(ActionAdapter):
    """Common part: build argv per action, show it (dry run) or run it and report failures with stderr."""

    def __init__(
        self,
        dry_run: bool = True,
        runner: Runner | None = None,
        checkpoint_marker: CheckpointMarker | None = None,
        job_timing: Callable[[str], JobTiming | None] | None = None,
    ) -> None:
        self.dry_run = dry_run
        self._runner = runner or _run
        self.checkpoint_marker = checkpoint_marker
        self._job_timing = job_timing
        self.issued: list[list[str]] = []

    def job_timing(self, job: str) -> JobTiming | None:
        """From the ``job_timing`` callable the site gives (its jobs' checkpoint cadence, restart time, time
        limit); None without one (then a straggler gets the response for an unknown restart cost).
        """
        return None if self._job_timing is None else self._job_timing(job)

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """From ``checkpoint_marker`` (e.g. :func:`heartbeat_file_marker`); None without one (then a requeue
        waiting on the checkpoint goes to a person at its timeout).
        """
        if self.checkpoint_marker is None:
            return None
        t = self.checkpoint_marker(job)
        return t is not None and t >= since_ts

    @abstractmethod
    def argv(self, request: ActionRequest) -> list[str]:
        """The command line for a supported request."""

    def _apply(self, request: ActionRequest) -> AdapterReply:
        argv = self.argv(request)
        line = shlex.join(argv)
        if self.dry_run:
            return AdapterReply("dry_run", line)
        self.issued.append(argv)
        try:
            done = self._runner(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return AdapterReply("failed", f"{line}: {exc}")
        if done.returncode != 0:
            return AdapterReply("failed", f"{line}: exit {done.returncode}: {done.stderr.strip()[:200]}")
        return AdapterReply("applied", line)


class SlurmAdapter(CommandAdapter):
    """Slurm: drain/resume nodes, requeue jobs, and ask a job to checkpoint (SIGUSR1, the usual convention)."""

    name: ClassVar[str] = "slurm"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(
        {ActionKind.DRAIN, ActionKind.UNDRAIN, ActionKind.REQUEUE, ActionKind.CHECKPOINT}
    )

    def argv(self, request: ActionRequest) -> list[str]:
        """``scontrol``/``scancel`` command line for ``request``."""
        target = _leaf(request.target)
        reason = f"twinloop: {request.reason or request.kind}"
        if request.kind == ActionKind.DRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=drain", f"reason={reason}"]
        if request.kind == ActionKind.UNDRAIN:
            return ["scontrol", "update", f"nodename={target}", "state=resume"]
        if request.kind == ActionKind.REQUEUE:
            return ["scontrol", "requeue", target]
        return ["scancel", "--signal=USR1", "--batch", target]


class KubernetesAdapter(CommandAdapter):
    """Kubernetes: cordon/drain and uncordon nodes."""

    name: ClassVar[str] = "k8s"
    supported: ClassVar[frozenset[ActionKind]] = frozenset({ActionKind.DRAIN, ActionKind.UNDRAIN})

    def argv(self, request: ActionRequest) -> list[str]:
        """``kubectl`` command line for ``request``."""
        node = _leaf(request.target)
        if request.kind == ActionKind.DRAIN:
            return ["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s"]
        return ["kubectl", "uncordon", node]
