"""Train the loop's advisory incident classifier and score it on held-apart runs; writes the packaged model.

Simulates seeded random fault scenarios (``twinloop.lab.fault_scenarios.random_scenario``) with the loop off,
keeps every incident's first report with the features the loop's :class:`~twinloop.ops.classify.advisory.Advisor`
computes from its samples, labels them from the injected ground truth (``twinloop.lab.classifier_dataset``), fits a
telemetry-only multinomial logistic regression on the *train* seeds and scores it, and the rules, on the *test*
seeds. The scenarios draw their faults from ``ADVISORY_FAULT_KINDS``: the twin's faults plus operator power caps.
With ``--write`` the model goes to ``src/twinloop/ops/classify/models/advisory.json``. No packaged scenario
is in the training data.

    PYTHONPATH=src .venv/bin/python benchmarks/train_advisory.py --train 24 --test 12 --write
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from twinloop.lab.classifier_dataset import build_dataset
from twinloop.lab.classifier_metrics import score
from twinloop.lab.fault_scenarios import ADVISORY_FAULT_KINDS
from twinloop.ops.classify.advisory import AdvisoryModel
from twinloop.ops.classify.base import make_classifier
from twinloop.ops.classify.learned import LogisticClassifier

TRAIN_SEED0, TEST_SEED0 = 1000, 5000
MODEL = Path(__file__).resolve().parents[1] / "src" / "twinloop" / "ops" / "classify" / "models" / "advisory.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=24, help="training runs (seeds 1000, 1001, ...)")
    ap.add_argument("--test", type=int, default=12, help="held-apart test runs (seeds 5000, 5001, ...)")
    ap.add_argument("--duration-s", type=float, default=1500.0, help="simulated seconds per run")
    ap.add_argument("--l2", type=float, default=0.01, help="L2 penalty (classifier_compare's CV choice)")
    ap.add_argument("--write", action="store_true", help="write the packaged model")
    args = ap.parse_args()
    t0 = time.perf_counter()
    train_seeds = list(range(TRAIN_SEED0, TRAIN_SEED0 + args.train))
    kinds = ADVISORY_FAULT_KINDS
    train = build_dataset(train_seeds, args.duration_s, from_samples=True, kinds=kinds)
    test = build_dataset(range(TEST_SEED0, TEST_SEED0 + args.test), args.duration_s, from_samples=True, kinds=kinds)
    print(f"data: {time.perf_counter() - t0:.0f} s; train {len(train)} incidents, test {len(test)}")
    print("train labels:", dict(Counter(c.value for c in train.labels)))
    clf = make_classifier("logistic", l2=args.l2)
    assert isinstance(clf, LogisticClassifier)
    clf.fit(train.features, list(train.labels))
    model = AdvisoryModel.from_classifier(
        clf,
        {
            "data": "twin random fault scenarios (twinloop.lab.fault_scenarios.random_scenario), loop off, "
            "fault kinds ADVISORY_FAULT_KINDS (with operator power caps)",
            "seeds": f"{train_seeds[0]}..{train_seeds[-1]}",
            "duration_s": args.duration_s,
            "incidents": len(train),
            "l2": args.l2,
            "features": "telemetry only (the rule class is not an input)",
            "command": "benchmarks/train_advisory.py " + f"--train {args.train} --duration-s {args.duration_s:g}",
        },
    )
    truth = list(test.labels)
    adv = [p for p in clf.predict(test.features)]
    rules = list(make_classifier("rule_based").predict(test.features))
    for name, pred in (("rules", rules), ("advisory", adv)):
        s = score(truth, pred)
        print(f"{name:9s} held-out: n={s.n} accuracy={s.accuracy:.3f} macro_F1={s.macro_f1:.3f}")
    disagree = [i for i in range(len(truth)) if adv[i] != rules[i]]
    right = Counter(
        "advisory" if adv[i] == truth[i] else "rules" if rules[i] == truth[i] else "neither" for i in disagree
    )
    print(f"held-out disagreements: {len(disagree)} of {len(truth)}; right one: {dict(right)}")
    if args.write:
        MODEL.parent.mkdir(parents=True, exist_ok=True)
        MODEL.write_text(model.to_json() + "\n")
        print(f"wrote {MODEL}")


if __name__ == "__main__":
    main()
