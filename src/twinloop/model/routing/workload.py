"""Drifting expert affinities: the token stream a router sees over time.

A generative guess, not a fit to a trained router: each token is a point ``z`` in a small latent space
(``latent_dim``), drawn around the centre of one of ``n_topics`` topics; each expert has a key vector, and
a token's affinity logits are ``z · keys / temperature``. The topic mix drifts over time (each topic's
weight follows a slow sinusoid with its own phase, so the popular experts shift), and during a burst a
``burst_share`` of the tokens belong to a new topic whose centre points at one hot expert (a suddenly hot
expert, as when a batch of one kind of request arrives). Everything is drawn from one seeded generator:
the same spec and step give the same affinities, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

F32 = NDArray[np.float32]


@dataclass(frozen=True)
class DriftSpec:
    """How the token stream drifts (steps count router steps, one batch each).

    Attributes:
        tokens_per_step: tokens routed per step (one MoE layer's batch across the EP group).
        n_topics: topics the tokens come from; latent_dim: size of the latent space.
        topic_spread: token scatter around its topic centre (latent units; larger = flatter affinities).
        temperature: logits = z · keys / temperature (smaller = sharper preferences).
        drift_period_steps: period of the topic-mix sinusoids (0 = no drift).
        drift_depth: how far the topic mix swings (0 = fixed mix; 3 = a topic goes from ~5 % to ~95 %).
        burst_start_step / burst_steps: the hot-expert burst window (burst_steps = 0: no burst).
        burst_share: share of tokens in the burst topic during the window (0..1).
        burst_boost: logit added to the hot expert for the burst tokens.
    """

    tokens_per_step: int = 8192
    n_topics: int = 64
    latent_dim: int = 16
    topic_spread: float = 1.5
    temperature: float = 1.0
    drift_period_steps: int = 64
    drift_depth: float = 2.0
    burst_start_step: int = 40
    burst_steps: int = 20
    burst_share: float = 0.2
    burst_boost: float = 4.0

    def __post_init__(self) -> None:
        checks = [
            ("tokens_per_step", self.tokens_per_step >= 1, ">= 1"),
            ("n_topics", self.n_topics >= 1, ">= 1"),
            ("latent_dim", self.latent_dim >= 1, ">= 1"),
            ("topic_spread", self.topic_spread >= 0, ">= 0"),
            ("temperature", self.temperature > 0, "> 0"),
            ("drift_period_steps", self.drift_period_steps >= 0, ">= 0"),
            ("drift_depth", self.drift_depth >= 0, ">= 0"),
            ("burst_start_step", self.burst_start_step >= 0, ">= 0"),
            ("burst_steps", self.burst_steps >= 0, ">= 0"),
            ("burst_share", 0 <= self.burst_share <= 1, "in 0..1"),
        ]
        for name, ok, allowed in checks:
            if not ok:
                raise InputError("drift", name, f"must be {allowed}, got {getattr(self, name)}")

    def in_burst(self, step: int) -> bool:
        """Whether ``step`` falls in the hot-expert burst window."""
        return self.burst_steps > 0 and self.burst_start_step <= step < self.burst_start_step + self.burst_steps


@dataclass(frozen=True)
class AffinityStream:
    """The fixed parts of a drifting stream (drawn once per seed): topic centres, expert keys, hot expert.

    Attributes:
        spec: the drift; n_experts: routed experts.
        centres: topic centres, shape (n_topics, latent_dim); keys: expert keys, (latent_dim, n_experts).
        phases: each topic's drift phase (radians); hot_expert: the expert the burst lands on.
        seed: the generator seed; step draws use ``(seed, step)`` so steps are independent of order.
    """

    spec: DriftSpec
    n_experts: int
    centres: F32
    keys: F32
    phases: NDArray[np.float64]
    hot_expert: int
    seed: int

    @classmethod
    def create(cls, spec: DriftSpec, n_experts: int, seed: int = 0) -> AffinityStream:
        """Draw the topic centres, expert keys and the hot expert from ``seed``."""
        if n_experts < 2:
            raise InputError("drift", "n_experts", f"must be >= 2, got {n_experts}")
        rng = np.random.default_rng([seed, 0])
        centres = rng.standard_normal((spec.n_topics, spec.latent_dim)).astype(np.float32)
        keys = rng.standard_normal((spec.latent_dim, n_experts))
        keys = (keys / np.linalg.norm(keys, axis=0)).astype(np.float32)  # equal norms: no expert favoured a priori
        phases = rng.uniform(0, 2 * np.pi, spec.n_topics)
        hot = int(rng.integers(n_experts))
        return cls(spec, n_experts, centres, keys, phases, hot, seed)

    def topic_mix(self, step: int) -> NDArray[np.float64]:
        """Probability of each topic at ``step`` (sums to 1)."""
        s = self.spec
        if s.drift_period_steps == 0:
            logit = np.zeros(s.n_topics)
        else:
            logit = s.drift_depth * np.sin(2 * np.pi * step / s.drift_period_steps + self.phases)
        w = np.exp(logit - logit.max())
        return np.asarray(w / w.sum(), dtype=np.float64)

    def logits(self, step: int) -> F32:
        """Affinity logits of the tokens of ``step``, shape (tokens_per_step, n_experts), float32."""
        s = self.spec
        rng = np.random.default_rng([self.seed, 1, step])
        n = s.tokens_per_step
        topic = rng.choice(s.n_topics, size=n, p=self.topic_mix(step))
        z = self.centres[topic] + np.float32(s.topic_spread) * rng.standard_normal((n, s.latent_dim), dtype=np.float32)
        out = z @ (self.keys / np.float32(s.temperature))
        if s.in_burst(step) and s.burst_share > 0:
            hot_tokens = rng.random(n) < s.burst_share
            out[hot_tokens, self.hot_expert] += np.float32(s.burst_boost)
        return np.asarray(out, dtype=np.float32)
