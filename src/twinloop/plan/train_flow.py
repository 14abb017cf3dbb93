"""The training planner's whole use case in one call: search → rebuild the request → plan → power sweep.

``twinloop plan train`` and ``POST /api/plan/train`` both call :func:`plan_train_flow`, so the CLI and the web
cannot plan differently. :func:`~twinloop.plan.train.plan_train` stays the single-plan step inside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twinloop.errors import InputError

if TYPE_CHECKING:
    from twinloop.plan.power_sweep import PowerSweep
    from twinloop.plan.search import SearchResult
    from twinloop.plan.train import TrainPlan
    from twinloop.plan.train_routing import TrainRouting

GB = 1e9


@dataclass(frozen=True)
class RoutingSource:
    """A saved routing run (``plan moe --out``) whose mean hottest-rank load becomes the plan's MoE imbalance.

    Attributes:
        path: the ``moe_routing.json`` file; router: its row (``None``: the only one); placement: its row.
    """

    path: str
    router: str | None = None
    placement: str = "contiguous"


@dataclass(frozen=True)
class TrainOutcome:
    """What one training-planning request produced.

    Attributes:
        plan: the plan of the user's configuration, or of the search's best one.
        search: the ranked search, when one was asked for; top: rows of it the document lists.
        sweep: the power sweep of the planned configuration, when asked for.
        routing: the routing run the MoE imbalance came from, when one was given.
    """

    plan: TrainPlan
    search: SearchResult | None = None
    sweep: PowerSweep | None = None
    routing: TrainRouting | None = None
    top: int = 10

    def to_doc(self) -> dict[str, Any]:
        """The document ``plan train --json`` prints: the plan, then ``moe_routing``, ``search``, ``power_sweep``."""
        out = dataclasses.asdict(self.plan)
        if self.routing is not None:
            out["moe_routing"] = dataclasses.asdict(self.routing)
        if self.search is not None:
            out["search"] = {
                "objective": self.search.objective,
                "evaluated": self.search.evaluated,
                "fitting": self.search.fitting,
                "results": self.search.rows(self.top),
            }
        if self.sweep is not None:
            out["power_sweep"] = {"knee_power_limit_w": self.sweep.knee_power_limit_w, "points": self.sweep.rows()}
        return out


def plan_train_flow(
    fields: Mapping[str, Any],
    search: str | None = None,
    sweep: bool = False,
    *,
    ray: bool = False,
    top: int = 10,
    sweep_points: int | None = None,
    routing: RoutingSource | None = None,
    source: str = "plan train",
) -> TrainOutcome:
    """Plan training from request fields (``TrainRequest``'s names), optionally searching and sweeping power.

    Args:
        fields: the request's fields (model, gpu, gpus, parallel degrees, prices, …) as ``make_request`` takes them.
        search: rank every configuration by this objective (throughput | energy | cost) and plan the best one.
        sweep: also sweep the planned configuration's power limit.
        ray: run the search's evaluation as Ray tasks (same ranking).
        top: search rows the outcome's document lists.
        sweep_points: how many power limits the sweep evaluates (None: the sweep's default).
        routing: take the MoE imbalance from a saved routing run (needs ``ep``; excludes ``moe_imbalance``).
        source: what input errors name.

    Raises:
        InputError: an unknown objective, ``top`` < 1, bad request fields, or no configuration fits.
    """
    from twinloop.plan.train import plan_train
    from twinloop.plan.train_request import make_request, resolve

    if search is not None:
        from twinloop.plan.search import OBJECTIVES

        if search not in OBJECTIVES:
            raise InputError("--search", "", f"unknown objective {search!r} (allowed: {', '.join(OBJECTIVES)})")
    if top < 1:
        raise InputError("--top", "", f"must be >= 1, got {top}")
    if ray and search is None:  # it would be ignored: one plan is a single evaluation, never sent to Ray
        raise InputError("--ray", "", "runs a search's evaluation on Ray: give --search throughput|energy|cost too")
    request_fields = dict(fields)
    routed = None
    if routing is not None:
        from twinloop.model.arch import load_model
        from twinloop.plan.train_routing import training_routing

        if request_fields.get("moe_imbalance") is not None:
            raise InputError("--routing", "", "give either --routing or --moe-imbalance, not both")
        model = load_model(str(request_fields["model"])).name
        routed = training_routing(routing.path, model, request_fields.get("ep"), routing.router, routing.placement)
        request_fields["moe_imbalance"] = routed.mean_load_factor
    request = make_request(source=source, **request_fields)
    result = None
    if search is not None:
        from twinloop.plan.search import search as run_search

        result = run_search(resolve(request), search, ray=ray)  # type: ignore[arg-type]
        if result.fitting == 0:
            raise InputError(
                "plan train",
                "memory",
                f"no configuration fits: the smallest needs {result.smallest_memory_bytes / GB:.1f} GB per GPU",
            )
        best = result.ranked.configs.config(0)
        request = make_request(source=source, **{**request_fields, **dataclasses.asdict(best)})
    plan = plan_train(request)
    swept = None
    if sweep:
        from twinloop.plan.parallel import ConfigArrays
        from twinloop.plan.power_sweep import DEFAULT_POINTS, power_sweep

        cfg = ConfigArrays.from_configs([plan.config])
        swept = power_sweep(resolve(request), cfg, DEFAULT_POINTS if sweep_points is None else sweep_points)
    return TrainOutcome(plan=plan, search=result, sweep=swept, routing=routed, top=top)
