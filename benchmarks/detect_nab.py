"""`twinloop detect`'s detectors on Numenta Anomaly Benchmark series: windows found, false alarms/day, NAB score.

Reads NAB series (``timestamp,value`` CSVs) and NAB's ``combined_windows.json`` labels. By default the series
packaged in ``benchmarks/data/nab`` (see its README: source, licence, citation), each with its signal kind and
whether the profiles were fitted on it or it is held out. Scoring: ``twinloop.lab.nab_windows``, NAB's own scorer
(standard profile; the first 15 % of each file, at most 750 rows, is probationary: alarms there are not scored and
are counted in the ``prob`` column); windows entirely outside a series' span are not scored. The totals give the
mean of the per-series scores and the pooled score (raw scores summed and normalised once, as NAB scores its corpus).

    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py                 # default vs per-kind profile
    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py --profile auto  # one profile for all series
    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py --profile auto --only 'held out (fresh)'  # one set
    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py --skip-default --series \
        realAWSCloudwatch/ec2_cpu_utilization_fe7f93.csv:utilisation --set novelty_z.record_window_s=259200
    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py --data NAB/data \\
        --labels NAB/labels/combined_windows.json \\
        --series realKnownCause/machine_temperature_system_failure.csv:temperature
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from twinloop.lab.nab_windows import WindowScore, load_windows, pooled_nab_score, probation_rows, score_alarms
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import read_series
from twinloop.ops.detect.profiles import PROFILE_NAMES, DetectorProfile, detect_with_profile, select_profile
from twinloop.ops.events import Detection

HERE = Path(__file__).resolve().parent / "data" / "nab"

#: Packaged series: key (path under NAB's data/) → (signal kind, "fitted" or "held out").
#: Utilisation split, declared (and committed) before the scale-floor change and before the three new CPU series
#: were scored: the two CPU series already scored with the utilisation profile (RDS ``cc0c53``, idle EC2
#: ``24ae8d``) and one new busy EC2 series (``5f5533``) are fitted on; two new series (EC2 ``fe7f93``, RDS
#: ``e47b3b``) were held out. EC2 ``fe7f93`` has since been looked at (its false alarms were read one by one to
#: find their cause, routine bursts), so it moved to "fitted" before the routine-burst baseline was designed;
#: RDS ``e47b3b`` and the ambient temperature stay held out.
SERIES: dict[str, tuple[str, str]] = {
    "realKnownCause/ec2_request_latency_system_failure.csv": ("latency", "fitted"),
    "realAWSCloudwatch/rds_cpu_utilization_cc0c53.csv": ("utilisation", "fitted"),
    "realAWSCloudwatch/ec2_cpu_utilization_24ae8d.csv": ("utilisation", "fitted"),
    "realAWSCloudwatch/ec2_cpu_utilization_5f5533.csv": ("utilisation", "fitted"),
    "realAWSCloudwatch/ec2_cpu_utilization_fe7f93.csv": ("utilisation", "fitted"),
    "realAWSCloudwatch/rds_cpu_utilization_e47b3b.csv": ("utilisation", "held out"),
    "realKnownCause/machine_temperature_system_failure.csv": ("temperature", "fitted"),
    "realKnownCause/ambient_temperature_system_failure.csv": ("temperature", "held out"),
    "realTraffic/TravelTime_387.csv": ("latency", "held out"),
    "realTraffic/TravelTime_451.csv": ("latency", "held out"),
    "realAWSCloudwatch/ec2_cpu_utilization_53ea38.csv": ("utilisation", "held out"),
    "realAWSCloudwatch/ec2_cpu_utilization_77c1ca.csv": ("utilisation", "held out"),
    "realAWSCloudwatch/ec2_cpu_utilization_825cc2.csv": ("utilisation", "held out"),
    "realAWSCloudwatch/ec2_cpu_utilization_ac20cd.csv": ("utilisation", "held out"),
    "realAWSCloudwatch/ec2_cpu_utilization_c6585a.csv": ("utilisation", "held out"),
    "realAWSCloudwatch/elb_request_count_8c0756.csv": ("generic", "held out"),
    "realAWSCloudwatch/ec2_network_in_257a54.csv": ("generic", "held out"),
    # Periodic counts (the seasonal baseline, issue 14), declared and committed (33785c3) before any was copied or
    # scored: one tweet-volume series fitted on (AAPL, the first of NAB's realTweets), two held out (GOOG, IBM), each
    # packaged only after the design it judges was frozen.
    "realTweets/Twitter_volume_AAPL.csv": ("count", "fitted"),
    # GOOG: held out for the first design (scored once, 99eb5c4 → db7e939), fitted on for the second (a7be2f3).
    "realTweets/Twitter_volume_GOOG.csv": ("count", "fitted"),
    # IBM: held out for the second design; packaged after it was adopted (a6fd5bb), scored once.
    "realTweets/Twitter_volume_IBM.csv": ("count", "held out"),
    # Unnamed signals (nab3), declared in DECLARED_NOT_COPIED and committed (84ee240) before any was copied or
    # scored, with the kind ``auto`` picked from the name then (generic for all seven). The road series are
    # ``latency`` since the road-state routing was adopted by its declared rule (95dc077; held out 71.8 > 23.5).
    "realTraffic/speed_6005.csv": ("latency", "fitted"),
    "realTraffic/occupancy_6005.csv": ("latency", "fitted"),
    "realAdExchange/exchange-2_cpc_results.csv": ("generic", "fitted"),
    "realTraffic/speed_7578.csv": ("latency", "held out"),
    "realTraffic/speed_t4013.csv": ("latency", "held out"),
    "realTraffic/occupancy_t4013.csv": ("latency", "held out"),
    "realAdExchange/exchange-3_cpc_results.csv": ("generic", "held out"),
    # More CloudWatch series (nab4), declared in DECLARED_NOT_COPIED and committed (06979a1) before any was copied or
    # scored, with the kind ``auto`` picked from the name then (generic for all five).
    "realAWSCloudwatch/ec2_disk_write_bytes_1ef3de.csv": ("generic", "fitted"),
    "realAWSCloudwatch/ec2_network_in_5abac7.csv": ("generic", "fitted"),
    "realAWSCloudwatch/ec2_disk_write_bytes_c0d644.csv": ("generic", "held out"),
    "realAWSCloudwatch/grok_asg_anomaly.csv": ("generic", "held out"),
    "realAWSCloudwatch/iio_us-east-1_i-a2eb1cd9_NetworkIn.csv": ("generic", "held out"),
    # Fresh held-out round (nabfresh), declared in DECLARED_NOT_COPIED and committed (97adfcd) before any was copied,
    # read or scored; the six copied (byte-exact, md5 = NAB-1.1's) moved here. Kind = what ``auto`` picks from the name.
    "realAdExchange/exchange-2_cpm_results.csv": ("generic", "fitted"),
    "realAdExchange/exchange-3_cpm_results.csv": ("generic", "held out (fresh)"),
    "realAdExchange/exchange-4_cpc_results.csv": ("generic", "held out (fresh)"),
    "realAdExchange/exchange-4_cpm_results.csv": ("generic", "held out (fresh)"),
    "realKnownCause/rogue_agent_key_hold.csv": ("generic", "held out (fresh)"),
    "realKnownCause/rogue_agent_key_updown.csv": ("generic", "held out (fresh)"),
    # nabasg: declared in DECLARED_NOT_COPIED (e9f4dea) before it was copied or scored; copied from a third-party copy
    # (the only complete one the index stores in NAB-1.1's two-column layout; md5 is NOT NAB-1.1's, see the README).
    "realKnownCause/cpu_utilization_asg_misconfiguration.csv": ("utilisation", "held out (asg)"),
    # Second fresh round (nabart): NAB's artificial series, declared in DECLARED_NOT_COPIED and committed (c981725)
    # before any was copied, read or scored; all eleven since copied, checked and moved here (md5 = NAB-1.1's,
    # except art_daily_small_noise, art_noisy, art_daily_jumpsup: the index's labelled layout, see the data
    # README). Kind = what ``auto`` picks from the name. The ``artificialNoAnomaly`` ones have no window: they
    # count false alarms only.
    "artificialWithAnomaly/art_daily_flatmiddle.csv": ("generic", "fitted"),
    "artificialWithAnomaly/art_daily_jumpsdown.csv": ("generic", "held out (fresh2)"),
    "artificialWithAnomaly/art_daily_jumpsup.csv": ("generic", "held out (fresh2)"),
    "artificialWithAnomaly/art_daily_nojump.csv": ("generic", "held out (fresh2)"),
    "artificialWithAnomaly/art_increase_spike_density.csv": ("generic", "held out (fresh2)"),
    "artificialWithAnomaly/art_load_balancer_spikes.csv": ("utilisation", "held out (fresh2)"),
    "artificialNoAnomaly/art_daily_no_noise.csv": ("generic", "fitted"),
    "artificialNoAnomaly/art_daily_small_noise.csv": ("generic", "held out (fresh2)"),
    "artificialNoAnomaly/art_daily_perfect_square_wave.csv": ("generic", "held out (fresh2)"),
    "artificialNoAnomaly/art_flatline.csv": ("generic", "held out (fresh2)"),
    "artificialNoAnomaly/art_noisy.csv": ("generic", "held out (fresh2)"),
}

#: Declared in the same commit as AAPL, held out: GOOG and IBM, the next two of the same layout (both since packaged
#: and moved to SERIES above),
#: picked by their names alone (none plotted or read beyond its size). NAB's nyc_taxi and
#: cpu_utilization_asg_misconfiguration were meant too (fitted / held out), but the only stored copies reachable
#: here are 605,000 characters (a NAB *results* file) and 576,000 characters, read 16,000 at a time; not copied.
#: Whoever packages them keeps this split: tune on AAPL only, score GOOG and IBM once.
#: After GOOG's single scoring (count 1/3 against generic's 2/3; docs/sections/calibration-detect.md), a second
#: design was declared before it was run: on a periodic series, `phase_z` *together with* generic's novelty z
#: (candidate a) or with both of generic's detectors (candidate b). GOOG is then fitted on too (it has been seen);
#: IBM stays held out for it. Rule, fixed here: the candidate with the highest summed NAB score over AAPL + GOOG is
#: adopted only if that sum beats both the first design's (82.9 + 29.3) and generic's (70.4 + 47.3).
#:
#: Unnamed-signal split (nab3, 2026-11-27), declared and committed before any of these files was copied, read or
#: scored; picked by name and size alone (the index's character counts, nothing else): NAB's road speed and
#: occupancy series (``realTraffic/``) and two ad-exchange cost-per-click series (``realAdExchange/``, hourly). Their
#: names say nothing ``auto`` knows, so the kind recorded is what ``auto`` picks for them today: ``generic``. Fitted
#: on (a design may look at these): ``speed_6005``, ``occupancy_6005``, ``exchange-2_cpc_results``; held out (scored
#: once with the code of the time, then once after any design declared on the fitted ones): the other four.
#: All seven are packaged (byte-exact, md5 = NAB-1.1's) and moved to SERIES above.
#: Scored once with the profiles unchanged (85466fe; docs/sections/calibration-detect.md, "Unnamed signals"), then a
#: design was declared here before it was implemented or run on any held-out file: road-state names go to the
#: latency profile, as NAB's ``TravelTime_*`` already do (``speed`` and ``occupancy`` join auto's latency words; no
#: parameter changes). Physics: travel time, speed and occupancy are three readings of one road state (speed = length
#: / travel time; occupancy grows with density = flow / speed), and an incident shows in all three as short extreme
#: intervals, often single 5-min averages between normal ones, which the latency profile looks for (single-sample
#: robust z) and generic does not (two consecutive samples, a level not held in the past week). Fitted evidence is
#: nil either way (speed_6005 0/1 with both; occupancy_6005 1/2, 0 false alarms with both, NAB 45.3 vs 43.4). Rule,
#: fixed here: adopted only if the summed NAB score on the three held-out road series (speed_7578, speed_t4013,
#: occupancy_t4013; exchange-3 is not affected) beats generic's 26.3 + 0.0 - 2.8 = 23.5 and none of them loses a
#: window it had; otherwise reverted and reported. The held-out files' text passed through the copier while they
#: were copied; no detector ran on them before 85466fe, and the design comes from the brief and the physics.
#:
#: More CloudWatch series (nab4, 2026-11-27), declared and committed before any of these files was copied, read or
#: scored: the five ``realAWSCloudwatch/`` files not packaged yet (disk-write bytes, network-in bytes, an
#: auto-scaling group's metric), the split given by the brief, by name alone. The kind recorded is what ``auto``
#: picks for each name today (``select_profile("auto", [file name, "value"])``): ``generic`` for all five (no name
#: word matches; ``NetworkIn``, ``disk_write_bytes`` and ``grok_asg`` say nothing ``auto`` knows). Fitted on (a design
#: may look at these): ``ec2_disk_write_bytes_1ef3de``, ``ec2_network_in_5abac7``; held out (scored once with the code
#: of the time, then once after any design declared on the fitted ones): the other three.
#: All five are packaged (byte-exact, md5 = NAB-1.1's) and moved to SERIES above.
#: Scored once with the profiles unchanged (c368028; docs/sections/calibration-detect.md, "More held-out CloudWatch
#: series": held out, generic 27.2 + 8.8 - 2.8 = 33.2, windows 1/3, 1/3, 0/2). Then a design was declared here, from
#: the two fitted files only, before it was implemented or run on any held-out file: **burst counters**. A series
#: whose median is at most a thousandth of its 99th percentile, all values >= 0 (bytes or packets per interval: idle
#: at zero or a few bytes, transfers three or more decades above), gets, under ``generic`` only, generic's novelty z
#: alone, on log1p of the values. Why: (1) CUSUM tracks a mean level, but the mean of such a series is set by how often
#: bursts come, not by a level: after a burst the slow baseline sits far above the idle samples and the zeros that
#: follow read as a downward shift (7 of the 9 false alarms on ``ec2_disk_write_bytes_1ef3de`` are CUSUM, on runs of
#: zeros or on routine bursts); (2) transfer sizes are multiplicative, so a change that matters (transfers twice as
#: large, traffic collapsing from tens of bytes to none) is a change of ratio, which a robust z in raw units cannot see
#: beside bursts 10^5 times the idle level. The threshold (three decades) is the physics of "bursts far above the
#: typical sample", not fitted: on the fitted files the two counters have median / p99 of 0 and 1.3e-5, every other
#: fitted series 0.04 or more, so any threshold from 1e-4 to 1e-2 picks the same series. Fitted evidence (generic vs
#: the design): 1ef3de 1/1, 9 false alarms, 49.3 -> 1/1, 1, 93.6; 5abac7 2/2, 8, 73.3 -> 2/2, 6, 78.3 (two variants
#: were also tried on the fitted files and scored lower there: dropping CUSUM without the log, and the log keeping
#: CUSUM). Rule, fixed here: adopted only if the summed NAB score on the three held-out series (c0d644,
#: grok_asg_anomaly, iio NetworkIn) beats 33.2 and none of them loses a window it had (c0d644 1/3, grok 1/3);
#: otherwise reverted and reported. Every other packaged series must keep its result (the whole benchmark is run to
#: check it).
#: Outcome: implemented (99a023e) and scored once on the held-out files: **rejected and reverted** (b196e79). Held out
#: 0.0 + 8.8 - 2.8 = 6.0 < 33.2: ``c0d644`` (the only held-out burst counter) lost the window generic had (1/3, 2 false
#: alarms, 27.2 -> 0/3, 0, 0.0); ``grok_asg_anomaly`` and the iio series are not burst counters and did not move; the
#: other 27 packaged series did not move either.
#:
#: Fresh held-out round (nabfresh, 2026-11-28), declared and committed before any of these files was copied, read or
#: scored (the old held-out set has been scored under many designs and is no longer a clean test). Chosen by name
#: alone: the NAB series with labels in ``labels/combined_windows.json`` (at ``07b379d``) not packaged yet and stored
#: in the code-search index at a size that can be copied page by page. The kind recorded is what ``auto`` picks for
#: each name today (``select_profile("auto", [file name, "value"])``). Split rule, fixed here: the first new file of
#: each NAB folder, alphabetically, is fitted on (a design may look at it); all others are "held out (fresh)": scored
#: once with the shipped code, then once with the final design. ``rogue_agent_key_*`` are stored in the index only as
#: ``realKnownCause/mole_key_*`` (an older name); they are used only if their md5 equals NAB-1.1's
#: ``rogue_agent_key_*``. ``nyc_taxi`` is stored only in a third-party copy; used only if its md5 equals NAB-1.1's.
#: A declared file that cannot be copied in time stays here, not scored, and is named in the write-up.
#:
#: Second fresh held-out round (nabart, 2026-11-28), declared and committed before any of these files was copied,
#: read or scored: NAB's two artificial folders, none packaged yet. ``artificialWithAnomaly/`` has one labelled window
#: per file; ``artificialNoAnomaly/`` has none (its entries in ``combined_windows.json`` are empty lists), so its files
#: measure false alarms alone, on shapes an operator meets (a flat line, a perfect square wave, noise without a
#: fault). The kind recorded is what ``auto`` picks for each name today (``select_profile("auto", [file name,
#: "value"])``): ``generic`` for ten, ``utilisation`` for ``art_load_balancer_spikes`` (the word ``load``). Split
#: rule, fixed here: the first file of each folder, alphabetically, is fitted on (a design may look at it):
#: ``art_daily_flatmiddle`` and ``art_daily_no_noise``; every other one is "held out (fresh2)": scored once with the
#: shipped code, then once more only after a design declared on the fitted ones. A declared file that cannot be copied
#: and checked stays here, not scored, and is named in the write-up.
DECLARED_NOT_COPIED: dict[str, tuple[str, str]] = {
    "realKnownCause/nyc_taxi.csv": ("generic", "fitted"),
    "realRogueAgent/rogue_agent_cpu_usage.csv": ("utilisation", "fitted"),
    "realRogueAgent/rogue_agent_memory_percent.csv": ("utilisation", "held out (fresh)"),
    "realRogueAgent/rogue_agent_network_percent.csv": ("utilisation", "held out (fresh)"),
    # nabasg (2026-11-28): cpu_utilization_asg_misconfiguration was declared here (e9f4dea), held out (asg), before it
    # was copied, read or scored; now packaged and moved to SERIES. nyc_taxi stays declared (fitted), not copied.
}


def override(profile: DetectorProfile, settings: Sequence[str]) -> DetectorProfile:
    """``profile`` with parameters replaced, for neighbourhood checks (``--set DETECTOR.PARAM=VALUE``).

    A parameter the profile gives as a span (seconds clamped to a range of samples) takes ``SECONDS`` or
    ``SECONDS:LO:HI``; any other takes a number. Both the profile's detectors and its periodic set
    (:attr:`DetectorProfile.periodic`) are changed. Raises ``SystemExit`` on a detector the profile does not run.
    """
    groups = [list(profile.detectors), list(profile.periodic)]
    for item in settings:
        target, value = item.split("=", 1)
        det, param = target.split(".", 1)
        hits = [(g, i) for g, specs in enumerate(groups) for i, d in enumerate(specs) if d.name == det]
        if not hits:
            runs = sorted({d.name for specs in groups for d in specs})
            raise SystemExit(f"--set {item}: profile {profile.name} runs no {det} (it runs {runs})")
        for g, i in hits:
            spec = groups[g][i]
            if param in spec.spans:
                parts = value.split(":")
                old = spec.spans[param]
                lo, hi = (int(parts[1]), int(parts[2])) if len(parts) == 3 else (old[1], old[2])
                groups[g][i] = replace(spec, spans={**spec.spans, param: (float(parts[0]), lo, hi)})
            else:
                groups[g][i] = replace(spec, params={**spec.params, param: float(value)})
    return replace(profile, detectors=tuple(groups[0]), periodic=tuple(groups[1]))


def with_gap(profile: DetectorProfile, gap_s: float) -> DetectorProfile:
    """``profile`` with every detector re-warming only after a hole longer than ``gap_s`` (clamped to 5..2,000
    samples, and never under the base's 5 intervals; ``--gap-s``). The named profiles keep their state across a hole
    shorter than a day (``_HOLE`` in ``profiles.py``); ``--gap-s 1`` gives back the stock rule (5 intervals)."""
    span = {"gap_s": (gap_s, 5, 2000)}
    detectors = tuple(replace(d, spans={**d.spans, **span}) for d in profile.detectors)
    periodic = tuple(replace(d, spans={**d.spans, **span}) for d in profile.periodic)
    return replace(profile, detectors=detectors, periodic=periodic)


def run_series(
    csv: Path, key: str, profile_name: str, settings: Sequence[str] = (), gap_s: float = 0.0
) -> tuple[str, list[Detection], np.ndarray]:
    """Run a detector profile on one NAB CSV (its ``value`` column): the profile run, its detections, the row times.

    ``auto`` sees only what ``twinloop detect --profile auto`` would: the file name and the column name, never
    the kind this script assigns. ``settings`` (``DETECTOR.PARAM=VALUE``) override the profile's parameters.
    """
    blocks, _ = read_series(csv, ["value"])
    profile = select_profile(profile_name, [Path(key).name, "value"])
    if settings:
        profile = override(profile, settings)
    if gap_s > 0:
        profile = with_gap(profile, gap_s)
    return profile.name, detect_with_profile(blocks, profile), blocks[0].ts


def score_series(
    csv: Path, labels: Path, key: str, profile_name: str, settings: Sequence[str] = (), gap_s: float = 0.0
) -> tuple[str, WindowScore]:
    """Run a detector profile on one NAB CSV (see :func:`run_series`) and score the alarm onsets.

    Returns the profile actually run and the score.
    """
    ran, detections, _ = run_series(csv, key, profile_name, settings, gap_s)
    return ran, score_alarms([d.ts for d in detections], load_windows(labels, key), file_rows(csv))


def file_rows(csv: Path) -> np.ndarray:
    """The file's row times (UTC s), every row as NAB counts them: the detectors' reader drops duplicated
    timestamps (1-12 rows in 7 packaged files), which would move NAB's probationary cut and window widths."""
    with csv.open(encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    stamps = [dt.datetime.fromisoformat(line.split(",", 1)[0]).replace(tzinfo=dt.UTC) for line in lines if line]
    return np.array([t.timestamp() for t in stamps], dtype=np.float64)


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M")


def explain_series(
    csv: Path, labels: Path, key: str, profile_name: str, settings: Sequence[str] = (), gap_s: float = 0.0
) -> None:
    """Print where one series' windows are caught or missed and where its false alarms fall (``--explain``)."""
    ran, detections, _ = run_series(csv, key, profile_name, settings, gap_s)
    ts = np.sort(file_rows(csv))
    start = float(ts[probation_rows(ts.size)])
    windows = load_windows(labels, key)
    print(f"  {Path(key).name} ({ran}): scored from {_when(start)} (probation before it)")
    for a, b in windows:
        inside = [d for d in detections if a <= d.ts <= b and d.ts >= start]
        what = f"found {_when(inside[0].ts)} by {inside[0].detector}" if inside else "MISSED"
        print(f"    window {_when(a)} .. {_when(b)}: {what}")
    for d in detections:
        if d.ts >= start and not any(a <= d.ts <= b for a, b in windows):
            print(f"    false alarm {_when(d.ts)} by {d.detector}")


def _csv(key: str, data: Path) -> Path:
    # Packaged series are stored flat (benchmarks/data/nab/<file>); a NAB checkout keeps data/<category>/<file>.
    nested = data / key
    return nested if nested.exists() else data / Path(key).name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=HERE, help="NAB data/ folder (default: the packaged series)")
    ap.add_argument("--labels", type=Path, default=HERE / "combined_windows.json", help="combined_windows.json")
    ap.add_argument("--series", nargs="*", help="KEY[:KIND] (path under data/, signal kind); default: packaged")
    ap.add_argument("--profile", choices=PROFILE_NAMES, help="one profile for every series (default: per kind)")
    ap.add_argument("--set", nargs="*", default=[], help="DETECTOR.PARAM=VALUE overrides of the profile (not default)")
    ap.add_argument("--skip-default", action="store_true", help="do not run the default detectors for comparison")
    ap.add_argument("--explain", action="store_true", help="list each window (found when, by what) and false alarm")
    ap.add_argument("--only", nargs="*", help="score only the packaged series of these sets (e.g. 'held out (fresh)')")
    ap.add_argument("--gap-s", type=float, default=0.0, help="re-warm after a hole longer than this, s (1: 5 samples)")
    args = ap.parse_args()
    load_variants()
    series = dict(SERIES)
    if args.series:
        series = {s.split(":")[0]: ([*s.split(":"), "auto"][1], "given") for s in args.series}
    if args.only:
        series = {k: v for k, v in series.items() if v[1] in args.only}
    print(
        f"{'series':52s} {'kind':12s} {'set':16s} {'profile':17s} {'found':>7s} {'FA':>4s} {'FA/day':>7s} {'NAB':>7s} "
        f"{'prob':>4s}"
    )
    totals: dict[tuple[str, str, str], list[WindowScore]] = {}
    for key, (kind, role) in series.items():
        for name in ("default", args.profile or kind)[1 if args.skip_default else 0 :]:
            tweaks = ([], 0.0) if name == "default" else (args.set, args.gap_s)
            ran, s = score_series(_csv(key, args.data), args.labels, key, name, *tweaks)
            label = f"auto→{ran}" if name == "auto" else ran
            totals.setdefault((kind, role, "default" if name == "default" else "per kind"), []).append(s)
            if args.explain and name != "default":
                explain_series(_csv(key, args.data), args.labels, key, name, *tweaks)
            print(
                f"{Path(key).name[:52]:52s} {kind:12s} {role:16s} {label:17s} {s.found:>3d}/{s.windows:<3d} "
                f"{s.false_alarms:4d} {s.false_alarms_per_day:7.3f} {s.nab_score:7.1f} {s.probation_alarms:4d}"
            )
    print_totals(totals)


def print_totals(totals: dict[tuple[str, str, str], list[WindowScore]]) -> None:
    """Per signal kind and set (fitted / held out), then all kinds together, default vs the per-kind profile:
    windows found, false alarms, the mean NAB score over the series and the pooled one (NAB's corpus score)."""
    rows = sorted(totals.items())
    for role, prof in sorted({(r, p) for (_, r, p) in totals}):
        rows.append(
            (("all", role, prof), [s for (_, r, p), ss in totals.items() if (r, p) == (role, prof) for s in ss])
        )
    head = f"{'kind':12s} {'set':16s} {'profile':9s} {'series':>6s} {'found':>7s} {'FA':>4s}"
    print(f"\n{head} {'mean NAB':>9s} {'pooled':>7s}")
    for (kind, role, prof), scores in rows:
        found, windows = sum(s.found for s in scores), sum(s.windows for s in scores)
        fa = sum(s.false_alarms for s in scores)
        # A series with no labelled window (NAB's artificialNoAnomaly) has no normalised score (NaN): its false
        # alarms count in FA and in the pooled score's raw sum, not in the mean.
        scored = [s.nab_score for s in scores if s.windows > 0]
        mean = sum(scored) / len(scored) if scored else float("nan")
        pooled = pooled_nab_score(scores)
        counts = f"{kind:12s} {role:16s} {prof:9s} {len(scores):6d} {found:>3d}/{windows:<3d} {fa:4d}"
        print(f"{counts} {mean:9.1f} {pooled:7.1f}")


if __name__ == "__main__":
    main()
