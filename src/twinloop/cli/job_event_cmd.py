"""`twinloop job-event EVENT`: a training job (or its launcher) records a checkpoint or restart event in the
heartbeat directory that `twinloop watch --job-heartbeats` reads (see twinloop.ops.respond.adapters.heartbeats).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json
from twinloop.errors import InputError


@app.command("job-event")
def job_event(
    event: str = typer.Argument(..., help="checkpoint-start | checkpoint-done | restarted | requeued."),
    directory: Path = typer.Option(..., "--dir", help="The heartbeat directory (twinloop watch --job-heartbeats)."),
    job: str | None = typer.Option(
        None,
        "--job",
        help="Job id (default: $SLURM_JOB_ID; in a Kubernetes pod, namespace.pod from $POD_NAMESPACE or the service"
        " account's namespace file, and $POD_NAME or $HOSTNAME).",
    ),
    ts: float | None = typer.Option(None, "--ts", help="Unix time of the event, s (default: now)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Record a job's checkpoint or restart event for the live loop (appends to DIR/JOB.jsonl)."""
    from twinloop.ops.respond.adapters.heartbeats import own_job_id, record

    stamp = time.time() if ts is None else ts

    def write() -> tuple[str, Path]:
        job_id, why = (job, "") if job is not None else own_job_id()
        if not job_id:
            raise InputError("--job", "", f"not given, {why}: pass --job")
        try:
            return job_id, record(directory, job_id, event, stamp)
        except OSError as exc:
            raise InputError("--dir", "", f"{directory}: cannot write: {exc.strerror or exc}") from None

    job_id, path = guarded(write)
    doc = {"job": job_id, "event": event.replace("-", "_"), "ts": stamp, "file": str(path)}
    if json_out:
        print_json(doc)
    else:
        sys.stdout.write(f"{path}: {doc['event']} at {stamp:.3f}\n")
