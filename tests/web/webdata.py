"""A small synthetic site in a DuckDB store for the web tests (deterministic, built with the store API).

Layout: site ``dc9`` with 2 rows x 3 racks x 2 nodes x 4 GPUs (48 GPUs); GPU fields every 10 s, facility and
job fields every 10 s, over ``STEPS`` steps. Rack ``dc9/r02/k03`` runs hot and its GPUs throttle
(``sw_thermal``) in the second half; GPUs carry a ``job`` label. Loop records: two runs with incidents and
actions.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.records import write_run
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

T0 = 1_767_225_600.0
STEPS = 60
DT_S = 10.0
SITE = "dc9"
HOT_RACK = "dc9/r02/k03"
JOB = "dc9/jobs/train-a"


def gpu_ids() -> list[str]:
    """The 48 GPU ids."""
    return [
        f"{SITE}/r{r:02d}/k{k:02d}/n{n:02d}/g{g}" for r in (1, 2) for k in (1, 2, 3) for n in (1, 2) for g in range(4)
    ]


def build_store(path: Path, seed: int = 0, steps: int = STEPS) -> Path:
    """Write the synthetic site's telemetry and loop records to ``path``; returns it."""
    rng = np.random.default_rng(seed)
    gpus = gpu_ids()
    n = len(gpus)
    hot = np.array([g.startswith(HOT_RACK + "/") for g in gpus])
    nodes = sorted({g.rsplit("/", 1)[0] for g in gpus})
    racks = sorted({g.rsplit("/", 2)[0] for g in gpus})
    rows = sorted({r.rsplit("/", 1)[0] for r in racks})
    labels = {g: {"job": "train-a", "gpu_kind": "h100-sxm"} for g in gpus}
    frames = []
    for k in range(steps):
        ts = T0 + k * DT_S
        late = k >= steps // 2
        temp = 60.0 + 5.0 * rng.standard_normal(n) * 0.2 + np.where(hot & late, 25.0, 0.0)
        power = 600.0 + 20.0 * rng.standard_normal(n) - np.where(hot & late, 150.0, 0.0)
        clock = np.where(hot & late, 1500.0, 1980.0)
        reasons = np.where(hot & late, 0x20, 0).astype(np.float64)
        frames.append(
            Frame.from_dense(
                ts,
                gpus,
                {
                    "DCGM_FI_DEV_POWER_USAGE": power,
                    "DCGM_FI_DEV_GPU_TEMP": temp,
                    "DCGM_FI_DEV_SM_CLOCK": clock,
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT": np.full(n, 700.0),
                    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons,
                },
                labels=labels if k == 0 else None,
                source="webdata",
            )
        )
        node_power = np.array([power[[g.startswith(nd + "/") for g in gpus]].sum() + 1500.0 for nd in nodes])
        frames.append(Frame.from_dense(ts, nodes, {"TWINLOOP_FI_NODE_POWER": node_power}))
        rack_power = np.array([node_power[[nd.startswith(r + "/") for nd in nodes]].sum() for r in racks])
        frames.append(
            Frame.from_dense(
                ts,
                racks,
                {"TWINLOOP_FI_RACK_POWER": rack_power, "TWINLOOP_FI_RACK_INLET_TEMP": np.full(len(racks), 30.0)},
            )
        )
        frames.append(Frame.from_dense(ts, rows, {"TWINLOOP_FI_ROW_POWER": np.full(len(rows), rack_power.sum() / 2)}))
        it = float(rack_power.sum())
        cooling, losses = 0.12 * it, 0.05 * it
        frames.append(
            Frame.from_dense(
                ts,
                [SITE],
                {
                    "TWINLOOP_FI_IT_POWER": np.array([it]),
                    "TWINLOOP_FI_COOLING_POWER": np.array([cooling]),
                    "TWINLOOP_FI_CONVERSION_LOSS": np.array([losses]),
                    "TWINLOOP_FI_FACILITY_POWER": np.array([it + cooling + losses]),
                    "TWINLOOP_FI_PUE": np.array([(it + cooling + losses) / it]),
                    "TWINLOOP_FI_AMBIENT_TEMP": np.array([21.0]),
                },
            )
        )
        # job lifecycle: queued 2 steps, ramp-up 3, sustained, a checkpoint at 20, a restart at 40
        phase = 0 if k < 2 else 1 if k < 5 else 4 if k == 20 else 0 if k == 40 else 1 if 41 <= k < 43 else 3
        tps = 1.0e5 if phase == 3 else 0.0
        frames.append(
            Frame.from_dense(
                ts,
                [JOB],
                {
                    "TWINLOOP_FI_JOB_PHASE": np.array([float(phase)]),
                    "TWINLOOP_FI_JOB_TOKENS_PER_S": np.array([tps]),
                    "TWINLOOP_FI_JOB_STEP_TIME": np.array([2.0 if phase == 3 else 0.0]),
                    "TWINLOOP_FI_JOB_GPUS": np.array([48.0]),
                },
            )
        )
    with DuckDBStore(path) as store:
        store.append(Frame.concat(frames))
    con = duckdb.connect(str(path))
    try:
        write_loop_records(con)
    finally:
        con.close()
    return path


def write_loop_records(con: duckdb.DuckDBPyConnection) -> None:
    """Two runs of loop records: ``loop-off`` (incidents, no actions) and ``loop-on`` (with actions)."""
    inc = Incident(
        1,
        EventClass.THERMAL_THROTTLE,
        HOT_RACK,
        (f"{HOT_RACK}/n01/g0",),
        T0 + 300,
        T0 + 590,
        Severity.MAJOR,
        n_detections=8,
        status="open",
    )
    inc2 = Incident(
        2,
        EventClass.STRAGGLER,
        f"{SITE}/r01/k01/n01/g2",
        (f"{SITE}/r01/k01/n01/g2",),
        T0 + 100,
        T0 + 160,
        Severity.MINOR,
        n_detections=2,
        status="closed",
    )
    req = ActionRequest(ActionKind.CDU_SETPOINT, f"{SITE}/r02/cdu", 27.0, reason="cooling", incident_id=1)
    acts = [
        ActionResult(0, req, "applied", T0 + 310, "ok"),
        ActionResult(1, req, "verified", T0 + 550, "DCGM_FI_DEV_GPU_TEMP moved +3.10 (down)"),
    ]
    write_run(con, "loop-off", [inc, inc2], [])
    write_run(con, "loop-on", [inc], acts)
