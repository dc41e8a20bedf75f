#!/usr/bin/env bash
# Issue 10's learner memory plan, measured on one GPU (figures in docs/benchmarks.md):
# benchmarks/learner_memory.py for a 1.5B policy (without and with the KL reference engine) and a
# 7B one, ZeRO-3 bf16 with activation checkpointing, one 2,048 + 8,192-token sequence per micro-batch.
# Needs the wheelhouse (.whl, built by ../shared/device/wheelhouse) where DeepSpeed is missing.
# Usage, from the repository root: bash scripts/gpu_learner_memory.sh OUTDIR [1.5B|7B]
# (one size per call keeps each call under ten minutes)
set -uo pipefail
out=${1:-learner_memory_out}
size=${2:-1.5B}
mkdir -p "$out"
if [[ -d .whl ]] && ! python3 -c "import deepspeed" 2>/dev/null; then
  site=$(mktemp -d) && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
  export PYTHONPATH="$site"
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,memory.total --format=csv
  python3 -c "import sys, torch, transformers, deepspeed; print(sys.version.split()[0], torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__)"; date -u; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
python3 benchmarks/memory_plan.py > "$out/plan.txt" 2>&1
run() {  # name, arguments
  local name=$1; shift
  timeout "${RUN_TIMEOUT:-540}" python3 benchmarks/learner_memory.py "$@" > "$out/$name.json" 2> "$out/$name.log"
  echo "$name rc=$? $(cat "$out/$name.json")"; tail -3 "$out/$name.log" | grep -i -E "error|memory" || true
}
if [[ $size == 1.5B ]]; then
  run m1_5b --shape 1.5B
  run m1_5b_kl --shape 1.5B --kl-beta 0.05
else  # the plan: 7B does not fit one H200 without optimizer offload, and fits with it
  run m7b --shape 7B --steps 1
  run m7b_offload --shape 7B --steps 1 --offload-optimizer
fi
