#!/usr/bin/env bash
# How the evaluator's candidate clock behaves on a CUDA machine (torch, psutil, tqdm only): four
# tasks' references as their own candidates (an unbiased evaluator says 1.000x) and five
# evaluations each of a 0.1, a 0.9 and a 3 ms seed, for overhead_quantile 0.5 and 0.9; then the
# GPU guard tests. Usage, from the repository root: bash scripts/gpu_timing.sh OUTDIR
set -uo pipefail
o=${1:-gpu_timing}; mkdir -p $o; export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log --oneline -1 > $o/env.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $o/env.txt
CUDAL1_CACHE=/tmp/cudal1-guards python3 scripts/gpu_prebuild.py > $o/prebuild.log 2>&1 &
python3 - >> $o/prebuild.log 2>&1 <<'PY' &
from concurrent.futures import ThreadPoolExecutor
from cudal1.bench.evaluator import prebuild
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks, seed_solutions
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
with ThreadPoolExecutor(3) as pool:
    print(list(pool.map(lambda t: prebuild(find_task(tasks, t), seeds[t].read_text(), "cuda", EvalSettings.for_backend("cuda", cache_dir="/tmp/rep-cache")), ["level1/1", "level1/7", "level2/5"])))
PY
for q in 0.5 0.9; do timeout 150 python3 benchmarks/self_speedup.py --backend cuda --tasks level1/1 level1/7 level2/5 level1/9 --repeats 3 --overhead-quantile $q 2>&1 | sed "s/^/q$q /" >> $o/self.log; done
wait
timeout 250 python3 benchmarks/repeatability.py --backend cuda --tasks level1/1 level1/7 level2/5 --repeats 5 --variants default overhead_q50 --cache /tmp/rep-cache > $o/repeat.log 2>&1
CUDAL1_CACHE=/tmp/cudal1-guards timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/bench/test_gpu_guards.py > $o/gpu_guards.log 2>&1
tail -3 $o/gpu_guards.log; grep -h '"median"' $o/self.log | cut -c1-200; tail -8 $o/repeat.log | cut -c1-300
