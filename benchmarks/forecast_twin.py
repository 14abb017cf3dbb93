"""Heat-load forecaster vs persistence on twin runs, trained and evaluated on held-apart seeds.

Each seed is a 2-hour run of :func:`twinloop.lab.forecast_scenarios.forecast_scenario` (256 H100s in 8 racks, 5 s
steps, a random job queue). The forecaster (ridge regression per level and horizon on load history plus what
the queue and the planner knew in advance, :mod:`twinloop.closedloop.twin_history`) is fitted on the training
seeds and scored on the test seeds, per rack and for the site, at 5, 10 and 15 minutes: MAE of the forecast and
of persistence (load in h = load now) on the same samples, and the improvement 1 - MAE_model / MAE_persistence.
It also replays one test run through :class:`~twinloop.ops.learn.forecast_online.OnlineForecast` and reports
the largest difference to the offline forecast and the cost of one online update + forecast.

    python benchmarks/forecast_twin.py [--train 0-7] [--test 100-103] [--notice 0.5] [--save PATH]

``--save PATH`` writes the fitted rack models as JSON (the packaged model the loop precools with,
``src/twinloop/ops/learn/models/rack_heat_forecast.json``, is this file with the default arguments).

``--notice`` is the share of jobs announced 5-30 min before submission (0: a job is known only once submitted).
The serving trace is derived from the Azure Public Dataset, AzureLLMInferenceTrace_conv, CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from twinloop.closedloop.twin_history import HORIZONS_S, TwinHistory, TwinRecorder, record_run, train_forecasters
from twinloop.lab.forecast_scenarios import forecast_scenario
from twinloop.ops.learn.forecast import HeatLoadForecaster, evaluate
from twinloop.ops.learn.forecast_online import OnlineForecast
from twinloop.twin.engine import Twin


def seeds(text: str) -> list[int]:
    """'0-7' or '0,3,5' → seeds."""
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def record(seed: int, notice: float) -> TwinHistory:
    sc = forecast_scenario(seed, notice_fraction=notice)
    return record_run(Twin(sc.spec), sc.known_from_s)


def online_check(seed: int, notice: float, models: dict[str, dict[float, HeatLoadForecaster]]) -> tuple[float, float]:
    """Replay one run online; (max |online - offline| / offline mean, microseconds per update + forecast)."""
    sc = forecast_scenario(seed, notice_fraction=notice)
    twin = Twin(sc.spec)
    rec = TwinRecorder(twin, sc.known_from_s)
    online = OnlineForecast(models["rack"], rec.entities("rack"), rec.sample_s)
    got, cost = [], 0.0
    for _ in range(round(sc.spec.duration_s / twin.dt_s)):
        obs = rec.observe(twin.step())
        if obs is None:
            continue
        o = obs["rack"]
        t0 = time.perf_counter()
        online.update(o.t_s, o.load_w, o.scheduled_delta_w, o.known_ahead_w)
        got.append(online.forecast(600.0))
        cost += time.perf_counter() - t0
    hist = rec.history()
    offline = np.column_stack([models["rack"][600.0].predict(h) for h in hist.rack])
    diff = float(np.abs(np.array(got) - offline).max() / np.abs(offline).mean())
    return diff, cost / len(got) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default="0-7")
    parser.add_argument("--test", default="100-103")
    parser.add_argument("--notice", type=float, default=0.5)
    parser.add_argument("--save", type=Path, default=None, help="write the fitted rack models here (JSON)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    train = [record(s, args.notice) for s in seeds(args.train)]
    test = [record(s, args.notice) for s in seeds(args.test)]
    t_rec = time.perf_counter()
    models = train_forecasters(train, HORIZONS_S)
    t_fit = time.perf_counter()
    if args.save is not None:
        doc = {
            "trained_by": f"benchmarks/forecast_twin.py --train {args.train} --notice {args.notice}",
            "sample_s": train[0].site.dt_s,
            "rack": [models["rack"][h].to_dict() for h in HORIZONS_S],
        }
        args.save.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"saved rack models to {args.save}")
    print(f"train seeds {args.train}, test seeds {args.test}, notice share {args.notice}")
    print(f"{'level':<6}{'horizon':>9}{'MAE model kW':>14}{'MAE persist kW':>16}{'improvement':>13}")
    worst = 1.0
    for level in ("rack", "site"):
        for h in HORIZONS_S:
            score = evaluate(models[level][h], [x for run in test for x in run.level(level)])
            worst = min(worst, score.improvement)
            print(
                f"{level:<6}{h / 60:>7.0f} m{score.mae_model_w / 1e3:>14.2f}{score.mae_persistence_w / 1e3:>16.2f}"
                f"{score.improvement:>12.1%}"
            )
    t_eval = time.perf_counter()
    diff, us = online_check(seeds(args.test)[0], args.notice, models)
    t_end = time.perf_counter()
    runs = len(train) + len(test)
    print(f"worst improvement {worst:.1%} (target >= 30%)")
    print(f"online vs offline (rack, 10 m): max |diff| {diff:.2e} of mean load; {us:.0f} us per update+forecast")
    print(
        f"wall: record {runs} runs {t_rec - t_start:.1f} s ({(t_rec - t_start) / runs:.2f} s/run), "
        f"fit {t_fit - t_rec:.2f} s, evaluate {t_eval - t_fit:.2f} s, online replay {t_end - t_eval:.1f} s, "
        f"total {t_end - t_start:.1f} s"
    )


if __name__ == "__main__":
    main()
