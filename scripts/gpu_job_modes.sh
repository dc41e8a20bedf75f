#!/usr/bin/env bash
# The whole training job on one GPU with the learner and the rollout engine sharing it
# (rollout.weight_sync=ipc), once in pipeline.mode=sync and once in async; the run's step-time
# breakdown per step lands in each run's log (figures in docs/benchmarks.md). The transformers engine
# (no vLLM on the lent machine), MLflow off (not on its image), the CPU benchmark pool.
# Needs the wheelhouse (WHL, built by ../shared/device/wheelhouse) for Ray, Hydra and DeepSpeed.
# Usage, from the repository root: bash scripts/gpu_job_modes.sh OUTDIR [WHL] [STEPS]
set -uo pipefail
out=${1:-job_modes_out}
whl=${2:-.whl}
steps=${3:-4}
mkdir -p "$out"
if [[ -d $whl ]] && ! python3 -c "import ray, deepspeed, hydra" 2>/dev/null; then
  site=$(mktemp -d) && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$whl"/*.whl
  export PYTHONPATH="$site"
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; date -u; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
for mode in sync async; do
  start=$(date +%s)
  timeout "${RUN_TIMEOUT:-240}" python3 jobs/train.py --config-name smoke tracking=none run_dir="$out/run_$mode" \
    rollout.weight_sync=ipc learner.num_gpus=0.5 rollout.num_gpus=0.5 pipeline.mode=$mode \
    stage.contrastive_rl.steps="$steps" stage.contrastive_rl.group_size=4 bench.pools.cpu.num_actors=4 \
    > "$out/train_$mode.log" 2>&1
  echo "mode=$mode rc=$? wall_s=$(( $(date +%s) - start ))"
  grep -E "stage|step|ipc|sync|breakdown|Error|error" "$out/train_$mode.log" | grep -v -i warn | tail -25 | cut -c1-400
  cp "$out/run_$mode/state.json" "$out/state_$mode.json" 2>/dev/null
  ls "$out/run_$mode" 2>/dev/null | head -20
done
