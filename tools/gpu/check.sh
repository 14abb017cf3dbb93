#!/usr/bin/env bash
# One device check on a lent NVIDIA GPU (about 7 minutes): run from the repo root with OUT set and the wheels of
# twinloop's missing dependencies in .whl/ (see tools/gpu/README.md). Writes eight files under $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
tl() { python3 -m twinloop.cli.main "$@"; }
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
tl probe --json > "$OUT/probe.json" 2>/dev/null || echo "probe failed: $?"
# The loop watches the real GPU through NVML for the whole check, observe mode: it must stay quiet on a healthy GPU.
tl watch nvml --period 1 --duration "${WATCH_S:-400}" --db /tmp/watch.duckdb --json > "$OUT/watch.json" &
wp=$!
python3 tools/gpu/cap_check.py "$OUT" 450 30 330 &
cp=$!
python3 tools/gpu/shapes.py "$OUT"
wait $cp; wait $wp; echo "watch rc=$?"
python3 -c "import duckdb; c = duckdb.connect('/tmp/watch.duckdb'); c.execute('CHECKPOINT'); c.close()" && cp /tmp/watch.duckdb "$OUT/"
ls -la "$OUT"
