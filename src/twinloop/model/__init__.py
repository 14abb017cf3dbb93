"""Model architecture → parameters, FLOPs, bytes, KV cache; precision policies; MoE routing.

The public API: the names in ``__all__`` (``from twinloop.model import ...``), what other packages and
users may import; the modules behind them may move. They load on first use (PEP 562), so importing one
module of the package does not load the rest (CLI start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinloop.lazy import lazy_exports

if TYPE_CHECKING:
    from twinloop.model.arch import catalog_model_names, load_config_file, load_model
    from twinloop.model.architecture import ModelArch
    from twinloop.model.flops import FlopBreakdown, forward_flops_per_token, training_flops_per_token, weight_bytes
    from twinloop.model.hf_config import parse_hf_config
    from twinloop.model.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token
    from twinloop.model.moe import RoutingLoad, route_tokens
    from twinloop.model.params import ParamCounts, param_counts
    from twinloop.model.precision import PrecisionPolicy, get_policy

_WHERE = {
    "ModelArch": "architecture",
    "catalog_model_names": "arch",
    "load_config_file": "arch",
    "load_model": "arch",
    "parse_hf_config": "hf_config",
    "ParamCounts": "params",
    "param_counts": "params",
    "FlopBreakdown": "flops",
    "forward_flops_per_token": "flops",
    "training_flops_per_token": "flops",
    "weight_bytes": "flops",
    "kv_cache_bytes": "kv_cache",
    "kv_cache_bytes_per_token": "kv_cache",
    "PrecisionPolicy": "precision",
    "get_policy": "precision",
    "RoutingLoad": "moe",
    "route_tokens": "moe",
}
__all__ = [
    "FlopBreakdown",
    "ModelArch",
    "ParamCounts",
    "PrecisionPolicy",
    "RoutingLoad",
    "catalog_model_names",
    "forward_flops_per_token",
    "get_policy",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "load_config_file",
    "load_model",
    "param_counts",
    "parse_hf_config",
    "route_tokens",
    "training_flops_per_token",
    "weight_bytes",
]


__getattr__ = lazy_exports(__name__, _WHERE)
