"""The real programs the integration tests start, in one place: Prometheus, Alertmanager, Chromium, a free port.

Each program is the Debian package that ``scripts/test`` installs, found on PATH. A test that needs one that is
absent skips with the reason (``require``); one that is present but does not come up within its bounded wait
fails with the tail of its log. Every server listens on 127.0.0.1 only and is stopped when its block ends.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
CHROMIUM = shutil.which("chromium")
#: Headless Chromium as the tests run it: no sandbox (containers), no GPU, no traffic of its own.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
#: What a poll of a server that is still starting may raise: not up yet, or an answer without the data yet.
_NOT_YET = (httpx.HTTPError, KeyError, IndexError, ValueError)


def free_port() -> int:
    """A loopback TCP port nobody listens on (right now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require(binary: str | None, package: str) -> str:
    """The program's path, or skip the test naming the Debian package that provides it."""
    if binary is None:
        pytest.skip(f"{package} is not installed (Debian package '{package}'; scripts/test installs it)")
    return binary


@dataclass(frozen=True)
class Running:
    """A started server: its base URL, its process and its log file."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def wait_until(self, ready: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        """Poll ``ready`` until true; fail if the server exits first or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                if ready():
                    return
            except _NOT_YET:
                pass
            time.sleep(0.2)
        pytest.fail(f"{self.name}: {what} not within {timeout_s:g} s")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result of an instant PromQL query (Prometheus only)."""
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=2).json()
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


@contextmanager
def _serve(name: str, argv: Sequence[str], url: str, log_path: Path) -> Iterator[Running]:
    """Start ``argv``, wait for ``url/-/ready``, yield, then stop it (terminate, kill after 10 s)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT)
        try:
            server = Running(name, url, proc, log_path)
            server.wait_until(lambda: httpx.get(f"{url}/-/ready", timeout=1).status_code == 200, "ready")
            yield server
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@contextmanager
def prometheus(workdir: Path, targets: Sequence[str]) -> Iterator[Running]:
    """A real Prometheus scraping ``targets`` (``host:port``) every second; skips when it is not installed."""
    binary = require(PROMETHEUS, "prometheus")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: twinloop\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: [{', '.join(repr(t) for t in targets)}]\n"
    )
    argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}"]  # fmt: skip
    with _serve("prometheus", argv, f"http://127.0.0.1:{port}", workdir / "prometheus.log") as server:
        yield server


@contextmanager
def alertmanager(workdir: Path) -> Iterator[Running]:
    """A real Alertmanager routing every alert to a receiver that drops it; skips when it is not installed."""
    binary = require(ALERTMANAGER, "prometheus-alertmanager")
    port = free_port()
    config = workdir / "alertmanager.yml"
    config.write_text("route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n")
    argv = [binary, f"--config.file={config}", f"--storage.path={workdir / 'alertmanager-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]  # fmt: skip
    with _serve("alertmanager", argv, f"http://127.0.0.1:{port}", workdir / "alertmanager.log") as server:
        yield server


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium driven by Playwright (a ``Browser``); skips when either is not installed."""
    binary = require(CHROMIUM, "chromium")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()
