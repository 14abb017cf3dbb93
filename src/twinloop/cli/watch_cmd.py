"""`twinloop watch SOURCE`: the operational loop on a real cluster (or a recording of one)."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, clock_text, fail, guarded, print_json, stderr
from twinloop.errors import InputError

if TYPE_CHECKING:
    from twinloop.ops import ActionAdapter, Built, JobSource, Policy, SiteFile, WatchSummary
    from twinloop.ops.live.job_progress import JobProgress

MODES = ("observe", "approve", "auto")
JOB_SOURCES = "slurm | k8s | FILE"


@app.command()
def watch(
    source: str = typer.Argument(
        ...,
        help="nvml | nvidia-smi[:FILE] | dcgm:URL | prometheus:URL | replay:FILE (.duckdb, .parquet, .csv).",
    ),
    target: str | None = typer.Argument(None, help="The FILE or URL, when given apart: `watch replay FILE`."),
    mode: str = typer.Option("observe", "--mode", help="observe (recommend only) | approve | auto."),
    actuator: str = typer.Option("none", "--actuator", help="none | nvml | slurm | k8s (none touches nothing)."),
    policy: Path | None = typer.Option(None, "--policy", help="Response policy YAML (default: the packaged one)."),
    topology: Path | None = typer.Option(None, "--topology", help="Site file: hosts → row/rack/CDU/PDU."),
    jobs: str | None = typer.Option(None, "--jobs", help=f"Where jobs come from: {JOB_SOURCES}."),
    db: Path | None = typer.Option(None, "--db", help="DuckDB store for telemetry, incidents and actions."),
    speed: float = typer.Option(0.0, "--speed", help="Replay speed (1 = as recorded, 0 = as fast as possible)."),
    duration: float | None = typer.Option(None, "--duration", help="Stop after this many seconds of data."),
    period: float = typer.Option(1.0, "--period", help="Sampling period of live sources, s."),
    alertmanager: str | None = typer.Option(None, "--alertmanager", help="Alertmanager URL (API v2)."),
    run_name: str = typer.Option("watch", "--run", help="Run name in the store (a restart continues it)."),
    job_heartbeats: Path | None = typer.Option(
        None,
        "--job-heartbeats",
        help="Directory of the jobs' heartbeat files (twinloop job-event): their steps, loss and checkpoints; needs"
        " --jobs.",
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Watch a cluster: detect → classify → respond → verify at the source's cadence, recording as it goes."""
    if target is not None:
        if ":" in source:
            raise fail(str(InputError("TARGET", "", f"{source!r} names its target already (give it once)")))
        source = f"{source}:{target}"
    args = _WatchArgs(source, mode, actuator, policy, topology, jobs, db, speed, duration, period, alertmanager,
                      run_name, job_heartbeats)  # fmt: skip
    parts = guarded(lambda: _prepare(args))
    doc = guarded(lambda: _run(args, parts))
    if json_out:
        print_json(doc)
    else:
        _print_text(doc)


@dataclass(frozen=True)
class _WatchArgs:
    """The command line of ``twinloop watch``, as given."""

    source: str
    mode: str
    actuator: str
    policy: Path | None
    topology: Path | None
    jobs: str | None
    db: Path | None
    speed: float
    duration_s: float | None
    period_s: float
    alertmanager: str | None
    run_name: str
    job_heartbeats: Path | None = None


@dataclass(frozen=True)
class _Parts:
    """What the loop is built from: the source, the site, the policy, where jobs come from, the actuator."""

    built: Built
    site: SiteFile | None
    policy: Policy | None
    job_source: JobSource | None
    adapter: ActionAdapter
    progress: JobProgress | None = None


def _say(message: str) -> None:
    # Progress goes to stderr in every mode, so --json keeps stdout to one document.
    stderr.print(message, markup=False, highlight=False, soft_wrap=True)


def _check(args: _WatchArgs) -> None:
    """Reject out-of-range options before anything is opened."""
    if args.mode not in MODES:
        raise InputError("--mode", "", f"{args.mode!r} (allowed: {', '.join(MODES)})")
    if args.speed < 0:
        raise InputError("--speed", "", f"{args.speed} (allowed: >= 0)")
    if args.duration_s is not None and args.duration_s <= 0:
        raise InputError("--duration", "", f"{args.duration_s} (allowed: > 0 s)")
    if args.alertmanager is not None and not args.alertmanager.startswith(("http://", "https://")):
        # else every alert fails to send, one warning each, and the watch still exits 0
        raise InputError("--alertmanager", "", f"{args.alertmanager!r} (allowed: an http:// or https:// URL)")


