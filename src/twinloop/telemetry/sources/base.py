"""The Source protocol: a typed, frozen config and a generator of frames.

A source never raises on bad *data*: a bad line, value or failed request is counted in the
:class:`~twinloop.telemetry.report.IngestReport` passed to :meth:`Source.frames` and reading goes on.
Bad *configuration* (a missing file, an unknown option) raises :class:`~twinloop.errors.InputError`.
Constructors only store the config; files, devices and connections open inside :meth:`Source.frames`,
so a source (and its config) pickles.
"""

from __future__ import annotations

import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from twinloop.errors import pydantic_error
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport


class SourceConfig(BaseModel):
    """Base of every source config: frozen, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Pacer:
    """Sleeps so that data timestamps advance ``speed`` times as fast as the wall clock (0 = no pacing)."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._start: tuple[float, float] | None = None

    def wait(self, ts_s: float) -> None:
        """Block until the data time ``ts_s`` is due."""
        if self.speed <= 0:
            return
        now = time.monotonic()
        if self._start is None:
            self._start = (now, ts_s)
            return
        wall0, ts0 = self._start
        delay = wall0 + (ts_s - ts0) / self.speed - now
        if delay > 0:
            time.sleep(delay)


def default_node_prefix() -> str:
    """Entity prefix of this machine's GPUs when nothing says where it sits: ``site0/row0/rack0/<host>``."""
    return f"site0/row0/rack0/{socket.gethostname().split('.')[0] or 'localhost'}"


class Source(ABC):
    """A telemetry source (one file per kind under ``telemetry/sources/``, registered in ``SOURCES``).

    Class attributes:
        name: the registry key (used on the command line).
        config_type: the pydantic config model.
        target_field: the config field that the CLI's positional TARGET fills (path, URL ...), if any.
    """

    name: ClassVar[str]
    config_type: ClassVar[type[SourceConfig]]
    target_field: ClassVar[str | None] = None

    def __init__(self, config: SourceConfig | None = None) -> None:
        self.config = config if config is not None else self.config_type()
        if not isinstance(self.config, self.config_type):
            raise TypeError(f"{self.name} source needs a {self.config_type.__name__}, got {type(config).__name__}")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Source:
        """Build the source from a plain dict of options (CLI), validating into an InputError."""
        try:
            config = cls.config_type.model_validate(options)
        except ValidationError as exc:
            raise pydantic_error(f"{cls.name} source", exc) from None
        return cls(config)

    @property
    def label(self) -> str:
        """Name of the source for messages (``kind:target``)."""
        target = getattr(self.config, self.target_field, None) if self.target_field else None
        return f"{self.name}:{target}" if target else self.name

    @abstractmethod
    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield frames in time order as far as the input allows; count problems in ``report``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"
