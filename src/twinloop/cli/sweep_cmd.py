"""`twinloop sweep`: scenario x seed x loop-policy runs on Ray, streamed to Parquet and the store, summarized."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, output_dir, print_json, stderr, stdout


@contextmanager
def _bar(total: int, enabled: bool) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Done / failed / ETA on stderr (only on a terminal, and never with --json)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda r: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("done, [red]{task.fields[failed]} failed"), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=stderr, transient=True) as bar:  # fmt: skip
        task = bar.add_task("sweep", total=total, failed=0)
        failed = [0]

        def seen(r: dict[str, Any]) -> None:
            failed[0] += r["status"] != "ok"
            bar.update(task, advance=1, failed=failed[0])

        yield seen


def _print(doc: dict[str, Any], summary: list[Any]) -> None:
    from twinloop.cli.tables import Col, print_table
    from twinloop.sweep.summary import by_scenario, fmt_interval

    loops = list(dict.fromkeys(s.loop for s in summary))
    for sc, by_metric in by_scenario(summary).items():
        rows = [[escape(m), *(fmt_interval(d[lp]) if lp in d else "—" for lp in loops),
                 str(max(x.n for x in d.values()))] for m, d in by_metric.items()]  # fmt: skip
        cols = [Col("metric", "left"), *(Col(f"{lp}\nmean ± 95% CI") for lp in loops), Col("seeds")]
        print_table(stdout, f"{sc}: mean and 95 % interval across seeds", cols, rows)
    for r in doc["failed"]:
        stdout.print(f"[red]failed[/red] cell {r['cell']} ({escape(r['scenario'])}, seed {r['seed']}, {r['loop']}) "
                     f"after {r['attempts']} attempts: {escape(str(r['error']))}")  # fmt: skip
    stdout.print(
        f"{doc['runs']} runs ({len(doc['failed'])} failed) in {doc['wall_s']:.1f} s on {doc['workers']} workers. "
        f"Rows: {doc['parquet']}, {doc['store']}. Report: {doc['report']}"
    )


@app.command()
def sweep(
    spec_path: Path = typer.Argument(..., metavar="SPEC.yaml", help="Sweep spec (scenarios, seeds, loops, plans)."),
    address: str | None = typer.Option(
        None, "--address", help="Existing Ray cluster: ray://HOST:10001 or auto (default: start a local Ray)."
    ),
    workers: int | None = typer.Option(None, "--workers", help="Runs in flight (default: one per core)."),
    out: Path = typer.Option(Path("twinloop-sweep"), "--out", help="Directory for runs.parquet, sweep.duckdb, report."),
    seeds: str | None = typer.Option(None, "--seeds", help="Replace the spec's seeds, e.g. 0 or 0,1,2."),
    duration: str | None = typer.Option(None, "--duration", help="Replace every scenario's duration, e.g. 2m."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Run a sweep of scenarios x seeds x loop policies on Ray; rows to Parquet and DuckDB; intervals and report."""
    from twinloop.errors import InputError
    from twinloop.sweep.report import write_sweep_report
    from twinloop.sweep.runner import run_cells
    from twinloop.sweep.sink import RowSink
    from twinloop.sweep.spec import cells, load_sweep, narrowed
    from twinloop.sweep.summary import stats_doc, summarize

    holder: dict[str, Any] = {}

    def go() -> dict[str, Any]:
        spec = load_sweep(spec_path)
        if seeds is not None or duration is not None:
            try:
                seed_list = None if seeds is None else tuple(int(x) for x in seeds.split(",") if x.strip())
            except ValueError:
                raise InputError("--seeds", "", f"{seeds!r} (allowed: integers separated by commas)") from None
            spec = narrowed(spec, seed_list, duration)
        todo = cells(spec, str(spec_path))
        output_dir(out)  # before any run: the row sink would find a bad --out only after the first one
        with RowSink(out) as sink, _bar(len(todo), not json_out) as seen:

            def on_row(r: dict[str, Any]) -> None:
                sink(r)
                seen(r)

            result = run_cells(todo, spec.name, workers=workers, address=address, on_row=on_row)
        summary = summarize(result.rows)
        holder["summary"] = summary
        report = write_sweep_report(
            out / "report.html", spec.name, summary, result.failed,
            subtitle=f"{len(result.rows)} runs, {len(result.failed)} failed, {result.wall_s:.1f} s on "
            f"{result.workers} workers",
        )  # fmt: skip
        return {
            "sweep": spec.name,
            "runs": len(result.rows),
            "failed": [
                {k: r[k] for k in ("cell", "scenario", "seed", "loop", "attempts", "error")} for r in result.failed
            ],
            "wall_s": result.wall_s,
            "workers": result.workers,
            "cluster_cpus": result.cluster_cpus,
            "parquet": str(sink.parquet_path),
            "store": str(sink.store_path),
            "report": str(report),
            "summary": stats_doc(summary),
        }

    doc = guarded(go)
    if json_out:
        print_json(doc)
    else:
        _print(doc, holder["summary"])
    if doc["failed"]:
        raise typer.Exit(code=1)
