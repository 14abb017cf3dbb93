"""Policies as data: YAML rules mapping classified incidents to actions.

A rule names the incident classes it handles, the minimum severity, the actions (kind, target selector, value)
and the effect it expects. Values are absolute (``value``), a change from the current setting (``change``) or
a factor of it (``scale``); the guard rails then bound whatever comes out.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from twinloop.errors import InputError, pydantic_error
from twinloop.ops.events import EventClass, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import LEVEL_DEPTH
from twinloop.ops.respond.restart_cost import RestartWhen
from twinloop.safeio import load_yaml

POLICY_DIR = Path(__file__).resolve().parent / "policies"

Mode = Literal["observe", "approve", "auto"]
#: Modes from the strictest: a rule's own mode can only make the responder's stricter.
MODE_ORDER: tuple[Mode, ...] = ("observe", "approve", "auto")
TargetSelector = Literal["root", "gpu", "node", "rack", "row", "cdu", "job", "site", "members", "replica"]
RootLevel = Literal["gpu", "node", "rack", "row", "site", "job"]
_LEVEL_BY_DEPTH = {depth: level for level, depth in LEVEL_DEPTH.items()}


def root_level(entity: str) -> RootLevel | None:
    """Level of an entity id: ``<site>/jobs/<name>`` is a job, else the depth of ``site/row/rack/node/gpu``."""
    if "/jobs/" in entity:
        return "job"
    return cast(RootLevel | None, _LEVEL_BY_DEPTH.get(entity.count("/") + 1))


class _Frozen(BaseModel):
    # allow_inf_nan=False: a policy with `value: .nan` must not load (issue 19); every float field is finite.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ActionTemplate(_Frozen):
    """One action of a rule; exactly one of value/change/scale/value_from for setting kinds, none for the others."""

    kind: ActionKind
    target: TargetSelector = "root"
    value: float | None = None
    change: float | None = None
    scale: float | None = Field(default=None, gt=0)
    value_from: Literal["supply_limit", "thermal_path", "supply_need"] | None = Field(
        default=None,
        description="take the value from the adapter: supply_limit = what a node's working PSUs carry;"
        " thermal_path = the power cap a GPU's own thermal path carries below its slowdown temperature"
        " (ops/respond/thermal_cap.py), with ``scale`` as the fallback where the cluster cannot tell;"
        " supply_need = facility water only as cold as the rule's own CDU setpoints need (their lowest minus the"
        " CDUs' approach), never warmer than now, stepping at most ``change`` (required, < 0), its fallback where"
        " the approach or the setpoints are not known",
    )
    duration_s: float = Field(default=0.0, ge=0)
    after_s: float = Field(default=0.0, ge=0, le=86400, description="delay after the incident's first action")
    after_checkpoint: bool = Field(
        default=False,
        description="wait (at least after_s) until the job's checkpoint is reported complete, so a requeue throws"
        " no work away; with no confirmation by checkpoint_timeout_s the action goes to a person",
    )
    checkpoint_timeout_s: float = Field(default=300.0, gt=0, le=86400)
    unless_kept_back: bool = Field(
        default=False,
        description="not done where the job's requeue would run it slower (as a kept-back requeue's drain is not):"
        " the job stays, and a restart for another cause must find its node again",
    )

    @model_validator(mode="after")
    def _one_value(self) -> ActionTemplate:
        # A thermal-path cap may name its fallback factor (a cluster without a coolant reading), the water a supply
        # need steps to its largest step (a cluster without a known approach).
        fallback = (self.value_from == "thermal_path" and self.scale is not None) or (
            self.value_from == "supply_need" and self.change is not None
        )
        given = sum(v is not None for v in (self.value, self.change, self.scale, self.value_from)) - fallback
        if given > 1:
            raise ValueError(
                "give at most one of value, change, scale, value_from (thermal_path may add a scale, supply_need a"
                " change)"
            )
        if self.value_from == "thermal_path" and self.kind != ActionKind.POWER_CAP:
            raise ValueError("value_from: thermal_path is a power limit: only for kind power_cap")
        if self.value_from == "supply_need" and self.kind != ActionKind.FACILITY_WATER:
            raise ValueError("value_from: supply_need is a facility water temperature: only for kind facility_water")
        if self.value_from == "supply_need" and (self.change is None or self.change >= 0):
            raise ValueError(
                "value_from: supply_need needs change (< 0: the largest step colder, and the step where no approach"
                " is known)"
            )
        return self


class ExpectTemplate(_Frozen):
    """The effect to verify after the rule's actions (else they are rolled back)."""

    field: str
    direction: Literal["down", "up"]
    within_s: float = Field(gt=0, le=86400)
    min_change: float = Field(default=0.0, ge=0)
    aggregate: Literal["mean", "max"] = "mean"
    relative_to: Literal["level", "trend"] = "level"


SupplyCondition = Literal["short", "carried"]


