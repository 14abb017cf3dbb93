"""Router plug-ins: the base class, what a router sees (:class:`RoutingContext`), what it returns
(:class:`Assignment`), shared helpers (top-k, capacity) and the registry.

A router is stateful over a run (a bias, a current K): :meth:`Router.start` resets that state for a
placement and batch size, :meth:`Router.route` routes one step's tokens and may update the state from
the load it caused (the feedback a real router gets after each step). Constructors only store parameters.
Routers see affinities in (0, 1) (sigmoid of the logits, DeepSeek-V3's gating) and never the "true" top-k
the simulator scores them against.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.model.routing.placement import Placement

I64 = NDArray[np.int64]
F32 = NDArray[np.float32]


@dataclass(frozen=True)
class RoutingContext:
    """What a router knows about the layer it routes for.

    Attributes:
        n_experts / top_k: routed experts and the model's experts per token (K).
        node_limit: the model's max nodes per token (0 = none given).
        tokens: tokens per step; placement: experts on ranks and nodes.
        source_rank: the EP rank each token comes from, shape (tokens,).
    """

    n_experts: int
    top_k: int
    node_limit: int
    tokens: int
    placement: Placement
    source_rank: I64

    def capacity(self, capacity_factor: float) -> I64:
        """Copies each expert may take per step: ``ceil(cf · tokens · K / n_experts)`` per instance."""
        per = math.ceil(capacity_factor * self.tokens * self.top_k / self.n_experts)
        return np.asarray(per * self.placement.n_replicas, dtype=np.int64)


class StepScores:
    """One step's router scores: the logits, their sigmoid (computed on first use) and the experts ranked
    by affinity (computed once, widened on demand), so routers sharing a step do not redo the sort.

    Args:
        logits: (tokens, n_experts) float32 gate logits.
    """

    def __init__(self, logits: F32) -> None:
        self.logits = logits
        self._affinity: F32 | None = None
        self._ranked: I64 = np.zeros((logits.shape[0], 0), dtype=np.int64)

    @property
    def affinity(self) -> F32:
        """Affinities in (0, 1): ``sigmoid(logits)`` (DeepSeek-V3's gate)."""
        if self._affinity is None:
            self._affinity = np.asarray(1.0 / (1.0 + np.exp(-self.logits)), dtype=np.float32)
        return self._affinity

    def ranked(self, k: int) -> I64:
        """Each token's ``k`` best experts by affinity, best first (sigmoid is monotone: sorted on logits)."""
        if self._ranked.shape[1] < k:
            self._ranked = top_k(self.logits, k)
        return self._ranked[:, :k]


@dataclass(frozen=True)
class Assignment:
    """One step's routing.

    Attributes:
        experts: (tokens, k_max) experts serving each token, best first, -1 for an empty slot.
        dropped: copies the router wanted but dropped (over capacity, nowhere to redirect).
        redirected: copies sent to a backup expert instead of the one chosen first.
        capacity: per-expert capacity this step, or None when the router has none.
    """

    experts: I64
    dropped: int
    redirected: int
    capacity: I64 | None = None


def top_k(scores: F32, k: int) -> I64:
    """Indices of the ``k`` largest entries of each row, best first, shape (rows, k)."""
    n = scores.shape[1]
    idx = np.argpartition(scores, n - k, axis=1)[:, n - k :]
    order = np.argsort(-np.take_along_axis(scores, idx, axis=1), axis=1, kind="stable")
    return np.asarray(np.take_along_axis(idx, order, axis=1), dtype=np.int64)


def capacity_positions(experts: I64, n_experts: int) -> I64:
    """Arrival position of each copy at its expert, shape like ``experts`` (-1 for empty slots).

    Copies arrive slot-major (every token's first choice before any second choice, then token order), so
    under a capacity a token loses its least preferred experts first (GShard's priority).
    """
    flat = experts.T.ravel()
    valid = flat >= 0
    e = np.where(valid, flat, n_experts)
    counts = np.bincount(e, minlength=n_experts + 1)
    order = np.argsort(e, kind="stable")
    starts = np.cumsum(counts) - counts
    pos = np.empty(flat.size, dtype=np.int64)
    pos[order] = np.arange(flat.size) - np.repeat(starts, counts)
    pos[~valid] = -1
    return np.asarray(pos.reshape(experts.shape[1], experts.shape[0]).T, dtype=np.int64)


def enforce_capacity(experts: I64, capacity: I64, already: I64 | None = None) -> tuple[I64, int]:
    """Empty the slots past their expert's capacity (``already`` copies taken before); (experts, dropped)."""
    n_experts = capacity.size
    pos = capacity_positions(experts, n_experts)
    room = capacity if already is None else capacity - already
    over = (experts >= 0) & (pos >= room[np.maximum(experts, 0)])
    return np.where(over, -1, experts), int(over.sum())


def expert_load(experts: I64, n_experts: int) -> I64:
    """Copies per expert (empty slots ignored)."""
    flat = experts.ravel()
    return np.bincount(flat[flat >= 0], minlength=n_experts).astype(np.int64)


class Router(ABC):
    """A routing policy. Subclasses set ``name`` and ``uses_capacity``, take keyword parameters with
    defaults, and implement :meth:`route`; stateful ones override :meth:`start`.
    """

    name: ClassVar[str]
    #: True when the router never puts more copies on an expert than ``Assignment.capacity``.
    uses_capacity: ClassVar[bool] = False

    def start(self, ctx: RoutingContext) -> None:  # noqa: B027 - stateless routers need no reset
        """Reset the run state for ``ctx`` (called once before the first step)."""

    def width(self, ctx: RoutingContext) -> int:
        """Most experts this router gives one token (the width of ``Assignment.experts``)."""
        return ctx.top_k

    @abstractmethod
    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Route one step's tokens from their ``scores``."""

    def params(self) -> dict[str, Any]:
        """The router's parameters (for reports)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


REGISTRY: dict[str, type[Router]] = {}
R = TypeVar("R", bound=type[Router])


def register(cls: R) -> R:
    """Class decorator: add a router variant to :data:`REGISTRY` under ``cls.name``."""
    REGISTRY[cls.name] = cls
    return cls


def make_router(name: str, source: str = "--router", **params: Any) -> Router:
    """A router by registry name (InputError naming the allowed names when unknown)."""
    from twinloop.model.routing import routers  # noqa: F401 - fills REGISTRY

    if name not in REGISTRY:
        raise InputError(source, "", f"unknown router {name!r} (allowed: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name](**params)
