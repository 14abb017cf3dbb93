"""`twinloop detect FILE`: run the change/anomaly detectors offline on a CSV or Parquet time series."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, clock_text, guarded, print_json, stderr, stdout
from twinloop.cli.tables import Col, print_table
from twinloop.errors import InputError
from twinloop.ops import (
    DEFAULT_DETECTORS,
    REGISTRY,
    Detection,
    Incident,
    InputReport,
    SeriesBlock,
    detect_blocks,
    detect_steps,
    load_variants,
    pipeline_incidents,
    read_series,
)
from twinloop.ops.detect.profiles import PROFILES

if TYPE_CHECKING:
    from twinloop.ops import ProfileChoice


def _time(ts: float, report: InputReport) -> str:
    if report.time_axis == "index":
        return f"{_in_file(ts, report):.12g}"
    return clock_text(ts)


def _in_file(ts: float, report: InputReport) -> float:
    """A time in the file's own terms: a sample-indexed file's sample number, else seconds."""
    return ts / report.interval_s if report.time_axis == "index" and report.interval_s else ts


def _detection_json(d: Detection, report: InputReport) -> dict[str, Any]:
    return {
        "ts": _in_file(d.ts, report),
        "entity": d.entity,
        "field": d.source,
        "score": d.score,
        "kind": d.kind,
        "class": d.event_class.value,
        "detector": d.detector,
    }


def _incident_json(i: Incident, report: InputReport) -> dict[str, Any]:
    return {
        "incident_id": i.incident_id,
        "class": i.event_class.value,
        "root": i.root,
        "n_members": len(i.members),
        "start_ts": _in_file(i.start_ts, report),
        "end_ts": _in_file(i.end_ts, report),
        "severity": i.severity.name.lower(),
        "status": i.status,
    }


@app.command()
def detect(
    file: Path = typer.Argument(
        ..., help="CSV or Parquet: wide (timestamp + value columns), long (ts, entity, field, value) or nvidia-smi CSV."
    ),
    field: list[str] = typer.Option(
        None, "--field", "-f", help="Value column / field to analyse (repeatable); default all."
    ),
    detector: list[str] = typer.Option(
        None, "--detector", "-d", help="Detector (repeatable); default " + " and ".join(DEFAULT_DETECTORS) + "."
    ),
    profile: str = typer.Option(
        None,
        "--profile",
        help=f"Detector profile per signal kind: {', '.join(PROFILES)}, or auto (picked from the field / file name; "
        "generic when neither names a kind; count, for strongly periodic counts, only when asked for); replaces "
        "--detector. Without "
        "--profile and --detector: default for GPU telemetry (sampled every 60 s or faster, nvidia-smi, DCGM "
        "fields), auto for slower series.",
    ),
    interval_s: float = typer.Option(
        None,
        "--interval-s",
        help="Seconds between samples of a file whose time column only numbers them (0/1, 2, 3 ...) or that has "
        "none (one value per line); default 300 (assumed, reported). Times are then shown as sample numbers.",
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Detect anomalies and change points in a time series file (telemetry exported from elsewhere)."""

    def run() -> None:
        names = _detector_names(detector)
        blocks, report = read_series(file, list(field) if field else None, interval_s)
        n_samples = max(b.ts.size for b in blocks)
        if n_samples < 2:
            raise InputError(str(file), "", f"{n_samples} sample(s) (allowed: at least 2 timestamps)")
        choice = _choice(file, blocks, report.layout, profile, bool(detector))
        names, detections = _detect(blocks, names, choice, show_progress=not json_out)
        incidents = pipeline_incidents(blocks) if report.layout in ("long", "wide-entity", "nvidia-smi") else []
        summary = _summary(file, blocks, report, n_samples, names, choice)
        if json_out:
            print_json(
                {
                    **summary,
                    "detections": [_detection_json(d, report) for d in detections],
                    "incidents": [_incident_json(i, report) for i in incidents],
                }
            )
        else:
            _print_text(summary, report, detections, incidents)

    guarded(run)


def _detector_names(detector: list[str] | None) -> list[str]:
    """The detectors asked for (default: :data:`DEFAULT_DETECTORS`), each checked against the registry."""
    load_variants()
    names = list(detector) if detector else list(DEFAULT_DETECTORS)
    for n in names:
        if n not in REGISTRY:
            from twinloop.errors import unknown_name

            raise unknown_name("--detector", "", "detector", n, REGISTRY)
    return names


def _choice(
    file: Path, blocks: list[SeriesBlock], layout: str, profile: str | None, explicit_detectors: bool
) -> ProfileChoice | None:
    """The profile to run: ``--profile``'s; none when ``--detector`` names the detectors; else chosen from the data
    (:func:`~twinloop.ops.detect.profiles.choose_profile`: GPU telemetry keeps the default detectors, slower
    series get the kind profile).
    """
    from twinloop.ops import ProfileChoice, choose_profile, select_profile

    hints = [file.name, *(b.field or "" for b in blocks), *(n for b in blocks for n in b.names)]
    if profile is not None:
        return ProfileChoice(select_profile(profile, hints), "--profile " + profile)
    if explicit_detectors:
        return None
    return choose_profile(blocks, layout, hints)


