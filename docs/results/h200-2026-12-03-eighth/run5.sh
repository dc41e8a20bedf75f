#!/usr/bin/env bash
# Eighth session, last device run (about 6 minutes of device time were left): the clock and garbage-collector
# experiment (clock_experiment.py, four trees/settings interleaved), then the GPU guard tests and issue 21's sandbox
# check on the merged main. Output in $OUT.
set -u
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; date -u; git log --oneline -1
  echo "cudal1 sources sha1: $(find cudal1 -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12)"; } > $OUT/env.txt 2>&1
REPS=2 timeout 140 python3 docs/results/h200-2026-12-03-eighth/clock_experiment.py > $OUT/clock.jsonl 2> $OUT/clock.err
echo "clock rc=$?" >> $OUT/rc.txt
export PYTHONPATH=$PWD
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/bench/test_gpu_guards.py > $OUT/guards.txt 2>&1; echo "guards rc=$?" >> $OUT/rc.txt
timeout 75 python3 scripts/gpu_sandbox_check.py > $OUT/sandbox_check.txt 2>&1; echo "sandbox_check rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt; tail -2 $OUT/guards.txt
