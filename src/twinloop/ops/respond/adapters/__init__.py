"""Adapters carry actions out: the twin (closed loop), NVML, and Slurm/Kubernetes command emitters."""