def _detect(
    blocks: list[SeriesBlock], names: list[str], choice: ProfileChoice | None, show_progress: bool
) -> tuple[list[str], list[Detection]]:
    """Run the detectors over the blocks: the chosen profile's, else ``names`` (``--detector``), with a progress
    bar on stderr when ``show_progress``. Returns the detectors run and the detections.

    The ``default`` profile runs its detectors as ``names`` (the same detections as through the profile, which
    has no spans and no spacing), so that GPU telemetry keeps its progress bar.
    """
    from twinloop.ops import detect_with_profile

    if choice is not None:
        if choice.profile.name != "default":
            return choice.profile.detector_names, detect_with_profile(blocks, choice.profile)
        names = choice.profile.detector_names
    if not show_progress:
        return names, detect_blocks(blocks, names)
    # The detectors step through time in Python: a long single series takes a while, so show how far.
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("detect"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task("detect", total=detect_steps(blocks, len(names)))
        return names, detect_blocks(blocks, names, progress=lambda n: bar.advance(task, n))


def _summary(
    file: Path,
    blocks: list[SeriesBlock],
    report: InputReport,
    n_samples: int,
    names: list[str],
    choice: ProfileChoice | None,
) -> dict[str, Any]:
    """What was read (layout, rows, cadence, what was repaired or skipped), which profile (``None``: the detectors
    named by ``--detector``) and which detectors ran, and why that profile.
    """
    return {
        "file": str(file),
        "layout": report.layout,
        "rows": report.rows,
        "samples": n_samples,
        "series": sum(len(b.names) for b in blocks),
        "dt_s": report.dt_s,
        "time_axis": report.time_axis,
        "time_unit": report.time_unit,
        "interval_s": report.interval_s,
        "interval_assumed": report.interval_assumed,
        "aligned_max_shift_s": report.aligned_max_shift_s,
        "out_of_order_rows": report.out_of_order,
        "duplicate_rows": report.duplicates,
        "nan_count": report.nan_count,
        "problems": report.problems,
        "skipped_columns": report.skipped_columns,
        "counters_as_rates": report.counters,
        "profile": choice.profile.name if choice is not None else None,
        "profile_reason": choice.reason if choice is not None else "--detector",
        "detectors": names,
    }


def _print_detections(detections: list[Detection], report: InputReport) -> None:
    """The detections table, without columns that repeat one value on every row (said in the title instead).

    On a wide file (the H100 samples, nvidia-smi CSV) entity and field are the same column name, every time is
    on one date and nothing is classified: shown as columns they split the table into three parts at 80 columns.
    """
    times = [_time(d.ts, report) for d in detections]
    title = f"{len(detections)} detections"
    dates = {t[:10] for t in times}
    if len(dates) == 1 and all(len(t) == 19 and t[10] == " " for t in times):
        title += f" on {dates.pop()} (UTC)"
        times = [t[11:] for t in times]
    classes = {d.event_class.value for d in detections}
    one_class = len(classes) == 1
    if one_class:
        title += f", all {classes.pop()}"
    same = all(d.source == d.entity for d in detections)
    cols = [Col("time", "left"), Col("column" if same else "entity", "left"), *([] if same else [Col("field", "left")]),
            Col("score"), Col("kind", "left"), *([] if one_class else [Col("class", "left")]),
            Col("detector", "left")]  # fmt: skip
    rows = [
        [t, escape(d.entity), *([] if same else [escape(d.source)]), f"{d.score:.2f}", d.kind,
         *([] if one_class else [d.event_class.value]), d.detector]
        for t, d in zip(times, detections, strict=True)
    ]  # fmt: skip
    print_table(stdout, title, cols, rows, keys=2)


def _print_text(
    summary: dict[str, Any], report: InputReport, detections: list[Detection], incidents: list[Incident]
) -> None:
    """The human output: one line on what was read, a table of detections, a table of incidents if any."""
    stdout.print(
        f"{summary['file']}: {report.layout} layout, {summary['samples']} samples of {summary['series']} series, "
        f"dt {report.dt_s:.3g} s, {report.out_of_order} rows out of order (sorted), "
        f"sweeps aligned (max shift {report.aligned_max_shift_s * 1000:.3g} ms), "
        f"{report.duplicates} duplicate rows, {sum(report.nan_count.values())} NaN samples, "
        f"{sum(report.problems.values())} bad rows skipped",
        highlight=False,
    )
    if report.time_axis == "index":
        how = "assumed; --interval-s to set it" if report.interval_assumed else "--interval-s"
        stdout.print(
            f"time axis: sample numbers, {report.interval_s:g} s apart ({how}); times below are sample numbers",
            highlight=False,
        )
    if report.time_unit != "s":
        stdout.print(
            f"time column in {report.time_unit} since 1970 (by its magnitude), read as seconds", highlight=False
        )
    for name, why in report.skipped_columns.items():
        stdout.print(f"column {escape(name)!r} not analysed: {escape(why)}", highlight=False)
    for name in report.counters:
        stdout.print(f"{escape(name)!r} is a cumulative counter: analysed as its rate per second", highlight=False)
    prof = summary["profile"] or "none"
    stdout.print(
        f"profile {prof} ({escape(summary['profile_reason'])}): {', '.join(summary['detectors'])}", highlight=False
    )
    if not detections:
        stdout.print("0 detections", highlight=False)
    else:
        _print_detections(detections, report)
    if incidents:
        cols = [Col("id"), Col("class", "left"), Col("root", "left"), Col("GPUs"), Col("start", "left"),
                Col("end", "left"), Col("severity", "left"), Col("status", "left")]  # fmt: skip
        rows = [
            [
                str(i.incident_id),
                i.event_class.value,
                escape(i.root),
                str(len(i.members)),
                _time(i.start_ts, report),
                _time(i.end_ts, report),
                i.severity.name.lower(),
                i.status,
            ]
            for i in incidents
        ]
        print_table(stdout, f"{len(incidents)} incidents (rules + topology grouping)", cols, rows)
    if not detections:
        stderr.print("no anomalies or change points found", highlight=False)
