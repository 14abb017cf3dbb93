"""The actuators ``twinloop watch --actuator`` offers: none (the default), nvml, slurm, k8s.

``none`` touches nothing: every action the loop would take is recorded as a dry run. The others act for real,
but show each command as a dry run first (on the watcher's progress stream) and then run it; a failure comes
back as a ``failed`` reply that the responder records, the guard rails back off from and the watcher raises to a
person. Every action passes the responder's guard rails before it gets here.

With ``--job-heartbeats DIR`` (slurm, k8s) the scheduler's adapter reads the jobs' heartbeat files
(:mod:`twinloop.ops.respond.adapters.heartbeats`): a requeue waiting on a checkpoint goes ahead once the job
records it, and a straggler's restart is priced with the job's measured checkpoint cadence and write time. It
also learns each GPU's job from the watcher's ``--jobs`` (:class:`JobLookup`): a scheduler adapter knows job ids,
not where they run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from twinloop.errors import InputError, unknown_name
from twinloop.ops.events import Incident
from twinloop.ops.live.jobs import JobMap
from twinloop.ops.live.k8s_fleet import KubernetesJobs
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import (
    ActionAdapter,
    AdapterReply,
    JobTiming,
    RequeuePace,
    ThermalPath,
    leaf,
)
from twinloop.ops.respond.adapters.commands import KubernetesAdapter, SlurmAdapter
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats
from twinloop.ops.respond.adapters.nvml import NvmlAdapter

ACTUATORS = ("none", "nvml", "slurm", "k8s")


class NoActuator(ActionAdapter):
    """Records every action as a dry run and touches nothing (``--actuator none``). With ``fleet`` (``--jobs k8s``)
    it still says which jobs are serving fleets: what the loop detects and decides in observe mode must be what it
    would with ``--actuator k8s`` (a fleet's replicas are not compared as one job's ranks, nor the fleet requeued).
    """

    name: ClassVar[str] = "none"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(self, fleet: KubernetesJobs | None = None) -> None:
        self.fleet = fleet

    def is_serving(self, job: str) -> bool | None:
        """From ``--jobs k8s`` where given; else unknown."""
        return None if self.fleet is None else self.fleet.is_serving(job)

    def _apply(self, request: ActionRequest) -> AdapterReply:
        return AdapterReply("dry_run", f"actuator none: {request.kind} on {request.target} not carried out")


class CordonAdapter(KubernetesAdapter):
    """Kubernetes by cordon/uncordon: a drained node takes no new pods, and the running ones are left to the job
    (``kubectl drain`` would evict them; the loop checkpoints and requeues jobs through its own actions).
    """

    def argv(self, request: ActionRequest) -> list[str]:
        """``kubectl cordon|uncordon NODE``; a requeue, a replica's restart or a checkpoint as
        :class:`KubernetesAdapter` does it (pods deleted, or signalled).
        """
        if request.kind not in (ActionKind.DRAIN, ActionKind.UNDRAIN):
            return super().argv(request)
        node = leaf(request.target)
        return ["kubectl", "cordon" if request.kind == ActionKind.DRAIN else "uncordon", node]


class JobLookup:
    """The watcher's job source (``--jobs``), remembering what it last said so the actuator can name a GPU's job.

    A scheduler adapter knows job ids, not which GPUs they hold: without this a GPU's or node's job is unknown live,
    and every checkpoint or requeue of "the job" is refused as unresolved.
    """

    def __init__(self, source: Callable[[tuple[str, ...], Mapping[str, Mapping[str, str]]], JobMap | None]) -> None:
        self.source = source
        self._owner: dict[str, str] = {}  # GPU id -> job entity (<site>/jobs/<id>)

    def __call__(self, gpu_ids: tuple[str, ...], labels: Mapping[str, Mapping[str, str]]) -> JobMap | None:
        """Ask the job source (the cluster calls this every ``jobs_every_s``) and remember its answer."""
        jobs = self.source(gpu_ids, labels)
        owner: dict[str, str] = {}
        if jobs is not None:
            for gpu, j in zip(gpu_ids, jobs.job_index.tolist(), strict=True):
                if j >= 0:
                    job = jobs.job_ids[j]
                    owner[gpu] = job if "/" in job else f"{gpu.split('/', 1)[0]}/jobs/{job}"
        self._owner = owner
        return jobs

    def jobs_under(self, entity: str) -> list[str]:
        """The jobs on ``entity`` (a GPU, or every GPU under a node/rack/row), sorted; a job id as itself."""
        if "/jobs/" in entity:
            return [entity]
        prefix = entity.rstrip("/") + "/"
        return sorted({job for gpu, job in self._owner.items() if gpu == entity or gpu.startswith(prefix)})


class DryRunFirst(ActionAdapter):
    """Wraps a real adapter: shows the dry run of each request, then carries it out. With ``jobs`` (the watcher's
    :class:`JobLookup`), a GPU's job is the one the job source says runs there.
    """

    name: ClassVar[str] = "dry-run-first"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(
        self, dry: ActionAdapter, real: ActionAdapter, show: Callable[[str], None], jobs: JobLookup | None = None
    ) -> None:
        self.dry = dry
        self.real = real
        self.show = show
        self.jobs = jobs
        self.name = f"{real.name}"  # type: ignore[misc]

    # Every question the responder asks goes to the real adapter: answered by the base class's defaults instead,
    # `twinloop watch --actuator slurm` could never see a checkpoint confirmed, a job's timing or a PSU's headroom.
    def resolve(self, selector: str, incident: Incident) -> list[str]:
        """The real adapter's targets; a job from the job source where one is given."""
        if selector == "job" and self.jobs is not None:
            return sorted({j for e in (incident.root, *incident.members) for j in self.jobs.jobs_under(e)})
        return self.real.resolve(selector, incident)

    def supply_limit_w(self, target: str) -> float | None:
        """The real adapter's answer."""
        return self.real.supply_limit_w(target)

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """The real adapter's answer."""
        return self.real.checkpoint_done(job, since_ts)

    def job_timing(self, job: str) -> JobTiming | None:
        """The real adapter's answer."""
        return self.real.job_timing(job)

    def is_serving(self, job: str) -> bool | None:
        """The real adapter's answer."""
        return self.real.is_serving(job)

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        """The real adapter's answer."""
        return self.real.requeue_pace(job, without)

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        """The real adapter's answer."""
        return self.real.thermal_path(gpu)

    def job_of(self, entity: str) -> str | None:
        """The job source's one job on ``entity`` where one is given (None if none or several), else the real
        adapter's answer.
        """
        if self.jobs is not None:
            found = self.jobs.jobs_under(entity)
            return found[0] if len(found) == 1 else None
        return self.real.job_of(entity)

    def jobs_on(self, entity: str) -> tuple[str, ...] | None:
        """The job source's jobs on ``entity`` where one is given, else the real adapter's answer (a requeue whose job
        has already left its incident's node is then not done twice under `twinloop watch` either).
        """
        if self.jobs is not None:
            return tuple(self.jobs.jobs_under(entity))
        return self.real.jobs_on(entity)

    def cdu_of(self, entity: str) -> str | None:
        """The real adapter's answer."""
        return self.real.cdu_of(entity)

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        """The real adapter's hardware range."""
        return self.real.limits(kind, target)

    def current(self, kind: ActionKind, target: str) -> float | None:
        """The real adapter's current setting."""
        return self.real.current(kind, target)

    def apply(self, request: ActionRequest) -> AdapterReply:
        """Dry run (shown), then the real thing (the real adapter refuses kinds it does not support)."""
        dry = self.dry.apply(request)
        self.show(f"dry run: {dry.detail}")
        return self.real.apply(request)

    def _apply(self, request: ActionRequest) -> AdapterReply:  # pragma: no cover - apply is overridden
        return self.real.apply(request)


