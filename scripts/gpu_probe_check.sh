#!/usr/bin/env bash
# GPU acceptance of issue 20's degenerate-task part, in one run on a CUDA machine:
#   1. the degenerate-task check on CUDA outputs (several dtypes) gives the CPU's verdicts, and an
#      evaluation of a constant-output shortcut on a degenerate task is labelled degenerate_task
#      (before the fix the check raised on every CUDA tensor and the result was paid);
#   2. `cudal1 tasks --probe --backend cuda` on KernelBench levels 1-2, from an empty cache, timed;
#   3. the same on level 3.
# PASS when (1) holds, every level-1/2 task loads and levels 1-2 take under 5 minutes, and every
# level-3 task loads except those that import a module not installed here (listed: they do not
# run in eager PyTorch alone).
# Needs only torch, psutil and tqdm (no Ray, Hydra or DeepSpeed).
# Usage: bash scripts/gpu_probe_check.sh KERNELBENCH_PATH OUTDIR
# (BACKEND=cpu runs the same steps on the CPU: a dry run of this script, not the acceptance.)
set -uo pipefail
backend=${BACKEND:-cuda}
export BACKEND=$backend
kb=${1:?usage: $0 KERNELBENCH_PATH OUTDIR}
out=${2:?usage: $0 KERNELBENCH_PATH OUTDIR}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"
  echo "cores: $(nproc)"; date -u; } > "$out/env.txt" 2>&1
cat "$out/env.txt"

# 1. The check itself on CUDA tensors, and the judge's label on a degenerate task.
python3 scripts/gpu_degenerate_check.py > "$out/check_cuda.txt" 2>&1
cat "$out/check_cuda.txt"

# 2-3. The probe, from an empty cache each time, one line per task on stderr.
probe() {
  local name=$1; shift
  rm -rf "$out/cache-$name"
  local t0 t1 rc
  t0=$(date +%s.%N)
  python3 -m cudal1.cli tasks --tasks "$kb" --backend "$backend" --probe --cache "$out/cache-$name" \
    --json "$out/$name.json" "$@" > "$out/$name.out" 2> >(tee "$out/$name.err" >&2)
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$t1") s" \
    | tee "$out/$name.wall"
}
probe levels12 --levels 1 2
probe level3 --levels 3

python3 - "$out" <<'EOF'
import json
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
problems = []
check = (out / "check_cuda.txt").read_text()
if "CHECK_CUDA PASS" not in check:
    problems.append("the degenerate-task check on CUDA outputs (check_cuda.txt)")
not_installed = re.compile(r"^imports .+, not installed here")
for name, levels, limit_s in (("levels12", (1, 2), 300.0), ("level3", (3,), None)):
    try:
        report = json.loads((out / f"{name}.json").read_text())
        wall = float(re.search(r"in ([\d.]+) s", (out / f"{name}.wall").read_text()).group(1))
    except (OSError, ValueError, AttributeError) as e:
        problems.append(f"{name}: no report ({e})")
        continue
    for level in levels:
        tasks = [t for t in report["tasks"] if t["level"] == level]
        failed = [f for f in report["failures"] if f"/level{level}/" in f["path"]]
        skipped = [f for f in failed if not_installed.match(f["reason"])]
        failed = [f for f in failed if f not in skipped]
        degenerate = [t for t in tasks if t.get("degenerate")]
        print(f"level{level}: {len(tasks)} loaded ({len(degenerate)} degenerate), {len(failed)} failed, "
              f"{len(skipped)} need a module not installed")
        for f in failed:
            print(f"  FAILED {Path(f['path']).name}: {f['reason']}")
        for f in skipped:
            print(f"  SKIPPED {Path(f['path']).name}: {f['reason']}")
        if failed:
            problems.append(f"level{level}: {len(failed)} tasks did not load")
        if not tasks:
            problems.append(f"level{level}: no task loaded")
    slowest = sorted(report.get("probe_times", {}).items(), key=lambda kv: -kv[1])[:5]
    print(f"{name}: {wall:.0f} s wall (probing {report['probe_seconds']:.0f} s); slowest: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in slowest))
    if limit_s is not None and wall >= limit_s:
        problems.append(f"{name}: {wall:.0f} s, not under {limit_s:.0f} s")
print("PASS" if not problems else "FAIL: " + "; ".join(problems))
sys.exit(0 if not problems else 1)
EOF
