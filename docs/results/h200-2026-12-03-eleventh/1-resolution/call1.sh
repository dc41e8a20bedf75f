#!/usr/bin/env bash
# Session 11, call 1: why the fast seeds' speedups spread (ninth session: level1/1 15-36x,
# level2/1 32-49x, both candidates below the calibration's resolution). Each seed is timed in one
# plain process (the yardstick), then evaluated three times under each of: default, the
# resolution from the timing pass (timing_resolution), and rounds of at least 100 / 240 ms of
# reference work (more calls per round trip, K, for the same jitter).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDAL1_CACHE=/tmp/c11/cache
r=$OUT/r; mkdir -p $r /tmp/c11
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; nproc; date -u
  echo "cudal1 sources sha1: $(find cudal1 -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12)"; } > $r/env.txt 2>&1
t0=$(date +%s)
SEEDS="level1/1 level2/1 level1/12 level1/7"
timeout 150 python3 scripts/gpu_prebuild.py $SEEDS > $r/prebuild.log 2>&1; echo "prebuild rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
timeout 420 python3 benchmarks/repeatability.py --backend cuda --tasks $SEEDS --repeats 3 \
  --variants default timing_resolution round100 round240 --inprocess \
  --cache $CUDAL1_CACHE --out $r/repeat.json --records $r/records.jsonl > $r/repeat.log 2>&1
echo "repeat rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
gzip -k $r/records.jsonl 2>/dev/null; mv $r/records.jsonl.gz $OUT/ 2>/dev/null; rm -f $r/records.jsonl
tar czf $OUT/r.tgz -C $OUT r
cat $r/times.txt
python3 - $r/repeat.json <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    ip = e.get("inprocess") or {}
    print(e["task"], e["variant"], e["ok"], "/", e["of"], "K", e["calls_per_round"], "sp", e["speedups"],
          "inproc", round(ip.get("ratios", {}).get("seed", float("nan")), 3), "res", e["resolution_ms"],
          "cand", e["candidate_ms"], "s", e["eval_seconds"])
PY
