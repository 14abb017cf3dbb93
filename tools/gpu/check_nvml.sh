#!/usr/bin/env bash
# Second device check (about 5 minutes): run from the repo root with OUT set and the wheels in .whl/ (README.md).
# 1. NVML vs nvidia-smi: `twinloop ingest nvml` at 10 Hz and nvidia-smi's own CSV at 100 ms for 60 s, side by side,
#    while 2. the linear-layer GEMMs of the published FP8 training cells run as CUDA graphs (the load);
# 3. an operator's power cap (nvidia-smi -pl) on a training-like step with `twinloop watch nvml` watching;
# 4. the NVML tests of the suite on the real GPU.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
tl() { python3 -m twinloop.cli.main "$@"; }
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
tl ingest nvml --period 0.1 --duration 60 --db /tmp/nvml.duckdb --json > "$OUT/ingest_nvml.json" 2>&1 &
ip=$!
timeout 61 nvidia-smi --query-gpu=timestamp,index,uuid,name,power.draw,power.limit,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,clocks_event_reasons.active,utilization.gpu,utilization.memory,memory.used,memory.free --format=csv -lms 100 > /tmp/smi.csv &
python3 tools/gpu/gemm_graphs.py "$OUT" train > /tmp/gemm.log 2>&1 || tail -5 /tmp/gemm.log
wait $ip; echo "ingest rc=$?"; sleep 2
tl watch nvml --period 1 --duration 165 --db /tmp/watch.duckdb --json > "$OUT/watch_cap.json" 2> /tmp/watch.err &
wp=$!
sleep 3
python3 tools/gpu/operator_cap.py "$OUT" 400 40 60 50 || echo "operator_cap failed: $?"
wait $wp; echo "watch rc=$?"; tail -3 /tmp/watch.err
nvidia-smi --query-gpu=power.limit,power.default_limit --format=csv
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/telemetry/test_telemetry_nvml.py 2>&1 | tail -5
python3 - <<'PY'
import duckdb
for f in ("/tmp/nvml.duckdb", "/tmp/watch.duckdb"):
    c = duckdb.connect(f); c.execute("CHECKPOINT"); c.close()
PY
cp /tmp/nvml.duckdb /tmp/watch.duckdb /tmp/smi.csv "$OUT/"
ls -la "$OUT"
