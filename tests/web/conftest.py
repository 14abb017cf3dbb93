"""Fixtures of the web tests: a synthetic store, an approve-mode responder, the app, a real uvicorn server."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import uvicorn
from fastapi import FastAPI
from tests.servers import chromium, free_port

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.web import create_app
from twinloop.web.controller import ResponderController

from .webdata import HOT_RACK, build_store

warnings.filterwarnings("ignore", message=".*httpx.*", category=DeprecationWarning)

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "web"


class MemAdapter(ActionAdapter):
    """Settings in a dict; every GPU belongs to job ``dc9/jobs/train-a``."""

    name: ClassVar[str] = "memory"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(self) -> None:
        self.settings: dict[tuple[ActionKind, str], float] = {}
        self.applied: list[ActionRequest] = []

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        return {
            ActionKind.POWER_CAP: (200.0, 700.0),
            ActionKind.CDU_SETPOINT: (15.0, 40.0),
            ActionKind.CDU_FLOW: (0.3, 1.5),
        }.get(kind)

    def current(self, kind: ActionKind, target: str) -> float | None:
        default = {ActionKind.POWER_CAP: 700.0, ActionKind.CDU_SETPOINT: 30.0, ActionKind.CDU_FLOW: 1.0}.get(kind)
        return self.settings.get((kind, target), default)

    def job_of(self, entity: str) -> str | None:
        return "dc9/jobs/train-a" if entity.startswith("dc9/r") else super().job_of(entity)

    def _apply(self, request: ActionRequest) -> AdapterReply:
        self.applied.append(request)
        if request.value is not None:
            self.settings[(request.kind, request.target)] = request.value
        return AdapterReply("applied", "ok")


@dataclass
class Loop:
    """A responder in approve mode with pending actions, and its controller."""

    adapter: MemAdapter
    responder: Responder
    controller: ResponderController


def make_loop() -> Loop:
    """An approve-mode responder that has handled one cooling incident (two actions pending)."""
    adapter = MemAdapter()
    responder = Responder(default_policy(), adapter, mode="approve")
    members = tuple(f"{HOT_RACK}/n01/g{i}" for i in range(4))
    incident = Incident(7, EventClass.COOLING_DEGRADATION, HOT_RACK, members, 0.0, 0.0, Severity.MAJOR)

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float:
        return 80.0

    responder.handle([incident], 0.0, read)
    clock = iter(range(1000, 10**6))
    controller = ResponderController(responder, read, clock=lambda: float(next(clock)))
    return Loop(adapter, responder, controller)


@pytest.fixture(scope="session")
def site_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic store (built once per session)."""
    return build_store(tmp_path_factory.mktemp("web") / "telemetry.duckdb")


@pytest.fixture
def loop() -> Loop:
    """A fresh approve-mode loop."""
    return make_loop()


@pytest.fixture
def app(site_db: Path, loop: Loop) -> FastAPI:
    """The app over the synthetic store with the loop attached (reads need the token)."""
    return create_app(site_db, site_db.parent, TOKEN, controller=loop.controller)


class Server:
    """uvicorn serving ``app`` in a thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def server(app: FastAPI) -> Iterator[Server]:
    """A real HTTP server for the app."""
    with Server(app) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium (Playwright), one per test module; skips when Chromium or Playwright is absent."""
    with chromium() as b:
        yield b


def loaded(page: Any) -> None:
    """Wait until the page's script has marked it loaded (its data fetched and drawn)."""
    page.wait_for_selector("body[data-loaded]", state="attached", timeout=20_000)


def shot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as ``tests/artifacts/web/NAME.png``; returns its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
