"""`twinloop probe`: what this node's kernel and hardware offer GPU workloads, with evidence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stderr, stdout
from twinloop.cli.tables import Col, print_table
from twinloop.errors import InputError
from twinloop.probe import bench_io, build_node_profile, run_probe
from twinloop.probe.bench_io import IoBenchResult

_STYLE = {"present": "green", "absent": "yellow", "unknown": "red"}


def _human(report_findings: Sequence[tuple[str, str, str, str]], bench: IoBenchResult | None) -> None:
    cols = [Col("check", "left"), Col("status", "left"), Col("value", "left", wrap=True),
            Col("evidence", "left", wrap=True)]  # fmt: skip
    rows = [
        [escape(check), f"[{_STYLE[status]}]{status}[/]", escape(value), escape(evidence)]
        for check, status, value, evidence in report_findings
    ]
    print_table(stdout, "Node probe (present / absent / unknown, with the files read)", cols, rows)
    if bench is None:
        return
    rows = [
        [escape(m.method), f"{m.bytes_per_s / 1e9:.2f}" if m.bytes_per_s else "unavailable", escape(m.reason)]
        for m in bench.measurements
    ]
    cols = [Col("method", "left"), Col("GB/s"), Col("note", "left", wrap=True)]
    print_table(stdout, escape(f"Sequential read of {bench.path} ({bench.file_bytes / 2**20:.0f} MiB)"), cols, rows)
    for w in bench.warnings:
        stderr.print(f"warning: {w}", markup=False, highlight=False)


@app.command()
def probe(
    json_out: bool = JSON_OPTION,
    sysfs_root: Path = typer.Option(
        Path("/"), "--sysfs-root", help="Directory holding proc/, sys/ and boot/ (a recorded tree); default /."
    ),
    bench_io_path: Path | None = typer.Option(
        None, "--bench-io", help="Measure sequential read throughput of this file (buffered, O_DIRECT, io_uring)."
    ),
) -> None:
    """Report kernel, io_uring, CXL, HMM, P2P DMA, NUMA, PCIe GPUs, drivers, IOMMU, huge pages and NVMe."""

    def run() -> None:
        if not sysfs_root.is_dir():
            raise InputError("--sysfs-root", str(sysfs_root), "not a directory (allowed: a root holding proc/, sys/)")
        if bench_io_path is not None and not bench_io_path.exists():
            raise InputError("--bench-io", str(bench_io_path), "file not found")
        if bench_io_path is not None and not bench_io_path.is_file():
            raise InputError("--bench-io", str(bench_io_path), "not a regular file (allowed: a file to read)")
        report = run_probe(sysfs_root)
        bench = None
        if bench_io_path is not None:
            bench = bench_io(
                bench_io_path,
                on_method=lambda m: stderr.print(f"bench-io: reading {bench_io_path} ({m})…", highlight=False),
            )
        profile = build_node_profile(report, bench)
        if json_out:
            print_json({"root": report.root, "findings": report.findings, "node_profile": profile, "bench_io": bench})
            return
        rows = [(f.check, f.status, f.value, "\n".join(f.evidence)) for f in report.findings]
        _human(rows, bench)

    guarded(run)
