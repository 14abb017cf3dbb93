"""Prometheus exporter: the latest value of every (entity, field), as dcgm-exporter publishes it.

An existing Prometheus (and Grafana with the stock dcgm-exporter dashboard, grafana.com id 12239) scrapes
twinloop like a GPU node. Metric names are the field names (``DCGM_FI_DEV_POWER_USAGE``); GPU series carry
dcgm-exporter's labels:

* ``gpu`` (index on the node), ``device`` (``nvidia<gpu>``), ``UUID``, ``modelName``, ``pci_bus_id``;
* ``Hostname``: the node's hostname, unique per node (a twin node ``dc1/r01/k03/n05`` becomes
  ``dc1-r01-k03-n05``; a ``Hostname`` label that came with the data wins);
* ``pod``, ``namespace``, ``container`` for a GPU that runs a job (dcgm-exporter's Kubernetes mapping:
  pod = the job, namespace = the ``namespace`` label or ``twinloop``, container = ``container`` or ``main``)
  and ``hpc_job`` (its HPC job mapping). A plain ``job`` label would be renamed ``exported_job`` by
  Prometheus, which owns ``job``.

Where the data did not bring a ``UUID`` or ``pci_bus_id`` (the twin), both are *synthesized*,
deterministically from the entity id (``GPU-<uuid5>``, bus ``0x18 + 0x10·gpu``): they identify the series,
not hardware. Every series also has an ``entity`` label with the twinloop entity id, so that values map back
exactly. Values are in dcgm-exporter's units (energy in mJ).

``/metrics`` goes through ``prometheus_client`` (a custom collector over :class:`LatestValues`). The body is
rendered at most once per ``render_period_s`` and only when new data arrived; every scrape in between gets
the cached bytes (gzip-compressed once per render for the clients that ask for it, as Prometheus does).
Requests are served by a fixed pool of ``max_threads`` workers; connections beyond ``max_pending`` are closed
at once instead of piling up threads, and the listen backlog holds a burst of that size.

Counters (energy, ECC and remap totals) are exposed *untyped*: ``prometheus_client`` appends ``_total`` to a
counter's name, and dcgm-exporter's names have no such suffix; the metric names matter more to existing
dashboards than the TYPE line (``rate()`` works the same on an untyped series).
"""

from __future__ import annotations

import gzip
import ipaddress
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from twinloop.errors import InputError
from twinloop.telemetry.fields import FIELD_BY_NAME
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source

#: What generate_latest writes (the classic text format); dcgm-exporter answers with the same.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_GPU_PART = re.compile(r"^(?:gpu|g)?(\d+)$")
_UUID_NS = uuid.UUID("6b1d2b1e-3f0e-4c55-9a53-74776e6c6f6f")  # fixed: the same entity always gets the same UUID
DEFAULT_NAMESPACE = "twinloop"
DEFAULT_CONTAINER = "main"


def synthetic_uuid(entity: str) -> str:
    """A stable nvidia-smi-style UUID for a GPU that has none (the twin's): ``GPU-<uuid5 of the entity id>``."""
    return f"GPU-{uuid.uuid5(_UUID_NS, entity)}"


def synthetic_pci_bus_id(gpu: int) -> str:
    """A PCI bus id in nvidia-smi's spelling for GPU ``gpu`` of a node (buses 0x18, 0x28, ...; synthetic)."""
    return f"00000000:{(0x18 + 0x10 * gpu) % 256:02X}:00.0"


def entity_labels(entity: str, labels: Mapping[str, str]) -> dict[str, str]:
    """dcgm-exporter labels of one entity (GPU ids ``.../<node>/gpu<i>`` or ``.../g<i>`` get the GPU set).

    Args:
        entity: the twinloop entity id.
        labels: labels that came with the data (``UUID``, ``modelName``/``gpu_kind``, ``job``, ``pod`` ...).

    Returns:
        Label name → value; empty values are left out (Prometheus treats them as absent anyway).
    """
    parts = entity.split("/")
    out: dict[str, str] = {}
    m = _GPU_PART.match(parts[-1]) if len(parts) >= 2 else None
    if m is not None or "gpu" in labels:
        gpu = labels.get("gpu", m.group(1) if m else "0")
        node = "-".join(parts[:-1]) if m is not None else "-".join(parts)
        out["gpu"] = gpu
        out["UUID"] = labels.get("UUID") or synthetic_uuid(entity)
        out["device"] = labels.get("device", f"nvidia{gpu}")
        out["modelName"] = labels.get("modelName", labels.get("gpu_kind", ""))
        out["Hostname"] = labels.get("Hostname") or node
        out["pci_bus_id"] = labels.get("pci_bus_id") or (synthetic_pci_bus_id(int(gpu)) if gpu.isdigit() else "")
    elif len(parts) == 4:
        out["Hostname"] = labels.get("Hostname") or "-".join(parts)
    job = labels.get("job") or labels.get("hpc_job") or ""
    pod = labels.get("pod") or job
    if pod:
        out["pod"] = pod
        out["namespace"] = labels.get("namespace") or DEFAULT_NAMESPACE
        out["container"] = labels.get("container") or DEFAULT_CONTAINER
    if job:
        out["hpc_job"] = job
    if labels.get("model"):
        out["model"] = labels["model"]
    out["entity"] = entity
    return {k: v for k, v in out.items() if v != ""}


