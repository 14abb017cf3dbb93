#!/usr/bin/env bash
# Fourth device check (about 6 minutes): a real training job reporting its steps to `twinloop watch nvml`.
# Run from the repo root with OUT set and the wheels in .whl/ (README.md).
# tools/gpu/train_job.py trains a ~0.5 B-parameter transformer for 300 s and meets, at known times, a co-tenant's GEMMs
# (70-115 s), a 45 s host-side hang (150 s), a synchronous checkpoint (225 s) and one flipped bit in its logits
# (265 s). Three watchers read the same GPU through NVML meanwhile, in observe mode with no actuator:
# at 1 s and at 5 s with the job's heartbeats (--jobs, --job-heartbeats), and at 1 s without them (as before).
# To try it without a GPU: SRC=nvml:REC.json (the fake NVML's recording) TRAIN=--small DUR=75 SKIP_WHEELS=1, with
# torch and twinloop's dependencies importable.
set -u
SRC=${SRC:-nvml}; TRAIN=${TRAIN:-}; DUR=${DUR:-340}
[ -n "${SKIP_WHEELS:-}" ] ||
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
tl() { python3 -m twinloop.cli.main "$@"; }
W=/tmp/jp; mkdir -p $W/beats
nvidia-smi -q > $W/nvidia-smi-q.txt 2>&1
printf 'h200train: [%s]\n' "$(hostname)" > $W/jobs.yaml
job=(--jobs $W/jobs.yaml --job-heartbeats $W/beats)
tl watch $SRC --period 1 --duration $DUR --db $W/w1.duckdb --run w1 "${job[@]}" --json > $W/watch_1s.json 2> $W/w1.err &
p1=$!
tl watch $SRC --period 5 --duration $DUR --db $W/w5.duckdb --run w5 "${job[@]}" --json > $W/watch_5s.json 2> $W/w5.err &
p5=$!
tl watch $SRC --period 1 --duration $DUR --db $W/w0.duckdb --run w0 --jobs $W/jobs.yaml --json > $W/watch_none.json 2> $W/w0.err &
p0=$!
sleep 4
python3 tools/gpu/train_job.py $W $W/beats h200train $TRAIN > $W/train.log 2>&1; echo "train rc=$?"; tail -3 $W/train.log
wait $p1; echo "watch 1s rc=$?"; wait $p5; echo "watch 5s rc=$?"; wait $p0; echo "watch none rc=$?"
tail -n 2 $W/w1.err $W/w5.err $W/w0.err
for f in w1 w5 w0; do
  python3 -c "import duckdb; c = duckdb.connect('$W/$f.duckdb'); c.execute('CHECKPOINT'); c.close()"
done
python3 - <<'PY'
import json
for name in ("watch_1s", "watch_5s", "watch_none"):
    d = json.load(open(f"/tmp/jp/{name}.json"))
    t0 = d["first_ts"]
    print(name, d["samples"], "samples", d["counts"]["incidents"], "incidents")
    for i in d["incidents"]:
        print("  ", i["class"], i["severity"], i["root"], round(i["opened_ts"] - t0, 1), round(i["last_ts"] - t0, 1))
PY
rm -f /tmp/ckpt.pt
tar -czf "$OUT/job_progress.tar.gz" -C $W --exclude='*.wal' .
cp $W/watch_1s.json $W/watch_5s.json $W/watch_none.json $W/train_job.json "$OUT/"
ls -la "$OUT"
