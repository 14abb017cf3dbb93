"""Sweep specs: a typed, frozen, validated grid or list of runs, and their expansion into cells.

A sweep YAML names the scenarios (packaged names, files, or inline overrides of any scenario field, deep-merged
into the scenario before validation), the seeds, the loop settings (off/on, mode, policy file) and, for planner
sweeps, the planner inputs. ``combine: grid`` (the default) runs every combination; ``combine: list`` pairs the
i-th scenario with the i-th seed and loop setting (lists of length one are repeated). Example::

    name: loop-robustness
    overrides: {duration_s: 1h}        # applied to every scenario (scenario overrides win)
    scenarios:
      - default                        # packaged scenario by name
      - {file: my-hall.yaml, label: my-hall, overrides: {weather: {ambient_c: 35}}}
    seeds: [0, 1, 2, 3, 4]
    loops: [{loop: false}, {loop: true, mode: auto}]
    plans:                             # planner sweeps (optional): TrainRequest fields, x seeds
      - {model: llama-3-8b, gpu: h100-sxm, gpus: 64}

:func:`load_sweep` turns every problem into one :class:`~twinloop.errors.InputError` naming the file, the
dotted field and the allowed range; :func:`cells` expands a spec into :class:`Cell` objects, each validated
(scenario and policy) on the driver before anything runs.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from twinloop.errors import InputError, pydantic_error
from twinloop.safeio import load_yaml

Mode = Literal["observe", "approve", "auto"]
_T = TypeVar("_T")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScenarioEntry(_Frozen):
    """One scenario of the sweep: a packaged name or a file, plus inline overrides of any of its fields."""

    file: str | None = Field(None, description="scenario YAML (relative to the sweep file) or a packaged name")
    label: str | None = Field(None, min_length=1, max_length=80, description="name in the results (default: file)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="deep-merged into the scenario")

    @model_validator(mode="before")
    @classmethod
    def _short(cls, v: Any) -> Any:
        return {"file": v} if isinstance(v, str) else v


class LoopEntry(_Frozen):
    """One loop setting: off (detection only, nothing acted on) or on in a mode, with an optional policy file."""

    loop: bool = Field(True, description="false = loop off, true = loop on")
    mode: Mode = "auto"
    policy: str | None = Field(None, description="policy YAML (relative to the sweep file); default packaged")

    @model_validator(mode="before")
    @classmethod
    def _short(cls, v: Any) -> Any:
        if isinstance(v, bool):
            return {"loop": v}
        if v in ("on", "off"):
            return {"loop": v == "on"}
        return v

    @property
    def label(self) -> str:
        """``off``, ``on-auto`` or ``on-approve+mypolicy`` (a stable name for tables and rows)."""
        if not self.loop:
            return "off"
        return f"on-{self.mode}" + (f"+{Path(self.policy).stem}" if self.policy else "")


class SweepSpec(_Frozen):
    """A sweep: scenarios x seeds x loop settings (grid or list), and/or planner inputs x seeds."""

    name: str = Field("sweep", min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.\-]+$")
    combine: Literal["grid", "list"] = "grid"
    overrides: dict[str, Any] = Field(default_factory=dict, description="deep-merged into every scenario")
    scenarios: tuple[ScenarioEntry, ...] = ()
    seeds: tuple[int, ...] = Field((0,), min_length=1, max_length=100_000)
    loops: tuple[LoopEntry, ...] = (LoopEntry(loop=False), LoopEntry(loop=True))
    plans: tuple[dict[str, Any], ...] = ()
    base_dir: str = Field("", description="directory relative paths resolve against (the sweep file's)")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        for s in v:
            if not 0 <= s < 2**32:
                raise ValueError(f"seed {s} out of range (allowed: 0..{2**32 - 1})")
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
        return v

    @model_validator(mode="after")
    def _shape(self) -> SweepSpec:
        if not self.scenarios and not self.plans:
            raise ValueError("a sweep needs scenarios or plans (allowed: at least one of them non-empty)")
        if self.combine == "list" and self.scenarios:
            lengths = {len(x) for x in (self.scenarios, self.seeds, self.loops) if len(x) != 1}
            if len(lengths) > 1:
                raise ValueError(
                    f"combine: list needs scenarios, seeds and loops of one length or length 1 (got "
                    f"{len(self.scenarios)}, {len(self.seeds)}, {len(self.loops)})"
                )
        labels = [scenario_label(e) for e in self.scenarios]
        if len(set(labels)) != len(labels):
            raise ValueError(f"scenario labels must be distinct (got {labels}); set label: on repeated files")
        return self


def scenario_label(e: ScenarioEntry) -> str:
    """The name a scenario entry has in the results."""
    return e.label or (Path(e.file).stem if e.file else "default")


@dataclass(frozen=True)
class Cell:
    """One run of the sweep: everything a worker needs, validated and picklable.

    Attributes:
        index: position in the sweep (rows are keyed and sorted by it).
        kind: ``twin`` (a closed-loop pass) or ``plan`` (one training plan).
        scenario: scenario label (twin) or the plan's label (plan).
        seed: the run's seed (the scenario's ``seed`` field, or the plan request's).
        loop: loop label (``off``, ``on-auto``, ...); empty for plans.
        inputs: the scenario dict after overrides (twin) or the TrainRequest fields (plan), as a dict.
        source: where the scenario came from (for error messages and relative paths).
        policy_path: the policy file of a loop-on cell, if any (recorded in the row).
        policy_doc: that file's parsed content: the worker validates it, so a remote node needs no copy of the file.
    """

    index: int
    kind: Literal["twin", "plan"]
    scenario: str
    seed: int
    loop: str
    loop_on: bool
    mode: str
    inputs: dict[str, Any]
    source: str
    base_dir: str
    policy_path: str | None
    overrides_json: str
    policy_doc: dict[str, Any] | None = None


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _pick(xs: tuple[_T, ...], i: int) -> _T:
    """Entry ``i`` of a zipped list, or its only entry (a one-entry list applies to every cell)."""
    return xs[0] if len(xs) == 1 else xs[i]


def _resolve(source: str, base_dir: str, name: str, field: str) -> Path:
    from twinloop.twin.scenario import SCENARIO_DIR

    p = Path(name)
    if not p.is_absolute() and base_dir:
        p = Path(base_dir) / p
    if p.exists():
        return p
    packaged = SCENARIO_DIR / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if packaged.exists():
        return packaged
    known = sorted(q.stem for q in SCENARIO_DIR.glob("*.yaml"))
    raise InputError(source, field, f"no such scenario file {name!r} (allowed: a file or one of {', '.join(known)})")


def load_sweep(path: str | Path) -> SweepSpec:
    """Load and validate a sweep YAML; every error is one :class:`InputError` naming file, field and range."""
    p = Path(path)
    raw = load_yaml(p)
    return sweep_from_dict(raw, str(p), str(p.resolve().parent))


def sweep_from_dict(raw: object, source: str = "sweep", base_dir: str = "") -> SweepSpec:
    """Validate a parsed mapping into a :class:`SweepSpec`."""
    if not isinstance(raw, dict):
        raise InputError(source, "", "expected a mapping at the top level")
    body = dict(raw)
    body.setdefault("base_dir", base_dir)
    try:
        return SweepSpec.model_validate(body)
    except ValidationError as exc:
        raise pydantic_error(source, exc) from None


def narrowed(spec: SweepSpec, seeds: tuple[int, ...] | None = None, duration: str | None = None) -> SweepSpec:
    """``spec`` with other seeds and/or every scenario's ``duration_s`` replaced (a quick check of a big sweep)."""
    body = spec.model_dump()
    if seeds is not None:
        body["seeds"] = seeds
    if duration is not None:
        body["overrides"] = {**body["overrides"], "duration_s": duration}
        body["scenarios"] = [
            {**e, "overrides": {k: v for k, v in e["overrides"].items() if k != "duration_s"}}
            for e in body["scenarios"]
        ]
    return sweep_from_dict(body, "--seeds/--duration", spec.base_dir)


