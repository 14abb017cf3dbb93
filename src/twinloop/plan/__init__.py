"""Training and serving planners: parallelism, collectives, memory, time, power, cost, failures, search.

The public API: the names in ``__all__`` (``from twinloop.plan import ...``), what other packages and
users may import; the modules behind them may move. They load on first use (PEP 562), so importing one
module of the package does not load the rest (CLI start-up time). ``search``, ``evaluate`` and ``power_sweep``
are not here: each is also the name of its module, which the import system binds on the package once loaded,
so the package name would depend on import order; import them from their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinloop.lazy import lazy_exports

if TYPE_CHECKING:
    from twinloop.plan.cost import Prices, cost_usd
    from twinloop.plan.efficiency import DEFAULT_EFFICIENCY, TrainEfficiency
    from twinloop.plan.evaluate import TrainArrays
    from twinloop.plan.memory import memory_per_gpu
    from twinloop.plan.parallel import ParallelConfig
    from twinloop.plan.power_sweep import PowerSweep
    from twinloop.plan.search import SearchResult
    from twinloop.plan.serve import ServePlan, ServeRequest, build_request, plan_serve
    from twinloop.plan.train import TrainPlan, plan_train
    from twinloop.plan.train_request import TrainContext, TrainRequest, make_request, resolve
    from twinloop.plan.train_time import step_time
    from twinloop.plan.warmup import WarmupPlan, plan_warmup
    from twinloop.plan.workload import TrainWorkload, build_workload

_WHERE = {
    "TrainPlan": "train",
    "plan_train": "train",
    "TrainContext": "train_request",
    "TrainRequest": "train_request",
    "make_request": "train_request",
    "resolve": "train_request",
    "SearchResult": "search",
    "ServePlan": "serve",
    "ServeRequest": "serve",
    "build_request": "serve",
    "plan_serve": "serve",
    "PowerSweep": "power_sweep",
    "TrainArrays": "evaluate",
    "ParallelConfig": "parallel",
    "memory_per_gpu": "memory",
    "step_time": "train_time",
    "Prices": "cost",
    "cost_usd": "cost",
    "TrainWorkload": "workload",
    "build_workload": "workload",
    "WarmupPlan": "warmup",
    "plan_warmup": "warmup",
    "DEFAULT_EFFICIENCY": "efficiency",
    "TrainEfficiency": "efficiency",
}
__all__ = [
    "DEFAULT_EFFICIENCY",
    "ParallelConfig",
    "PowerSweep",
    "Prices",
    "SearchResult",
    "ServePlan",
    "ServeRequest",
    "TrainArrays",
    "TrainContext",
    "TrainEfficiency",
    "TrainPlan",
    "TrainRequest",
    "TrainWorkload",
    "WarmupPlan",
    "build_request",
    "build_workload",
    "cost_usd",
    "make_request",
    "memory_per_gpu",
    "plan_serve",
    "plan_train",
    "plan_warmup",
    "resolve",
    "step_time",
]


__getattr__ = lazy_exports(__name__, _WHERE)
