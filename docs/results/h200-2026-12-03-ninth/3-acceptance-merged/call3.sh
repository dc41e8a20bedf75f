#!/usr/bin/env bash
# Session 9, call 3: the acceptance run on merged main (issue 21's red-team changes to judge.py,
# worker.py, readers.py, evaluator.py), then an A/B of the calibration's length on the two fast seeds.
set -u
export CUDAL1_ACCEPTANCE_CACHE=/tmp/acc9; mkdir -p $CUDAL1_ACCEPTANCE_CACHE
bash scripts/gpu_acceptance.sh .kb/KernelBench $OUT/acc > $OUT/acceptance.out 2>&1
echo "acceptance rc=$?" >> $OUT/acceptance.out
export PYTHONPATH=$PWD CUDAL1_CACHE=$CUDAL1_ACCEPTANCE_CACHE/cache
timeout 95 python3 benchmarks/repeatability.py --backend cuda --tasks level1/1 level2/1 --repeats 3 \
  --variants default calibration_x3 --cache $CUDAL1_CACHE --out $OUT/acc/ab.json --records $OUT/acc/ab_records.jsonl > $OUT/acc/ab.log 2>&1
echo "ab rc=$?" >> $OUT/acceptance.out
tar czf $OUT/acc.tgz -C $OUT acc
tail -14 $OUT/acceptance.out
python3 -c "
import json
for e in json.load(open('$OUT/acc/ab.json')): print(e['task'], e['variant'], e['speedups'], 'res', e['resolution_ms'])
"
