#!/usr/bin/env bash
# The two-process evaluator's GPU evidence in one run on a CUDA machine (torch, psutil, tqdm only):
# the GPU guard tests, every builtin CUDA seed of levels 1-2 from a cold then a warm build cache,
# five evaluations of a 0.1, a 0.9 and a 3 ms candidate, and four tasks' references as their own
# candidates. Figures go to docs/benchmarks.md.
# Usage, from the repository root: bash scripts/gpu_judge.sh OUTDIR
set -uo pipefail
out=${1:-gpu_out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"
  echo "cores: $(nproc)"; date -u; git log --oneline -1; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
CUDAL1_CACHE=/tmp/cudal1-guards python3 scripts/gpu_prebuild.py > "$out/prebuild.log" 2>&1 &
prebuild=$!
python3 benchmarks/eval_throughput.py --backend cuda --levels 1 2 --copies 1 --repeats 5 \
  --repeat-task level1/1 level1/7 level2/5 \
  --out "$out/throughput.json" --results-dir "$out" 2>&1 | tee "$out/throughput.log"
wait $prebuild; cat "$out/prebuild.log"
CUDAL1_CACHE=/tmp/cudal1-guards python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu \
  tests/bench/test_gpu_guards.py 2>&1 | tee "$out/gpu_guards.log"
# The reference as its own candidate: an unbiased evaluator says 1.000x.
timeout 200 python3 benchmarks/self_speedup.py --backend cuda --tasks level1/1 level1/7 level2/5 level1/9 --repeats 3 \
  --out "$out/self_speedup.json" 2>&1 | tee "$out/self_speedup.log"
