"""Issue 14, a realness check: one job of the packaged ``mixed_hall`` scenario traced second by second.

For the job (default ``finetune``), in one pass (loop on by default): its phases and placements (GPUs per GPU model,
racks), and per placement, for each GPU model it holds: the SM clock (median and slowest), the enforced power limit
against the TDP and the rack/row/site cap's per-GPU limit, power, die temperature, the share of GPU-seconds held by
a power or a thermal limit, the job's step time against its profile's full-clock step (the step the job's profile
gives on the hall's reference GPU, the first row's), and the iterations it completed. Then the loop's actions that
touched the job or its nodes. Prints markdown tables.

Run (one 2 h pass of seed 1 with the loop on, a few minutes on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/trace_job_mixed_hall.py --seed 1
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

import twinloop
from twinloop.closedloop.passes import run_pass
from twinloop.hardware.gpu import get_gpu
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.gpu_rates import kind_rates, work_rate
from twinloop.twin.jobs import Phase, make_jobs
from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict
from twinloop.twin.workload import WorkloadProfile


@dataclass
class Segment:
    """One stretch of the job on one set of nodes (a placement), with per-GPU-model sums over its sustained s."""

    start_s: float
    nodes: tuple[int, ...]
    kinds: dict[str, int]
    racks: tuple[str, ...]
    end_s: float = 0.0
    sustained_s: int = 0
    hung_s: int = 0
    iterations_start: float = 0.0
    iterations_end: float = 0.0
    step_s_sum: float = 0.0
    per_kind: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))


def _spec(seed: int, duration_s: float | None, scenario: str = "mixed_hall") -> ScenarioSpec:
    """A packaged scenario by name, or a scenario file by its path (a new-user hall: sweeps/new-user/*.yaml)."""
    path = (
        Path(scenario)
        if scenario.endswith(".yaml")
        else Path(twinloop.__file__).parent / "scenarios" / f"{scenario}.yaml"
    )
    raw = yaml.safe_load(path.read_text())
    raw["seed"] = seed
    if duration_s is not None:
        raw["duration_s"] = duration_s
    return scenario_from_dict(raw, str(path), str(path.parent))


def pass_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every one-pass trace takes: the seed, the scenario, loop off, the window."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenario", default="mixed_hall", help="a packaged scenario or a scenario file")
    ap.add_argument("--loop-off", action="store_true", help="trace the loop-off pass instead")
    ap.add_argument("--window-s", type=float, default=600.0)
    return ap


class Tracer:
    """An ``on_step`` hook recording one job's placements and, each sustained second, its GPUs' state by model."""

    def __init__(self, job_name: str) -> None:
        self.job_name = job_name
        self.segments: list[Segment] = []
        self.phases: list[tuple[float, str]] = []
        self.node_ids: set[str] = set()

    def __call__(self, twin: Twin, result: StepResult) -> None:
        job = next(j for j in twin.jobs if j.spec.name == self.job_name)
        t = result.t_s
        if not self.phases or self.phases[-1][1] != job.phase.name:
            self.phases.append((t, job.phase.name))
        if not job.running or job.gpus.size == 0:
            return
        nodes = tuple(int(n) for n in job.nodes)
        seg = self.segments[-1] if self.segments else None
        if seg is None or seg.nodes != nodes or seg.end_s < t - 1.5 * twin.dt_s:
            seg = self._new_segment(twin, t, nodes, job.iterations)
        seg.end_s = t
        seg.iterations_end = job.iterations
        if job.phase == Phase.HUNG:
            seg.hung_s += 1
        if job.phase != Phase.SUSTAINED:
            return
        seg.sustained_s += 1
        seg.step_s_sum += job.profile.iteration_s / max(job.speed, 1e-6)
        self._sample(twin, seg, job.gpus)

    def _new_segment(self, twin: Twin, t: float, nodes: tuple[int, ...], iterations: float) -> Segment:
        topo = twin.topo
        gpus = np.flatnonzero(np.isin(topo.gpu_node, nodes))
        kinds: dict[str, int] = defaultdict(int)
        for k in topo.gpu_kind[gpus]:
            kinds[topo.kinds[int(k)].name] += 1
        racks = tuple(sorted({topo.rack_id(int(r)) for r in np.unique(topo.gpu_rack[gpus])}))
        self.node_ids.update(topo.node_id(n) for n in nodes)
        seg = Segment(t, nodes, dict(kinds), racks, iterations_start=iterations)
        self.segments.append(seg)
        return seg

    @staticmethod
    def _sample(twin: Twin, seg: Segment, gpus: np.ndarray) -> None:
        ph, topo = twin.physics, twin.topo
        a = ph.gpus
        clock = ph.clock_mhz()[gpus]
        cap = twin.chain.per_rack_limit_w()[topo.gpu_rack[gpus]]
        kind_idx = topo.gpu_kind[gpus]
        for k in np.unique(kind_idx):
            m = kind_idx == k
            d = seg.per_kind[topo.kinds[int(k)].name]
            d["clock_med"].append(float(np.median(clock[m])))
            d["clock_min"].append(float(clock[m].min()))
            d["limit"].append(float(np.median(a.limit_w[gpus][m])))
            d["cap"].append(float(np.median(cap[m])))
            d["tdp"].append(float(ph.tdp_w[gpus][m][0]))
            d["power"].append(float(np.median(a.power_w[gpus][m])))
            d["temp_max"].append(float(a.temp_c[gpus][m].max()))
            lim = a.limited[gpus][m]
            th = a.thermal_bound[gpus][m]
            d["power_limited"].append(float(np.mean(lim & ~th)))
            d["thermal_limited"].append(float(np.mean(lim & th)))


def _full_clock_step_s(profile: WorkloadProfile, kind: str, reference: str) -> float:
    """The profile's step at full clock on ``kind`` when it was made for ``reference`` (twin.gpu_rates)."""
    rates = kind_rates((get_gpu(kind),), get_gpu(reference))
    rate = work_rate(np.ones(1), profile.compute_fraction, rates.compute, rates.memory)[0]
    return float(profile.compute_s / rate + profile.comm_s)


def _print(tracer: Tracer, profile: WorkloadProfile, reference: str, actions: list[str]) -> None:
    print("phases (t_s: phase): " + ", ".join(f"{t:.0f}: {p}" for t, p in tracer.phases))
    print()
    print("| placement | GPUs by model | racks | sustained s | hung s | iterations | mean step s (profile "
          f"{profile.iteration_s:.2f} s at full clock on {reference}) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for s in tracer.segments:
        step = s.step_s_sum / s.sustained_s if s.sustained_s else float("nan")
        kinds = ", ".join(f"{n} {k}" for k, n in s.kinds.items())
        print(
            f"| {s.start_s:.0f}–{s.end_s:.0f} s | {kinds} | {', '.join(s.racks)} | {s.sustained_s} | {s.hung_s} "
            f"| {s.iterations_start:.0f} → {s.iterations_end:.0f} | {step:.3f} |"
        )
    print()
    print(
        "| placement | model | SM clock MHz median (slowest) | enforced limit W (TDP; cap's per-GPU limit) | power W "
        "| max die °C | power-limited | thermal-limited | profile's step on this model at full clock s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in tracer.segments:
        for kind, d in s.per_kind.items():
            med = {k: float(np.mean(v)) for k, v in d.items()}
            print(
                f"| {s.start_s:.0f} s | {kind} | {med['clock_med']:.0f} ({min(d['clock_min']):.0f}) "
                f"| {med['limit']:.0f} ({med['tdp']:.0f}; {med['cap']:.0f}) | {med['power']:.0f} "
                f"| {max(d['temp_max']):.1f} | {100 * med['power_limited']:.0f} % "
                f"| {100 * med['thermal_limited']:.0f} % | {_full_clock_step_s(profile, kind, reference):.2f} |"
            )
    print()
    print("actions of the loop on the job or its nodes:")
    for line in actions or ["(none)"]:
        print(f"- {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--job", default="finetune")
    ap.add_argument(
        "--scenario", default="mixed_hall", help="a packaged scenario (e.g. default, with --job) or a scenario file"
    )
    ap.add_argument("--duration-s", type=float, default=None, help="override the scenario's 2 h")
    ap.add_argument("--loop-off", action="store_true", help="trace the loop-off pass instead")
    ap.add_argument(
        "--straggler-restart",
        choices=["now", "at_checkpoint", "never"],
        default=None,
        help="what-if, as in decisions_mixed_hall.py: answer every straggler this way (`now`: the old response)",
    )
    args = ap.parse_args()
    spec = _spec(args.seed, args.duration_s, args.scenario)
    tracer = Tracer(args.job)
    policy = None
    if args.straggler_restart is not None:
        sys.path.insert(0, str(Path(__file__).parent))
        from decisions_mixed_hall import _forced  # the same what-if policy as the decisions benchmark

        policy = _forced(args.straggler_restart)
    result = run_pass(spec, not args.loop_off, policy=policy, on_step=tracer)
    job_spec = next(j for j in spec.jobs if j.name == args.job)

    reference = str((job_spec.plan or {}).get("gpu", spec.rows[0].node.gpu))
    profile = make_jobs((job_spec,), {}, spec.rows[0].node.gpu)[0].profile
    actions = [
        f"t={a.ts:.0f} {a.request.kind} {a.request.target} ({a.status}): {a.request.reason[:160]}"
        for a in result.actions
        if args.job in a.request.target or any(a.request.target.startswith(n) for n in tracer.node_ids)
    ]
    _print(tracer, profile, reference, actions)
    jobs = {j["name"]: j for j in result.summary["jobs"]}
    j = jobs[args.job]
    print()
    print(
        f"{args.job}: goodput {j['goodput_tokens_per_s']:.4g} tokens/s, ettr {j['ettr']:.3f} "
        f"(seed {args.seed}, loop {'off' if args.loop_off else 'on'}, {result.wall_s:.0f} s wall)"
    )


if __name__ == "__main__":
    main()
