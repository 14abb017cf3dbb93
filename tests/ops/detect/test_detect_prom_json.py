"""Users' own exports: a saved Prometheus API answer (`detect`, `ingest`), clocks in ms/us/ns, long bad lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.ops.detect.offline import read_series

T0 = 1_764_244_800  # 2025-11-27 12:00 UTC


def _answer(n: int = 600, step_s: int = 15, jump_at: int | None = 400) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    result = []
    for gpu in range(2):
        temps = 60 + rng.normal(0, 0.3, n) + (12.0 if gpu == 1 else 0.0) * (np.arange(n) >= (jump_at or n))
        values = [[T0 + step_s * i, f"{t:.2f}"] for i, t in enumerate(temps)]
        result.append({"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": str(gpu), "Hostname": "n7"},
                       "values": values})  # fmt: skip
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _write(tmp_path: Path, doc: Any, name: str = "q.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def test_range_answer_reads_per_gpu_and_the_jump_is_found(tmp_path: Path, cli: Callable[..., Any]) -> None:
    p = _write(tmp_path, _answer())
    (block,), report = read_series(p)
    assert report.layout == "prometheus" and report.out_of_order == 0 and report.dt_s == 15
    assert block.names == ("site0/row0/rack0/n7/gpu0", "site0/row0/rack0/n7/gpu1")
    result = cli("detect", str(p), "--json")
    assert result.exit_code == 0, result.output
    found = {d["entity"] for d in json.loads(result.stdout)["detections"]}
    assert found == {"site0/row0/rack0/n7/gpu1"}


@pytest.mark.parametrize("shape", ["data", "result"])
def test_bare_data_or_result_list(tmp_path: Path, shape: str) -> None:
    data = _answer()["data"]
    (block,), _ = read_series(_write(tmp_path, data if shape == "data" else data["result"]))
    assert block.values.shape == (600, 2)


def test_nan_values_and_bad_samples_are_counted(tmp_path: Path) -> None:
    doc = _answer()
    values = doc["data"]["result"][0]["values"]
    values[5][1] = "NaN"
    values[6] = ["later"]
    _, report = read_series(_write(tmp_path, doc))
    assert report.problems == {"parse_error": 1}
    assert report.nan_count["site0/row0/rack0/n7/gpu0:DCGM_FI_DEV_GPU_TEMP"] == 2  # the NaN and the lost sample


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, ("status", "bad_data")),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, ("resultType", "query_range")),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, ("data.result", "no valid")),
        ({"status": "success", "data": {"result": "x"}}, ("data.result", "matrix")),
        ('{"data": {"result": [', ("line 1", "malformed JSON")),
    ],
)
def test_bad_answers_are_one_line_exit_2(
    tmp_path: Path, cli: Callable[..., Any], doc: Any, names: tuple[str, ...]
) -> None:
    p = _write(tmp_path, doc)
    with pytest.raises(InputError) as exc:
        read_series(p)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(p)) and all(n in text for n in names), text
    assert cli("detect", str(p)).exit_code == 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                            st.sampled_from(["status", "data", "result", "resultType", "metric", "values",
                                             "value", "__name__"]), inner, max_size=4),
                        max_leaves=20))  # fmt: skip
def test_any_json_reads_or_is_an_input_error(tmp_path: Path, doc: Any) -> None:
    p = _write(tmp_path, {"resultType": "matrix", "result": doc} if not isinstance(doc, dict) else doc)
    try:
        blocks, _ = read_series(p)
    except InputError:
        return
    assert all(b.values.shape[0] == b.ts.size for b in blocks)


@pytest.mark.parametrize(("scale", "unit"), [(1, "s"), (1_000, "ms"), (1_000_000, "us"), (1_000_000_000, "ns")])
def test_a_clock_in_ms_us_or_ns_is_read_as_seconds(tmp_path: Path, scale: int, unit: str) -> None:
    rows = "\n".join(f"{(T0 + 15 * i) * scale},{400 + (i % 3)}" for i in range(200))
    (block,), report = read_series(_write(tmp_path, f"time,power_w\n{rows}\n", "p.csv"))
    assert report.time_unit == unit and report.dt_s == pytest.approx(15)
    assert block.ts[0] == pytest.approx(T0)


def test_a_clock_past_year_9999_prints_seconds(tmp_path: Path, cli: Callable[..., Any]) -> None:
    rows = "\n".join(f"{3e11 + 15 * i},{400 + (40 if 150 <= i < 170 else 0) + (i % 3)}" for i in range(300))
    result = cli("detect", str(_write(tmp_path, f"time,power_w\n{rows}\n", "far.csv")), "--detector", "cusum")
    assert result.exit_code == 0, result.output


def test_a_sample_without_a_finite_time_is_counted(tmp_path: Path) -> None:
    doc = _answer()
    doc["data"]["result"][1]["values"][0][0] = "NaN"
    _, report = read_series(_write(tmp_path, doc))
    assert report.problems == {"parse_error": 1}


def test_ingest_reads_a_saved_answer(tmp_path: Path, cli: Callable[..., Any]) -> None:
    p = _write(tmp_path, _answer(n=50))
    result = cli("ingest", "prometheus", str(p), "--db", str(tmp_path / "t.duckdb"))
    assert result.exit_code == 0, result.output
    assert "stored 100" in result.output


def test_a_json_file_as_the_telemetry_schema_is_a_short_error(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """A wrong file's whole first line (here 40 kB of JSON) is not quoted into the error."""
    p = _write(tmp_path, _answer(n=1000))
    result = cli("ingest", "file", str(p), "--db", str(tmp_path / "t.duckdb"))
    assert result.exit_code == 2 and len(result.output) < 1000 and "more" in result.output, result.output[:300]


def test_input_errors_are_capped() -> None:
    from twinloop.errors import MAX_MESSAGE_CHARS

    text = str(InputError("f.csv", "x", "y" * 10 * MAX_MESSAGE_CHARS))
    assert len(text) < MAX_MESSAGE_CHARS + 100 and text.endswith("more characters)")


def test_a_twinloop_store_is_read_as_its_recording(tmp_path: Path, cli: Callable[..., Any]) -> None:
    # `twinloop ingest ... --db x.duckdb`, then `twinloop detect x.duckdb`: read as `watch replay` reads it, not
    # as a CSV of binary garbage. Known by its header, so a store named .db or .bin is read too.
    prom = _write(tmp_path, _answer())
    db = tmp_path / "recording.bin"
    ingested = cli("ingest", "file", str(_long_csv(tmp_path, prom)), "--db", str(db), "--json")
    assert ingested.exit_code == 0, ingested.output
    (block,), report = read_series(db)
    assert report.layout == "store" and report.dt_s == 15 and block.values.shape == (600, 2)
    result = cli("detect", str(db), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["profile"] == "default", doc["profile"]
    assert {d["entity"] for d in doc["detections"]} == {"site0/row0/rack0/n7/gpu1"}


def _long_csv(tmp_path: Path, prom: Path) -> Path:
    """The saved answer in the telemetry schema (ts, entity, field, value), as `twinloop ingest file` reads it."""
    (block,), _ = read_series(prom)
    rows = ["ts,entity,field,value"]
    for i, t in enumerate(block.ts.tolist()):
        rows += [f"{t},{name},DCGM_FI_DEV_GPU_TEMP,{block.values[i, j]}" for j, name in enumerate(block.names)]
    out = tmp_path / "long.csv"
    out.write_text("\n".join(rows) + "\n")
    return out
