"""The field table: DCGM names and ids, units, aliases, and the generated documentation."""

from __future__ import annotations

import re
from pathlib import Path

from twinloop.hardware import power
from twinloop.telemetry.fields import ALIASES, FIELD_BY_NAME, FIELDS, canonical_field, render_markdown

DOC = Path(__file__).parents[2] / "docs" / "telemetry-fields.md"


def test_docs_match_the_table() -> None:
    assert DOC.read_text() == render_markdown(), (
        "docs/telemetry-fields.md is stale: run python -m twinloop.telemetry.docgen > docs/telemetry-fields.md"
    )


def test_names_ids_and_units_are_consistent() -> None:
    assert len(FIELD_BY_NAME) == len(FIELDS)
    ids = [f.dcgm_id for f in FIELDS if f.dcgm_id is not None]
    assert len(ids) == len(set(ids))
    for f in FIELDS:
        assert re.fullmatch(r"(DCGM_FI_(DEV|PROF)|TWINLOOP_FI)_[A-Z0-9_]+", f.name), f.name
        assert (f.dcgm_id is not None) == f.name.startswith("DCGM_"), f.name
        assert f.unit and f.description
    # The required GPU fields are all there, with DCGM's ids.
    expected = {"DCGM_FI_DEV_POWER_USAGE": 155, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 156,
                "DCGM_FI_DEV_GPU_TEMP": 150, "DCGM_FI_DEV_MEMORY_TEMP": 140, "DCGM_FI_DEV_SM_CLOCK": 100,
                "DCGM_FI_DEV_MEM_CLOCK": 101, "DCGM_FI_DEV_POWER_MGMT_LIMIT": 160,
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 112, "DCGM_FI_DEV_XID_ERRORS": 230, "DCGM_FI_DEV_GPU_UTIL": 203,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 1004, "DCGM_FI_PROF_DRAM_ACTIVE": 1005,
                "DCGM_FI_DEV_FB_USED": 252}  # fmt: skip
    assert {k: FIELD_BY_NAME[k].dcgm_id for k in expected} == expected
    assert FIELD_BY_NAME["DCGM_FI_DEV_POWER_USAGE"].unit == "W"
    assert FIELD_BY_NAME["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].unit == "J"


def test_facility_rack_node_job_fields_exist() -> None:
    levels = {f.level for f in FIELDS}
    assert {"gpu", "node", "rack", "row", "site", "job"} <= levels
    for name in (
        "TWINLOOP_FI_RACK_POWER",
        "TWINLOOP_FI_CDU_SUPPLY_TEMP",
        "TWINLOOP_FI_CDU_RETURN_TEMP",
        "TWINLOOP_FI_CDU_FLOW",
        "TWINLOOP_FI_PSU_STATE",
        "TWINLOOP_FI_AMBIENT_TEMP",
        "TWINLOOP_FI_FACILITY_POWER",
        "TWINLOOP_FI_PUE",
        "TWINLOOP_FI_JOB_STEP_TIME",
        "TWINLOOP_FI_JOB_LOSS",
    ):
        assert name in FIELD_BY_NAME  # fmt: skip


def test_alias_and_unknown() -> None:
    assert canonical_field("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS") == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
    assert all(canonical_field(new) == new for new in ALIASES.values())
    assert canonical_field("DCGM_FI_DEV_NOPE") is None


def test_clock_event_bits_are_nvmls() -> None:
    import pynvml

    assert pynvml.nvmlClocksEventReasonSwPowerCap == power.CLOCK_EVENT_SW_POWER_CAP
    assert pynvml.nvmlClocksEventReasonHwThermalSlowdown == power.CLOCK_EVENT_HW_THERMAL
    assert pynvml.nvmlClocksEventReasonGpuIdle == power.CLOCK_EVENT_GPU_IDLE
