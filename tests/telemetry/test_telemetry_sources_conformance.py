"""Every registered source: runs, repeats exactly, pickles, has defaults, and yields valid frames."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import numpy as np
import pytest

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources import SOURCES, Source, make_source


def _run(source: Source) -> tuple[list[Frame], IngestReport]:
    report = IngestReport()
    return list(validated_frames(source, report)), report


def _digest(frames: list[Frame]) -> list[tuple[float, str, str, float]]:
    rows = []
    for f in frames:
        rows += list(zip(f.ts_s.tolist(), f.entity_names().tolist(), f.field_names().tolist(), f.value.tolist(),
                         strict=True))  # fmt: skip
    return rows


def test_every_registered_source_has_an_example(example_sources: dict[str, Callable[[], Source]]) -> None:
    assert set(example_sources) == set(SOURCES)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_source_conformance(kind: str, example_sources: dict[str, Callable[[], Source]]) -> None:
    make = example_sources[kind]
    source = make()
    assert source.name == kind and SOURCES[kind] is type(source)
    frames, report = _run(source)
    assert frames, f"{kind} produced no frames"
    assert report.rows_stored == 0 and report.rows_in >= sum(len(f) for f in frames)
    for f in frames:
        assert f.ts_s.dtype == np.float64 and f.value.dtype == np.float64
        assert np.isfinite(f.value).all()
        assert len(f.entities) and all(e.count("/") >= 1 for e in f.entities)
    # Deterministic: a second run of a fresh source gives the same samples.
    again, _ = _run(make())
    assert _digest(frames) == _digest(again)
    # Config and source pickle (no open handles before frames() runs).
    assert pickle.loads(pickle.dumps(source.config)) == source.config
    if kind != "twin":  # the twin example holds a list of frames, which pickles too, but is compared above
        clone = pickle.loads(pickle.dumps(source))
        assert _digest(_run(clone)[0]) == _digest(frames)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_config_defaults_are_valid(kind: str) -> None:
    cls = SOURCES[kind]
    config = cls.config_type()
    assert cls(config).config == config
    with pytest.raises(Exception, match="extra"):
        cls.config_type.model_validate({"no_such_option": 1})


def test_make_source_maps_target_and_rejects_unknown_kind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = make_source("file", str(tmp_path / "x.csv"), {"batch_rows": 5})
    assert src.config.path.endswith("x.csv") and src.config.batch_rows == 5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"unknown source 'nvmll'.*did you mean nvml"):
        make_source("nvmll")
    with pytest.raises(ValueError, match="batch_rows"):
        make_source("file", "x.csv", {"batch_rows": "many"})


def test_pacer_sleeps_by_data_time_over_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    from twinloop.telemetry.sources import base

    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(base.time, "sleep", lambda s: slept.append(s))
    pacer = base.Pacer(speed=10.0)
    for ts in (1000.0, 1010.0, 1030.0):
        pacer.wait(ts)
    assert slept == pytest.approx([1.0, 3.0])  # 10 s and 30 s of data at 10x, clock standing still
    base.Pacer(0.0).wait(5.0)
    assert len(slept) == 2
