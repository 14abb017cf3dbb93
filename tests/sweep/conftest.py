"""A local Ray with 2 CPUs shared by the sweep tests (started once, shut down at the end: nothing left running)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
