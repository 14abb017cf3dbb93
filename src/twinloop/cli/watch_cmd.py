"""`twinloop watch SOURCE`: the operational loop on a real cluster (or a recording of one)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import typer

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stderr
from twinloop.errors import InputError

MODES = ("observe", "approve", "auto")
JOB_SOURCES = "slurm | k8s | FILE"


@app.command()
def watch(
    source: str = typer.Argument(
        ...,
        help="nvml | nvidia-smi[:FILE] | dcgm:URL | prometheus:URL | replay:FILE (.duckdb, .parquet, .csv).",
    ),
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
    json_out: bool = JSON_OPTION,
) -> None:
    """Watch a cluster: detect → classify → respond → verify at the source's cadence, recording as it goes."""

    def prepare() -> Any:
        from twinloop.ops.live.actuators import make_actuator
        from twinloop.ops.live.jobs import k8s_jobs, load_job_file, slurm_jobs
        from twinloop.ops.live.kinds import build_source
        from twinloop.ops.live.site import load_site
        from twinloop.ops.respond.policy import load_policy

        if mode not in MODES:
            raise InputError("--mode", "", f"{mode!r} (allowed: {', '.join(MODES)})")
        if speed < 0:
            raise InputError("--speed", "", f"{speed} (allowed: >= 0)")
        if duration is not None and duration <= 0:
            raise InputError("--duration", "", f"{duration} (allowed: > 0 s)")
        built = build_source(source, period_s=period)
        if speed > 0 and not built.replay:
            raise InputError("--speed", "", "only a recording (replay:FILE, nvidia-smi:FILE) can be paced")
        site = load_site(topology) if topology is not None else None
        pol = load_policy(policy) if policy is not None else None
        job_source = None
        if jobs == "slurm":
            job_source = lambda gpus, _labels: slurm_jobs(gpus)  # noqa: E731
        elif jobs == "k8s":
            job_source = k8s_jobs
        elif jobs is not None:
            path = Path(jobs)
            if not path.is_file():
                raise InputError("--jobs", "", f"{jobs}: not slurm, k8s or a file")
            job_source = lambda gpus, _labels: load_job_file(path, gpus)  # noqa: E731
        adapter = make_actuator(actuator, say)
        return built, site, pol, job_source, adapter

    def say(message: str) -> None:
        # Progress goes to stderr in every mode, so --json keeps stdout to one document.
        stderr.print(message, markup=False, highlight=False, soft_wrap=True)

    built, site, pol, job_source, adapter = guarded(prepare)

    def run() -> dict[str, Any]:
        from twinloop.ops.alerts import AlertmanagerClient
        from twinloop.ops.live.cluster import LiveOptions, SourceCluster
        from twinloop.ops.live.control import ControlChannel, control_path
        from twinloop.ops.live.watcher import WatchConfig, Watcher
        from twinloop.ops.records import LiveRecords
        from twinloop.telemetry.store.session import SessionStore

        # the store is opened only in short sessions (append, close), so `twinloop serve --db` reads it live
        store = SessionStore(db) if db is not None else None
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        cluster = SourceCluster(
            built.source,
            adapter,
            LiveOptions(cadence_s=built.cadence_s, speed=speed, whole_sweeps=built.whole_sweeps),
            site=site,
            jobs=job_source,
            on_frame=store.append if store is not None else None,
        )
        records = LiveRecords(store, run_name) if store is not None else None
        control = ControlChannel(control_path(db), run_name) if db is not None else None
        alerts = AlertmanagerClient(alertmanager) if alertmanager else None
        config = WatchConfig(mode=mode, run=run_name, policy=pol)  # type: ignore[arg-type]
        watcher = Watcher(cluster, records, control, alerts, config, say)
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        say(f"watching {source} in {mode} mode, actuator {actuator}" + (f", recording to {db}" if db else ""))
        summary = watcher.run(duration, stop.is_set)
        incidents, actions = records.summary() if records is not None else _in_memory(watcher)
        doc = {
            "source": source,
            "mode": mode,
            "actuator": actuator,
            "db": str(db) if db is not None else None,
            "run": run_name,
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
            # The learned classifier's second opinion (acts on nothing): per incident, where it and the rules differ.
            "advisory": None
            if watcher.advisor is None
            else {**watcher.advisor.summary(), "incidents": [a.to_dict() for a in watcher.advisor.advice.values()]},
        }
        return doc

    doc = guarded(run)
    if json_out:
        print_json(doc)
    else:
        c = doc["counts"]
        stderr.print(
            f"{doc['samples']} samples ({doc['stopped']}): {c['incidents']} incidents "
            f"({c['incidents_warning_or_above']} warning or above), {c['actions']} actions "
            f"({c['actions_failed']} failed, {c['pending']} pending), {c['warnings']} data warnings",
            highlight=False,
        )
        for i in doc["incidents"]:
            closed = "open" if i["closed_ts"] is None else f"closed {i['closed_ts']:.1f}"
            sys.stdout.write(
                f"incident {i['incident_id']}: {i['class']} {i['severity']} at {i['root']} "
                f"opened {i['opened_ts']:.1f}, {closed}\n"
            )


def _in_memory(watcher: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary lists from the watcher's memory when there is no store."""
    incidents = [
        {"incident_id": i.incident_id, "opened_ts": i.start_ts, "closed_ts": i.end_ts if i.status != "open" else None,
         "class": str(i.event_class), "severity": i.severity.name.lower(), "root": i.root,
         "entities": list(i.members), "status": i.status, "last_ts": i.end_ts}
        for i in sorted(watcher._latest.values(), key=lambda i: i.incident_id)
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
