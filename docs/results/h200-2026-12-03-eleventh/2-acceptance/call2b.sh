#!/usr/bin/env bash
# Session 11, call 2, command 2 (same machine, warm caches from command 1): the A/B of the
# resolution's source on four seeds, three evaluations each, beside the in-process yardstick with
# the cache flushed before each call and without.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDAL1_CACHE=/tmp/acc11/cache
r=$OUT/ab; mkdir -p $r
timeout 300 python3 benchmarks/repeatability.py --backend cuda --tasks level1/1 level2/1 level1/17 level2/5 --repeats 3 \
  --variants default calibration_resolution --inprocess \
  --cache $CUDAL1_CACHE --out $r/ab.json --records $r/ab_records.jsonl > $r/ab.log 2>&1
echo "ab rc=$?" | tee $r/rc.txt
gzip $r/ab_records.jsonl
python3 - $r/ab.json <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    ip = e.get("inprocess") or {}
    w = ip.get("warm_cache") or {}
    print(e["task"], e["variant"], e["ok"], "/", e["of"], "K", e["calls_per_round"], "sp", e["speedups"],
          "inproc", round(ip.get("ratios", {}).get("seed", float("nan")), 3),
          "warm", round(w.get("ratios", {}).get("seed", float("nan")), 3),
          "cand", e["candidate_ms"], "inproc cand", round(ip.get("candidates_ms", {}).get("seed", 0), 4),
          round(w.get("candidates_ms", {}).get("seed", 0), 4), "res", e["resolution_ms"])
PY
