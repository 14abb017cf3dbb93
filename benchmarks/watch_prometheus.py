"""Fleet scale: twinloop's ``/metrics`` exporter for N GPUs → a real Prometheus → ``twinloop watch prometheus:URL``.

For each fleet size the benchmark starts the exporter (``twinloop.telemetry.exporter``) with N GPUs of 5 DCGM fields
(power, temperature, SM clock, power limit, clock-event reasons; values are a seeded random walk updated every
second, not a simulation), a Prometheus (Debian package) on 127.0.0.1 scraping it every second, and the watcher
(observe mode, no actuator) following Prometheus (``follow`` mode: labels once a minute, then every second a
label-light range query per metric for the steps not read yet). It prints, per size:
the exporter's scrape time as Prometheus reports it, the loop's achieved tick rate, GPU-field values per second
through the whole loop, and the lag from a query's evaluation time to the end of the loop's step over it.

It also times the watcher alone over 16,384 GPUs (frames handed in memory), to tell the loop's own cost apart from
the exporter's and the HTTP path's.

Where the time goes, per size (second table): the exporter's render (median per render, and renders per second),
Prometheus's scrapes (successful / attempted over the run, mean scrape duration, samples per scrape) and its CPU
(cores, from /proc), the watcher's discovery (metric names and one label set per entity, median), its values poll (range
queries + decode, summed over the metrics asked for concurrently, mean per poll; the whole poll with frame
building, median; steps read per poll) and its loop
step (detect → classify → respond, median), and the CPU of the exporter (with its feeder, in a process of its own)
and of the watcher (this process), with the watcher's CPU seconds per step delivered: the figure that matters where
Prometheus and the exporters run on other machines, as they do at a real site.

Run: PYTHONPATH=src python benchmarks/watch_prometheus.py [--gpus 256,1024] [--seconds 20] [--loop-only 16384]
     [--gzip-level 1]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.kinds import build_source
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.ops.ports import Sample
from twinloop.telemetry.exporter import Exporter, LatestValues
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.sources import prometheus as prometheus_source
from twinloop.telemetry.sources.prometheus import PrometheusSource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource

FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_MGMT_LIMIT",
          "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fleet(n: int) -> list[str]:
    """N GPU ids, 8 per node, 4 nodes per rack, 32 racks per row."""
    return [f"dc/row{g // 1024}/rack{g // 32 % 32}/node{g // 8}/gpu{g % 8}" for g in range(n)]


def feed(latest: LatestValues, gpus: list[str], stop: threading.Event, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    n = len(gpus)
    power = rng.uniform(300, 650, n)
    temp = rng.uniform(40, 70, n)
    while not stop.is_set():
        t = time.time()
        power = np.clip(power + rng.normal(0, 5, n), 100, 690)
        temp = np.clip(temp + rng.normal(0, 0.2, n), 30, 80)
        cols = {"DCGM_FI_DEV_POWER_USAGE": power, "DCGM_FI_DEV_GPU_TEMP": temp,
                "DCGM_FI_DEV_SM_CLOCK": np.full(n, 1755.0), "DCGM_FI_DEV_POWER_MGMT_LIMIT": np.full(n, 700.0),
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": np.zeros(n)}  # fmt: skip
        latest.update(Frame.from_dense(t, gpus, cols))
        stop.wait(max(0.0, 1.0 - (time.time() - t)))


def start_prometheus(tmp: Path, target_port: int) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("prometheus")
    if exe is None:
        raise SystemExit("prometheus is not installed (Debian package 'prometheus')")
    port = free_port()
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: twinloop\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    proc = subprocess.Popen(
        [exe, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit("prometheus did not become ready")


def query(url: str, q: str, at: float | None = None) -> float | None:
    params: dict[str, str | float] = {"query": q} if at is None else {"query": q, "time": at}
    try:
        res = httpx.get(f"{url}/api/v1/query", params=params, timeout=10).json()["data"]["result"]
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return float(res[0]["value"][1]) if res else None


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def serve_fleet(n: int, gzip_level: int, port_q: Any, stop_ev: Any, stats_q: Any) -> None:
    """The exporter and its feeder, in a process of their own so that the watcher's CPU is measured apart."""
    latest = LatestValues()
    renders: list[tuple[float, float]] = []
    plain_render = latest.render

    def timed_render() -> str:
        t = time.perf_counter()
        out = plain_render()
        renders.append((time.time(), time.perf_counter() - t))
        return out

    latest.render = timed_render  # type: ignore[method-assign]
    stop = threading.Event()
    threading.Thread(target=feed, args=(latest, fleet(n), stop), daemon=True).start()
    with Exporter(latest, listen="127.0.0.1:0", gzip_level=gzip_level) as exporter:
        port_q.put(exporter.port)
        stop_ev.wait()
    stop.set()
    stats_q.put(renders)


