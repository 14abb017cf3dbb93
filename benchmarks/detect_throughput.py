"""Detection throughput: the full pipeline on 16,384 GPUs x 10 fields at 1 Hz, pinned to one core.

Prints samples/s processed by ``DetectionPipeline.step`` (per-field detectors + cross-signal rules + topology
grouping; telemetry generation is not timed) and the headroom factor against real time (1 s of telemetry per
step). A rack-wide coolant fault and a straggler start at 2/3 of the run so that the rule and grouping paths run too.

    python benchmarks/detect_throughput.py [--gpus 16384] [--steps 300] [--detectors] [--quality]
        [--twin [SCENARIO]] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from twinloop.lab.detector_data import Fault, SyntheticCluster, fleet_entities
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.base import REGISTRY
from twinloop.ops.detect.pipeline import DetectionPipeline


def detector_costs(steps: int = 200) -> dict[str, float]:
    """Microseconds per entity-sample of every registered detector (vectorized: 16,384 entities; river: 64)."""
    load_variants()
    import river.anomaly
    import river.drift  # noqa: F401  (imported here so that import time is not counted)

    out = {}
    for name, cls in sorted(REGISTRY.items()):
        n = 16_384 if cls.vectorized else 64
        t_steps = steps if cls.vectorized else 3 * steps  # amortize building the per-entity river models
        x = 50.0 + np.random.default_rng(1).standard_normal((t_steps, n))
        det = cls()
        t0 = time.perf_counter()
        for i in range(t_steps):
            det.update(float(i), x[i])
        out[name] = 1e6 * (time.perf_counter() - t0) / (t_steps * n)
    return out


QUALITY_SCENARIOS: dict[str, tuple[str, tuple[int, ...], float, str]] = {
    # fault kind: (synthetic kind, GPUs, magnitude, expected class)
    "rack_coolant": ("coolant", tuple(range(64, 128)), 15.0, "cooling_degradation"),
    "gpu_tim": ("tim", (5,), 1.5, "cooling_degradation"),
    "power_cap": ("power_cap", tuple(range(32)), 400.0, "power_throttle"),
    "power_brake": ("power_brake", (3, 4), 1.0, "power_delivery_fault"),
    "xid_79": ("xid", (9,), 79.0, "gpu_hardware_error"),
    "straggler": ("straggler", (10,), 0.8, "straggler"),
    "sdc": ("sdc", (40,), 0.5, "suspected_sdc"),
    "hang": ("hang", (70,), 1.0, "job_hang"),
    "benign_phase": ("phase", tuple(range(96, 128)), 0.85, ""),
    "flapping_sensor": ("flap", (12,), 15.0, ""),
    "nan_burst": ("nan", tuple(range(64)), 1.0, ""),
}


def quality(seeds: int = 5, onset_s: float = 200.0, seconds: int = 330) -> dict[str, dict[str, float]]:
    """Per scenario over ``seeds`` runs on 128 GPUs: recall, precision, incidents per fault, median TTD (s).

    TTD is from the fault's onset to the step at which the pipeline reports the incident (1 s telemetry).

    Precision counts fault-class incidents of the expected class over all fault-class incidents (benign and
    bad-input scenarios expect none: any fault incident there is a false positive).
    """
    from twinloop.ops.detect.pipeline import PipelineConfig
    from twinloop.ops.events import FAULT_CLASSES

    entities = fleet_entities(1, 2)
    out = {}
    for name, (kind, gpus, mag, expected) in QUALITY_SCENARIOS.items():
        found, fault_incidents, right, ttd = 0, 0, 0, []
        for seed in range(seeds):
            end = onset_s + 50.0 if kind == "nan" else None
            sim = SyntheticCluster(entities, (Fault(kind, gpus, onset_s, end, mag),), seed=seed)
            pipe = DetectionPipeline(entities, config=PipelineConfig(emit_info=False))
            first: dict[int, tuple[str, float]] = {}
            for t in range(seconds):
                f = sim.sample(float(t))
                for u in pipe.step(f.ts, f.fields, f.job_index, f.job_ids, f.job_fields):
                    if u.event_class in FAULT_CLASSES and u.status != "merged":
                        first.setdefault(u.incident_id, (u.event_class.value, float(t)))  # when it is reported
            fault_incidents += len(first)
            hits = [ts for cls, ts in first.values() if cls == expected]
            right += len(hits)
            if hits:
                found += 1
                ttd.append(min(hits) - onset_s)
        out[name] = {
            "expected": expected or "none",
            "recall": found / seeds if expected else float("nan"),
            "precision": right / fault_incidents if fault_incidents else float("nan"),
            "false_incidents": float(fault_incidents - right),
            "incidents_per_fault": right / found if found else float("nan"),
            "median_ttd_s": float(np.median(ttd)) if ttd else float("nan"),
        }
    return out


def twin_quality(scenario: str | None = None) -> dict[str, object]:
    """Run a twin scenario (default: the packaged one) through the pipeline with every GPU kind's limits and
    the site fields, the GPU fields the loop sees (``closedloop.cluster.gpu_fields``: each rank's step time, node
    and row fields), told which jobs are serving fleets (as the loop's runner tells it), and score it with
    ``twinloop.ops.evaluate`` against the injected faults and the twin's background events (failures, PSU
    overloads, the hall's background stragglers, capped racks: ``closedloop.labels.ground_truth``)."""
    from twinloop.closedloop.adapter import TwinAdapter
    from twinloop.closedloop.cluster import gpu_fields, loop_scenario
    from twinloop.closedloop.labels import ground_truth
    from twinloop.ops.detect.rules import GpuLimits
    from twinloop.ops.evaluate import evaluate_detection
    from twinloop.twin.engine import Twin
    from twinloop.twin.scenario import load_scenario

    spec = loop_scenario(load_scenario(scenario))
    twin = Twin(spec, scenario or "default scenario")
    gpu_ids = twin.telemetry.entities("gpu")
    job_ids = twin.telemetry.entities("job")
    pipe = DetectionPipeline(
        gpu_ids,
        limits=GpuLimits.from_kinds(twin.topo.kinds, twin.topo.gpu_kind),
        cdu_of_rack={rid: rid.rsplit("/", 1)[0] for rid in twin.topo.ids("rack")},  # a CDU serves a row
    )
    adapter = TwinAdapter(twin)
    for job in job_ids:
        if adapter.is_serving(job):
            pipe.replica_job(job)
    incidents = {}
    detect_s = 0.0
    for _ in range(round(spec.duration_s / twin.dt_s)):
        r = twin.step()
        if r.gpu is None:
            continue
        fac = r.facility or {}
        t0 = time.perf_counter()
        fields = gpu_fields(twin, r)  # what the loop sees: with each rank's step time and node/row fields
        updates = pipe.step(r.t_s, fields, twin.job_of_gpu, job_ids, fac.get("job"), site_fields=fac.get("site"))
        detect_s += time.perf_counter() - t0
        incidents.update({u.incident_id: u for u in updates})
    end = float(twin.t_s)
    faults, background = ground_truth(twin, adapter)
    report = evaluate_detection(tuple(incidents.values()), faults, background)
    return {
        "scenario": spec.name,
        "gpus": len(gpu_ids),
        "seconds": end,
        "detect_ms_per_step": 1e3 * detect_s / max(1, round(end / twin.dt_s)),
        "faults": {
            q.fault: {
                "detected": f"{q.n_detected}/{q.n_faults}",
                "precision": q.precision,
                "incidents": q.n_incidents,
                "ttd_s": q.median_time_to_detect_s,
            }
            for q in report.per_fault
        },
        "false_alarms": [f"{i.event_class.value}@{i.root}" for i in report.false_alarms],
        "background_incidents": [f"{i.event_class.value}@{i.root}" for i in report.background],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=16_384, help="GPUs (multiple of 512: rows of 8 racks x 64)")
    parser.add_argument("--steps", type=int, default=300, help="1 s steps to time (faults start at 2/3)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--detectors", action="store_true", help="also time each registered detector alone")
    parser.add_argument("--quality", action="store_true", help="also score detection on the synthetic scenarios")
    parser.add_argument("--twin", nargs="?", const="", default=None, metavar="SCENARIO",
                        help="also score detection on a twin scenario (default: the packaged one)")  # fmt: skip
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    rows = max(1, args.gpus // 512)
    entities = fleet_entities(n_rows=rows, racks_per_row=8)
    half = float(2 * args.steps // 3)  # after the rules' warm-up (120 s)
    faults = (Fault("coolant", tuple(range(64, 128)), half, None, 15.0), Fault("straggler", (3,), half, None, 0.8))
    sim = SyntheticCluster(entities, faults, seed=0)
    frames = [sim.sample(float(t)) for t in range(args.steps)]
    pipe = DetectionPipeline(entities)
    n_fields = len(frames[0].fields)
    step_s = []
    incidents = 0
    opened: set[str] = set()
    for f in frames:
        t0 = time.perf_counter()
        updates = pipe.step(f.ts, f.fields, f.job_index, f.job_ids, f.job_fields)
        step_s.append(time.perf_counter() - t0)
        incidents += len(updates)
        opened.update(f"{u.event_class.value}@{u.root}" for u in updates if u.status == "open")
    steady = step_s[5:]  # the first steps allocate state
    mean_s = statistics.fmean(steady)
    result = {
        "gpus": len(entities),
        "fields": n_fields,
        "steps": len(steady),
        "step_mean_ms": 1e3 * mean_s,
        "step_median_ms": 1e3 * statistics.median(steady),
        "step_p99_ms": 1e3 * float(np.quantile(steady, 0.99)),
        "samples_per_s": len(entities) * n_fields / mean_s,
        "headroom_vs_1hz": 1.0 / mean_s,
        "incident_updates": incidents,
        "incidents": sorted(opened),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    if args.detectors:
        result["detector_us_per_sample"] = detector_costs()
    if args.quality:
        result["quality"] = quality()
    if args.twin is not None:
        result["twin"] = twin_quality(args.twin or None)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return
    print(f"{result['gpus']} GPUs x {n_fields} fields, {result['steps']} steps of 1 s, 1 core")
    print(
        f"step: mean {result['step_mean_ms']:.1f} ms, median {result['step_median_ms']:.1f} ms, "
        f"p99 {result['step_p99_ms']:.1f} ms"
    )
    mega = result["samples_per_s"] / 1e6
    print(f"throughput: {mega:.2f} M samples/s; headroom {result['headroom_vs_1hz']:.1f}x real time")
    print(f"incident updates during the run: {incidents} ({', '.join(sorted(opened))})")
    for name, us in result.get("detector_us_per_sample", {}).items():
        print(f"detector {name}: {us:.3f} us per entity-sample")
    if "twin" in result:
        print(json.dumps(result["twin"], indent=2, default=str))
    if "quality" in result:
        print("scenario          expected              recall  precision  false  per-fault  median TTD s")
        for name, q in result["quality"].items():
            print(
                f"{name:<17} {q['expected']:<21} {q['recall']:>6.2f} {q['precision']:>10.2f} "
                f"{q['false_incidents']:>6.0f} {q['incidents_per_fault']:>10.2f} {q['median_ttd_s']:>13.1f}"
            )


if __name__ == "__main__":
    main()
