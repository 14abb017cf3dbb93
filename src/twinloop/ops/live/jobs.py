"""Which job runs on which GPU, where a scheduler says: Slurm (``squeue --json``), Kubernetes pod labels (as
dcgm-exporter attaches them: ``pod``, ``namespace``; grouped by controller in :mod:`.k8s_fleet`), or a file.

A job file (YAML or JSON) maps job ids to hosts or GPUs::

    train-42: [node01, node02]          # every GPU of these hosts
    eval-7: [node03/gpu0, node03/gpu1]  # these GPUs

All three give a :class:`JobMap`: per GPU (in topology order), an index into ``job_ids`` (-1 = none).

Slurm (``--jobs slurm``): each RUNNING job's ``nodes`` host list, and its ``gres_detail`` list, one string per
allocated node in node-list order, e.g. ``["gpu:h100:4(IDX:0-3)", "gpu:h100:2(IDX:0,2)"]``: the GPU indices the job
holds on each node, so two jobs sharing an 8-GPU node each get their own GPUs. Sources (SchedMD/slurm on GitHub):

- ``src/slurmctld/gres_ctld.c`` ``gres_ctld_job_build_details`` (``gres_stepmgr_job_build_details`` in later
  releases) writes one entry per node: ``name[:type]:count(IDX:bit_fmt)`` per GRES, comma-joined; ``name(CNT:n)`` for a
  GRES with no device bitmap; nothing for a node the GRES is not on.
- ``src/plugins/openapi/v0.0.37/jobs.c`` (``squeue --json`` in 21.08 runs this plugin's jobs handler,
  ``src/squeue/data.c``; jobs loaded with ``SHOW_ALL|SHOW_DETAIL``) dumps ``gres_detail`` as that list;
  ``job_resources.allocated_nodes`` there holds sockets, cores, memory and CPUs per node, no GPU. (22.05's
  v0.0.38 plugin was not checked.)
- ``src/plugins/data_parser/v0.0.39``-``v0.0.4x/parsers.c`` ``DUMP_FUNC(JOB_INFO_GRES_DETAIL)`` (23.02+) dumps the same
  list; the current ``src/squeue/opts.c`` sets ``detail_flag`` for ``--json``/``--yaml``, so ``squeue.c`` loads
  jobs with ``SHOW_DETAIL``.
- A recorded Slurm 23.02.6 ``squeue --json`` (data_parser v0.0.39), quoted in a public repository's mock
  (``fake_squeue``): ``"show_flags": ["DETAIL", "LOCAL"]``, ``"gres_detail": ["gpu:8(IDX:0-7)"]``, and
  ``job_resources.allocated_nodes`` with ``nodename``, cores and memory, no GPU.
- ``doc/html/gres.shtml`` (slurm.schedmd.com/gres.html, "GPU Management"): with ``AutoDetect=nvml`` Slurm numbers GPUs
  as NVML does (by PCI bus id), the ``gpu<i>`` the NVML source and dcgm-exporter's ``gpu`` label use; hand-written
  ``File=/dev/nvidiaN`` lines (to be listed in increasing order, the page says) follow device minor numbers, whose
  mapping to NVML's numbering the page calls system dependent.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.respond.adapters.commands import run_command
from twinloop.ops.say_once import SayOnce
from twinloop.safeio import load_yaml

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class JobMap:
    """Jobs and the GPUs they hold."""

    job_ids: tuple[str, ...]
    job_index: I64

    @classmethod
    def from_hosts(cls, gpu_ids: Sequence[str], hosts_of_job: Mapping[str, Sequence[str]]) -> JobMap:
        """Jobs given as lists of hosts (``node01``) or GPUs (``node01/gpu3``) → per-GPU job index."""
        job_ids = tuple(sorted(hosts_of_job))
        index = np.full(len(gpu_ids), -1, dtype=np.int64)
        parts = [g.split("/") for g in gpu_ids]
        host = np.array([p[-2] if len(p) >= 2 else "" for p in parts])
        hostgpu = np.array([f"{p[-2]}/{p[-1]}" if len(p) >= 2 else "" for p in parts])
        for j, job in enumerate(job_ids):
            names = np.asarray(list(hosts_of_job[job]), dtype=str)
            index[np.isin(host, names) | np.isin(hostgpu, names)] = j
        return cls(job_ids, index)


def load_job_file(path: str | Path, gpu_ids: Sequence[str]) -> JobMap:
    """A job file (see the module docstring); errors name the file and the job."""
    p = Path(path)
    raw = load_yaml(p)
    if not isinstance(raw, dict):
        raise InputError(str(p), "", "expected a mapping job id → list of hosts or host/gpuN")
    jobs: dict[str, list[str]] = {}
    for job, hosts in raw.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
            raise InputError(str(p), str(job), "expected a list of hosts or host/gpuN names")
        jobs[str(job)] = hosts
    return JobMap.from_hosts(gpu_ids, jobs)


_RANGE = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<body>[^\]]+)\](?P<suffix>.*)$")


def split_outside(text: str, brackets: str, what: str, max_depth: int | None = None) -> list[str]:
    """``text`` split at the commas outside ``brackets`` (an open and a close character: ``node[01-03,07],gpu-a1``
    or ``gpu:2(IDX:0,2),nic:1(IDX:0)`` → two items each); ``what`` names them in an error.

    Raises:
        ValueError: an unbalanced bracket, or one nested deeper than ``max_depth``.
    """
    opening, closing = brackets[0], brackets[1]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == opening) - (ch == closing)
        if depth < 0 or (max_depth is not None and depth > max_depth):
            raise ValueError(f"unbalanced {what} {text!r}")
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced {what} {text!r}")
    out.append(text[start:])
    return out


def json_list(text: str, key: str, source: str, expected: str) -> list[Any]:
    """The list under ``key`` of a JSON object (a command's ``--json`` / ``-o json`` output).

    Raises:
        InputError: not JSON, or no list under ``key`` (naming ``expected``, what the output should have been).
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(source, "", f"not JSON: {exc}") from None
    found = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(found, list):
        raise InputError(source, key, f"missing (expected {expected} output)")
    return found


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (``node[01-03,07],gpu-a1``) → host names.

    Raises:
        ValueError: an unbalanced bracket or a bad range.
    """
    out: list[str] = []
    for item in filter(None, (s.strip() for s in split_outside(text, "[]", "brackets in host list"))):
        m = _RANGE.match(item)
        if not m:
            out.append(item)
            continue
        for part in m["body"].split(","):
            lo, _, hi = part.partition("-")
            if not _DIGITS.fullmatch(lo) or (hi and not _DIGITS.fullmatch(hi)):
                raise ValueError(f"bad range {part!r} in host list {text!r}")
            width = len(lo)
            for k in range(int(lo), int(hi or lo) + 1):
                out.extend(expand_hostlist(f"{m['prefix']}{k:0{width}d}{m['suffix']}"))
    return out


#: What a job holds on one of its hosts: the GPU indices Slurm names (an empty set: none), or None where Slurm names
#: no index (no ``gres_detail``, a count without indices): then the job may hold the whole host.
HostGpus = frozenset[int] | None

#: A bound on one IDX range, so a garbled ``0-999999999`` costs a clear error, not gigabytes; far above any node.
_MAX_GRES_INDEX = 65535

_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() passes "²", which int() then rejects
_GRES_ENTRY = re.compile(r"^(?P<spec>[^()]*)(?:\((?P<kind>IDX|CNT):(?P<body>[^()]*)\))?$")


def parse_gres_gpus(text: str | None) -> HostGpus:
    """The GPU indices one ``gres_detail`` entry names (one entry per allocated node, e.g. ``gpu:h100:4(IDX:0-3)``).

    Slurm's slurmctld writes each node's entry as ``name[:type]:count(IDX:indices)`` per GRES, joined by commas
    (``gres_ctld_job_build_details``), the indices in bit_fmt form (``0-3``, ``0,2,4-5``); only ``gpu`` counts
    (``nic``, ``mps``, ``shard`` do not hold a GPU of their own). ``""``, None or ``IDX:N/A``: no GPU on that node.

    Returns:
        The indices; None where a ``gpu`` entry gives no indices (``gpu(CNT:2)``, ``gpu:2``).

    Raises:
        ValueError: an entry not of that form, or a bad index range.
    """
    found: set[int] = set()
    unknown = False
    for entry in filter(str.strip, split_outside(text or "", "()", "parentheses in gres entry", max_depth=1)):
        m = _GRES_ENTRY.match(entry.strip())
        if m is None:
            raise ValueError(f"{entry!r} is not NAME[:TYPE]:COUNT(IDX:LIST)")
        if m["spec"].split(":", 1)[0].strip() != "gpu":
            continue
        if m["kind"] != "IDX":
            unknown = True  # a GPU count without indices
            continue
        found |= _index_list(m["body"])
    return None if unknown and not found else frozenset(found)


def _index_list(body: str) -> set[int]:
    """``0-3,5`` → {0, 1, 2, 3, 5}; ``""`` and ``N/A`` (no index) → empty."""
    body = body.strip()
    if body in ("", "N/A"):
        return set()
    out: set[int] = set()
    for part in body.split(","):
        lo, _, hi = part.strip().partition("-")
        if not _DIGITS.fullmatch(lo) or (hi and not _DIGITS.fullmatch(hi)):
            raise ValueError(f"bad index {part!r} in IDX:{body}")
        first, last = int(lo), int(hi or lo)
        if first > last or last > _MAX_GRES_INDEX:
            raise ValueError(
                f"bad index range {part!r} in IDX:{body} (allowed: 0 <= first <= last <= {_MAX_GRES_INDEX})"
            )
        out.update(range(first, last + 1))
    return out


def _running_jobs(text: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    """``(position, job)`` for each RUNNING job of ``squeue --json`` output.

    Raises:
        InputError: not JSON or not the squeue layout.
    """
    jobs = json_list(text, "jobs", source, "squeue --json")
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise InputError(source, f"jobs[{i}]", "not an object")
        state = job.get("job_state", "RUNNING")  # a string up to 23.02, a list of flags from 23.11
        if "RUNNING" in (state if isinstance(state, list) else [state]):
            out.append((i, job))
    return out


def _hosts(job: dict[str, Any], i: int, source: str) -> list[str]:
    try:
        return expand_hostlist(str(job.get("nodes", "")))
    except ValueError as exc:
        raise InputError(source, f"jobs[{i}].nodes", str(exc)) from None


def parse_squeue_json(text: str, source: str = "squeue --json") -> dict[str, list[str]]:
    """Running jobs and their hosts from ``squeue --json`` output (Slurm 21.08+ layout).

    Raises:
        InputError: not JSON or not the squeue layout.
    """
    out: dict[str, list[str]] = {}
    for i, job in _running_jobs(text, source):
        if hosts := _hosts(job, i, source):
            out[str(job.get("job_id", i))] = hosts
    return out


def parse_squeue_gpus(
    text: str, source: str = "squeue --json", note: Callable[[str], None] | None = None
) -> dict[str, dict[str, HostGpus]]:
    """Running jobs → host → the GPU indices the job holds there (:data:`HostGpus`), from ``squeue --json``.

    ``gres_detail`` has one entry per allocated node, in the order of the job's node list (slurmctld builds both from
    the job's node bitmap); a job without it (no GRES, or a Slurm that did not send it) names no index on any host.
    An entry that cannot be read, or a list whose length differs from the node list, is told to ``note`` and that
    job's hosts are left unindexed (what ``--jobs slurm`` did before it read indices).

    Raises:
        InputError: not JSON or not the squeue layout, or a bad host list.
    """
    say = note or (lambda _m: None)
    out: dict[str, dict[str, HostGpus]] = {}
    for i, job in _running_jobs(text, source):
        if hosts := _hosts(job, i, source):
            where = f"{source}: jobs[{i}].gres_detail"
            out[str(job.get("job_id", i))] = dict(
                zip(hosts, _held(job.get("gres_detail"), hosts, where, say), strict=True)
            )
    return out


def _held(detail: Any, hosts: list[str], where: str, say: Callable[[str], None]) -> list[HostGpus]:
    """Per host of a job, the GPU indices its ``gres_detail`` names (None: none named, or not readable)."""
    held: list[HostGpus] = [None] * len(hosts)
    if not isinstance(detail, list) or not detail:
        return held
    if len(detail) != len(hosts):
        # Entries pair with nodes by position: with a count off, any pairing could give a job another's GPUs.
        say(f"{where} has {len(detail)} entries for {len(hosts)} nodes; its GPU indices are not read")
        return held
    for k, entry in enumerate(detail):
        try:
            held[k] = parse_gres_gpus(None if entry is None else str(entry))
        except ValueError as exc:
            say(f"{where}[{k}]: {exc}; GPU indices on {hosts[k]} not read")
    return held


def assign_gpus(held: Mapping[str, Mapping[str, HostGpus]], say: Callable[[str], None]) -> dict[str, list[str]]:
    """Job → the ``host/gpuN`` (or whole ``host``) names it holds, for :meth:`JobMap.from_hosts`; never a GPU twice.

    On a host where any job's GPU indices are known, only named indices count: a job naming none there holds none
    (Slurm sends indices for every job holding GPUs, so its silence means no GPU). A host no job names indices on
    goes whole to its one job (Slurm without GRES, as before). Two jobs claiming one GPU, or two unindexed jobs on
    one host, is inconsistent: those GPUs go to no job (a job-level action there is refused as unresolved, never
    sent to the wrong job) and ``say`` is told.
    """
    indexed = {h for hosts in held.values() for h, gpus in hosts.items() if gpus is not None}
    owners: dict[tuple[str, int], list[str]] = {}
    whole: dict[str, list[str]] = {}
    for job in sorted(held):
        for host, gpus in held[job].items():
            if gpus is not None:
                for g in gpus:
                    owners.setdefault((host, g), []).append(job)
            elif host not in indexed:
                whole.setdefault(host, []).append(job)
    out: dict[str, list[str]] = {job: [] for job in held}
    clash: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for (host, g), jobs in sorted(owners.items()):
        if len(jobs) == 1:
            out[jobs[0]].append(f"{host}/gpu{g}")
        else:
            clash.setdefault((host, tuple(jobs)), []).append(g)
    for (host, claimants), lost in sorted(clash.items()):
        say(f"--jobs slurm: jobs {', '.join(claimants)} all claim GPU {_ranges(lost)} of {host}; left to no job")
    for host, jobs in sorted(whole.items()):
        if len(jobs) == 1:
            out[jobs[0]].append(host)
        else:
            say(f"--jobs slurm: jobs {', '.join(jobs)} share {host}, no GPU index named; its GPUs left to no job")
    return {job: names for job, names in out.items() if names}


def _ranges(indices: Sequence[int]) -> str:
    """[0, 1, 2, 5] → ``0-2,5`` (how Slurm writes them)."""
    out: list[str] = []
    for g in sorted(indices):
        if out and out[-1].split("-")[-1] == str(g - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{g}"
        else:
            out.append(str(g))
    return ",".join(out)


Runner = Callable[[list[str]], str]


def _run_squeue(argv: list[str]) -> str:
    try:
        done = run_command(argv)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError("--jobs slurm", "", f"cannot run squeue: {exc}") from None
    if done.returncode != 0:
        raise InputError("--jobs slurm", "", f"squeue exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


class SlurmJobs:
    """``--jobs slurm``: each running job on the GPUs Slurm allocated it (``squeue --json``), asked each refresh.

    Args:
        runner: runs a command line, returns its stdout (tests give a recorded one).
        warn: told once per distinct inconsistency (the watcher's progress stream).
    """

    def __init__(self, runner: Runner | None = None, warn: Callable[[str], None] | None = None) -> None:
        self._runner = runner or _run_squeue
        self._say = SayOnce(warn)

    def __call__(self, gpu_ids: Sequence[str], _labels: Mapping[str, Mapping[str, Any]] | None = None) -> JobMap:
        """Jobs per GPU; a GPU no job holds (or two claim) is -1."""
        held = parse_squeue_gpus(self._runner(["squeue", "--json"]), note=self._say)
        return JobMap.from_hosts(gpu_ids, assign_gpus(held, self._say))


def slurm_jobs(
    gpu_ids: Sequence[str], runner: Runner | None = None, warn: Callable[[str], None] | None = None
) -> JobMap:
    """Ask Slurm which jobs run where (``squeue --json``), once; see :class:`SlurmJobs`."""
    return SlurmJobs(runner, warn)(gpu_ids)


def pod_labelled(labels: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, pod)`` from the labels dcgm-exporter puts on a GPU's series (``exported_*`` where Prometheus
    renamed them); the namespace ``default`` where none is given; None without a pod.
    """
    pod = labels.get("pod") or labels.get("exported_pod")
    ns = labels.get("namespace") or labels.get("exported_namespace") or "default"
    return (str(ns), str(pod)) if pod else None


def k8s_jobs(gpu_ids: Sequence[str], labels: Mapping[str, Mapping[str, Any]]) -> JobMap:
    """Jobs from the Kubernetes labels dcgm-exporter puts on each GPU's series, one per pod: ``namespace.pod``
    (what ``--jobs k8s`` falls back to where kubectl cannot group pods by their controller:
    :mod:`twinloop.ops.live.k8s_fleet`).
    """
    found = [pod_labelled(labels.get(g, {})) for g in gpu_ids]
    names = [f"{p[0]}.{p[1]}" if p else "" for p in found]
    job_ids = tuple(sorted({n for n in names if n}))
    pos = {j: i for i, j in enumerate(job_ids)}
    return JobMap(job_ids, np.array([pos.get(n, -1) for n in names], dtype=np.int64))
