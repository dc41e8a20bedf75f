#!/usr/bin/env bash
# Issue 25's engine restart on one GPU (figures in docs/cluster.md): benchmarks/engine_restart.py
# starts the learner (DeepSpeed) and a transformers engine as two Ray actors in one placement-group
# bundle (0.5 GPU each), kills the engine's process with SIGKILL while it streams its groups, and
# logs the engine-vs-learner logprob gap of the replacement before and after the sync that brings
# it to the learner's version (ipc, then object_store), then after the next regular sync.
# Needs the wheelhouse (WHL, default .whl, built by ../shared/device/wheelhouse) for Ray and DeepSpeed.
# Usage, from the repository root: bash scripts/gpu_engine_restart.sh OUTDIR [WHL]   (MODEL=1.5B for a bigger policy)
set -uo pipefail
out=${1:-engine_restart_out}
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
timeout "${RUN_TIMEOUT:-550}" python3 benchmarks/engine_restart.py --out "$out/engine_restart.json" \
  --model "${MODEL:-small}" > "$out/engine_restart.log" 2>&1
echo "rc=$?"
grep -v -i -E "warn|^\s*$" "$out/engine_restart.log" | grep -E '^\{|engine restart|Error|error' | cut -c1-2000
