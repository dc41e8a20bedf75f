#!/usr/bin/env bash
# Session 9, call 2: the acceptance's repeat step on its own (call 1 ran out its time limit),
# the sandbox check, and eval-suite with two evaluations per device.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDAL1_CACHE=/tmp/c9/cache
r=$OUT/r; mkdir -p $r /tmp/c9
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; nproc; date -u
  echo "cudal1 sources sha1: $(find cudal1 -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12)"; } > $r/env.txt 2>&1
SEEDS="level1/1 level1/12 level1/17 level1/7 level2/1 level2/5"
t0=$(date +%s)
timeout 150 python3 scripts/gpu_prebuild.py $SEEDS > $r/prebuild.log 2>&1; echo "prebuild rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
timeout 230 python3 benchmarks/repeatability.py --backend cuda --tasks $SEEDS --repeats 5 --variants default \
  --cache $CUDAL1_CACHE --out $r/repeat.json > $r/repeat.log 2>&1; echo "repeat rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
timeout 60 python3 scripts/gpu_sandbox_check.py > $r/sandbox_check.txt 2>&1; echo "sandbox rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
timeout 100 python3 -m cudal1.cli eval-suite --backend cuda --per-device 2 --out $r/suite.jsonl > $r/suite.out 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 )) s" >> $r/times.txt
tar czf $OUT/r.tgz -C $OUT r
cat $r/times.txt; tail -3 $r/sandbox_check.txt; tail -5 $r/suite.out
python3 - $r/repeat.json <<'PY'
import json, statistics, sys
for e in json.load(open(sys.argv[1])):
    print(e["task"], e["ok"], "/", e["of"], "sp", e["speedups"], "spread", e["spread_speedup"], "ref", e["reference_ms"], "cand", e["candidate_ms"], "res", e["resolution_ms"])
PY
