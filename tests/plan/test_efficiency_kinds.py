"""Every efficiency factor of the training planner is documented with a kind, and the guesses are a known list.

Issue 20: each factor in ``plan/efficiency.py`` is either measured, fitted (and says on what) or published (and
cites it). The table in docs/sections/calibration-plan-train.md ("Every efficiency factor") is the record; this
test keeps it in step with the module and pins the factors still GUESSES, so a new guess must be named here.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from twinloop.plan import efficiency as effc
from twinloop.plan.train_time import dp_last_bucket_fraction

DOC = Path(__file__).resolve().parents[2] / "docs" / "sections" / "calibration-plan-train.md"

#: The factors of plan/efficiency.py that remain GUESSES: none since the per-phase activities follow the power
#: model's rules (plan/activity.py) with measured, published or derived constants.
REMAINING_GUESSES: set[str] = set()
KINDS = {"measured", "fitted", "published", "derived", "setting", "convention", "guess"}


def _table() -> dict[str, str]:
    """name cell → kind cell of the "Every efficiency factor" table."""
    text = DOC.read_text()
    section = text[text.index("### Every efficiency factor") :]
    section = section[: section.index("\n\n", section.index("|---"))]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] not in ("name",) and not cells[0].startswith("---"):
            rows[cells[0].replace("`", "")] = cells[2].replace("*", "").lower()
    return rows


def test_every_module_constant_is_in_the_table_with_a_kind() -> None:
    rows = _table()
    names = [n for n, v in vars(effc).items() if re.fullmatch(r"[A-Z][A-Z0-9_]+", n) and isinstance(v, float)]
    assert len(names) >= 20
    documented = " ".join(rows)
    for name in names:
        prefix = name.split("_")[0] + "_*"
        found = re.search(rf"(?<![A-Z_]){name}\b", documented) or prefix in documented
        assert found, f"{name} is not in the efficiency-factor table"
    for name, kind in rows.items():
        assert {k.strip() for k in re.split(r"[/,]", kind)} <= KINDS, f"{name}: unknown kind {kind!r}"


def test_the_remaining_guesses_of_efficiency_py_are_the_named_short_list() -> None:
    rows = _table()
    module_rows = {n: k for n, k in rows.items() if "." not in n.split(" ")[0] and "(" not in n}
    guesses = {n for n, k in module_rows.items() if "guess" in k}
    assert guesses == REMAINING_GUESSES


def test_measured_constants_say_so_in_the_module() -> None:
    source = Path(effc.__file__).read_text()
    for name in (
        "HBM_EFFICIENCY",
        "DECODE_HBM_EFFICIENCY",
        "TRAIN_DIE_TEMP_C",
        "RESERVED_BYTES",
        "GEMM_HBM_BYTES_PER_FLOP",
    ):
        comment = source[: source.index(f"\n{name} = ")].rsplit("\n\n", 1)[-1]
        assert "MEASURED" in comment and "h100" in comment.lower(), name


def test_no_constant_of_the_module_is_a_guess() -> None:
    source = Path(effc.__file__).read_text()
    names = [n for n, v in vars(effc).items() if re.fullmatch(r"[A-Z][A-Z0-9_]+", n) and isinstance(v, float)]
    for name in names:
        comment = source[: source.index(f"\n{name} = ")].rsplit("\n\n", 1)[-1]
        kinds = ("MEASURED", "FITTED", "PUBLISHED", "DERIVED", "CONVENTION", "SETTING")
        assert "GUESS." not in comment and any(k in comment for k in kinds), name


def test_last_bucket_is_one_megatron_core_bucket_of_the_gpu_parameters() -> None:
    params = [10e6, 400e6, 4e9, 4e9]
    n_dp = [8, 8, 8, 128]
    got = dp_last_bucket_fraction(np.array(params), np.array(n_dp), effc.DP_BUCKET_PARAMS)
    # one bucket holds everything; 40M of 400M; 40M of 4B; max(40M, 128 x 1M) of 4B
    assert got == pytest.approx([1.0, 0.1, 0.01, 0.032])
