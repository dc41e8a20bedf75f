#!/usr/bin/env bash
# Session 11, call 2, command 1: the acceptance run on merged main (CUDA's resolution from the
# timing pass; per-call input storages; wide correctness trials).
set -u
export CUDAL1_ACCEPTANCE_CACHE=/tmp/acc11; mkdir -p $CUDAL1_ACCEPTANCE_CACHE
bash scripts/gpu_acceptance.sh .kb/KernelBench $OUT/acc > $OUT/acceptance.out 2>&1
echo "acceptance rc=$?" >> $OUT/acceptance.out
tar czf $OUT/acc.tgz -C $OUT acc
tail -16 $OUT/acceptance.out
