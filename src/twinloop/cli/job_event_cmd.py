"""`twinloop job-event EVENT`: a training job (or its launcher) records a step, checkpoint or restart event in the
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
    event: str = typer.Argument(..., help="step | checkpoint-start | checkpoint-done | restarted | requeued."),
    directory: Path = typer.Option(..., "--dir", help="The heartbeat directory (twinloop watch --job-heartbeats)."),
    job: str | None = typer.Option(
        None,
        "--job",
        help="Job id (default: $SLURM_JOB_ID; in a Kubernetes pod, namespace.pod from $POD_NAMESPACE or the service"
        " account's namespace file, and $POD_NAME or $HOSTNAME).",
    ),
    ts: float | None = typer.Option(None, "--ts", help="Unix time of the event, s (default: now)."),
    step: float | None = typer.Option(None, "--step", help="step: steps done (required with step)."),
    step_time_s: float | None = typer.Option(None, "--step-time-s", help="step: the last step's wall time, s."),
    loss: float | None = typer.Option(None, "--loss", help="step: the last step's training loss."),
    grad_norm: float | None = typer.Option(None, "--grad-norm", help="step: the last step's global gradient norm."),
    tokens_per_s: float | None = typer.Option(None, "--tokens-per-s", help="step: the job's throughput."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Record a job's step, checkpoint or restart event for the live loop (appends to DIR/JOB.jsonl)."""
    from twinloop.ops.respond.adapters.heartbeats import own_job_id, record

    stamp = time.time() if ts is None else ts
    given = {"step": step, "step_time_s": step_time_s, "loss": loss, "grad_norm": grad_norm,
             "tokens_per_s": tokens_per_s}  # fmt: skip
    values = {k: v for k, v in given.items() if v is not None}

    def write() -> tuple[str, Path]:
        job_id, why = (job, "") if job is not None else own_job_id()
        if not job_id:
            raise InputError("--job", "", f"not given, {why}: pass --job")
        try:
            return job_id, record(directory, job_id, event, stamp, values)
        except OSError as exc:
            raise InputError("--dir", "", f"{directory}: cannot write: {exc.strerror or exc}") from None

    job_id, path = guarded(write)
    doc = {"job": job_id, "event": event.replace("-", "_"), "ts": stamp, **values, "file": str(path)}
    if json_out:
        print_json(doc)
    else:
        sys.stdout.write(f"{path}: {doc['event']} at {stamp:.3f}\n")
