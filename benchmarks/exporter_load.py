"""/metrics under load: concurrent scrapes of the exporter fed by the twin's default scenario.

``CLIENTS`` clients scrape at once, ``REQUESTS`` times each, with a per-request timeout; the script prints the
body size, latency p50/p99, scrapes per second, failures (timeouts, resets), how many times the body was
rendered and the most threads the process ran. The same script measures the previous exporter when run with
its sources first on the path (it uses only ``Exporter(listen=...)``, ``feed`` and ``port``)::

    PYTHONPATH=src python benchmarks/exporter_load.py [--clients 64] [--requests 2] [--steps 30]
    PYTHONPATH=<old checkout>/src python benchmarks/exporter_load.py   # before

The machine may be shared: run it twice and keep the better run.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from twinloop.telemetry.exporter import Exporter
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2, help="scrapes per client")
    ap.add_argument("--steps", type=int, default=30, help="twin steps fed before the scrapes")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, s")
    args = ap.parse_args()

    with Exporter(listen="127.0.0.1:0") as exporter:
        exporter.feed(TwinSource(TwinConfig(steps=args.steps))).join(300)
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        size = len(httpx.get(url, timeout=args.timeout).content)
        peak = 0
        stop = threading.Event()

        def server_threads() -> int:
            # This exporter's pool workers, or the stdlib ThreadingHTTPServer's one thread per request.
            names = [t.name for t in threading.enumerate()]
            return sum(n.startswith("twinloop-exporter-http") or "process_request_thread" in n for n in names)

        def watch() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, server_threads())
                time.sleep(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()

        host, port = "127.0.0.1", int(url.split(":")[2].split("/")[0])
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"

        def scrape() -> bool:
            # A bare socket client, as light as Prometheus' own (asks for gzip, does not decompress): the load
            # measured is the server's, not 64 Python clients parsing megabytes under one GIL.
            with socket.create_connection((host, port), timeout=args.timeout) as sock:
                sock.sendall(request)
                chunks = []
                while chunk := sock.recv(1 << 16):
                    chunks.append(chunk)
            return b"".join(chunks[:1]).startswith(b"HTTP/1.0 200") or b"".join(chunks[:1]).startswith(b"HTTP/1.1 200")

        def client(_: int) -> list[float | None]:
            out: list[float | None] = []
            for _ in range(args.requests):
                t0 = time.perf_counter()
                try:
                    ok = scrape()
                except OSError:
                    ok = False
                out.append(time.perf_counter() - t0 if ok else None)
            return out

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            results = [x for r in pool.map(client, range(args.clients)) for x in r]
        wall = time.perf_counter() - t0
        stop.set()
        watcher.join()
        renders = getattr(exporter, "renders", None)
    ok = sorted(x for x in results if x is not None)
    failed = len(results) - len(ok)
    q = statistics.quantiles(ok, n=100) if len(ok) >= 2 else [float("nan")] * 99
    print(f"body {size / 1e3:.0f} kB, {args.clients} clients x {args.requests} scrapes in {wall:.1f} s")
    print(f"p50 {q[49] * 1e3:.0f} ms, p99 {q[98] * 1e3:.0f} ms, {len(ok) / wall:.1f} scrapes/s, {failed} failed")
    print(f"renders {renders if renders is not None else 'one per request'}, server threads at most {peak}")


if __name__ == "__main__":
    main()
