#!/usr/bin/env bash
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/e
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
timeout 420 python3 .scratch/self_diag.py level1/47 level2/1 level1/88 > $OUT/e/diag.jsonl 2> $OUT/e/diag.err
echo "rc=$?"
python3 - <<'PY'
import json, os
for line in open(os.environ["OUT"] + "/e/diag.jsonl"):
    e = json.loads(line)
    r, c = e["ref_rounds"], e["cand_rounds"]
    print(f"{e['task']:10s} {e['i']} {e['status']:6s} x{e['speedup']} base {e['baseline_ms']} ref {e['ref_median']} cand {e['cand_median']} K {e['K']} rounds {len(r)} ref[min,max] {min(r) if r else None},{max(r) if r else None} cand[min,max] {min(c) if c else None},{max(c) if c else None} {e['s']} s")
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
tail -3 $OUT/e/diag.err
