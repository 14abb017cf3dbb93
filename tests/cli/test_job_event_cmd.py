"""`twinloop job-event`: a job records its checkpoint and restart events for `twinloop watch --job-heartbeats`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.respond.adapters import heartbeats
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats

runner = CliRunner()


def test_events_land_in_the_jobs_file_and_the_loop_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    for event, ts in (("checkpoint-start", "100"), ("checkpoint-done", "130"), ("checkpoint-start", "700"),
                      ("checkpoint_done", "720")):  # fmt: skip
        res = runner.invoke(app, ["job-event", event, "--dir", str(tmp_path), "--ts", ts, "--json"])
        assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc == {"job": "4242", "event": "checkpoint_done", "ts": 720.0, "file": str(tmp_path / "4242.jsonl")}
    res = runner.invoke(app, ["job-event", "restarted", "--dir", str(tmp_path), "--job", "7"])
    assert res.exit_code == 0 and res.stdout.startswith(f"{tmp_path / '7.jsonl'}: restarted at ")
    timing = JobHeartbeats(tmp_path, clock=lambda: 1000.0).timing("dc/jobs/4242")
    assert timing is not None and timing.checkpoint_write_s == 25.0 and timing.next_checkpoint_in_s == 310.0


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["checkpointed", "--job", "1"], "job-event: event: 'checkpointed' (allowed: checkpoint-start,"),
        (["restarted"], "--job: not given, $SLURM_JOB_ID not set and not in a Kubernetes pod"),
        (["restarted", "--job", "1", "--ts", "-5"], "job-event: ts"),
        (["restarted", "--job", ".."], "--job"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], where: str
) -> None:
    for name in ("SLURM_JOB_ID", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    res = runner.invoke(app, ["job-event", *args, "--dir", str(tmp_path), "--json"])
    assert res.exit_code == 2, res.output
    assert where in res.stderr and res.stderr.count("\n") == 1 and res.stdout == ""


def test_a_directory_it_cannot_write_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = runner.invoke(app, ["job-event", "restarted", "--job", "1", "--dir", str(blocker / "sub")])
    assert res.exit_code == 2 and "--dir" in res.stderr and "cannot write" in res.stderr, res.output


def _in_a_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, namespace: str | None = "ml\n") -> None:
    """A Kubernetes pod's environment, its service account's namespace file in ``tmp_path`` (None: no such file)."""
    for name in ("SLURM_JOB_ID", "POD_NAME", "POD_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("HOSTNAME", "pretrain-workers-0-0-x7k2p")
    path = tmp_path / "serviceaccount-namespace"
    if namespace is not None:
        path.write_text(namespace)
    monkeypatch.setattr(heartbeats, "K8S_NAMESPACE_FILE", path)


def _job_of(*args: str, directory: Path) -> tuple[int, str]:
    res = runner.invoke(app, ["job-event", "checkpoint-done", "--dir", str(directory), "--json", *args])
    return res.exit_code, json.loads(res.stdout)["job"] if res.exit_code == 0 else res.stderr


def test_in_a_kubernetes_pod_the_job_is_namespace_dot_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a pod had to be told `--job` (it has no $SLURM_JOB_ID): every pod of a JobSet needed its own wiring."""
    _in_a_pod(monkeypatch, tmp_path)
    beats = tmp_path / "beats"
    assert _job_of(directory=beats) == (0, "ml.pretrain-workers-0-0-x7k2p")  # the namespace file and $HOSTNAME
    assert (beats / "ml.pretrain-workers-0-0-x7k2p.jsonl").is_file()
    monkeypatch.setenv("POD_NAME", "from-downward-api")
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    assert _job_of(directory=beats) == (0, "team-a.from-downward-api")  # the downward API's names first
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert _job_of(directory=beats) == (0, "4242")  # Slurm's id still wins
    assert _job_of("--job", "ml.JobSet.pretrain", directory=beats) == (0, "ml.JobSet.pretrain")  # and --job over all


def test_a_pod_whose_namespace_cannot_be_told_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_a_pod(monkeypatch, tmp_path, namespace=None)
    code, err = _job_of(directory=tmp_path)
    assert code == 2 and err.count("\n") == 1, err
    assert "--job: not given, $SLURM_JOB_ID not set and in a Kubernetes pod no namespace ($POD_NAMESPACE not set" in err
    assert "serviceaccount-namespace: cannot read" in err and err.endswith("pass --job\n")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    code, err = _job_of(directory=tmp_path)
    assert code == 2 and "not in a Kubernetes pod ($KUBERNETES_SERVICE_HOST not set)" in err
    assert not list(tmp_path.glob("*.jsonl"))
