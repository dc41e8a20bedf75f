#!/usr/bin/env bash
# The in-process evaluator (a checkout of the commit before the two-process one, in OLD) against
# the current one, in one run on a CUDA machine: the same benchmark scripts (this checkout's)
# against each evaluator. Repeatability: 5 evaluations each of a 0.1, a 0.9 and a 3 ms candidate,
# sharing one build cache; throughput: every level-1 CUDA seed, cold then warm cache. First, the
# GPU guard tests on the current evaluator.
# Usage, from the repository root: bash scripts/gpu_compare.sh OLD OUTDIR
set -uo pipefail
old=$1; out=${2:-gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; date -u; git log --oneline -1; } > "$out/env.txt" 2>&1
CUDAL1_CACHE=/tmp/cudal1-guards PYTHONPATH=$PWD python3 scripts/gpu_prebuild.py > "$out/prebuild.log" 2>&1 &
PYTHONPATH=$PWD python3 - <<'PY'
from concurrent.futures import ThreadPoolExecutor
from cudal1.bench.evaluator import prebuild
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks, seed_solutions
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
with ThreadPoolExecutor(3) as pool:
    print(list(pool.map(lambda t: prebuild(find_task(tasks, t), seeds[t].read_text(), "cuda",
                                           EvalSettings.for_backend("cuda", cache_dir="/tmp/rep-cache")),
                        ["level1/1", "level1/7", "level2/5"])))
PY
wait
CUDAL1_CACHE=/tmp/cudal1-guards PYTHONPATH=$PWD python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu \
  tests/bench/test_gpu_guards.py 2>&1 | tee "$out/gpu_guards.log" | tail -n 5
for design in new old; do
  path=$PWD; [[ $design == old ]] && path=$old
  PYTHONPATH=$path python3 benchmarks/repeatability.py --backend cuda --tasks level1/1 level1/7 level2/5 --repeats 5 \
    --variants default --cache /tmp/rep-cache --out "$out/rep_$design.json" 2>&1 | tail -n 6
done
for design in new old; do
  path=$PWD; [[ $design == old ]] && path=$old
  PYTHONPATH=$path python3 benchmarks/eval_throughput.py --backend cuda --levels 1 --copies 1 --repeats 0 \
    --out "$out/throughput_$design.json" > "/tmp/throughput_$design.log" 2>&1
  grep -E "cold cache|warm cache" "/tmp/throughput_$design.log"
done