def _job_source(jobs: str | None) -> JobSource | None:
    """Where the watcher learns which job runs on which GPU: Slurm, Kubernetes, a file, or nowhere."""
    from twinloop.ops import load_job_file
    from twinloop.ops.live.jobs import SlurmJobs
    from twinloop.ops.live.k8s_fleet import KubernetesJobs

    if jobs is None:
        return None
    if jobs == "slurm":
        # Each job on the GPUs Slurm names (gres_detail); two jobs claiming one GPU said once on this stream.
        return SlurmJobs(warn=_say)
    if jobs == "k8s":
        # Pods grouped by their controller (a serving fleet is one job); one job per pod where kubectl cannot tell.
        return KubernetesJobs(warn=_say)
    path = Path(jobs)
    if not path.is_file():
        raise InputError("--jobs", "", f"{jobs}: not slurm, k8s or a file")
    return lambda gpus, _labels: load_job_file(path, gpus)


def _prepare(args: _WatchArgs) -> _Parts:
    """Check the options and build what the loop reads and acts through (bad input raises InputError)."""
    from twinloop.ops import build_source, load_policy, load_site, make_actuator
    from twinloop.ops.live.actuators import JobLookup
    from twinloop.ops.live.job_progress import JobProgress
    from twinloop.ops.respond.adapters.heartbeats import open_heartbeats

    _check(args)
    built = build_source(args.source, period_s=args.period_s)
    if args.speed > 0 and not built.replay:
        raise InputError("--speed", "", "only a recording (replay:FILE, nvidia-smi:FILE) can be paced")
    site = load_site(args.topology) if args.topology is not None else None
    pol = load_policy(args.policy) if args.policy is not None else None
    job_source = _job_source(args.jobs)
    # The actuator names each GPU's job (to checkpoint or requeue it, and confirm its checkpoint): it shares the
    # cluster's job source.
    jobs = JobLookup(job_source) if job_source is not None else None
    if args.job_heartbeats is None:
        return _Parts(built, site, pol, jobs, make_actuator(args.actuator, _say, None, jobs))
    if jobs is None:
        raise InputError("--job-heartbeats", "", "needs --jobs (slurm, k8s or FILE): which job runs on which GPU")
    beats = open_heartbeats(args.job_heartbeats, _say)
    # Every actuator gets the jobs' progress as telemetry; the scheduler's also confirm checkpoints with them.
    checkpoints = beats if args.actuator in ("slurm", "k8s") else None
    progress = JobProgress(args.job_heartbeats, _say)
    return _Parts(built, site, pol, jobs, make_actuator(args.actuator, _say, checkpoints, jobs), progress)


def _run(args: _WatchArgs, parts: _Parts) -> dict[str, Any]:
    """Build the watcher, run it until the source ends, the duration passes or a signal stops it; the summary."""
    from twinloop.ops import (
        AlertmanagerClient,
        LiveOptions,
        LiveRecords,
        SourceCluster,
        WatchConfig,
        Watcher,
    )
    from twinloop.ops.live.row_keys import gpu_rows_source_key
    from twinloop.telemetry.store.control import ControlChannel, control_path
    from twinloop.telemetry.store.session import SessionStore

    db, built = args.db, parts.built
    # the store is opened only in short sessions (append, close), so `twinloop serve --db` reads it live
    store = SessionStore(db) if db is not None else None
    # keyed: a watcher run again over the same data (a replay, a restart) stores none of its GPU rows twice
    on_frame = None if store is None else partial(store.append, source_key=gpu_rows_source_key(args.source, built))
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    cluster = SourceCluster(
        built.source,
        parts.adapter,
        LiveOptions(cadence_s=built.cadence_s, speed=args.speed, whole_sweeps=built.whole_sweeps),
        site=parts.site,
        jobs=parts.job_source,
        on_frame=on_frame,
        progress=parts.progress,
    )
    records = LiveRecords(store, args.run_name) if store is not None else None
    control = ControlChannel(control_path(db), args.run_name) if db is not None else None
    alerts = AlertmanagerClient(args.alertmanager) if args.alertmanager else None
    config = WatchConfig(mode=args.mode, run=args.run_name, policy=parts.policy)  # type: ignore[arg-type]
    # With --job-heartbeats the jobs' progress the rules read goes to the store too, beside the GPUs' rows.
    watcher = Watcher(cluster, records, control, alerts, config, _say, telemetry=store)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _say(
        f"watching {args.source} in {args.mode} mode, actuator {args.actuator}" + (f", recording to {db}" if db else "")
    )
    summary = watcher.run(args.duration_s, stop.is_set)
    if built.replay and not summary.samples and not stop.is_set():
        _nothing_read(args.source, cluster.report)
    incidents, actions = records.summary() if records is not None else _in_memory(watcher)
    advisor = watcher.advisor
    # The learned classifier's second opinion (acts on nothing): per incident, where it and the rules differ.
    advisory = (
        None if advisor is None else {**advisor.summary(), "incidents": [a.to_dict() for a in advisor.advice.values()]}
    )
    return {**_summary_doc(args, summary, incidents, actions), "advisory": advisory}


