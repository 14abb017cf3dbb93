"""The router variants, one per module; importing this package registers them all."""

from twinloop.model.routing.routers import adaptive, bias_balance, capacity, node_limited, topk, two_stage

__all__ = ["adaptive", "bias_balance", "capacity", "node_limited", "topk", "two_stage"]
