"""``twinloop watch``'s engine: the loop runner over a live cluster, with records, approvals, alerts and restarts.

The loop itself (detect → classify → respond → verify) is the generic runner's
(:class:`twinloop.ops.runner.LoopRunner`); this module adds what a loop on real GPUs needs around it:

* **records as they happen** (:class:`~twinloop.ops.records.LiveRecords`): every incident update and every action
  result is written to the store when the runner reports it, with its rule, reason, incident and verification;
* **people**: actions waiting for approval are listed in the control file (:mod:`.control`) and the decisions a
  person makes in the dashboard are applied at the next tick, under the guard rails; a person's decision also
  labels the incident's alarm source for the threshold tuner;
* **alerts** (:class:`~twinloop.ops.alerts.AlertmanagerClient`) for incidents and for failed actions, which are
  never retried blindly (the guard rails back off; a person is told);
* **restart safety**: started again on the same store and run, it carries on the stored incident and action ids,
  resumes its open incidents (a re-detected incident of the same class and root continues the stored one and does
  not fire its rules again; one not seen again within the pipeline's quiet period is closed), re-lists its pending
  approvals, tells the guard rails what was done (rate limits and back-off hold across the restart), and starts
  with the thresholds it learned;
* **the jobs' own progress in the store** (with ``--job-heartbeats``): each sample's job step fields and per-GPU
  rank step times, as the rules saw them, become telemetry rows at the sample's time beside the GPUs' own
  (:mod:`~twinloop.ops.live.progress_rows`), written once even when a restarted watcher reads the same data again;
  and, with records, which GPUs each job held over which time (spans, :mod:`~twinloop.ops.live.placement_rows`);
* **data quality**: samples with warnings (gaps, NaN bursts, duplicates, late rows, a source that came back) are
  counted and shown, and no action is taken on the step of such a sample (a rule's firing on a broken sample waits
  for a clean one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from twinloop.ops.alerts import AlertmanagerClient
from twinloop.ops.classify.advisory import Advisor, load_advisory_model
from twinloop.ops.detect.pipeline import DETECTOR_THRESHOLDS, RULE_THRESHOLDS, PipelineConfig
from twinloop.ops.events import Incident, Severity
from twinloop.ops.learn.feedback import ThresholdTuner
from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.control import ControlChannel, pending_row
from twinloop.ops.live.job_progress import JobProgress
from twinloop.ops.live.jobs import load_job_file
from twinloop.ops.live.kinds import build_source
from twinloop.ops.live.placement_rows import JobPlacement
from twinloop.ops.live.progress_rows import FrameSink, progress_frame, progress_source_key
from twinloop.ops.live.rules import use_live_rules
from twinloop.ops.ports import END, Sample
from twinloop.ops.records import VERDICTS, LiveRecords
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
from twinloop.ops.respond.policy import Mode, Policy
from twinloop.ops.runner import LoopRunner

Say = Callable[[str], None]


@dataclass(frozen=True)
class WatchConfig:
    """Watcher settings.

    Attributes:
        mode: ``observe`` (recommend only), ``approve`` (queue for a person) or ``auto``.
        run: the run name under which records are kept (restarts continue it).
        policy: the response policy (None: the packaged default).
        heartbeat_s: how often the status and decisions are exchanged with the control file, wall s.
        alert_refresh_s: how often firing alerts are re-sent, wall s.
        hold_on_warnings: take no action on a step whose sample has data-quality warnings.
        advisory: judge every incident with the packaged learned classifier too (a second opinion beside the
            rules' class, recorded and reported, acted on by nothing; :mod:`twinloop.ops.classify.advisory`).
    """

    mode: Mode = "observe"
    run: str = "watch"
    policy: Policy | None = None
    heartbeat_s: float = 1.0
    alert_refresh_s: float = 60.0
    hold_on_warnings: bool = True
    advisory: bool = True


@dataclass
class WatchSummary:
    """What a watch did (this process)."""

    samples: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    stopped: str = ""
    warnings: int = 0
    held_steps: int = 0
    alerts_sent: int = 0
    alerts_failed: int = 0
    resumed_incidents: int = 0
    relisted_pending: int = 0
    quality: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


class Watcher:
    """The live loop with its records, people, alerts and restarts (see the module docstring).

    Args:
        cluster: the live cluster.
        records: where incidents and actions go (None: nowhere; no restart safety).
        control: the channel to people (None: approvals only through :meth:`decide`).
        alerts: the Alertmanager client (None: no alerts).
        config: settings.
        say: progress and warnings for a person (stderr in the CLI).
        telemetry: the store the jobs' progress rows go to, when the cluster reads the jobs' heartbeats (the CLI's
            store, which the cluster's GPU rows go to as well); None: not written.
    """

    def __init__(
        self,
        cluster: SourceCluster,
        records: LiveRecords | None = None,
        control: ControlChannel | None = None,
        alerts: AlertmanagerClient | None = None,
        config: WatchConfig | None = None,
        say: Say | None = None,
        telemetry: FrameSink | None = None,
    ) -> None:
        self.cluster = cluster
        self.telemetry = telemetry if cluster.progress is not None else None
        self._progress_key = None if cluster.progress is None else progress_source_key(cluster.progress.directory)
        self.records = records
        self.control = control
        self.alerts = alerts
        self.config = config or WatchConfig()
        self.say: Say = say or (lambda _m: None)
        self.summary = WatchSummary()
        self.tuner = ThresholdTuner()
        self.runner: LoopRunner | None = None
        #: The learned classifier's second opinion (built at start when ``config.advisory``), by stored incident id.
        self.advisor: Advisor | None = None
        self._inc_offset = 0
        self._act_offset = 0
        self._inc_map: dict[int, int] = {}  # pipeline incident id -> stored id
        self._act_map: dict[int, int] = {}  # responder action id -> stored id
        self._local_of: dict[int, int] = {}  # stored id -> responder action id (pending ones)
        self._applied_by_request: dict[int, int] = {}  # id(request) -> stored action id (for verdicts)
        self._resume: dict[tuple[str, str], int] = {}  # (class, root) -> stored id of an incident open at start
        self._fired_before: dict[int, set[str]] = {}  # stored incident id -> rules fired on it before
        self._latest: dict[int, Incident] = {}
        self._source_of: dict[int, str] = {}  # stored incident id -> its first alarm source
        self._relist: list[tuple[int, ActionRequest]] = []
        self._last_beat = -float("inf")
        self._last_refresh = time.monotonic()
        self._busy_warned = -float("inf")
        self._deferred: dict[int, Incident] = {}  # updates of held steps, for the responder at the next clean step
        self._placement: JobPlacement | None = None  # the jobs' GPUs, with the progress rows (built at start)

    # ------------------------------------------------------------------ set-up and restart
    def start(self, stop: Callable[[], bool] | None = None) -> None:
        """Read the topology (until ``stop()`` says so), restore what a previous run left, build the runner."""
        if self.runner is not None:
            return
        topo = self.cluster.topology(stop)
        if self.config.advisory:
            self.advisor = Advisor(topo.gpu_ids, topo.limits, load_advisory_model())
        scale = self._restore_thresholds()
        if self.telemetry is not None and self.records is not None:
            self._placement = JobPlacement(topo.gpu_ids, topo.site, self.records.last_job_gpus())
        self.runner = LoopRunner(
            self.cluster,
            mode=self.config.mode,
            policy=self.config.policy,
            pipeline_config=PipelineConfig(threshold_scale=scale),
            optimize_cooling=bool(self.cluster.topology().liquid_rows),
            on_sample=self.advisor.observe if self.advisor is not None else None,
            on_incidents=self._on_incidents,
            on_actions=self._on_actions,
        )
        self.runner.start()
        use_live_rules(self.runner.pipeline)
        self._restore()

    @property
    def incidents(self) -> list[Incident]:
        """Every incident so far, its latest version, in the order they opened."""
        return sorted(self._latest.values(), key=lambda i: (i.start_ts, i.incident_id))

    @property
    def loop(self) -> LoopRunner:
        """The loop runner (built by :meth:`start`)."""
        self.start()
        assert self.runner is not None
        return self.runner

    def _restore_thresholds(self) -> dict[str, float]:
        if self.records is None:
            return {}
        stored = self.records.state("threshold_scale", {}) or {}
        known = set(RULE_THRESHOLDS) | {
            f for f, d in PipelineConfig().field_detectors.items() if d in DETECTOR_THRESHOLDS
        }
        scale = {k: float(v) for k, v in stored.items() if k in known and float(v) > 0}
        for k, v in scale.items():
            self.tuner._mult[k] = v  # the tuner carries on from the stored multipliers
        return scale

    def _restore(self) -> None:
        if self.records is None:
            return
        inc_max, act_max = self.records.max_ids()
        self._inc_offset, self._act_offset = inc_max + 1, act_max + 1
        for row in self.records.open_incidents():
            self._resume[(str(row["event_class"]), str(row["root"]))] = int(row["incident_id"])
        self.summary.resumed_incidents = len(self._resume)
        responder = self.runner.responder if self.runner is not None else None
        decided: set[int] = set()
        for a in self.records.actions():
            if a.incident_id >= 0 and a.rule:
                self._fired_before.setdefault(a.incident_id, set()).add(a.rule)
            if a.status in ("applied", "dry_run", "failed", "refused", "rolled_back", "restored") and responder:
                # The guard rails learn what was done: rate limits and failure back-off hold across the restart.
                req = ActionRequest(ActionKind(a.kind), a.target, a.value, incident_id=a.incident_id)
                responder.guards.record(ActionResult(a.action_id, req, a.status, a.ts))  # type: ignore[arg-type]
            if a.status in ("rejected", "applied", "refused", "failed"):
                decided.add(a.action_id)
        for a in self.records.actions():
            if a.status == "pending" and a.action_id not in decided and responder is not None:
                req = ActionRequest(ActionKind(a.kind), a.target, a.value, reason=a.reason, incident_id=a.incident_id)
                self._relist.append((a.action_id, req))

    # ------------------------------------------------------------------ ids
    def _stored_incident(self, inc: Incident) -> int:
        sid = self._inc_map.get(inc.incident_id)
        if sid is None:
            key = (str(inc.event_class), inc.root)
            if key in self._resume and inc.status == "open":
                sid = self._resume.pop(key)
                # Rules that acted on the stored incident do not act again on its continuation.
                fired = getattr(self.loop.responder, "_fired", None)
                if fired is not None:
                    fired.update((inc.incident_id, rule) for rule in self._fired_before.get(sid, ()))
                self.say(f"incident {sid} ({key[0]} at {key[1]}) continues after the restart")
            else:
                sid = self._inc_offset + inc.incident_id
            self._inc_map[inc.incident_id] = sid
        return sid

    def _stored_action(self, local_id: int) -> int:
        return self._act_map.setdefault(local_id, self._act_offset + local_id)

    def _stored_view(self, inc: Incident) -> Incident:
        merged = None if inc.merged_into is None else self._inc_map.get(inc.merged_into, inc.merged_into)
        return replace(inc, incident_id=self._stored_incident(inc), merged_into=merged)

    # ------------------------------------------------------------------ hooks
    def _on_incidents(self, sample: Sample, updates: Sequence[Incident]) -> None:
        stored = [self._stored_view(u) for u in updates]
        if self.advisor is not None:
            self.advisor.on_incidents(sample, stored)
        for inc, raw in zip(stored, updates, strict=True):
            new = inc.incident_id not in self._latest
            self._latest[inc.incident_id] = inc
            if new and inc.evidence:
                self._source_of[inc.incident_id] = inc.evidence[0].source
            if self.records is not None:
                self.records.incident(inc, raw.incident_id)
                if new and self.advisor is not None and inc.incident_id in self.advisor.advice:
                    self.records.advice(self.advisor.advice[inc.incident_id])
            if new and inc.severity >= Severity.MINOR:
                self.say(
                    f"incident {inc.incident_id} opened: {inc.event_class} at {inc.root} ({inc.severity.name.lower()})"
                )
            elif inc.status != "open" and inc.severity >= Severity.MINOR:
                self.say(f"incident {inc.incident_id} {inc.status}: {inc.event_class} at {inc.root}")
        if self.alerts is not None:
            self._warn(self.alerts.incidents(stored))

    def _on_actions(self, sample: Sample, results: Sequence[ActionResult]) -> None:
        for r in results:
            sid = self._stored_action(r.action_id)
            req = r.request
            view = replace(r, request=replace(req, incident_id=self._inc_map.get(req.incident_id, req.incident_id)))
            verifies = None
            if r.status == "verified":
                verifies = self._applied_by_request.get(id(req))
            elif r.status == "rolled_back" and req.reason.startswith("rollback of action "):
                local = req.reason.split()[3].rstrip(":")
                verifies = self._act_map.get(int(local)) if local.isdigit() else None
            if r.status == "applied":
                self._applied_by_request[id(req)] = sid
            if self.records is not None:
                self.records.action(sid, view, verifies if r.status in VERDICTS else None)
            if r.status == "pending":
                self._local_of[sid] = r.action_id
                if self.control is not None:
                    self.control.put_pending(pending_row(sid, view.request, r.ts, r.clamped))
                self.say(f"action {sid} awaits approval: {req.kind} on {req.target} ({req.reason})")
            elif r.status == "failed":
                self.say(
                    f"ACTION FAILED {sid}: {req.kind} on {req.target}: {r.detail} (not retried; raised to a person)"
                )
                if self.alerts is not None:
                    self._warn(self.alerts.failed_action(sid, view))
            elif r.status in ("applied", "dry_run", "recommended", "rolled_back", "restored"):
                self.say(
                    f"action {sid} {r.status}: {req.kind} on {req.target} {'' if req.value is None else req.value}"
                )

    def _warn(self, message: str | None) -> None:
        if message:
            self.summary.warnings += 1
            self.say(f"warning: {message}")

    # ------------------------------------------------------------------ people
    def decide(self, stored_id: int, approve: bool) -> ActionResult | None:
        """A person's decision on a pending action (by its stored id); None when it is not pending here."""
        local = self._local_of.get(stored_id)
        if local is None or local not in self.loop.pending:
            return None
        inc_id = self.loop.pending[local].incident_id
        # The runner reports the result with its next step (on_actions records it then).
        result = self.loop.approve(local) if approve else self.loop.reject(local)
        sid = self._inc_map.get(inc_id)
        source = self._source_of.get(sid) if sid is not None else None
        if source is not None and (source in RULE_THRESHOLDS or source in PipelineConfig().field_detectors):
            # A person's answer labels the alarm: approve = a true alarm, reject = a false one.
            self.tuner.alarm(stored_id, source)
            self.tuner.label(stored_id, approve)
            if self.records is not None:
                self.records.set_state("threshold_scale", self.tuner.multipliers)
        if self.control is not None:
            self.control.settle(stored_id, result.status)
        return result

    def _flush_records(self, final: bool = False) -> None:
        """Write queued records and telemetry in a short session of the store (other processes read it between);
        a store held by another process keeps them queued, with a warning once a minute.
        """
        if self.records is None:
            return
        done = self.records.flush() if final else self.records.flush_due()
        target = self.records.target
        busy_since = getattr(target, "busy_since", None)
        if not done and busy_since is not None and time.monotonic() - self._busy_warned >= 60.0:
            self._busy_warned = time.monotonic()
            queued = getattr(target, "queued", 0)
            self._warn(f"store held by another process: {queued} writes queued, written when it lets go")

    def _exchange(self, force: bool = False) -> None:
        now = time.monotonic()
        due = force or now - self._last_beat >= self.config.heartbeat_s
        if due and self._placement is not None and self.records is not None:
            # The spans go with the heartbeat, not every sample: an unchanged placement only grows its span.
            self.records.job_gpus([(s.job, s.gpus, s.first_ts, s.last_ts) for s in self._placement.take()])
        self._flush_records(final=force)
        if not due:
            return
        self._last_beat = now
        if self.control is not None:
            for sid, decision in self.control.take_decisions():
                if self.decide(sid, decision == "approve") is None:
                    self.control.settle(sid, "unknown to the watcher")
            self.control.heartbeat(self.status())
        if self.alerts is not None and now - self._last_refresh >= self.config.alert_refresh_s:
            self._last_refresh = now
            self._warn(self.alerts.refresh())

    def status(self) -> dict[str, Any]:
        """Mode, counts, newest sample (scalars)."""
        return {
            "mode": self.config.mode,
            "source": self.cluster.source.label,
            "samples": self.summary.samples,
            "last_ts": self.summary.last_ts,
            "open_incidents": sum(1 for i in self.incidents if i.status == "open"),
            "pending": len(self.loop.pending) if self.runner is not None else 0,
            "warnings": self.summary.warnings,
        }

    # ------------------------------------------------------------------ the loop
    def run(self, duration_s: float | None = None, stop: Callable[[], bool] | None = None) -> WatchSummary:
        """Watch until the source ends, ``duration_s`` of data time passes, or ``stop()`` says so."""
        started = time.monotonic()
        self.start(stop)
        runner = self.loop
        responder = runner.responder
        silent_warned = False
        t0: float | None = None
        try:
            while True:
                if stop is not None and stop():
                    self.summary.stopped = "stop"
                    break
                self._exchange()
                sample = self.cluster.poll()
                if sample is END:
                    self.summary.stopped = "end"
                    break
                if sample is None:
                    if self.cluster.silent_for_s() > self.cluster.silence_s and not silent_warned:
                        silent_warned = True
                        errors = self.cluster.report.examples.get("source_error")  # why, when the source knows
                        why = f" (source error: {errors[-1]})" if errors else ""
                        self._warn(
                            f"source {self.cluster.source.label} silent for {self.cluster.silent_for_s():.0f} s{why}"
                        )
                    continue
                assert isinstance(sample, Sample)
                silent_warned = False
                t0 = sample.ts if t0 is None else t0
                if duration_s is not None and sample.ts - t0 >= duration_s:
                    self.summary.stopped = "duration"
                    break
                for w in sample.warnings:
                    self._warn(w)
                if self._resume and sample.ts - t0 > self.loop.pipeline.config.quiet_s:
                    self._close_unseen(sample.ts)
                if self._relist and responder is not None:
                    self._relist_pending(sample.ts)
                if bool(sample.warnings) and self.config.hold_on_warnings and responder is not None:
                    self._held_step(sample)
                else:
                    if self._deferred and responder is not None:
                        # The updates of held steps reach the responder now, before this step's own.
                        responder.handle(list(self._deferred.values()), sample.ts, self.cluster.read)
                        self._deferred = {}
                    runner.step(sample)
                self._store_progress(sample)
                self.summary.samples += 1
                self.summary.first_ts = sample.ts if self.summary.first_ts is None else self.summary.first_ts
                self.summary.last_ts = sample.ts
            self._record_open_incidents()
        finally:
            self.cluster.close()
            self._exchange(force=True)
            if self.alerts is not None:
                self.summary.alerts_sent, self.summary.alerts_failed = self.alerts.sent, self.alerts.failed
            if self.cluster._assembler is not None:
                self.summary.quality = self.cluster._assembler.counts.as_dict()
            self.summary.wall_s = time.monotonic() - started
        return self.summary

    def _store_progress(self, sample: Sample) -> None:
        """The jobs' progress this sample gave the rules, as telemetry rows at its time (queued with the store's)."""
        if self.telemetry is None:
            return
        topo = self.cluster.topology()
        frame = progress_frame(sample, topo.gpu_ids, topo.site)
        if len(frame):
            self.telemetry.append(frame, source_key=self._progress_key)
        if self._placement is not None:
            self._placement.observe(sample)

    def _record_open_incidents(self) -> None:
        """Store the incidents still open as they stand now: the grouper reports an incident when it opens, grows
        or closes, so without this an open one's last evidence would read as of its opening (a real H100's 60 s
        operator cap showed as 5 s).
        """
        for raw in self.loop.pipeline.open_incidents:
            inc = self._stored_view(raw)
            self._latest[inc.incident_id] = inc
            if self.records is not None:
                self.records.incident(inc, raw.incident_id)

    def _close_unseen(self, ts: float) -> None:
        """Incidents open at the restart that the loop has not seen again within a quiet period are over."""
        for (cls, root), sid in self._resume.items():
            self.say(f"incident {sid} ({cls} at {root}) not seen again after the restart: closed")
            if self.records is not None:
                self.records.close_incident(sid, ts, "not seen again after the restart")
        self._resume = {}

    def _held_step(self, sample: Sample) -> None:
        """No action on a broken sample: detection runs (its state must advance), the responder and the cooling
        optimizer sit this step out, and its incident updates wait for the next clean step.
        """
        runner = self.loop
        self.summary.held_steps += 1
        responder, optimizer = runner.responder, getattr(runner, "optimizer", None)
        runner.responder, runner.optimizer = None, None
        try:
            out = runner.step(sample)
        finally:
            runner.responder, runner.optimizer = responder, optimizer
        for inc in out.incidents:
            self._deferred[inc.incident_id] = inc

    def _relist_pending(self, now: float) -> None:
        responder = self.loop.responder
        assert responder is not None
        for old_sid, req in self._relist:
            result = responder.submit(req, now, self.cluster.read, "approve")
            self._act_map[result.action_id] = old_sid
            if result.status == "pending":
                self._local_of[old_sid] = result.action_id
                self.summary.relisted_pending += 1
                if self.control is not None:
                    self.control.put_pending(pending_row(old_sid, req, now, result.clamped))
            elif self.records is not None:
                self.records.action(old_sid, result)
        self._relist = []


def observe(spec: str, jobs: str | Path | None = None, heartbeats: str | Path | None = None) -> list[Incident]:
    """The incidents :class:`Watcher` opens on the source ``spec`` (``replay:FILE``, ``nvml``...) in observe mode,
    touching nothing: what a recording of a real GPU is checked against.

    Args:
        spec: the source.
        jobs: a job file (``twinloop watch --jobs FILE``): which job runs on which GPU.
        heartbeats: the jobs' heartbeat directory (``--job-heartbeats``; needs ``jobs``): their steps as telemetry.
    """
    built = build_source(spec)
    job_source = None if jobs is None else (lambda gpus, _labels: load_job_file(jobs, gpus))
    progress = None if heartbeats is None else JobProgress(heartbeats)
    cluster = SourceCluster(built.source, NoActuator(), LiveOptions(cadence_s=built.cadence_s), jobs=job_source,
                            progress=progress)  # fmt: skip
    w = Watcher(cluster, config=WatchConfig(mode="observe"))
    w.run()
    return w.incidents