def _nothing_read(source: str, report: Any) -> None:
    """A recording that gave the loop not one sample is an error naming its first bad line, not a quiet, empty
    watch (exit 0 with "0 samples" read as "the loop saw nothing wrong").
    """
    from twinloop.telemetry.ingest import require_rows_kept

    require_rows_kept(report, source)
    raise InputError(source, "", "no sample in the recording (allowed: a file with at least one reading)")


def _summary_doc(
    args: _WatchArgs, summary: WatchSummary, incidents: list[dict[str, Any]], actions: list[dict[str, Any]]
) -> dict[str, Any]:
    """The JSON document of a watch: what ran, how it stopped, counts, data quality, incidents and actions."""
    return {
        "source": args.source,
        "mode": args.mode,
        "actuator": args.actuator,
        "db": str(args.db) if args.db is not None else None,
        "run": args.run_name,
        "stopped": summary.stopped,
        "samples": summary.samples,
        "first_ts": summary.first_ts,
        "last_ts": summary.last_ts,
        "wall_s": round(summary.wall_s, 3),
        "counts": {
            "incidents": len(incidents),
            "incidents_warning_or_above": sum(1 for i in incidents if i["severity"] != "info"),
            "actions": len(actions),
            "actions_failed": sum(1 for a in actions if a["status"] == "failed"),
            "pending": sum(1 for a in actions if a["status"] == "pending"),
            "warnings": summary.warnings,
            "held_steps": summary.held_steps,
            "resumed_incidents": summary.resumed_incidents,
            "relisted_pending": summary.relisted_pending,
            "alerts_sent": summary.alerts_sent,
            "alerts_failed": summary.alerts_failed,
        },
        "data_quality": summary.quality,
        "incidents": incidents,
        "actions": actions,
    }


def _print_text(doc: dict[str, Any]) -> None:
    """The human summary: counts on stderr, one line per incident on stdout."""
    c = doc["counts"]
    stderr.print(
        f"{doc['samples']} samples ({doc['stopped']}): {c['incidents']} incidents "
        f"({c['incidents_warning_or_above']} warning or above), {c['actions']} actions "
        f"({c['actions_failed']} failed, {c['pending']} pending), {c['warnings']} data warnings",
        highlight=False,
    )
    for i in doc["incidents"]:
        closed = "open" if i["closed_ts"] is None else f"closed {clock_text(i['closed_ts'])}"
        sys.stdout.write(
            f"incident {i['incident_id']}: {i['class']} {i['severity']} at {i['root']} "
            f"opened {clock_text(i['opened_ts'])}, {closed}\n"
        )


def _in_memory(watcher: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary lists from the watcher's memory when there is no store."""
    incidents = [
        {"incident_id": i.incident_id, "opened_ts": i.start_ts, "closed_ts": i.end_ts if i.status != "open" else None,
         "class": str(i.event_class), "severity": i.severity.name.lower(), "root": i.root,
         "entities": list(i.members), "status": i.status, "last_ts": i.end_ts}
        for i in sorted(watcher.incidents, key=lambda i: i.incident_id)
    ]  # fmt: skip
    actions = []
    for r in watcher.runner.actions if hasattr(watcher.runner, "actions") else watcher.runner.responder.log:
        req = r.request
        actions.append({"action_id": watcher._act_map.get(r.action_id, r.action_id), "ts": r.ts, "kind": str(req.kind),
                        "target": req.target, "value": req.value, "status": r.status, "detail": r.detail,
                        "incident_id": watcher._inc_map.get(req.incident_id, req.incident_id),
                        "rule": req.reason.partition(" on incident ")[0], "reason": req.reason,
                        "verification": None})  # fmt: skip
    return incidents, actions
