"""Node capabilities for GPU workloads: kernel, io_uring, CXL, HMM, P2P DMA, NUMA, PCIe, drivers, IOMMU,
huge pages, NVMe — read from procfs/sysfs without root — and measured storage read throughput.
"""

from twinloop.probe.bench_io import IoBenchResult, ReadMeasurement, bench_io
from twinloop.probe.finding import STATUSES, Finding, Status
from twinloop.probe.profile import NodeProfile, PcieGpu, build_node_profile, load_node_profile
from twinloop.probe.registry import CHECKS, ProbeReport, run_probe

__all__ = [
    "CHECKS",
    "STATUSES",
    "Finding",
    "IoBenchResult",
    "NodeProfile",
    "PcieGpu",
    "ProbeReport",
    "ReadMeasurement",
    "Status",
    "bench_io",
    "build_node_profile",
    "load_node_profile",
    "run_probe",
]
