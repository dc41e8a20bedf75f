#!/usr/bin/env bash
# Session 11, call 3: the two KernelBench tasks whose reference-as-candidate ran out of memory in
# call 2 (the wide trials' conditioning check in float64 on 6 GiB outputs), after the chunked check.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDAL1_CACHE=/tmp/c13/cache
timeout 140 python3 benchmarks/self_speedup.py --backend cuda --kernelbench .kb/KernelBench --tasks level1/19 level1/23 \
  --repeats 1 --band 0.98 1.02 --out $OUT/self.json > $OUT/self.log 2>&1
echo "self rc=$?" >> $OUT/self.log
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader >> $OUT/self.log
cat $OUT/self.log | tail -6
python3 -c "
import json
for e in json.load(open('$OUT/self.json')): print(e['task'], e['statuses'], e['speedups'], e.get('reference_ms'))
" 2>&1 | tail -3
