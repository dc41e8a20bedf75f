#!/usr/bin/env bash
# Issue 10 §2's weight sync by CUDA IPC, measured on one GPU (figures in docs/benchmarks.md):
# benchmarks/ipc_sync.py starts the learner (DeepSpeed) and a transformers engine as two Ray actors
# in one placement-group bundle (0.5 GPU each), checks the engine's logprobs after an SFT step and an
# IPC sync, then times the sync for random-weight 1.5B and 7B Qwen2 shapes.
# Needs the wheelhouse (WHL, default .whl, built by ../shared/device/wheelhouse) for Ray and DeepSpeed.
# Usage, from the repository root: bash scripts/gpu_ipc_sync.sh OUTDIR [WHL]
set -uo pipefail
out=${1:-ipc_sync_out}
whl=${2:-.whl}
mkdir -p "$out"
if [[ -d $whl ]] && ! python3 -c "import ray, deepspeed" 2>/dev/null; then
  site=$(mktemp -d) && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$whl"/*.whl
  export PYTHONPATH="$site"
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, transformers, deepspeed, ray; print(sys.version.split()[0], torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__, 'ray', ray.__version__)"
  nproc; free -g | head -2; date -u; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout "${RUN_TIMEOUT:-500}" python3 benchmarks/ipc_sync.py --out "$out/ipc_sync.json" --shapes ${SHAPES:-1.5B 7B} \
  > "$out/ipc_sync.log" 2>&1
echo "rc=$?"
grep -v -i -E "warn|^\s*$" "$out/ipc_sync.log" | grep -E '^\{|ipc sync ok|Error|error' | cut -c1-1500
nvidia-smi --query-gpu=memory.used --format=csv >> "$out/env.txt" 2>&1
