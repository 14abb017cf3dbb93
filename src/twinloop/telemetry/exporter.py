"""Prometheus exporter: the latest value of every (entity, field) in dcgm-exporter's text format.

An existing Prometheus (and Grafana with dcgm-exporter dashboards) scrapes twinloop like a GPU node:
metric names are the field names (``DCGM_FI_DEV_POWER_USAGE``), GPU series carry dcgm-exporter's labels
``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname`` (and ``pci_bus_id`` when known), the workload job
goes in ``hpc_job`` (dcgm-exporter's HPC job-mapping label; a plain ``job`` label would be renamed
``exported_job`` by Prometheus, which owns ``job``), and every series has an ``entity`` label with the
twinloop entity id so that values map back exactly. Values are in dcgm-exporter's units (energy in mJ).

:class:`LatestValues` keeps the cache (thread-safe), :class:`Exporter` serves ``/metrics`` from a stdlib
``ThreadingHTTPServer`` in a thread and feeds the cache from a source in another thread.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.telemetry.fields import FIELD_BY_NAME
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.promtext import render
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_GPU_PART = re.compile(r"^(?:gpu)?(\d+)$")


def entity_labels(entity: str, labels: Mapping[str, str]) -> dict[str, str]:
    """dcgm-exporter-style labels of one entity (GPU ids ``.../<node>/gpu<i>`` get gpu/device/Hostname)."""
    parts = entity.split("/")
    out: dict[str, str] = {}
    m = _GPU_PART.match(parts[-1]) if len(parts) >= 2 else None
    if m is not None or "gpu" in labels:
        gpu = labels.get("gpu", m.group(1) if m else "0")
        out["gpu"] = gpu
        out["UUID"] = labels.get("UUID", "")
        out["device"] = labels.get("device", f"nvidia{gpu}")
        out["modelName"] = labels.get("modelName", labels.get("gpu_kind", ""))
        out["Hostname"] = labels.get("Hostname", parts[-2] if len(parts) >= 2 else "")
        if "pci_bus_id" in labels:
            out["pci_bus_id"] = labels["pci_bus_id"]
    elif len(parts) == 4:
        out["Hostname"] = labels.get("Hostname", parts[-1])
    if "job" in labels:
        out["hpc_job"] = labels["job"]
    if "model" in labels:
        out["model"] = labels["model"]
    out["entity"] = entity
    return out


class LatestValues:
    """The newest (ts, value) of every (entity, field), with entity labels; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], tuple[float, float]] = {}
        self._labels: dict[str, dict[str, str]] = {}
        self.updates = 0

    def update(self, frame: Frame) -> None:
        """Take the last sample per (entity, field) of ``frame`` when newer than what is held."""
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
                self._labels.setdefault(ent, {}).update(lab)
            self.updates += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], tuple[float, float]], dict[str, dict[str, str]]]:
        """A consistent copy of (values, labels)."""
        with self._lock:
            return dict(self._values), {k: dict(v) for k, v in self._labels.items()}

    def render(self) -> str:
        """The Prometheus text exposition of the held values."""
        values, labels = self.snapshot()
        by_field: dict[str, list[tuple[dict[str, str], float]]] = {}
        for (ent, fld), (_, val) in sorted(values.items()):
            spec = FIELD_BY_NAME.get(fld)
            scale = spec.dcgm_scale if spec is not None else 1.0
            by_field.setdefault(fld, []).append((entity_labels(ent, labels.get(ent, {})), val * scale))
        families = []
        for fld, samples in by_field.items():
            spec = FIELD_BY_NAME.get(fld)
            help_text = f"{spec.description} (in {spec.dcgm_unit or spec.unit})" if spec is not None else fld
            families.append((fld, help_text, spec.kind if spec is not None else "gauge", samples))
        return render(families)


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); raises InputError when malformed."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InputError("export", "--listen", f"expected HOST:PORT (e.g. 127.0.0.1:9400), got {listen!r}")
    return host or "127.0.0.1", int(port)


class Exporter:
    """Serves ``/metrics`` and keeps it fed from a source.

    Args:
        latest: the cache to serve (shared with whoever feeds it).
        listen: ``HOST:PORT``; port 0 picks a free port (see :attr:`port`).
    """

    def __init__(self, latest: LatestValues | None = None, listen: str = "127.0.0.1:9400") -> None:
        self.latest = latest if latest is not None else LatestValues()
        self.listen = listen
        self.report = IngestReport()
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.feed_error: BaseException | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self) -> Exporter:
        """Bind and serve in a background thread."""
        host, port = parse_listen(self.listen)
        latest = self.latest

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = latest.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise InputError("export", "--listen", f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self._server.daemon_threads = True
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
