"""Incidents of one packaged scenario and seed by event class, loop off and on (what the sweep's count is made of).

    PYTHONPATH=src python benchmarks/incident_classes.py power-events 0

Run it on two trees (``PYTHONPATH=<tree>/src``) to see which classes a change moved; each pass is one simulated
hour (~30 s here).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

import twinloop
from twinloop.closedloop.passes import run_pass
from twinloop.twin.scenario import scenario_from_dict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", help="a packaged scenario: default, hot-afternoon, power-events, cooling-plant")
    parser.add_argument("seed", type=int)
    args = parser.parse_args()
    path = Path(twinloop.__file__).parent / "scenarios" / f"{args.scenario}.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["seed"] = args.seed
    spec = scenario_from_dict(raw, str(path), str(path.parent))
    for loop_on in (False, True):
        seen: dict[int, str] = {}

        def on_incidents(_twin: Any, _result: Any, updates: Any, seen: dict[int, str] = seen) -> None:
            for incident in updates:
                seen.setdefault(incident.incident_id, str(incident.event_class))

        run_pass(spec, loop_on, on_incidents=on_incidents)
        classes = ", ".join(f"{k} {v}" for k, v in sorted(Counter(seen.values()).items()))
        print(f"loop {'on' if loop_on else 'off'}: {len(seen)} incidents: {classes}")


if __name__ == "__main__":
    main()
