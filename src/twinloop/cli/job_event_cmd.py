"""`twinloop job-event EVENT`: a training job (or its launcher) records a step, checkpoint or restart event in the
heartbeat directory that `twinloop watch --job-heartbeats` reads (see twinloop.ops.respond.adapters.heartbeats), and
each rank its own step time (`rank-step`, see twinloop.ops.live.rank_progress).
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
    event: str = typer.Argument(
        ..., help="step | rank-step | checkpoint-start | checkpoint-done | restarted | requeued | finished."
    ),
    directory: Path = typer.Option(..., "--dir", help="The heartbeat directory (twinloop watch --job-heartbeats)."),
    job: str | None = typer.Option(
        None,
        "--job",
        help="Job id (default: $SLURM_JOB_ID; in a Kubernetes pod, namespace.pod from $POD_NAMESPACE or the service"
        " account's namespace file, and $POD_NAME or $HOSTNAME).",
    ),
    ts: float | None = typer.Option(None, "--ts", help="Unix time of the event, s (default: now)."),
    step: float | None = typer.Option(None, "--step", help="step: steps done (required with step)."),
    step_time_s: float | None = typer.Option(
        None,
        "--step-time-s",
        help="step: the last step's wall time, s; rank-step: the rank's own compute time of it (no wait for peers), s.",
    ),
    loss: float | None = typer.Option(None, "--loss", help="step: the last step's training loss."),
    grad_norm: float | None = typer.Option(None, "--grad-norm", help="step: the last step's global gradient norm."),
    tokens_per_s: float | None = typer.Option(None, "--tokens-per-s", help="step: the job's throughput."),
    gpu_uuid: str | None = typer.Option(None, "--gpu-uuid", help="rank-step: the rank's GPU, its NVML UUID."),
    host: str | None = typer.Option(None, "--host", help="rank-step: the GPU's host (without --gpu-uuid)."),
    gpu_index: int | None = typer.Option(
        None, "--gpu-index", help="rank-step: the GPU's NVML index on --host (nvidia-smi's, not a CUDA ordinal)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Record a job's step, checkpoint or restart event for the live loop (appends to DIR/JOB.jsonl).

    rank-step records one rank's own step time, without the wait for its peers (appends to DIR/JOB.ranks/GPU.jsonl).
    """
    from twinloop.ops.respond.adapters.heartbeats import RANK_EVENT, own_job_id, record, record_rank

    stamp = time.time() if ts is None else ts
    given = {"step": step, "step_time_s": step_time_s, "loss": loss, "grad_norm": grad_norm,
             "tokens_per_s": tokens_per_s}  # fmt: skip
    values = {k: v for k, v in given.items() if v is not None}
    where = {k: v for k, v in {"gpu_uuid": gpu_uuid, "host": host, "gpu_index": gpu_index}.items() if v is not None}
    rank = event.replace("-", "_") == RANK_EVENT

    def write() -> tuple[str, Path]:
        if where and not rank:
            flag = next(iter(where)).replace("_", "-")
            raise InputError("job-event", f"--{flag}", f"goes with rank-step, not {event!r}")
        job_id, why = (job, "") if job is not None else own_job_id()
        if not job_id:
            raise InputError("--job", "", f"not given, {why}: pass --job")
        try:
            if rank:
                return job_id, record_rank(directory, job_id, values, stamp, gpu_uuid, host, gpu_index)
            return job_id, record(directory, job_id, event, stamp, values)
        except OSError as exc:
            raise InputError("--dir", "", f"{directory}: cannot write: {exc.strerror or exc}") from None

    job_id, path = guarded(write)
    doc = {"job": job_id, "event": event.replace("-", "_"), "ts": stamp, **values, **where, "file": str(path)}
    if json_out:
        print_json(doc)
    else:
        sys.stdout.write(f"{path}: {doc['event']} at {stamp:.3f}\n")
