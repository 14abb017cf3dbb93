"""A co-tenant on a job's GPU through `twinloop watch nvml` (issue 14: on a real H200 a co-tenant's GEMMs doubled a
job's step time while NVML's power and clock said nothing, and the straggler response moved the healthy job).

The watcher replays an NVML recording through the fake NVML (four H100s of one node running job 7, one rank a GPU)
whose GPU 0 lists a second compute process from 120 s to 220 s, while the job's heartbeats and its ranks' own step
times show that rank 40 % slower over that time: one incident at GPU 0, priced as a straggler's, every action naming
the process. The same run without the second process is a straggler at the job and at GPU 0, its actions naming no
process: so the co-tenant's test can fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.respond.adapters.heartbeats import record, record_rank
from twinloop.telemetry.sources.base import default_node_prefix

SECONDS = 300
SLOW = (120.0, 220.0, 1.4)
N_GPUS = 4
NOTEBOOK = {"pid": 4242, "name": "/opt/conda/bin/jupyter-kernel", "used_memory_bytes": 8 * 2**30}
runner = CliRunner()


def _recording(path: Path, co_tenant: bool) -> Path:
    """Four busy H100s at a steady clock and power (what the H200 showed under its co-tenant), 1 s apart."""
    devices = []
    for g in range(N_GPUS):
        samples = []
        for k in range(SECONDS):
            procs = [{"pid": 1000 + g, "name": "/usr/bin/python3", "used_memory_bytes": 60 * 2**30}]
            if co_tenant and g == 0 and SLOW[0] <= k < SLOW[1]:
                procs.append(NOTEBOOK)
            samples.append({
                "power_mw": 690_000, "energy_mj": 10**9 + 690_000 * k, "gpu_temp_c": 60, "memory_temp_c": 66,
                "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "power_limit_mw": 700_000, "clocks_event_reasons": 0,
                "gpu_util_pct": 100, "mem_util_pct": 40, "fb_used_bytes": 61 * 2**30,
                "ecc": {"sbe_volatile": 0, "dbe_volatile": 0, "sbe_aggregate": 0, "dbe_aggregate": 0},
                "remapped_rows": [0, 0, 0, 0], "compute_processes": procs,
            })  # fmt: skip
        devices.append({"index": g, "uuid": f"GPU-{g:08d}-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3",
                        "pci_bus_id": f"00000000:{0x18 + g:02X}:00.0", "memory_total_bytes": 85_520_809_984,
                        "samples": samples})  # fmt: skip
    path.write_text(json.dumps({"synthetic": True, "period_s": 1.0, "devices": devices}))
    return path


def _beats(beats: Path, host: str) -> None:
    """Job 7's steps (1 s each, 40 % slower while GPU 0's rank is slowed) and each rank's own step time."""
    t, step = 0.0, 0
    rng = np.random.default_rng(0)
    while t < SECONDS:
        slow = SLOW[0] <= t < SLOW[1]
        d = SLOW[2] if slow else 1.0
        t += d
        step += 1
        loss = 3.0 - 0.001 * step + 0.01 * rng.standard_normal()
        record(beats, "7", "step", t, {"step": step, "step_time_s": d, "loss": loss, "grad_norm": 1.0})
        for g in range(N_GPUS):
            own = (SLOW[2] if slow and g == 0 else 1.0) * 0.9
            record_rank(beats, "7", {"step": step, "step_time_s": own}, ts=t, host=host, gpu_index=g)


def _watch(tmp: Path, co_tenant: bool) -> dict[str, Any]:
    tmp.mkdir(exist_ok=True)
    host = default_node_prefix().rsplit("/", 1)[-1]
    rec = _recording(tmp / "nvml.json", co_tenant)
    (tmp / "jobs.yaml").write_text(json.dumps({"7": [host]}))
    _beats(tmp / "beats", host)
    res = runner.invoke(app, ["watch", f"nvml:{rec}", "--jobs", str(tmp / "jobs.yaml"), "--job-heartbeats",
                              str(tmp / "beats"), "--mode", "auto", "--duration", str(SECONDS), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _asked(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(rule, kind) of every action the policy asked for (``--actuator none`` names no job: a checkpoint or requeue of
    one is recorded refused, not carried out; what was asked is what is judged here)."""
    return {(a["rule"], a["kind"]) for a in doc["actions"]}


def test_a_co_tenant_is_named_at_its_gpu_in_every_action_it_gets(tmp_path: Path) -> None:
    doc = _watch(tmp_path, co_tenant=True)
    (inc,) = [i for i in doc["incidents"] if i["severity"] != "info"]  # the GPU's alone: no job straggler beside it
    gpu0 = inc["root"]
    assert inc["class"] == "straggler" and gpu0.endswith("/gpu0") and inc["entities"] == [gpu0]
    assert SLOW[0] < inc["opened_ts"] <= SLOW[0] + 10.0
    assert {("straggler", "drain"), ("straggler", "requeue")} <= _asked(doc)  # priced as a straggler's
    for reason in {a["reason"] for a in doc["actions"]}:
        assert f"co-tenant on {gpu0}: 2 compute processes for the job's 1 rank there" in reason
        assert "pid 4242 (jupyter-kernel, 8192 MiB)" in reason and "step time is up 40 %" in reason


def test_the_same_slowdown_without_the_process_is_a_straggler_moved_as_before(tmp_path: Path) -> None:
    doc = _watch(tmp_path, co_tenant=False)
    roots = sorted(i["root"] for i in doc["incidents"] if i["class"] == "straggler")
    assert len(roots) == 2 and roots[0] == "site0/jobs/7" and roots[1].endswith("/gpu0")
    assert {("straggler", "drain"), ("straggler", "requeue")} <= _asked(doc)
    assert not any("co-tenant" in a["reason"] for a in doc["actions"])