def measure(n: int, seconds: float, gzip_level: int = 1) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    port_q, stats_q, stop_ev = ctx.Queue(), ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve_fleet, args=(n, gzip_level, port_q, stop_ev, stats_q), daemon=True)
    child.start()
    exporter_port = port_q.get(timeout=120)
    plain_discover, plain_poll = PrometheusSource._discover, prometheus_source.poll_values
    with tempfile.TemporaryDirectory() as d:
        proc, url = start_prometheus(Path(d), exporter_port)
        try:
            deadline = time.monotonic() + 120
            while (query(url, "count(DCGM_FI_DEV_POWER_USAGE)") or 0) < n and time.monotonic() < deadline:
                time.sleep(0.5)
            built = build_source(f"prometheus:{url}", period_s=1.0)
            # The source's own cost per values poll: the PromQL range queries (HTTP + JSON decode, all metrics) and
            # the whole poll (queries, parsing, frame building); it runs in the watcher's source thread.
            gets: list[float] = []
            whole: list[float] = []
            steps_per_poll: list[int] = []
            discoveries: list[float] = []

            def timed_poll(follower: Any, fetch: Any, pool: Any, window: tuple[float, float], *a: Any) -> Any:
                def timed_fetch(*fa: Any) -> Any:
                    t = time.perf_counter()
                    out = fetch(*fa)
                    gets.append(time.perf_counter() - t)
                    return out

                t = time.perf_counter()
                out = plain_poll(follower, timed_fetch, pool, window, *a)
                whole.append(time.perf_counter() - t)
                steps_per_poll.append(round((window[1] - window[0]) / follower.period_s) + 1)
                return out

            def timed_discover(self: PrometheusSource, *a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                out = plain_discover(self, *a, **k)
                discoveries.append(time.perf_counter() - t)
                return out

            prometheus_source.poll_values = timed_poll
            PrometheusSource._discover = timed_discover  # type: ignore[method-assign]
            cluster = SourceCluster(built.source, NoActuator(),
                                    LiveOptions(cadence_s=1.0, whole_sweeps=True, discover_s=60))  # fmt: skip
            lags: list[float] = []
            steps: list[float] = []
            values = [0]
            poll = cluster.poll

            def timed_poll() -> object:
                s = poll()
                if isinstance(s, Sample):
                    values[0] += sum(int(np.isfinite(v).sum()) for v in s.gpu.values())
                    pending.append(s.ts)
                return s

            pending: list[float] = []
            cluster.poll = timed_poll  # type: ignore[method-assign]
            w = Watcher(cluster, config=WatchConfig(mode="observe"))
            w.start()
            runner_step = w.loop.step

            def timed_step(sample: Sample) -> object:
                t = time.perf_counter()
                out = runner_step(sample)
                steps.append(time.perf_counter() - t)
                lags.append(time.time() - sample.ts)
                return out

            w.loop.step = timed_step  # type: ignore[method-assign]
            prom_cpu0, own_cpu0, exp_cpu0 = cpu_s(proc.pid), own_cpu_s(), cpu_s(child.pid)
            t0, t0_wall = time.monotonic(), time.time()
            summary = w.run(stop=lambda: time.monotonic() - t0 >= seconds)
            wall = time.monotonic() - t0
            prom_cores = (cpu_s(proc.pid) - prom_cpu0) / wall
            own_cores = (own_cpu_s() - own_cpu0) / wall
            exporter_cores = (cpu_s(child.pid) - exp_cpu0) / wall
            window, at = f"[{max(1, round(wall))}s]", time.time()
            scrape_s = query(url, f'avg_over_time(scrape_duration_seconds{{job="twinloop"}}{window})', at)
            scrapes = query(url, f'count_over_time(up{{job="twinloop"}}{window})', at)
            scrapes_ok = query(url, f'sum_over_time(up{{job="twinloop"}}{window})', at)
            per_scrape = query(url, f'avg_over_time(scrape_samples_scraped{{job="twinloop"}}{window})', at)
        finally:
            PrometheusSource._discover = plain_discover  # type: ignore[method-assign]
            prometheus_source.poll_values = plain_poll
            stop_ev.set()
            proc.terminate()
            proc.wait(timeout=30)
    renders = [dur for at, dur in stats_q.get(timeout=60) if at >= t0_wall]
    child.join(timeout=30)
    lag = np.array(lags) if lags else np.array([np.nan])
    return {
        "gpus": n,
        "ticks": summary.samples,
        "tick_rate_hz": (summary.samples - 1) / (summary.last_ts - summary.first_ts)
        if summary.samples > 1 and summary.last_ts and summary.first_ts
        else float("nan"),
        "values_per_s": values[0] / max(wall, 1e-9),
        "lag_p50_s": float(np.median(lag)),
        "lag_p95_s": float(np.percentile(lag, 95)),
        "scrape_s": float("nan") if scrape_s is None else scrape_s,
        "wall_s": wall,
        "render_s": float(np.median(renders)) if renders else float("nan"),
        "renders_per_s": len(renders) / wall,
        "scrapes": scrapes or 0.0,
        "scrapes_ok": scrapes_ok or 0.0,
        "samples_per_scrape": float("nan") if per_scrape is None else per_scrape,
        "prometheus_cores": prom_cores,
        "query_s": sum(gets) / len(whole) if whole else float("nan"),
        "steps_per_poll": float(np.mean(steps_per_poll)) if steps_per_poll else float("nan"),
        "discovery_s": float(np.median(discoveries)) if discoveries else float("nan"),
        "source_poll_s": float(np.median(whole)) if whole else float("nan"),
        "step_s": float(np.median(steps)) if steps else float("nan"),
        "own_cores": own_cores,
        "exporter_cores": exporter_cores,
        "watcher_cpu_s_per_step": own_cores * wall / max(summary.samples, 1),
    }


def loop_only(n: int, ticks: int) -> dict[str, float]:
    """The watcher alone over N GPUs (frames handed in memory, no HTTP): wall time per tick."""
    gpus = fleet(n)
    rng = np.random.default_rng(1)
    frames = [Frame.from_dense(1.7e9 + k, gpus, {f: rng.uniform(100, 600, n) for f in FIELDS}) for k in range(ticks)]
    source = TwinSource(TwinConfig(), frames=frames)
    cluster = SourceCluster(source, NoActuator(), LiveOptions(cadence_s=1.0, whole_sweeps=True))
    w = Watcher(cluster, config=WatchConfig(mode="observe"))
    w.start()
    t0 = time.perf_counter()
    summary = w.run()
    wall = time.perf_counter() - t0
    return {"gpus": n, "ticks": summary.samples, "s_per_tick": wall / max(summary.samples, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="256,1024")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--loop-only", default="16384", help="GPU counts for the watcher alone (no HTTP)")
    ap.add_argument("--gzip-level", type=int, default=1, help="the exporter's gzip level (0: uncompressed)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; exporter gzip level {args.gzip_level}\n")
    print("| GPUs | watcher alone: wall s per tick (1 Hz needs < 1) |")
    print("|---|---|")
    for n in (int(x) for x in args.loop_only.split(",") if x):
        r = loop_only(n, 30)
        print(f"| {r['gpus']:,} | {r['s_per_tick']:.3f} ({r['ticks']} ticks) |", flush=True)
    print()
    head = "| GPUs | loop ticks | tick rate (Hz, target 1) | GPU-field values/s | lag p50 / p95 (s) "
    head += "| exporter scrape (s) |"
    print(head)
    print("|---|---|---|---|---|---|")
    results = []
    for n in (int(x) for x in args.gpus.split(",")):
        r = measure(n, args.seconds, args.gzip_level)
        results.append(r)
        print(f"| {r['gpus']:,} | {r['ticks']} in {r['wall_s']:.0f} s | {r['tick_rate_hz']:.2f} | "
              f"{r['values_per_s']:,.0f} | {r['lag_p50_s']:.2f} / {r['lag_p95_s']:.2f} | {r['scrape_s']:.2f} |",
              flush=True)  # fmt: skip
    print()
    print("| GPUs | render s (renders/s) | scrapes ok / tried | samples per scrape | Prometheus CPU (cores) "
          "| discovery s | range queries + decode s per poll (sum over metrics) | whole values poll s | steps per poll "
          "| loop step s | exporter CPU (cores) | watcher CPU (cores) | watcher CPU s per step |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['gpus']:,} | {r['render_s']:.3f} ({r['renders_per_s']:.2f}) | {r['scrapes_ok']:.0f} / "
              f"{r['scrapes']:.0f} | {r['samples_per_scrape']:,.0f} | {r['prometheus_cores']:.2f} | "
              f"{r['discovery_s']:.2f} | {r['query_s']:.3f} | {r['source_poll_s']:.3f} | "
              f"{r['steps_per_poll']:.2f} | {r['step_s']:.3f} | "
              f"{r['exporter_cores']:.2f} | {r['own_cores']:.2f} | {r['watcher_cpu_s_per_step']:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
