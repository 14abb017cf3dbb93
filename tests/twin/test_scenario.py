"""Scenario loading: durations, defaults and bad input (InputError naming file, field, allowed range)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from tests.twin.twin_helpers import make, small

from twinloop.errors import InputError
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import SCENARIO_DIR, load_scenario, parse_duration_s, scenario_from_dict


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("6h", 21600), ("1.5d", 129600), ("250ms", 0.25), ("2m", 120), (45, 45), ("30 min", 1800)],
)
def test_durations(text: Any, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@given(st.text(max_size=12))
def test_duration_parser_never_crashes_on_garbage(text: str) -> None:
    try:
        assert parse_duration_s(text) >= 0
    except ValueError as exc:
        assert "duration" in str(exc)


def test_default_scenario_loads() -> None:
    spec = load_scenario()
    n = sum(r.count * r.racks * r.nodes_per_rack * r.node.gpus for r in spec.rows)
    assert n == 1024
    assert {j.kind for j in spec.jobs} == {"training", "serving"}


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    p = tmp_path / "scn.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_unknown_field_names_file_and_field(tmp_path: Path) -> None:
    raw = small()
    raw["rows"][0]["cdu"]["flow_gpm"] = 10
    with pytest.raises(InputError) as err:
        load_scenario(_write(tmp_path, raw))
    assert err.value.source.endswith("scn.yaml")
    assert err.value.field == "rows.0.cdu.flow_gpm"


def test_negative_cdu_flow_names_range(tmp_path: Path) -> None:
    raw = small()
    raw["rows"][0]["cdu"]["flow_kg_per_s"] = -3
    with pytest.raises(InputError) as err:
        load_scenario(_write(tmp_path, raw))
    assert err.value.field == "rows.0.cdu.flow_kg_per_s"
    assert "greater than 0" in str(err.value)


def test_wrong_unit_is_rejected(tmp_path: Path) -> None:
    raw = small(duration_s="3 fortnights")
    with pytest.raises(InputError) as err:
        load_scenario(_write(tmp_path, raw))
    assert err.value.field == "duration_s"
    assert "allowed" in str(err.value)


def test_rack_over_busway_is_impossible(tmp_path: Path) -> None:
    raw = small()
    raw["rows"][0]["busway_rating_w"] = 20000
    with pytest.raises(InputError) as err:
        load_scenario(_write(tmp_path, raw))
    assert err.value.field == "rows.0.busway_rating_w"
    assert "allowed: >=" in str(err.value)


def test_rack_over_pdu_and_unknown_gpu() -> None:
    raw = small()
    raw["rows"][0]["rack_pdu_rating_w"] = 1000
    with pytest.raises(InputError, match=r"rows\.0\.rack_pdu_rating_w"):
        scenario_from_dict(raw, "x.yaml")
    raw = small()
    raw["rows"][0]["node"] = {"gpu": "h100-sxn"}
    with pytest.raises(InputError, match="did you mean h100-sxm"):
        scenario_from_dict(raw, "x.yaml")


def test_job_larger_than_site_and_bad_fault_target() -> None:
    raw = small(jobs=[{"name": "big", "kind": "training", "gpus": 64}])
    with pytest.raises(InputError, match=r"jobs\.0\.gpus.*1\.\.32"):
        scenario_from_dict(raw, "x.yaml")
    raw = small(faults=[{"kind": "straggler", "target": "dc1/r01/k09/n01/g0", "start_s": 1}])
    with pytest.raises(InputError, match=r"faults\.0\.target"):
        make(raw)
    raw = small(faults=[{"kind": "psu_loss", "target": "dc1/r01", "start_s": 1}])
    with pytest.raises(InputError, match="needs a node target"):
        make(raw)


def test_cli_bad_scenario_exit_2(cli: Any, tmp_path: Path) -> None:
    raw = small()
    raw["rows"][0]["cdu"]["flow_kg_per_s"] = -1
    result = cli("sim", str(_write(tmp_path, raw)), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "scn.yaml" in lines[0] and "rows.0.cdu.flow_kg_per_s" in lines[0]


def test_cli_bad_duration_flag_exit_2(cli: Any) -> None:
    result = cli("sim", "--duration", "ten", "--json")
    assert result.exit_code == 2
    assert "--duration" in result.stderr


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_packaged_scenarios_run(path: Path) -> None:
    twin = Twin(load_scenario(path), source=str(path))
    twin.run(120)
    s = twin.summary()
    assert s["energy"]["balance_error"] < 1e-3
    assert any(j["phase"] != "queued" for j in s["jobs"])
