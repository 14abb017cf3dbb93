"""`twinloop ingest`, `twinloop query`, `twinloop export`: telemetry in, out and served to Prometheus."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, progress, stderr, stdout
from twinloop.cli.tables import Col, print_table
from twinloop.errors import InputError
from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.telemetry.ingest import ingest as run_ingest
from twinloop.telemetry.ingest import require_rows_kept
from twinloop.telemetry.sources import SOURCES, Source, make_source
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.timeparse import parse_duration, parse_time

DB_OPTION = typer.Option("twinloop.duckdb", "--db", help="DuckDB store file.")
SET_OPTION = typer.Option(None, "--set", help="Source option KEY=VALUE (VALUE as JSON when it parses), repeatable.")
SPEED_HELP = "twin/replay: data seconds per wall-clock second (1 = real time, 0 = as fast as possible)."
SOURCE_HELP = f"Source kind: {', '.join(SOURCES)}."
TARGET_HELP = "Path or URL for the source (file path, recording, Prometheus URL, twin scenario)."


#: The source option each flag sets, first match wins (--samples is a twin's steps: one sweep per step).
_FLAG_FIELDS: dict[str, tuple[str, ...]] = {
    "--query": ("queries",),
    "--period": ("period_s", "period_ms"),
    "--duration": ("duration_s",),
    "--samples": ("samples", "polls", "steps"),
    "--speed": ("speed",),
}


def _options(
    kind: str,
    sets: list[str] | None,
    query: list[str] | None = None,
    period_s: float | None = None,
    duration_s: float | None = None,
    samples: int | None = None,
    speed: float | None = None,
) -> dict[str, Any]:
    cls = SOURCES.get(kind)
    fields = set(cls.config_type.model_fields) if cls is not None else set()
    opts: dict[str, Any] = {}
    for item in sets or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError("ingest", "--set", f"expected KEY=VALUE, got {item!r}")
        try:
            opts[key] = json.loads(raw)
        except ValueError:
            opts[key] = raw

    def put(flag: str, value: Any) -> None:
        if value is None:
            return
        for name in _FLAG_FIELDS[flag]:
            if name in fields:
                opts[name] = round(value * 1000) if name == "period_ms" else value
                return
        # name what does bound this source (a twin runs its whole scenario unless told its steps)
        takes = [f for f, opts_of in _FLAG_FIELDS.items() if any(n in fields for n in opts_of)]
        own = ", ".join(sorted(fields)) or "none"
        raise InputError(
            "ingest",
            flag,
            f"the {kind} source has no such option (it takes {', '.join(takes) or 'none of these'}; "
            f"its own options, for --set KEY=VALUE: {own})",
        )

    for flag, value in (("--query", tuple(query) if query else None), ("--period", period_s),
                        ("--duration", duration_s), ("--samples", samples), ("--speed", speed)):  # fmt: skip
        put(flag, value)
    return opts


def _cell(column: str, value: Any) -> str:
    if column == "ts" and isinstance(value, float):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _build(kind: str, target: str | None, opts: dict[str, Any]) -> Source:
    return make_source(kind, target, opts)


@app.command()
def ingest(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    target: str | None = typer.Argument(None, help=TARGET_HELP),
    db: str = DB_OPTION,
    query: list[str] | None = typer.Option(None, "--query", help="PromQL query (prometheus), repeatable."),
    period: float | None = typer.Option(None, "--period", help="Sampling period, s (nvml, nvidia-smi, prometheus)."),
    duration: float | None = typer.Option(None, "--duration", help="Stop after this many seconds (live sources)."),
    samples: int | None = typer.Option(None, "--samples", help="Number of sweeps / polls (live sources)."),
    speed: float | None = typer.Option(None, "--speed", help=SPEED_HELP),
    batch_rows: int = typer.Option(1_000_000, "--batch-rows", min=1, help="Samples per store transaction."),
    sets: list[str] | None = SET_OPTION,
    force: bool = typer.Option(False, "--force", help="Add twinloop tables to a DuckDB file that has others."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Read telemetry from SOURCE into the DuckDB store; every bad row is counted and reported.

    Examples: `twinloop ingest file telemetry.csv`, `twinloop ingest nvml --period 0.1 --duration 60`,
    `twinloop ingest nvidia-smi smi.csv`, `twinloop ingest prometheus http://prom:9090 --query
    DCGM_FI_DEV_POWER_USAGE`, `twinloop ingest replay old.duckdb`, `twinloop ingest twin scenario.yaml`.
    """

    def run() -> None:
        src = _build(source, target, _options(source, sets, query, period, duration, samples, speed))
        t0 = time.perf_counter()
        with (
            DuckDBStore(db, force=force) as store,
            progress(f"ingest {src.label}", total=0, enabled=not json_out) as advance,
        ):
            report = run_ingest(src, store, batch_rows=batch_rows, on_batch=advance)
        require_rows_kept(report, src.label)  # every row dropped is an error (exit 2), never a quiet 0
        elapsed = time.perf_counter() - t0
        doc = {"source": src.label, "db": db, "elapsed_s": elapsed, **report.to_dict()}
        if json_out:
            print_json(doc)
            return
        stdout.print(f"ingested {src.label} into {db} in {elapsed:.2f} s", markup=False, highlight=False)
        for line in report.summary_lines():
            stdout.print(line, markup=False, highlight=False)

    guarded(run)


