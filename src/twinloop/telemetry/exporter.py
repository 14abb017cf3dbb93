"""Prometheus exporter: the latest value of every (entity, field), as dcgm-exporter publishes it.

An existing Prometheus (and Grafana with the stock dcgm-exporter dashboard, grafana.com id 12239) scrapes
twinloop like a GPU node. Metric names are the field names (``DCGM_FI_DEV_POWER_USAGE``); GPU series carry
dcgm-exporter's labels (:mod:`twinloop.telemetry.exporter_labels`). Values are in dcgm-exporter's units
(energy in mJ).

The cache and its text exposition are :class:`~twinloop.telemetry.exporter_latest.LatestValues` (vectorized
across GPUs: ~0.1-0.2 s a render at 16,384 GPUs; ``benchmarks/exporter_render.py``). The body is rendered at
most once per ``render_period_s`` and only when new data arrived; every scrape in between gets the cached
bytes (gzip-compressed once per render for the clients that ask for it, as Prometheus does).
Requests are served by a fixed pool of ``max_threads`` workers; connections beyond ``max_pending`` are closed
at once instead of piling up threads, and the listen backlog holds a burst of that size.
"""

from __future__ import annotations

import gzip
import ipaddress
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from twinloop.errors import InputError
from twinloop.telemetry.exporter_labels import (
    DEFAULT_CONTAINER,
    DEFAULT_NAMESPACE,
    entity_labels,
    synthetic_pci_bus_id,
    synthetic_uuid,
)
from twinloop.telemetry.exporter_latest import LatestValues, reference_render
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_CONTAINER",
    "DEFAULT_NAMESPACE",
    "Exporter",
    "LatestValues",
    "entity_labels",
    "is_loopback",
    "parse_listen",
    "reference_render",
    "synthetic_pci_bus_id",
    "synthetic_uuid",
]

