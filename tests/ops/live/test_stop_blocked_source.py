"""`twinloop watch` stops on Ctrl-C / SIGTERM even when its source is stuck in its own wait.

Walking the CLI: `twinloop watch prometheus:http://127.0.0.1:1` (nothing listening) printed "silent for 5 s" and
then ignored SIGTERM and Ctrl-C for good: the loop saw the stop, but closing the cluster waited without end for
the reader thread, which sat in the Prometheus source's back-off sleep and never looked at the stop flag.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import ClassVar

from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig
from twinloop.telemetry.sources.files import FileConfig


class _Stuck(Source):
    """A source blocked in its own wait (a dead endpoint's retry back-off) that yields nothing."""

    name: ClassVar[str] = "stuck"
    config_type: ClassVar[type[SourceConfig]] = FileConfig

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        time.sleep(3600.0)
        yield from ()


def test_close_returns_while_the_source_is_stuck_in_its_wait() -> None:
    cluster = SourceCluster(_Stuck(FileConfig(path="unused.csv")), NoActuator(), LiveOptions(discover_s=0.1))
    cluster.topology()  # no data within discover_s: an empty topology, the reader thread still asleep
    closer = threading.Thread(target=cluster.close, daemon=True)
    started = time.monotonic()
    closer.start()
    closer.join(timeout=15.0)
    assert not closer.is_alive(), "close() waited for a reader thread that never looks at the stop flag"
    assert time.monotonic() - started < 10.0


def test_watch_stops_promptly_while_waiting_for_a_silent_source() -> None:
    """The stop (Ctrl-C / SIGTERM) also ends the wait for the first data (``discover_s``, 60 s by default)."""
    from twinloop.ops.live.watcher import WatchConfig, Watcher

    cluster = SourceCluster(_Stuck(FileConfig(path="unused.csv")), NoActuator(), LiveOptions(discover_s=60.0))
    watcher = Watcher(cluster, config=WatchConfig(mode="observe"))
    started = time.monotonic()
    summary = watcher.run(stop=lambda: time.monotonic() - started > 0.5)
    assert summary.stopped == "stop" and summary.samples == 0
    assert time.monotonic() - started < 10.0


class _Refused(Source):
    """A source whose endpoint refuses every request: it counts the error and waits (as the Prometheus one does)."""

    name: ClassVar[str] = "refused"
    config_type: ClassVar[type[SourceConfig]] = FileConfig

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        report.add("source_error", "http://prom:9090/api/v1/query", "up", "ConnectError: Connection refused")
        time.sleep(3600.0)
        yield from ()


def test_silent_source_warning_says_why() -> None:
    """It said only "source ... silent for 5 s": the connection error the source had counted was not shown."""
    from twinloop.ops.live.watcher import WatchConfig, Watcher

    said: list[str] = []
    cluster = SourceCluster(
        _Refused(FileConfig(path="unused.csv")), NoActuator(), LiveOptions(discover_s=0.1, silence_s=0.3)
    )
    watcher = Watcher(cluster, config=WatchConfig(mode="observe"), say=said.append)
    started = time.monotonic()
    watcher.run(stop=lambda: time.monotonic() - started > 1.5)
    silent = [s for s in said if "silent for" in s]
    assert silent and "Connection refused" in silent[0], said