class LatestValues:
    """The newest (ts, value) of every (entity, field), with entity labels; safe across threads.

    ``version`` grows with every update that changed something, so a reader can tell whether what it
    rendered is stale.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], tuple[float, float]] = {}
        self._labels: dict[str, dict[str, str]] = {}
        self.updates = 0
        self.version = 0

    def update(self, frame: Frame) -> None:
        """Take the last sample per (entity, field) of ``frame`` when newer than what is held.

        Labels of an entity are replaced by the frame's (not merged), so a GPU whose job ended loses its
        ``job`` label as soon as a frame says so.
        """
        if not len(frame):
            return
        key = frame.entity_idx.astype(np.int64) * max(len(frame.fields), 1) + frame.field_idx
        # Newest per key: sort by (key, ts) and take each key's last row.
        order = np.lexsort((frame.ts_s, key))
        k_sorted = key[order]
        last = order[np.r_[k_sorted[1:] != k_sorted[:-1], True]]
        ents = [frame.entities[i] for i in frame.entity_idx[last]]
        flds = [frame.fields[i] for i in frame.field_idx[last]]
        with self._lock:
            for e, f, t, v in zip(ents, flds, frame.ts_s[last].tolist(), frame.value[last].tolist(), strict=True):
                old = self._values.get((e, f))
                if old is None or t >= old[0]:
                    self._values[(e, f)] = (t, v)
            for ent, lab in frame.labels.items():
                self._labels[ent] = dict(lab)
            self.updates += 1
            self.version += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], tuple[float, float]], dict[str, dict[str, str]]]:
        """A consistent copy of (values, labels)."""
        with self._lock:
            return dict(self._values), {k: dict(v) for k, v in self._labels.items()}

    def render(self) -> str:
        """The Prometheus text exposition of the held values (through ``prometheus_client``)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return generate_latest(registry).decode()


class _Collector:
    """A ``prometheus_client`` collector over a :class:`LatestValues` (one metric family per field)."""

    def __init__(self, latest: LatestValues) -> None:
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        values, labels = self.latest.snapshot()
        label_cache: dict[str, dict[str, str]] = {}
        families: dict[str, Metric] = {}
        for (ent, fld), (_, val) in sorted(values.items()):
            fam = families.get(fld)
            spec = FIELD_BY_NAME.get(fld)
            if fam is None:
                if spec is None:
                    fam = Metric(fld, fld, "gauge")
                else:
                    unit = spec.dcgm_unit or spec.unit
                    counter = " (a counter, exposed untyped: dcgm-exporter's name has no _total)"
                    doc = f"{spec.description} (in {unit})" + (counter if spec.kind == "counter" else "")
                    fam = Metric(fld, doc, "gauge" if spec.kind == "gauge" else "unknown")
                families[fld] = fam
            lab = label_cache.get(ent)
            if lab is None:
                lab = label_cache[ent] = entity_labels(ent, labels.get(ent, {}))
            fam.add_sample(fld, lab, val * (spec.dcgm_scale if spec is not None else 1.0))
        yield from families.values()


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
    """

    def __init__(self, latest: LatestValues | None = None, listen: str = "127.0.0.1:9400", *,
                 allow_remote: bool = False, render_period_s: float = 1.0, max_threads: int = 8,
                 max_pending: int = 64, request_timeout_s: float = 10.0) -> None:  # fmt: skip
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
                self._gzipped = (body, gzip.compress(body, compresslevel=5))
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
                gz = "gzip" in self.headers.get("Accept-Encoding", "")
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
