#!/usr/bin/env bash
# Third device check (about 2 minutes): run from the repo root with OUT set and the wheels in .whl/ (README.md).
# 1. The NVML source's framebuffer reading (v2 query) against nvidia-smi's memory.used/free/reserved, idle.
# 2. A cap already in place when the watcher starts: nvidia-smi -pl 400 on a training-like step, then
#    `twinloop watch nvml` for 60 s, then the limit restored (operator_cap.py with no uncapped lead-in).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
tl() { python3 -m twinloop.cli.main "$@"; }
nvidia-smi --query-gpu=timestamp,memory.total,memory.used,memory.free,memory.reserved --format=csv > "$OUT/smi_memory.csv"
tl ingest nvml --period 0.5 --duration 5 --db /tmp/mem.duckdb --json > "$OUT/ingest_memory.json" 2>&1
nvidia-smi --query-gpu=timestamp,memory.total,memory.used,memory.free,memory.reserved --format=csv,noheader >> "$OUT/smi_memory.csv"
tl query --db /tmp/mem.duckdb --field DCGM_FI_DEV_FB_USED --aggregate --json > "$OUT/query_fb_used.json" 2>&1
tl query --db /tmp/mem.duckdb --field DCGM_FI_DEV_FB_FREE --aggregate --json > "$OUT/query_fb_free.json" 2>&1
mkdir -p "$OUT/preset"
python3 tools/gpu/operator_cap.py "$OUT/preset" 400 0 75 10 &
cp=$!
sleep 10
tl watch nvml --period 1 --duration 60 --db /tmp/watch2.duckdb --json > "$OUT/watch_preset.json" 2> /tmp/watch2.err
echo "watch rc=$?"; tail -3 /tmp/watch2.err
wait $cp; echo "operator_cap rc=$?"
nvidia-smi --query-gpu=power.limit,power.default_limit --format=csv
python3 -c "import duckdb; c = duckdb.connect('/tmp/watch2.duckdb'); c.execute('CHECKPOINT'); c.close()" && cp /tmp/watch2.duckdb "$OUT/"
ls -la "$OUT" "$OUT/preset"