def make_actuator(
    name: str,
    show: Callable[[str], None] = lambda _m: None,
    heartbeats: JobHeartbeats | None = None,
    jobs: JobLookup | None = None,
) -> ActionAdapter:
    """The adapter for ``--actuator NAME``. The scheduler's adapter names a GPU's job from ``jobs`` (the watcher's
    ``--jobs``, also given to the cluster), so a checkpoint or requeue of "the incident's job" reaches it; with
    ``heartbeats`` (``--job-heartbeats DIR``) it also confirms checkpoints and prices restarts from what the jobs
    record there.

    Raises:
        InputError: an unknown name, NVML not available for ``nvml``, or heartbeats for an actuator with no jobs
            or without a job source.
    """
    if heartbeats is not None and name not in ("slurm", "k8s"):
        raise InputError("--job-heartbeats", "", f"needs --actuator slurm or k8s (the scheduler's), not {name!r}")
    if heartbeats is not None and jobs is None:
        raise InputError("--job-heartbeats", "", "needs --jobs (slurm, k8s or FILE): which job runs on which GPU")
    # With `--jobs k8s` the adapter learns the pods of each controller's job: which to delete, and which serve.
    fleet = jobs.source if jobs is not None and isinstance(jobs.source, KubernetesJobs) else None
    if name == "none":
        return NoActuator(fleet)
    if name == "slurm":
        real = SlurmAdapter(dry_run=False, heartbeats=heartbeats)
        return DryRunFirst(SlurmAdapter(dry_run=True), real, show, jobs)
    if name == "k8s":
        cordon = CordonAdapter(dry_run=False, heartbeats=heartbeats, fleet=fleet)
        return DryRunFirst(CordonAdapter(dry_run=True, fleet=fleet), cordon, show, jobs)
    if name == "nvml":
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded...
            raise InputError("--actuator", "nvml", f"NVML is not available on this machine: {exc}") from None
        return DryRunFirst(NvmlAdapter(pynvml, dry_run=True), NvmlAdapter(pynvml, dry_run=False), show)
    raise unknown_name("--actuator", "", "actuator", name, ACTUATORS)