def _twin_cells(spec: SweepSpec, source: str) -> list[Cell]:
    from twinloop.ops import load_policy
    from twinloop.twin.scenario import DEFAULT_SCENARIO, scenario_from_dict

    if spec.combine == "grid":
        combos = list(itertools.product(range(len(spec.scenarios)), spec.seeds, spec.loops))
    else:
        n = max(len(spec.scenarios), len(spec.seeds), len(spec.loops))
        combos = [(i if len(spec.scenarios) > 1 else 0, _pick(spec.seeds, i), _pick(spec.loops, i)) for i in range(n)]
    bases: list[tuple[dict[str, Any], str, str]] = []
    for i, e in enumerate(spec.scenarios):
        p = DEFAULT_SCENARIO if e.file is None else _resolve(source, spec.base_dir, e.file, f"scenarios.{i}.file")
        raw = load_yaml(p)
        if not isinstance(raw, dict):
            raise InputError(str(p), "", "expected a mapping at the top level")
        merged = deep_merge(deep_merge(raw, spec.overrides), e.overrides)
        bases.append((merged, str(p), str(p.resolve().parent)))
        # Validate once per scenario (and seed below) so a bad override fails before anything runs.
        scenario_from_dict(merged, f"{source}: scenarios.{i} ({p.name})", str(p.resolve().parent))
    policy_docs: dict[str, dict[str, Any]] = {}
    for j, lp in enumerate(spec.loops):
        if lp.policy:
            pol = Path(lp.policy) if Path(lp.policy).is_absolute() else Path(spec.base_dir) / lp.policy
            if not pol.exists():
                raise InputError(source, f"loops.{j}.policy", f"no such policy file {lp.policy!r}")
            policy_docs[str(pol)] = load_policy(pol).model_dump(mode="json")
    out = []
    for k, (si, seed, lp) in enumerate(combos):
        merged, src, base = bases[si]
        e = spec.scenarios[si]
        pol_path = None
        if lp.loop and lp.policy:
            pol_path = str(Path(lp.policy) if Path(lp.policy).is_absolute() else Path(spec.base_dir) / lp.policy)
        over = deep_merge(spec.overrides, e.overrides)
        out.append(
            Cell(k, "twin", scenario_label(e), seed, lp.label, lp.loop, lp.mode if lp.loop else "",
                 {**merged, "seed": seed}, src, base, pol_path, json.dumps(over, sort_keys=True, default=str),
                 policy_docs.get(pol_path) if pol_path else None)
        )  # fmt: skip
    return out


def _plan_cells(spec: SweepSpec, source: str, start: int) -> list[Cell]:
    from twinloop.plan.train_request import make_request

    out = []
    k = start
    for i, fields in enumerate(spec.plans):
        for seed in spec.seeds:
            inputs = {**{k: v for k, v in fields.items() if k != "label"}, "seed": seed}
            try:
                make_request(f"{source}: plans.{i}", **inputs)
            except InputError as exc:
                raise InputError(source, f"plans.{i}.{exc.field}".rstrip("."), exc.message) from None
            label = str(fields.get("label") or f"{fields.get('model')}@{fields.get('gpus')}x{fields.get('gpu')}")
            out.append(Cell(k, "plan", label, seed, "", False, "", inputs, source, spec.base_dir, None,
                            json.dumps(fields, sort_keys=True, default=str)))  # fmt: skip
            k += 1
    return out


def cells(spec: SweepSpec, source: str = "sweep") -> list[Cell]:
    """Every run of the sweep in a fixed order (twin cells first, then plan cells), validated on the driver."""
    twin = _twin_cells(spec, source) if spec.scenarios else []
    return twin + _plan_cells(spec, source, len(twin))
