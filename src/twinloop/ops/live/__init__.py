"""Live clusters: the loop's :class:`~twinloop.ops.ports.Cluster` port over real telemetry sources (NVML,
nvidia-smi, dcgm-exporter, Prometheus, recordings), with topology from labels and a site file, and jobs from
Slurm, Kubernetes labels or a file.
"""

from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.kinds import LIVE_KINDS, build_source, parse_source

__all__ = ["LIVE_KINDS", "LiveOptions", "SourceCluster", "build_source", "parse_source"]
