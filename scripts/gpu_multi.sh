#!/usr/bin/env bash
# Issue 4's multi-GPU evidence in one run on a host with 2 GPUs (figures in docs/benchmarks.md).
# Needs the wheelhouse (.whl, built by ../shared/device/wheelhouse) for DeepSpeed where it is missing.
# Usage, from the repository root: bash scripts/gpu_multi.sh OUTDIR
set -uo pipefail
out=${1:-gpu_multi_out}
mkdir -p "$out"
if [[ -d .whl ]] && ! python3 -c "import deepspeed" 2>/dev/null; then
  site=$(mktemp -d) && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
  export PYTHONPATH="$site"
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,memory.total --format=csv; nvidia-smi topo -m
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"; date -u; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 330 python3 benchmarks/multigpu.py sync --sizes 1.5b 7b 14b 32b --out "$out/sync.json" 2>&1 | grep -v -i "warn" | tee "$out/sync.log"
timeout 150 python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/multigpu.py zero3 --out "$out/zero3_2gpu.json" > "$out/zero3_2gpu.log" 2>&1
tail -2 "$out/zero3_2gpu.log"
timeout 120 python3 -m torch.distributed.run --nproc_per_node 1 benchmarks/multigpu.py zero3 --out "$out/zero3_1gpu.json" > "$out/zero3_1gpu.log" 2>&1
tail -2 "$out/zero3_1gpu.log"
python3 benchmarks/multigpu.py compare "$out/zero3_1gpu.json" "$out/zero3_2gpu.json" 2>&1 | tee "$out/compare.log"