#: What generate_latest writes (the classic text format); dcgm-exporter answers with the same.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); raises InputError when malformed."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InputError("export", "--listen", f"expected HOST:PORT (e.g. 127.0.0.1:9400), got {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ::1); other names are not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _PooledHTTPServer(HTTPServer):
    """An HTTP server whose requests run on a fixed thread pool, with at most ``max_pending`` waiting."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_threads: int,
                 max_pending: int) -> None:  # fmt: skip
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        # The listen backlog (stdlib default 5) must hold a burst of scrapers: an overflowing SYN queue makes
        # clients retry after 1, 3, 7, 15 s, which is where the old exporter's 28 s p99 came from.
        self.request_queue_size = max_threads + max_pending
        super().__init__(address, handler)
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="twinloop-exporter-http")
        self._slots = threading.BoundedSemaphore(max_threads + max_pending)
        self.rejected = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            # Overloaded: drop the connection now rather than queue it without bound.
            self.rejected += 1
            self.shutdown_request(request)
            return
        self._pool.submit(self._work, request, client_address)

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A scraper that hangs up mid-body (timeout, BrokenPipe) is its own business: no traceback on stderr.
        return

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class Exporter:
    """Serves ``/metrics`` and keeps it fed from a source.

    Args:
        latest: the cache to serve (shared with whoever feeds it).
        listen: ``HOST:PORT``; port 0 picks a free port (see :attr:`port`).
        allow_remote: allow a non-loopback ``listen`` host (else :meth:`start` refuses it).
        render_period_s: the body is re-rendered at most this often (the source's sample period), s.
        max_threads: worker threads serving requests.
        max_pending: connections allowed to wait for a worker; more are closed at once.
        request_timeout_s: a connection idle this long is closed (slow or stuck scrapers free their worker).
        gzip_level: compression level for clients that accept gzip (1-9), or 0 to always answer uncompressed.
            Level 1 (the default) compresses the dcgm-style text ~6x at half the CPU of level 5 (16,384 GPUs:
            25 MB in ~0.35 s); 0 suits a big exporter scraped over loopback, where compressing costs more CPU
            than the bytes it saves (``benchmarks/exporter_render.py``).
    """

    def __init__(self, latest: LatestValues | None = None, listen: str = "127.0.0.1:9400", *,
                 allow_remote: bool = False, render_period_s: float = 1.0, max_threads: int = 8,
                 max_pending: int = 64, request_timeout_s: float = 10.0, gzip_level: int = 1) -> None:  # fmt: skip
        if not 0 <= gzip_level <= 9:
            raise InputError("export", "gzip_level", f"must be 0 (off) to 9, got {gzip_level}")
        self.gzip_level = gzip_level
        self.latest = latest if latest is not None else LatestValues()
        self.listen = listen
        self.allow_remote = allow_remote
        self.render_period_s = render_period_s
        self.max_threads = max_threads
        self.max_pending = max_pending
        self.request_timeout_s = request_timeout_s
        self.report = IngestReport()
        self.renders = 0
        self._server: _PooledHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._render_lock = threading.Lock()
        self._gzip_lock = threading.Lock()
        self._body: bytes | None = None
        self._gzipped: tuple[bytes, bytes] | None = None
        self._body_version = -1
        self._body_at = -float("inf")
        self.feed_error: BaseException | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def rejected(self) -> int:
        """Connections closed unserved because the pool and its queue were full."""
        return self._server.rejected if self._server is not None else 0

    def body(self) -> bytes:
        """The exposition, rendered anew only when data changed and ``render_period_s`` has passed."""
        now = time.monotonic()
        body = self._body
        if body is not None and (
            self.latest.version == self._body_version or now - self._body_at < self.render_period_s
        ):
            return body
        # One request renders; the others keep getting the previous body meanwhile instead of queueing behind it.
        if not self._render_lock.acquire(blocking=body is None):
            assert body is not None
            return body
        try:
            # Another request may have rendered while this one waited for the lock.
            if self._body is not None and (
                self.latest.version == self._body_version or time.monotonic() - self._body_at < self.render_period_s
            ):
                return self._body
            version = self.latest.version
            self._body = self.latest.render().encode()
            self._body_version, self._body_at = version, time.monotonic()
            self.renders += 1
            return self._body
        finally:
            self._render_lock.release()

    def gzipped_body(self) -> bytes:
        """:meth:`body` gzip-compressed (once per render; Prometheus asks for gzip)."""
        body = self.body()
        with self._gzip_lock:
            if self._gzipped is None or self._gzipped[0] is not body:
                self._gzipped = (body, gzip.compress(body, compresslevel=self.gzip_level))
            return self._gzipped[1]

    def start(self) -> Exporter:
        """Bind and serve in a background thread.

        Raises:
            InputError: malformed ``listen``, a non-loopback host without ``allow_remote``, or the port is taken.
        """
        host, port = parse_listen(self.listen)
        if not self.allow_remote and not is_loopback(host):
            raise InputError("export", "--listen", f"{host} is not a loopback address; add --allow-remote to expose "
                             "/metrics on the network")  # fmt: skip
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            timeout = self.request_timeout_s
            # Headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK
            # of the headers (~40 ms a scrape).
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                gz = exporter.gzip_level > 0 and "gzip" in self.headers.get("Accept-Encoding", "")
                body = exporter.gzipped_body() if gz else exporter.body()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                if gz:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        try:
            self._server = _PooledHTTPServer((host, port), Handler, self.max_threads, self.max_pending)
        except OSError as exc:
            raise InputError("export", "--listen", f"cannot listen on {host}:{port}: {exc.strerror}") from None
        t = threading.Thread(target=self._server.serve_forever, name="twinloop-exporter", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def feed(self, source: Source) -> threading.Thread:
        """Start a thread that runs ``source`` and puts each validated frame into the cache."""

        def run() -> None:
            try:
                for frame in validated_frames(source, self.report):
                    if self._stop.is_set():
                        break
                    self.latest.update(frame)
            except BaseException as exc:  # surfaced by the caller through feed_error
                self.feed_error = exc

        t = threading.Thread(target=run, name="twinloop-exporter-feed", daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def stop(self) -> None:
        """Stop serving and feeding."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Exporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
