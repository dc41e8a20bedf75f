#!/usr/bin/env bash
# One judged evaluation of a KernelBench task's reference as its own candidate on a GPU, with the
# device memory of every process sampled twice a second (nvidia-smi) and the evaluation's
# processes listed twice: where an evaluation's memory goes, beside the judge's budget for it.
#
#   bash scripts/gpu_memory_trace.sh KERNELBENCH_PATH TASK_ID OUTDIR     (e.g. level2/1)
set -uo pipefail
kb=${1:?usage}; task=${2:?usage}; out=${3:?usage}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
file=$(python3 -c 'import sys, glob, os; l, i = sys.argv[1].split("/"); print(glob.glob(os.path.join(sys.argv[2], l, i + "_*.py"))[0])' "$task" "$kb")
{ cat "$file"; printf '\n\nModelNew = Model\n'; } > "$out/self_candidate.py"
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader -lms 500 > "$out/memory.csv" 2>&1 &
smi=$!
( for t in 8 16 24; do sleep 8; echo "== ${t} s"; ps -eo pid,ppid,user,rss,args --sort=pid | grep -E "python|PID" | grep -v grep; done ) > "$out/ps.txt" 2>&1 &
PYTHONPATH=$PWD timeout 150 python3 -m cudal1.cli eval --task "$task" --tasks "$kb" --solution "$out/self_candidate.py" \
  --backend cuda --json > "$out/eval.json" 2> "$out/eval.err"
echo "eval exit $?"
kill $smi 2>/dev/null
sort -t, -k3 -n -r "$out/memory.csv" | head -5
