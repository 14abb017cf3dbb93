"""The adapter protocol: resolve targets, report limits and current settings, apply an action."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import ActionKind, ActionRequest

ReplyStatus = Literal["applied", "dry_run", "refused", "failed"]


@dataclass(frozen=True)
class AdapterReply:
    """What an adapter says about one request."""

    status: ReplyStatus
    detail: str = ""


@dataclass(frozen=True)
class JobTiming:
    """What a job's checkpoints and restarts cost, as far as the cluster can tell (None: unknown).

    Attributes:
        checkpoint_write_s: how long one checkpoint write stops the job, s.
        restart_s: from a requeue to the job computing again (restart overhead, loading its state), s.
        next_checkpoint_in_s: time until the job's own next checkpoint, s.
        remaining_s: the job's expected remaining run time (its time limit), s.
        unsaved_s: the job's progress since its last saved checkpoint (or restart), in seconds of computing: what
            a restart without a new checkpoint redoes.
        checkpoint_interval_s: the time from a (re)start or a save to the job's next save, s.
        interruptions_per_s: how often the job is interrupted by a failure (a restart nobody asked for), per s.
        next_checkpoint_at_full_pace: ``next_checkpoint_in_s`` is the wall time at the job's full pace (from the
            cadence of past saves: job heartbeats), not at its pace now; a job slowed by a fraction ``s`` takes
            ``1/(1 - s)`` as long (frameworks save at iteration counts).
    """

    checkpoint_write_s: float | None = None
    restart_s: float | None = None
    next_checkpoint_in_s: float | None = None
    remaining_s: float | None = None
    unsaved_s: float | None = None
    checkpoint_interval_s: float | None = None
    interruptions_per_s: float | None = None
    next_checkpoint_at_full_pace: bool = False


@dataclass(frozen=True)
class RequeuePace:
    """How fast a job would run if requeued now, against how fast it runs now.

    Attributes:
        relative: the job's pace on the GPUs a requeue would give it over its present pace (its slowest rank
            now, a faulty GPU under its cap or thermal limit included); below 1: slower than staying.
        gpus: those GPUs, in words (``64 h100-sxm + 128 a100-sxm-80gb``), for the audit trail.
        waits: why the job would wait in the queue instead, admission holding it (then ``relative`` is 0), in words;
            empty when it would start at once.
    """

    relative: float
    gpus: str
    waits: str = ""

    @property
    def slower(self) -> bool:
        """The requeue would run the job strictly slower than it runs now (equal pace is not slower)."""
        return self.relative < 1.0

    def kept_back(self) -> str:
        """The audit line for a requeue not done because it would slow the job down."""
        if self.waits:
            return f"requeue kept back: the job would wait in the queue, not run: {self.waits}"
        return f"requeue kept back: would run at {self.relative:.2f} of its present pace on {self.gpus}"


@dataclass(frozen=True)
class ThermalPath:
    """What a GPU's thermal path is held against, as the cluster reports it.

    Attributes:
        slowdown_temp_c: the GPU's slowdown threshold (NVML ``NVML_TEMPERATURE_THRESHOLD_SLOWDOWN``), °C.
        coolant_temp_c: the liquid coolant at its cold plate, or the inlet air at its heat sink, now, °C; None where
            the cluster reports no coolant (a node's NVML alone): then whether the GPU's own thermal control holds
            its die can still be told, but not what its path carries.
    """

    slowdown_temp_c: float
    coolant_temp_c: float | None


def leaf(entity: str) -> str:
    """The scheduler's name for an entity: the last path component (node or job id)."""
    return entity.rstrip("/").rsplit("/", 1)[-1]


def ancestor(entity: str, depth: int) -> str | None:
    """The id ``depth`` levels deep of ``site/row/rack/node/gpu`` (1 = site ... 5 = gpu), or None if shallower."""
    parts = entity.split("/")
    if "jobs" in parts or len(parts) < depth:
        return None
    return "/".join(parts[:depth])


#: Depth of each level in an entity id ``site/row/rack/node/gpu``.
LEVEL_DEPTH = {"site": 1, "row": 2, "rack": 3, "node": 4, "gpu": 5}


class ActionAdapter(ABC):
    """Base of every adapter. Subclasses say which kinds they support and how to carry them out."""

    name: ClassVar[str]
    supported: ClassVar[frozenset[ActionKind]]

    def supply_limit_w(self, target: str) -> float | None:
        """The per-GPU power limit a node's working power supplies carry with its host's draw, W; None when the
        adapter cannot tell (then a policy value taken from it is refused as unknown).
        """
        return None

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """Whether ``job`` has reported a completed checkpoint at or after ``since_ts`` (cluster clock) or has no
        unsaved work; False while it has not; None when the adapter cannot tell (then a requeue waiting on the
        checkpoint goes to a person at its timeout).
        """
        return None

    def job_timing(self, job: str) -> JobTiming | None:
        """What ``job``'s checkpoints and restarts cost (the straggler response weighs them); None when the
        adapter cannot tell (then the policy's response for an unknown cost applies).
        """
        return None

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        """``job``'s pace on the GPUs it would get if requeued now, leaving out the nodes ``without`` (the ones the
        rule would drain), against its present pace; None when the adapter cannot tell (a live scheduler requeues
        into the job's own partition: then a requeue goes ahead as before).
        """
        return None

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        """``gpu``'s slowdown threshold and the coolant (or inlet air) temperature it sees now (None: no coolant
        reading, as on a node's NVML alone; then a cap taken from the thermal path falls back to the rule's fixed
        factor); None when the adapter cannot tell the threshold either.
        """
        return None

    def is_serving(self, job: str) -> bool | None:
        """Whether ``job`` is a serving fleet (replicas behind a router) rather than one synchronous job; None
        when unknown.
        """
        return None

    def resolve(self, selector: str, incident: Incident) -> list[str]:
        """Target ids for a policy selector (``root``, ``node``, ``rack``, ``cdu``, ``job``, ``members``...)."""
        if selector == "root":
            return [incident.root]
        if selector == "members":
            return list(incident.members)
        if selector == "replica":
            return self._replicas_of(incident)
        if selector == "job":
            jobs = {self.job_of(e) for e in (incident.root, *incident.members)}
            return sorted(j for j in jobs if j)
        if selector == "cdu":
            cdus = {self.cdu_of(e) for e in (incident.root, *incident.members)}
            return sorted(c for c in cdus if c)
        depth = LEVEL_DEPTH[selector]
        found = {ancestor(e, depth) for e in (incident.root, *incident.members)}
        return sorted(f for f in found if f)

    def _replicas_of(self, incident: Incident) -> list[str]:
        """The serving replicas among ``incident``'s members, each named by one of its member GPUs (what a
        ``restart_replica`` takes). An adapter that knows no replica boundaries names one GPU per node (a replica is
        at most its node's GPUs in the packaged halls; a replica spanning nodes is then named once per node).
        """
        first: dict[str, str] = {}
        for e in incident.members:
            node = ancestor(e, LEVEL_DEPTH["node"])
            if node is not None and ancestor(e, LEVEL_DEPTH["gpu"]) == e:
                first.setdefault(node, e)
        return sorted(first.values())

    def job_of(self, entity: str) -> str | None:
        """The job running on ``entity`` (a job id is returned as is); None when unknown."""
        return entity if "/jobs/" in entity else None

    def jobs_on(self, entity: str) -> tuple[str, ...] | None:
        """Every job running now on a GPU under ``entity`` (empty: none); None when the adapter cannot tell (then a
        requeue to move a job off ``entity`` goes ahead as before).
        """
        return None

    def cdu_of(self, entity: str) -> str | None:
        """The CDU cooling ``entity``; by default one CDU per row, named ``<row>/cdu``."""
        row = ancestor(entity, 2)
        return f"{row}/cdu" if row else None

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        """Hardware range of the setting ``kind`` on ``target``; None when unknown (the guard then refuses)."""
        return None

    def current(self, kind: ActionKind, target: str) -> float | None:
        """Current value of the setting ``kind`` on ``target``; None when unknown."""
        return None

    def apply(self, request: ActionRequest) -> AdapterReply:
        """Carry out ``request`` (refusing kinds this adapter does not support)."""
        if request.kind not in self.supported:
            return AdapterReply("refused", f"{self.name} adapter does not support {request.kind}")
        return self._apply(request)

    @abstractmethod
    def _apply(self, request: ActionRequest) -> AdapterReply:
        """Carry out a supported request."""
