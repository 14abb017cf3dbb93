"""Real GPU readings per workload phase, for fitting and validating the power and thermal models.

Reads a measurement directory in the layout of ``shared/data/h100`` (see its README): ``phases.csv`` and
``samples_20hz.csv`` (NVML every 50 ms, one run), ``results_run*.json`` (per-phase throughput and energy-counter
power measured inside the workload, every run) and ``precision_bf16_fp8.json``. A reduced copy holds, instead of
the 20 Hz samples, what this module derives from them (``phase_stats.csv``: steady-window means per phase, and
``trace_1hz.csv``: one-second means for the thermal fits); :func:`write_reduced` writes it, so the tests need
only a few kilobytes.

Each phase becomes a :class:`PhaseReading` with the model's inputs (clock, die temperature, activities) and its
measured power and throughput. Activities follow DCGM's meaning and are derived by fixed rules:

* ``dram_active``: NVML's memory utilisation, the share of time the memory is busy (a stream at the achievable
  bandwidth reads 1: the copy moves 3.0 TB/s, 90 % of the datasheet 3.35 TB/s, at 100 %); the planner computes
  the same quantity as memory-bound time over step time;
* ``tensor_active``: achieved dense FLOP/s over the peak at the measured clock (132 SMs × 4,096 BF16 FLOP per
  clock, 2× for FP8: the H100 SXM5 whitepaper's 989.4 TFLOP/s at 1,830 MHz). A decode GEMV is counted with
  its batch padded to 16 rows (the smallest tensor-core MMA tile; an assumption);
* ``sm_active``: 1 for every kernel that fills the GPU (GEMM, copy, decode, training), 0 when idle;
* ``context``: 1 once a CUDA context is open (every phase but the first idle).
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.power import MMA_MIN_ROWS

#: Dense BF16 FLOP per clock of an H100 SXM5 (132 SMs × 4,096).
H100_BF16_FLOP_PER_CLOCK = 132 * 4096
#: A phase's steady window starts this far into it (the 1 s power average and the die settle first).
STEADY_FROM = 0.4
#: Samples with less GPU utilisation than this are not part of a work phase's steady window.
BUSY_UTIL = 90.0

GEMM_N = 8192


@dataclass(frozen=True)
class PhaseStats:
    """Steady-window means of the 20 Hz samples in one phase (run 2)."""

    phase: str
    clock_mhz: float
    temp_c: float
    hbm_temp_c: float
    util_mem: float
    power_instant_w: float
    samples: int


@dataclass(frozen=True)
class PhaseReading:
    """One workload phase: the model's inputs and what was measured.

    Attributes:
        name: phase name (``cap_400``, ``decode_b8``, ``fp8_8192`` ...); group: ``idle``, ``gemm``, ``memory``,
            ``decode``, ``train`` or ``precision``.
        power_w: measured board power (mean over runs of the energy counter / time), W.
        power_runs_w: the per-run values.
        clock_mhz, temp_c, hbm_temp_c: measured SM clock and die/HBM temperatures in the steady window.
        tensor_active, sm_active, dram_active, context: model inputs (see the module docstring).
        fp8_share: share of tensor cycles in FP8.
        throughput: measured throughput (``throughput_unit``), mean over runs; throughput_runs: per run.
        power_limit_w / clock_lock_mhz: the limit or locked clock the phase ran under (None: default).
    """

    name: str
    group: str
    power_w: float
    power_runs_w: tuple[float, ...]
    clock_mhz: float
    temp_c: float
    hbm_temp_c: float
    tensor_active: float
    sm_active: float
    dram_active: float
    context: float
    fp8_share: float
    throughput: float
    throughput_runs: tuple[float, ...]
    throughput_unit: str
    power_limit_w: float | None = None
    clock_lock_mhz: float | None = None


@dataclass(frozen=True)
class Trace:
    """One-second means over the whole run (run 2): time from the first sample, power, temperatures."""

    t_s: NDArray[np.float64]
    power_w: NDArray[np.float64]
    temp_c: NDArray[np.float64]
    hbm_temp_c: NDArray[np.float64]
    util_mem: NDArray[np.float64]
    phase_start_s: dict[str, float]


@dataclass(frozen=True)
class Readings:
    """All phases and the 1 Hz trace of one measurement directory."""

    phases: dict[str, PhaseReading]
    trace: Trace
    default_limit_w: float


def _phases_csv(path: Path) -> list[tuple[float, str]]:
    out: list[tuple[float, str]] = []
    with path.open() as f:
        for row in csv.DictReader(f):
            try:
                t = float(row["t"])
            except (KeyError, ValueError):
                raise InputError(str(path), "t", "expected a Unix time in seconds") from None
            if out and t == out[-1][0]:  # 'cooldown' and 'idle' share a start: keep the first name
                continue
            out.append((t, row["phase"]))
    return out


def _read_samples(path: Path) -> dict[str, NDArray[np.float64]]:
    data = np.genfromtxt(path, delimiter=",", names=True)
    need = ("t", "power_instant_mw", "gpu_temp_c", "mem_temp_c", "sm_mhz", "util_gpu", "util_mem")
    missing = [c for c in need if c not in (data.dtype.names or ())]
    if missing:
        raise InputError(str(path), missing[0], "column missing (see shared/data/h100/README.md)")
    return {name: np.asarray(data[name], dtype=np.float64) for name in need}


def phase_stats(samples: dict[str, NDArray[np.float64]], marks: list[tuple[float, str]]) -> dict[str, PhaseStats]:
    """Steady-window means per phase; a phase name that repeats (``idle``) gets ``_2``, ``_3`` appended."""
    out: dict[str, PhaseStats] = {}
    t = samples["t"]
    for i, (start, name) in enumerate(marks[:-1]):
        end = marks[i + 1][0]
        key = name
        k = 2
        while key in out:
            key, k = f"{name}_{k}", k + 1
        window = (t >= start + STEADY_FROM * (end - start)) & (t < end)
        busy = window & (samples["util_gpu"] >= BUSY_UTIL)
        sel = busy if busy.sum() >= 5 else window
        if not sel.any():
            continue
        out[key] = PhaseStats(
            phase=key,
            clock_mhz=float(samples["sm_mhz"][sel].mean()),
            temp_c=float(samples["gpu_temp_c"][sel].mean()),
            hbm_temp_c=float(samples["mem_temp_c"][sel].mean()),
            util_mem=float(samples["util_mem"][sel].mean()),
            power_instant_w=float(samples["power_instant_mw"][sel].mean() / 1e3),
            samples=int(sel.sum()),
        )
    return out


def trace_1hz(samples: dict[str, NDArray[np.float64]], marks: list[tuple[float, str]]) -> Trace:
    """One-second means of instantaneous power and temperatures from the first sample on."""
    t0 = samples["t"][0]
    sec = np.floor(samples["t"] - t0).astype(np.int64)
    n = int(sec.max()) + 1
    count = np.bincount(sec, minlength=n).astype(np.float64)
    keep = count > 0

    def mean(col: str, scale: float = 1.0) -> NDArray[np.float64]:
        return (np.bincount(sec, weights=samples[col], minlength=n)[keep] / count[keep]) * scale

    starts: dict[str, float] = {}
    for start, name in marks:
        starts.setdefault(name, start - t0)
    return Trace(
        t_s=np.arange(n, dtype=np.float64)[keep] + 0.5,
        power_w=mean("power_instant_mw", 1e-3),
        temp_c=mean("gpu_temp_c"),
        hbm_temp_c=mean("mem_temp_c"),
        util_mem=mean("util_mem"),
        phase_start_s=starts,
    )


def _load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(str(path), "", f"unreadable JSON: {exc}".splitlines()[0]) from None


RUN_KEYS = ("idle", "gemm_peak", "power_caps", "clock_locks", "memcopy", "decode_like", "train_small")


def _runs(directory: Path) -> list[dict[str, Any]]:
    paths = sorted(directory.glob("results_run*.json"))
    if not paths:
        raise InputError(str(directory), "results_run*.json", "no per-run results found")
    runs = []
    for path in paths:
        run = _load_json(path)
        if not isinstance(run, dict):
            raise InputError(str(path), "", "expected a JSON object of phases")
        missing = [k for k in RUN_KEYS if k not in run]
        if missing:
            raise InputError(str(path), missing[0], f"phase missing (need {', '.join(RUN_KEYS)})")
        runs.append(run)
    return runs


def _peak_flops(clock_mhz: float, fp8: bool = False) -> float:
    return H100_BF16_FLOP_PER_CLOCK * clock_mhz * 1e6 * (2.0 if fp8 else 1.0)


def load_stats(directory: Path) -> tuple[dict[str, PhaseStats], Trace]:
    """Phase statistics and the 1 Hz trace, from the 20 Hz samples or from a reduced copy."""
    samples_path = directory / "samples_20hz.csv"
    if samples_path.exists():
        marks = _phases_csv(directory / "phases.csv")
        samples = _read_samples(samples_path)
        return phase_stats(samples, marks), trace_1hz(samples, marks)
    stats_path, trace_path = directory / "phase_stats.csv", directory / "trace_1hz.csv"
    if not stats_path.exists() or not trace_path.exists():
        raise InputError(str(directory), "samples_20hz.csv", "neither the samples nor a reduced copy found")
    stats: dict[str, PhaseStats] = {}
    with stats_path.open() as f:
        for row in csv.DictReader(f):
            stats[row["phase"]] = PhaseStats(
                phase=row["phase"],
                **{fl.name: float(row[fl.name]) for fl in fields(PhaseStats) if fl.name not in ("phase", "samples")},
                samples=int(row["samples"]),
            )
    data = np.genfromtxt(trace_path, delimiter=",", names=True)
    starts = _load_json(directory / "trace_phase_start_s.json")
    trace = Trace(
        t_s=np.asarray(data["t_s"]),
        power_w=np.asarray(data["power_w"]),
        temp_c=np.asarray(data["temp_c"]),
        hbm_temp_c=np.asarray(data["hbm_temp_c"]),
        util_mem=np.asarray(data["util_mem"]),
        phase_start_s=dict(starts) if isinstance(starts, dict) else {},
    )
    return stats, trace


def write_reduced(directory: Path, out: Path) -> None:
    """Write the reduced copy of ``directory`` (phase statistics, 1 Hz trace, the small JSON/CSV files) to ``out``."""
    stats, trace = load_stats(directory)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "phase_stats.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(PhaseStats)])
        w.writeheader()
        for s in stats.values():
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in asdict(s).items()})
    with (out / "trace_1hz.csv").open("w") as f:
        f.write("t_s,power_w,temp_c,hbm_temp_c,util_mem\n")
        for row in zip(trace.t_s, trace.power_w, trace.temp_c, trace.hbm_temp_c, trace.util_mem, strict=True):
            f.write(",".join(f"{v:.3f}" for v in row) + "\n")
    (out / "trace_phase_start_s.json").write_text(json.dumps(trace.phase_start_s, indent=1) + "\n")
    for name in ("results_run1.json", "results_run2.json", "precision_bf16_fp8.json"):
        src = directory / name
        if src.exists():
            (out / name).write_text(src.read_text())


def load_readings(directory: Path) -> Readings:
    """All phases of a measurement directory (raw, or a reduced copy written by :func:`write_reduced`)."""
    if not directory.is_dir():
        raise InputError(str(directory), "", "measurement directory not found")
    try:
        return _load_readings(directory)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(directory), "", f"unexpected layout: {type(exc).__name__}: {exc}") from None


def _load_readings(directory: Path) -> Readings:
    stats, trace = load_stats(directory)
    runs = _runs(directory)
    phases: dict[str, PhaseReading] = {}

    def st(name: str) -> PhaseStats:
        if name not in stats:
            raise InputError(str(directory), name, "phase missing from the samples")
        return stats[name]

    def add(name: str, group: str, s: PhaseStats, powers: list[float], thr: list[float], unit: str, **kw: Any) -> None:
        phases[name] = PhaseReading(
            name=name,
            group=group,
            power_w=float(np.mean(powers)),
            power_runs_w=tuple(float(p) for p in powers),
            clock_mhz=kw.pop("clock_mhz", s.clock_mhz),
            temp_c=s.temp_c,
            hbm_temp_c=s.hbm_temp_c,
            dram_active=kw.pop("dram_active", s.util_mem / 100.0),
            throughput=float(np.mean(thr)) if thr else float("nan"),
            throughput_runs=tuple(float(v) for v in thr),
            throughput_unit=unit,
            **kw,
        )

    idle = [r["idle"] for r in runs]
    add("idle", "idle", st("idle"), [i[0]["avg_w"] for i in idle], [], "", tensor_active=0.0, sm_active=0.0,
        context=0.0, fp8_share=0.0)  # fmt: skip
    add("idle_context", "idle", st("idle_2"), [i[1]["avg_w"] for i in idle], [], "", tensor_active=0.0,
        sm_active=0.0, context=1.0, fp8_share=0.0)  # fmt: skip
    add("cooldown", "idle", st("cooldown"), [i[2]["avg_w"] for i in idle], [], "", tensor_active=0.0,
        sm_active=0.0, context=1.0, fp8_share=0.0)  # fmt: skip

    def gemm(name: str, s: PhaseStats, recs: list[dict[str, Any]], **kw: float | None) -> None:
        tf = [r["tflops"] for r in recs]
        tensor = float(np.mean(tf)) * 1e12 / _peak_flops(s.clock_mhz)
        add(name, "gemm", s, [r["avg_w"] for r in recs], tf, "TFLOP/s", tensor_active=tensor, sm_active=1.0,
            context=1.0, fp8_share=0.0, **kw)  # fmt: skip

    gemm("gemm_peak", st("gemm_peak"), [r["gemm_peak"] for r in runs], power_limit_w=700.0)
    for i, cap in enumerate(runs[0]["power_caps"]):
        c = int(cap["cap_w"])
        gemm(f"cap_{c}", st(f"cap_{c}"), [r["power_caps"][i] for r in runs], power_limit_w=float(c))
    for i, lock in enumerate(runs[0]["clock_locks"]):
        f = int(lock["mhz"])
        gemm(f"clock_{f}", st(f"clock_{f}"), [r["clock_locks"][i] for r in runs], power_limit_w=700.0,
             clock_lock_mhz=float(f))  # fmt: skip

    add("memcopy", "memory", st("memcopy"), [r["memcopy"]["avg_w"] for r in runs],
        [r["memcopy"]["GBps_rw"] for r in runs], "GB/s", tensor_active=0.0, sm_active=1.0, context=1.0,
        fp8_share=0.0)  # fmt: skip

    weight_params = runs[0]["decode_like"]["weight_bytes"] / 2.0  # BF16
    for i, row in enumerate(runs[0]["decode_like"]["rows"]):
        b = int(row["batch"])
        recs = [r["decode_like"]["rows"][i] for r in runs]
        step_s = float(np.mean([r["step_ms"] for r in recs])) / 1e3
        s = st(f"decode_b{b}")
        tensor = max(b, MMA_MIN_ROWS) * 2.0 * weight_params / step_s / _peak_flops(s.clock_mhz)
        add(f"decode_b{b}", "decode", s, [r["avg_w"] for r in recs], [r["step_ms"] for r in recs], "ms/step",
            tensor_active=tensor, sm_active=1.0, context=1.0, fp8_share=0.0)  # fmt: skip

    _add_training(directory, runs, st("train_steady"), add)
    _add_precision(directory, st("gemm_peak"), phases)
    limit = float(runs[0].get("power_limit_range_mw", [0, 0, 700000])[2]) / 1e3
    return Readings(phases=phases, trace=trace, default_limit_w=limit)


def _add_training(directory: Path, runs: list[dict[str, Any]], s: PhaseStats, add: object) -> None:
    cfg_path = directory / "train_model_config.json"
    recs = [r["train_small"] for r in runs]
    tokens_s = float(np.mean([r["tokens_per_s"] for r in recs]))
    flops_token = 6.0 * recs[0]["params"]
    cfg = _load_json(cfg_path) if cfg_path.exists() else None
    if isinstance(cfg, dict):  # causal attention core, forward + backward: 6·L·seq·hidden per token
        flops_token += 6.0 * cfg["num_hidden_layers"] * recs[0]["seq"] * cfg["hidden_size"]
    tensor = tokens_s * flops_token / _peak_flops(s.clock_mhz)
    add("train_steady", "train", s, [r["avg_w"] for r in recs], [r["tokens_per_s"] for r in recs],  # type: ignore[operator]
        "tokens/s", tensor_active=tensor, sm_active=1.0, context=1.0, fp8_share=0.0)  # fmt: skip


def _add_precision(directory: Path, gemm_stats: PhaseStats, phases: dict[str, PhaseReading]) -> None:
    path = directory / "precision_bf16_fp8.json"
    if not path.exists():
        return
    rows = _load_json(path)
    base = phases["gemm_peak"]
    # DRAM activity of a tiled GEMM follows its operand bytes per second (NVML had no separate record here).
    dram_per_tflop = base.dram_active / base.throughput
    for r in rows if isinstance(rows, list) else []:
        fp8 = r["kind"] == "fp8"
        clock = float(r["sm_mhz"])
        name = f"{r['kind']}_{r['n']}"
        phases[name] = PhaseReading(
            name=name,
            group="precision",
            power_w=float(r["avg_w"]),
            power_runs_w=(float(r["avg_w"]),),
            clock_mhz=clock,
            temp_c=gemm_stats.temp_c,
            hbm_temp_c=gemm_stats.hbm_temp_c,
            tensor_active=float(r["tflops"]) * 1e12 / _peak_flops(clock, fp8),
            sm_active=1.0,
            dram_active=dram_per_tflop * float(r["tflops"]) * (0.5 if fp8 else 1.0),
            context=1.0,
            fp8_share=1.0 if fp8 else 0.0,
            throughput=float(r["tflops"]),
            throughput_runs=(float(r["tflops"]),),
            throughput_unit="TFLOP/s",
            power_limit_w=700.0,
        )
