"""The twin source: frames from the simulation, through a thin adapter.

``TwinSource(config, frames=...)`` passes on any iterable of :class:`~twinloop.telemetry.frame.Frame`
(the twin engine's per-step output, or any other producer). Without ``frames`` it asks the twin for them
through one documented entry point, ``twinloop.twin.telemetry_frames(scenario, seed, steps)``, imported when
first needed (so loading the telemetry layer does not load the simulation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar

from pydantic import Field

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Pacer, Source, SourceConfig


class TwinConfig(SourceConfig):
    """Twin source options.

    Attributes:
        scenario: scenario YAML path (``None`` = the twin's packaged default scenario).
        seed: random seed handed to the twin.
        steps: number of simulation steps handed to the twin (``None`` = the scenario's own length); the twin
            yields one frame per entity level and step. Frames handed in directly are passed on as they are.
        speed: simulated seconds per wall-clock second (1 = real time, as ``twinloop export`` wants it;
            0 = as fast as the twin runs).
    """

    scenario: str | None = None
    seed: int = 0
    steps: int | None = Field(default=None, ge=1)
    speed: float = Field(default=0.0, ge=0)


class TwinSource(Source):
    """Frames from the twin (or any iterable of frames handed in)."""

    name: ClassVar[str] = "twin"
    config_type: ClassVar[type[SourceConfig]] = TwinConfig
    target_field: ClassVar[str | None] = "scenario"

    def __init__(
        self,
        config: SourceConfig | None = None,
        frames: Iterable[Frame] | Callable[[], Iterable[Frame]] | None = None,
    ) -> None:
        super().__init__(config)
        self._frames = frames

    def _runner_frames(self) -> Iterable[Frame]:
        cfg = self.config
        assert isinstance(cfg, TwinConfig)
        from twinloop.twin import telemetry_frames

        return telemetry_frames(cfg.scenario, cfg.seed, cfg.steps)

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield the twin's frames unchanged (validation happens downstream)."""
        produced = self._frames() if callable(self._frames) else self._frames
        if produced is None:
            produced = self._runner_frames()
        pacer = Pacer(self.config.speed if isinstance(self.config, TwinConfig) else 0.0)
        for frame in produced:
            if len(frame):
                pacer.wait(float(frame.ts_s[0]))
            yield frame