@app.command()
def query(
    field: str = typer.Option(..., "--field", help="Field name, e.g. DCGM_FI_DEV_POWER_USAGE."),
    db: str = DB_OPTION,
    entity: str = typer.Option("", "--entity", help="Entity prefix, e.g. site0/row1 (default: all)."),
    since: str | None = typer.Option(
        None, "--since", help="Start: epoch s, ISO-8601, now-1h, latest-10m, or 1h (= latest-1h)."
    ),
    until: str | None = typer.Option(None, "--until", help="End (exclusive), same forms as --since."),
    every: str | None = typer.Option(None, "--every", help="Downsample into buckets (10s, 1m): min/mean/max/last."),
    aggregate: bool = typer.Option(False, "--aggregate", help="One row per entity over the whole range."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many rows."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Query the store: raw samples, downsampled buckets (--every) or per-entity aggregates."""

    def run() -> None:
        name = canonical_field(field)
        if name is None:
            from twinloop.errors import unknown_name

            raise unknown_name("query", "--field", "field", field, FIELD_BY_NAME)
        if aggregate and every is not None:  # the aggregate would be printed under an "every" title
            from twinloop.errors import InputError

            raise InputError(
                "query",
                "--aggregate",
                "cannot be combined with --every (one row per entity over the whole range, "
                "or buckets of --every: pick one)",
            )
        with DuckDBStore(db, read_only=True) as store:
            _, newest = store.time_range(name)
            since_s = None if since is None else parse_time(since, newest, "--since")
            until_s = None if until is None else parse_time(until, newest, "--until")
            every_s = None if every is None else parse_duration(every)
            if aggregate:
                table = store.aggregate(name, entity, since_s, until_s)
            elif every_s is not None:
                table = store.downsample(name, every_s, entity, since_s, until_s)
            else:
                table = store.query(name, entity, since_s, until_s).drop_columns(["field"])
        if limit is not None:
            table = table.slice(0, limit)
        rows = table.to_pylist()
        unit = FIELD_BY_NAME[name].unit
        if json_out:
            print_json({"field": name, "unit": unit, "entity": entity, "since_s": since_s, "until_s": until_s,
                        "every_s": every_s, "count": len(rows), "rows": rows})  # fmt: skip
            return
        if not rows:  # an entity typo or a range outside the data: an empty table would say nothing
            where = (f" under {entity}" if entity else "") + (" in the range given" if since or until else "")
            stdout.print(f"no samples of {name}{where} (store {db})", markup=False, highlight=False)
            return
        cols = [Col(c, "left" if c == "entity" else "right") for c in table.column_names]
        cells = [[escape(_cell(k, v)) for k, v in row.items()] for row in rows[:50]]
        title = escape(f"{name} [{unit}]" + (f" every {every}" if every else ""))
        print_table(stdout, title, cols, cells, keys=2 if cols[:2] and cols[1].header == "entity" else 1)
        if len(rows) > 50:
            stdout.print(f"... {len(rows) - 50} more rows (use --json or --limit)", markup=False)

    guarded(run)


@app.command()
def export(
    source_spec: str = typer.Option(
        "twin", "--source", help="KIND or KIND:TARGET, e.g. twin, nvml, file:t.csv, prometheus:http://h:9090."
    ),
    listen: str = typer.Option("127.0.0.1:9400", "--listen", help="HOST:PORT to serve /metrics on (loopback)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --listen address."),
    period: float | None = typer.Option(None, "--period", help="Sampling period, s (live sources)."),
    duration: float | None = typer.Option(None, "--duration", help="Serve this many seconds (default: until Ctrl-C)."),
    speed: float | None = typer.Option(None, "--speed", help=SPEED_HELP),
    sets: list[str] | None = SET_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Serve the latest values of a source at /metrics in dcgm-exporter's Prometheus format.

    Example: `twinloop export --speed 1 --listen 127.0.0.1:9400` runs the twin's default scenario in real time;
    point a Prometheus scrape job (honor_labels: true) at it like at a dcgm-exporter.
    """
    from twinloop.telemetry.exporter import Exporter

    def run() -> None:
        kind, sep, target = source_spec.partition(":")
        src = _build(kind, target if sep else None, _options(kind, sets, None, period, None, None, speed))
        exporter = Exporter(listen=listen, allow_remote=allow_remote).start()
        url = f"http://{listen.rpartition(':')[0] or '127.0.0.1'}:{exporter.port}/metrics"
        if not json_out:
            stderr.print(f"serving {src.label} on {url} (Ctrl-C to stop)", markup=False, highlight=False)
        feeder = exporter.feed(src)
        t0 = time.monotonic()
        try:
            while duration is None or time.monotonic() - t0 < duration:
                time.sleep(0.1)
                if exporter.feed_error is not None:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            exporter.stop()
        feeder.join(timeout=1.0)
        err = exporter.feed_error
        if isinstance(err, InputError | FileNotFoundError):
            raise err
        doc = {"source": src.label, "url": url, "served_s": time.monotonic() - t0, **exporter.report.to_dict()}
        if json_out:
            print_json(doc)
        else:
            for line in exporter.report.summary_lines():
                sys.stderr.write(line + "\n")

    guarded(run)
