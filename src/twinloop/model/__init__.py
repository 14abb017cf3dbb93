"""Model architecture → parameters, FLOPs, bytes, KV cache; precision policies; MoE routing."""
