#!/usr/bin/env bash
# Session 11, call 2, command 2 (same machine, warm caches from command 1): every builtin CUDA seed
# through eval-suite (the wide trials on honest CUDA kernels), and the in-process yardstick of the
# two fast seeds with the cache flushed before each call and without.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDAL1_CACHE=/tmp/acc11/cache
r=$OUT/more; mkdir -p $r
timeout 70 python3 - > $r/inprocess.txt 2>&1 <<'PY'
import json
from cudal1.bench.inprocess import measure_isolated
from cudal1.tasks import find_task, load_tasks, seed_solutions
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
for tid in ("level1/1", "level2/1"):
    for flush in (True, False):
        t = measure_isolated(find_task(tasks, tid), {"seed": seeds[tid].read_text()}, device="cuda", flush_l2=flush)
        print(json.dumps({"task": tid, "flush_l2": flush, "reference_ms": t.reference_ms, "seed_ms": t.candidates_ms["seed"],
                          "ratio": t.ratios["seed"], "spreads": t.spreads}), flush=True)
PY
echo "inprocess rc=$?" >> $r/rc.txt
timeout 300 python3 -m cudal1.cli eval-suite --backend cuda --per-device 1 --out $r/suite.jsonl > $r/suite.out 2>&1
echo "suite rc=$?" >> $r/rc.txt
cat $r/rc.txt $r/inprocess.txt; tail -8 $r/suite.out
python3 - $r/suite.jsonl <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    r = d.get("result", d)
    print(r.get("task_id"), r.get("status"), r.get("speedup"), "skipped:", r.get("skipped_trials"), (r.get("message") or "")[:100])
PY