class HandOver(_Frozen):
    """A coolant rule's row left to the cooling optimizer while its hottest GPU keeps a margin to slowdown.

    The rule acts (in full, at once) only while the incident's hottest GPU is within ``margin_c`` of the lowest
    slowdown temperature of its row's GPUs, or would get there by the end of the rule's verify window
    (``expect.within_s``) at its recent rise: the smaller of its last minute's rate kept up for the window and its
    rise over the last window (a ramp shows in both, a die settling on new work in one). Otherwise the responder
    records why it took no coolant action and asks again at every poll while the incident is open; the optimizer
    meanwhile tightens the row once its hottest GPU leaves the target band. Where no optimizer takes the row, or the
    margin cannot be read, the rule acts.
    """

    to: Literal["cooling_optimizer"]
    margin_c: float | None = Field(
        default=None,
        gt=0,
        le=30,
        description="margin to slowdown under which the rule acts, C; None: the optimizer's own (its precool margin)",
    )


class Rule(_Frozen):
    """Incidents of these classes at or above ``min_severity`` (rooted at one of ``at``, when given) get these
    actions, once per incident; with ``until_closed`` the settings are restored when the incident closes.
    ``supply`` (power-delivery rules) picks the rule by what the root node's working power supplies carry:
    ``short`` when they carry less than its GPUs' maximum power limit, ``carried`` when they carry it all (lost
    redundancy only: no cap binds, so no urgent action is proportionate). ``restart`` (straggler, short-supply and
    GPU cooling-fault rules) picks the rule by when moving the job off the incident's node pays
    (:func:`~.restart_cost.choose_restart`, a straggler's or a hot GPU's measured slowdown, or a short supply's cap):
    ``now``, ``at_checkpoint`` (the job's own next one) or ``never``. ``serving`` picks it by whether the incident's
    job is a serving fleet (a hung replica is restarted, a hung rank of a synchronous job stops it whole).
    ``hand_over`` (coolant rules) leaves the row to the cooling optimizer while its hottest GPU keeps a margin to
    slowdown (:class:`HandOver`).
    """

    name: str
    when: tuple[EventClass, ...] = Field(min_length=1)
    min_severity: Literal["info", "minor", "major", "critical"] = "minor"
    at: tuple[RootLevel, ...] = Field(default=(), description="root levels the rule applies to (empty: any)")
    actions: tuple[ActionTemplate, ...] = Field(min_length=1)
    expect: ExpectTemplate | None = None
    until_closed: bool = False
    mode: Mode | None = Field(default=None, description="a stricter mode for this rule (e.g. approve for requeues)")
    supply: SupplyCondition | None = Field(default=None, description="only when the node's supplies are short/carry")
    restart: RestartWhen | None = Field(
        default=None, description="only when the restart cost model picks this option for the incident's job"
    )
    serving: bool | None = Field(
        default=None,
        description="only when the incident's job is (true) or is not (false) a serving fleet; a cluster that cannot"
        " tell counts as not",
    )
    hand_over: HandOver | None = Field(
        default=None, description="leave the row to the cooling optimizer while its hottest GPU keeps a margin"
    )

    @model_validator(mode="after")
    def _hand_over_rows(self) -> Rule:
        # The optimizer steers a row's coolant: a GPU's own fault, a job or the whole site is not its to take.
        if self.hand_over is not None:
            if not self.at or any(level not in ("row", "rack", "node") for level in self.at):
                raise ValueError("hand_over: only for a rule limited to row, rack or node incidents (at: [row, ...])")
            if self.expect is None:
                raise ValueError("hand_over: needs an expect (its within_s is how far ahead a rising GPU is judged)")
        return self

    @property
    def severity_floor(self) -> Severity:
        """``min_severity`` as a :class:`Severity`."""
        return Severity[self.min_severity.upper()]


class Policy(_Frozen):
    """A named set of rules and the mode they run in."""

    name: str
    mode: Mode = "observe"
    rules: tuple[Rule, ...] = Field(min_length=1)

    def rules_for(self, event_class: EventClass, severity: Severity, root: str | None = None) -> list[Rule]:
        """The rules that apply to an incident of this class and severity (rooted at ``root``), in file order."""
        level = None if root is None else root_level(root)
        return [
            r
            for r in self.rules
            if event_class in r.when and severity >= r.severity_floor and (not r.at or level in r.at)
        ]


def load_policy(path: Path) -> Policy:
    """Load and validate a policy YAML file; errors name the file and the field."""
    try:
        raw = load_yaml(path)
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read policy: {exc.strerror}") from None
    try:
        return Policy.model_validate(raw)
    except ValidationError as exc:
        raise pydantic_error(str(path), exc) from None


@cache
def default_policy() -> Policy:
    """The packaged default policy (``policies/default.yaml``)."""
    return load_policy(POLICY_DIR / "default.yaml")
