"""Sweep specs: validation names file, field and range; grid and list expansion; deep-merged overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.sweep.spec import cells, deep_merge, load_sweep, sweep_from_dict

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def _write(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_grid_expands_every_combination(tmp_path: Path) -> None:
    p = _write(tmp_path, {"scenarios": ["default", "hot-afternoon"], "seeds": [1, 2, 3], "loops": ["off", "on"],
                          "overrides": {"duration_s": "2m"}})  # fmt: skip
    cs = cells(load_sweep(p), str(p))
    assert len(cs) == 12
    assert [c.index for c in cs] == list(range(12))
    assert {(c.scenario, c.seed, c.loop) for c in cs} == {
        (s, seed, lp) for s in ("default", "hot-afternoon") for seed in (1, 2, 3) for lp in ("off", "on-auto")
    }
    assert all(c.inputs["seed"] == c.seed and c.inputs["duration_s"] == "2m" for c in cs)


def test_list_pairs_and_repeats_length_one(tmp_path: Path) -> None:
    p = _write(tmp_path, {"combine": "list", "scenarios": ["default"], "seeds": [4, 5],
                          "loops": [{"loop": False}, {"loop": True, "mode": "observe"}]})  # fmt: skip
    cs = cells(load_sweep(p), str(p))
    assert [(c.seed, c.loop, c.mode) for c in cs] == [(4, "off", ""), (5, "on-observe", "observe")]


def test_scenario_overrides_deep_merge_and_win(tmp_path: Path) -> None:
    p = _write(tmp_path, {"overrides": {"duration_s": "3m", "step_s": 2},
                          "scenarios": [{"file": "default", "overrides": {"duration_s": "1m"}}],
                          "seeds": [0], "loops": ["off"]})  # fmt: skip
    (c,) = cells(load_sweep(p), str(p))
    assert c.inputs["duration_s"] == "1m" and c.inputs["step_s"] == 2
    assert c.inputs["rows"]  # the rest of the packaged scenario is still there


def test_deep_merge_keeps_siblings() -> None:
    assert deep_merge({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"c": 5}}) == {"a": {"b": 1, "c": 5}, "d": 3}


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        ({"scenarios": ["default"], "seeds": [-1]}, "seeds", "allowed: 0.."),
        ({"scenarios": ["default"], "seeds": [1, 1]}, "seeds", "distinct"),
        ({"scenarios": ["default"], "loops": [{"loop": True, "mode": "yolo"}]}, "loops.0.mode", "observe"),
        ({"scenarios": ["default"], "bogus": 1}, "bogus", "not permitted"),
        ({"seeds": [0]}, "", "scenarios or plans"),
        ({"combine": "list", "scenarios": ["default", "hot-afternoon"], "seeds": [0, 1, 2]}, "", "one length"),
    ],
)
def test_bad_spec_names_file_field_and_range(tmp_path: Path, doc: dict, field: str, words: str) -> None:
    p = _write(tmp_path, doc)
    with pytest.raises(InputError) as exc:
        load_sweep(p)
    assert exc.value.source == str(p) and exc.value.field == field and words in exc.value.message


def test_bad_scenario_override_fails_before_running(tmp_path: Path) -> None:
    p = _write(tmp_path, {"scenarios": [{"file": "default", "overrides": {"step_s": -5}}]})
    with pytest.raises(InputError) as exc:
        cells(load_sweep(p), str(p))
    assert "scenarios.0" in exc.value.source and exc.value.field == "step_s"


def test_unknown_scenario_file_lists_packaged(tmp_path: Path) -> None:
    p = _write(tmp_path, {"scenarios": ["no-such-hall"]})
    with pytest.raises(InputError, match=r"scenarios\.0\.file.*hot-afternoon"):
        cells(load_sweep(p), str(p))


def test_plan_cells_validate_inputs(tmp_path: Path) -> None:
    good = _write(tmp_path, {"plans": [{"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 64}], "seeds": [0, 1]})
    cs = cells(load_sweep(good), str(good))
    assert [c.kind for c in cs] == ["plan", "plan"] and cs[1].inputs["seed"] == 1
    bad = _write(tmp_path, {"plans": [{"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 0}]})
    with pytest.raises(InputError) as exc:
        cells(load_sweep(bad), str(bad))
    assert exc.value.field == "plans.0.gpus"


def test_packaged_loop_robustness_sweep() -> None:
    spec = load_sweep(SWEEPS / "loop-robustness.yaml")
    cs = cells(spec, "loop-robustness.yaml")
    assert len(cs) == 4 * 5 * 2
    assert {c.scenario for c in cs} == {"default", "hot-afternoon", "power-events", "cooling-plant"}
    assert {c.loop for c in cs} == {"off", "on-auto"}


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12))  # fmt: skip
def test_garbage_spec_is_input_error_or_valid(raw: object) -> None:
    try:
        sweep_from_dict(raw, "garbage.yaml")
    except InputError as exc:
        assert exc.source == "garbage.yaml"


def test_policy_file_travels_in_the_cell(tmp_path: Path) -> None:
    from twinloop.ops.respond.policy import POLICY_DIR, Policy, load_policy

    (tmp_path / "mine.yaml").write_text((POLICY_DIR / "default.yaml").read_text())
    p = _write(tmp_path, {"scenarios": ["default"], "loops": ["off", {"loop": True, "mode": "approve",
                                                                      "policy": "mine.yaml"}]})  # fmt: skip
    off, on = cells(load_sweep(p), str(p))
    assert off.policy_doc is None and on.loop == "on-approve+mine"
    assert Policy.model_validate(on.policy_doc) == load_policy(tmp_path / "mine.yaml")
    bad = _write(tmp_path, {"scenarios": ["default"], "loops": [{"loop": True, "policy": "missing.yaml"}]})
    with pytest.raises(InputError) as exc:
        cells(load_sweep(bad), str(bad))
    assert exc.value.field == "loops.0.policy"
