"""Rule-based vs learned incident classification on held-apart twin runs.

Simulates seeded random scenarios (``twinloop.lab.fault_scenarios``), labels every incident at its first report
(``twinloop.lab.classifier_dataset``), trains the learned classifiers on the *train* seeds only (the L2 penalty is
chosen by 4-fold cross-validation grouped by run, inside the train seeds) and scores every classifier on the
*test* seeds, which no choice looked at. Prints data sizes, per-class precision / recall / F1, macro-F1,
accuracy, lenient accuracy (any class the fault may show as), confusion matrices and wall times.

    .venv/bin/python benchmarks/classifier_compare.py                       # 40 train runs, 20 test runs
    .venv/bin/python benchmarks/classifier_compare.py --train 8 --test 4    # a quick look

Serving trace: Azure Public Dataset, AzureLLMInferenceTrace_conv (2023-11-16), CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from twinloop.lab.classifier_dataset import Dataset, build_dataset
from twinloop.lab.classifier_metrics import Scores, lenient_accuracy, score
from twinloop.ops.classify.base import LABELS, IncidentClassifier, make_classifier, to_label
from twinloop.ops.events import EventClass

TRAIN_SEED0, TEST_SEED0 = 1000, 5000
L2_GRID = (1e-3, 1e-2, 1e-1, 1.0)
SHORT = {c: "".join(w[0] for w in c.value.split("_")) for c in LABELS}  # e.g. cooling_degradation → cd


def _cv_l2(kind: str, train: Dataset, folds: int = 4) -> tuple[float, dict[float, float]]:
    """The L2 penalty with the best mean macro-F1 over run-grouped folds of the training set."""
    seeds = np.array(train.seeds)
    runs = np.unique(seeds)
    fold_of = {int(s): i % folds for i, s in enumerate(runs)}
    fold = np.array([fold_of[int(s)] for s in seeds])
    y = np.array(train.labels, dtype=object)
    out: dict[float, float] = {}
    for l2 in L2_GRID:
        f1s = []
        for f in range(folds):
            tr, va = fold != f, fold == f
            if not va.any() or not tr.any():
                continue
            model = make_classifier(kind, l2=l2).fit(train.features[tr], list(y[tr]))
            f1s.append(score(list(y[va]), model.predict(train.features[va])).macro_f1)
        out[l2] = float(np.mean(f1s)) if f1s else 0.0
    best = max(L2_GRID, key=lambda v: (out[v], -v))
    return best, out


def _bootstrap_gap(
    truth: Sequence[EventClass],
    a: Sequence[EventClass],
    b: Sequence[EventClass],
    seeds: Sequence[int],
    n_boot: int = 1000,
) -> tuple[float, float]:
    """2.5 and 97.5 percentiles of macro-F1(a) − macro-F1(b) over test sets resampled by run (seeded)."""
    rng = np.random.default_rng(0)
    runs = np.unique(seeds)
    rows = {int(r): np.flatnonzero(np.array(seeds) == r) for r in runs}
    gaps = []
    for _ in range(n_boot):
        idx = np.concatenate([rows[int(r)] for r in rng.choice(runs, runs.size)])
        t = [truth[i] for i in idx]
        gaps.append(score(t, [a[i] for i in idx]).macro_f1 - score(t, [b[i] for i in idx]).macro_f1)
    return float(np.percentile(gaps, 2.5)), float(np.percentile(gaps, 97.5))


def _table(name: str, s: Scores, lenient: float) -> None:
    print(f"\n{name}: n={s.n} accuracy={s.accuracy:.3f} lenient_accuracy={lenient:.3f} macro_F1={s.macro_f1:.3f}")
    print(f"  {'class':26s} {'prec':>6s} {'recall':>6s} {'F1':>6s} {'support':>7s} {'pred':>5s}")
    for c in s.per_class:
        if c.support or c.predicted:
            print(
                f"  {c.label.value:26s} {c.precision:6.3f} {c.recall:6.3f} {c.f1:6.3f} {c.support:7d} {c.predicted:5d}"
            )


def _confusion(name: str, s: Scores) -> None:
    used = [i for i in range(len(LABELS)) if s.confusion[i].sum() or s.confusion[:, i].sum()]
    legend = ", ".join(f"{SHORT[LABELS[i]]}={LABELS[i].value}" for i in used)
    print(f"\nconfusion ({name}; rows true, columns predicted; {legend})")
    print("       " + " ".join(f"{SHORT[LABELS[i]]:>4s}" for i in used))
    for i in used:
        print(f"  {SHORT[LABELS[i]]:>4s} " + " ".join(f"{int(s.confusion[i, j]):4d}" for j in used))


def _counts(name: str, d: Dataset) -> None:
    c = Counter(x.value for x in d.labels)
    print(
        f"{name}: {d.n_runs} runs, {len(d)} incidents ({d.n_ambiguous} ambiguous left out), "
        f"simulated in {d.wall_s:.1f} s"
    )
    print("  labels: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items())))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=40, help="training runs (seeds 1000, 1001, ...)")
    ap.add_argument("--test", type=int, default=20, help="held-apart test runs (seeds 5000, 5001, ...)")
    ap.add_argument("--duration-s", type=float, default=1500.0, help="simulated seconds per run (1 s steps)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    train = build_dataset(range(TRAIN_SEED0, TRAIN_SEED0 + args.train), args.duration_s)
    test = build_dataset(range(TEST_SEED0, TEST_SEED0 + args.test), args.duration_s)
    t_data = time.perf_counter() - t0
    _counts("train", train)
    _counts("test ", test)

    models: dict[str, IncidentClassifier] = {"rule_based": make_classifier("rule_based")}
    t1 = time.perf_counter()
    for kind in ("logistic", "logistic_stacked"):
        l2, cv = _cv_l2(kind, train)
        print(f"{kind}: CV macro-F1 by l2 " + ", ".join(f"{k:g}={v:.3f}" for k, v in cv.items()) + f" → l2={l2:g}")
        models[kind] = make_classifier(kind, l2=l2)
    for m in models.values():
        m.fit(train.features, list(train.labels))
    t_fit = time.perf_counter() - t1

    truth = list(test.labels)
    results = {}
    for name, m in models.items():
        t2 = time.perf_counter()
        pred = m.predict(test.features)
        dt = time.perf_counter() - t2
        s = score(truth, pred)
        results[name] = s
        _table(
            f"{name} (test, predict {1e6 * dt / max(1, len(truth)):.0f} us/incident)",
            s,
            lenient_accuracy(truth, pred, test.matched),
        )
    rule_raw = Counter(c.value for c, lab in zip(test.rule_classes, test.labels, strict=True) if to_label(c) != c)
    print(f"\n(rule classes scored as benign_phase_change: {dict(rule_raw)})")
    for name, s in results.items():
        _confusion(name, s)
    base = results["rule_based"]
    preds = {name: m.predict(test.features) for name, m in models.items()}
    named = np.array([c != to_label(c) for c in test.rule_classes])  # the rules said "unclassified"
    print(f"\nincidents the rules left unclassified: {int(named.sum())} of {len(truth)}")
    for name in ("logistic", "logistic_stacked"):
        s = results[name]
        print(f"\n{name} vs rule_based on held-apart runs: macro-F1 {s.macro_f1:.3f} vs {base.macro_f1:.3f}, "
              f"accuracy {s.accuracy:.3f} vs {base.accuracy:.3f}")  # fmt: skip
        for part, mask in (("rules named a class", ~named), ("rules said unclassified", named)):
            acc = [
                float(np.mean([preds[k][i] == truth[i] for i in np.flatnonzero(mask)])) for k in ("rule_based", name)
            ]
            print(f"  accuracy where {part}: {acc[1]:.3f} vs {acc[0]:.3f}")
        lo, hi = _bootstrap_gap(truth, preds[name], preds["rule_based"], test.seeds)
        print(f"  macro-F1 gain, 95 % bootstrap interval over test runs: [{lo:+.3f}, {hi:+.3f}]")
    print(f"\nwall: data {t_data:.1f} s, CV + fit {t_fit:.2f} s, total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
