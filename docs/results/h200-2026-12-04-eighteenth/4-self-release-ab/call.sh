#!/usr/bin/env bash
# Call D: the reference as its own candidate on the acceptance's 12 tasks, with the judge's
# between-phase cache release (A) and without it (B, sed in this copy only), interleaved A B A B.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
o=$OUT/d; mkdir -p "$o"
T="level1/1 level1/4 level1/19 level1/23 level1/40 level1/47 level1/88 level1/97 level2/1 level2/20 level2/40 level2/76"
cp cudal1/bench/judge.py /tmp/judge_a.py
sed 's/^            torch.cuda.empty_cache()$/            pass  # B: no release/' /tmp/judge_a.py > /tmp/judge_b.py
grep -c "B: no release" /tmp/judge_b.py
for run in a1 b1 a2; do
  cp /tmp/judge_${run:0:1}.py cudal1/bench/judge.py
  t0=$(date +%s)
  timeout 170 python3 benchmarks/self_speedup.py --backend cuda --kernelbench .kb/KernelBench --tasks $T \
    --repeats 1 --band 0.98 1.02 --out "$o/self-$run.json" > "$o/self-$run.log" 2>&1
  echo "$run rc=$? $(( $(date +%s) - t0 )) s"
  python3 - "$o/self-$run.json" <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    print(f"  {e['task']:10s} {e['speedups']} ref {e['reference_ms']} cand {e['candidate_ms']} {e['labels']}")
PY
  tail -2 "$o/self-$run.log"
done
cp /tmp/judge_a.py cudal1/bench/judge.py
