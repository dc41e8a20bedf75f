#!/usr/bin/env bash
# Where the two-process evaluator's time goes on a CUDA machine: one seed's build several ways
# (scripts/gpu_build_probe.py), then every builtin CUDA seed of levels 1-2 cold and warm with the
# judge's phase times and the ninja logs' compile times (benchmarks/eval_throughput.py).
# Usage, from the repository root: bash scripts/gpu_profile.sh OUTDIR
set -uo pipefail
out=${1:-gpu_out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"
  echo "cores: $(nproc)"; date -u; git log --oneline -1; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
python3 scripts/gpu_build_probe.py level1/10 2>&1 | tee "$out/build_probe.log"
python3 benchmarks/eval_throughput.py --backend cuda --levels 1 2 --copies 1 --repeats 0 --build-jobs 8 \
  --out "$out/throughput.json" --results-dir "$out" 2>&1 | tee "$out/throughput.log"
