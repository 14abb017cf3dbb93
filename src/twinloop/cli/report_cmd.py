"""`twinloop report DB`: one self-contained HTML report from a store (a watcher's, an ingest's, a run's)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stderr


@app.command()
def report(
    db: Path = typer.Argument(..., help="The DuckDB store (twinloop watch --db, ingest, a run's telemetry.duckdb)."),
    out: Path | None = typer.Option(None, "--out", help="The HTML file to write (default: DB's name + .html)."),
    run: str | None = typer.Option(None, "--run", help="Only this run's incidents and actions (default: all)."),
    title: str = typer.Option("twinloop report", "--title", help="The report's title."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write an HTML report from a store: telemetry, each job's step time with its incidents, incidents, actions."""
    from twinloop.report.store import store_report

    target = out if out is not None else db.with_name(db.name + ".html")
    done = guarded(lambda: store_report(db, target, run, title))
    if json_out:
        print_json({"db": str(db), "run": run, **done.to_dict()})
        return
    stderr.print(f"{len(done.sections)} section(s), {len(done.jobs)} job chart(s)", markup=False, highlight=False)
    sys.stdout.write(f"{done.path}\n")
