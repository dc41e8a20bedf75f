#!/usr/bin/env bash
# Eighth session, device run 2: the acceptance run on main with the compiler-dir fix of the read allow-list, the host's
# end event before the synchronize, and inprocess on "cuda"; then the fixed-cost diagnostic and issue 21's sandbox
# check, both on the acceptance run's build cache. Output in $OUT (acceptance reports tarred).
set -u
export PYTHONUNBUFFERED=1 CUDAL1_ACCEPTANCE_CACHE=/tmp/acc-cache
env | grep -E '^(CC|CXX|CUDAHOSTCXX|NVCC_CCBIN|CUDA_HOME|PATH)=' > $OUT/compiler_env.txt
timeout 430 bash scripts/gpu_acceptance.sh .kb/KernelBench $OUT/acceptance > $OUT/acceptance.out 2>&1
echo "acceptance rc=$?" >> $OUT/rc.txt
export PYTHONPATH=$PWD CUDAL1_CACHE=/tmp/acc-cache/cache
timeout 90 python3 docs/results/h200-2026-12-03-eighth/fixed_cost.py level1/1 level2/1 > $OUT/fixed_cost.jsonl 2> $OUT/fixed_cost.err
echo "fixed_cost rc=$?" >> $OUT/rc.txt
timeout 75 python3 scripts/gpu_sandbox_check.py > $OUT/sandbox_check.txt 2>&1; echo "sandbox_check rc=$?" >> $OUT/rc.txt
tar czf $OUT/acceptance.tgz -C $OUT acceptance && rm -rf $OUT/acceptance
cat $OUT/rc.txt; cat $OUT/acceptance.out | grep -E "^(PASS|FAIL)"
