#!/usr/bin/env bash
# Eighth session, device run 1 (merged main: issue 21's read allow-list and recorded-forward check, issue 22's typed
# verdict): issue 21's GPU checks, then the fixed-cost diagnostic. Output in $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log --oneline -1
  echo "cudal1 sources sha1: $(find cudal1 -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12)"; } > $OUT/env.txt 2>&1
timeout 200 python3 scripts/gpu_sandbox_check.py > $OUT/sandbox_check.txt 2>&1; echo "sandbox_check rc=$?" >> $OUT/rc.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/bench/test_harness_faults.py \
  tests/bench/test_containment.py -k "reads_outside or rewrite or killed or unmap or device_failure or harness" \
  > $OUT/gpu_tests.txt 2>&1; echo "gpu_tests rc=$?" >> $OUT/rc.txt
timeout 200 python3 docs/results/h200-2026-12-03-eighth/fixed_cost.py level1/1 level2/1 > $OUT/fixed_cost.jsonl 2> $OUT/fixed_cost.err
echo "fixed_cost rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt
