"""`twinloop detect` on one long series: time-chunked vs step-by-step, same detections (issue 19).

A 1 Hz series of ``--rows`` samples (Gaussian noise around 50 with an 8-sigma level shift for 1,000 samples)
runs through the default detectors (EWMA z-score and CUSUM) twice through the library's ``detect_blocks``:
chunked (the default) and one step at a time. Prints CPU seconds, samples/s and whether the detections match.

    python benchmarks/detect_offline.py [--rows 200000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from twinloop.ops.detect.offline import DEFAULT_DETECTORS, SeriesBlock, detect_blocks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    n = ap.parse_args().rows
    rng = np.random.default_rng(0)
    values = 50.0 + rng.normal(0.0, 1.0, (n, 1))
    values[int(n * 0.6) : int(n * 0.6) + 1000] += 8.0
    block = SeriesBlock("", 1.7e9 + np.arange(n, dtype=np.float64), ("temp",), values)
    found = {}
    for chunked in (True, False):
        t0 = time.process_time()
        dets = detect_blocks([block], DEFAULT_DETECTORS, chunked=chunked)
        cpu_s = time.process_time() - t0
        found[chunked] = [(d.ts, d.entity, d.detector) for d in dets]
        mode = "chunked" if chunked else "step by step"
        print(f"{mode:>12}: {cpu_s:7.2f} s CPU, {n / cpu_s:10,.0f} samples/s, {len(dets)} detections")
    print("same detections:", found[True] == found[False])


if __name__ == "__main__":
    main()
