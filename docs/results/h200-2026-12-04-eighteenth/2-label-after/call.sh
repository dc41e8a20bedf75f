#!/usr/bin/env bash
# Call C (eighteenth session): why does ModelNew = Model on KernelBench level1/19 and level1/23 get
# profile_failed on the H200? The reason is now in the record (label_reasons); GPU memory sampled.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
o=$OUT/c; mkdir -p "$o"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"
  date -u
  echo "cudal1 sources sha1: $(find cudal1 -name '*.py' | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12)"; } > "$o/env.txt" 2>&1
cat "$o/env.txt"
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader -lms 250 > "$o/apps.csv" 2>&1 &
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 250 > "$o/mem.csv" 2>&1 &
smi=$!
t0=$(date +%s)
timeout 300 python3 benchmarks/self_speedup.py --backend cuda --kernelbench .kb/KernelBench \
  --tasks level1/19 level1/23 --repeats 1 --band 0.98 1.02 --out "$o/self.json" > "$o/self.log" 2>&1
echo "self rc=$? $(( $(date +%s) - t0 )) s"
kill $smi; pkill -f query-compute-apps
cat "$o/self.log" | cut -c1-1500
sort -t, -k2 -n "$o/mem.csv" | tail -1
echo "peak MiB: $(awk -F, '{gsub(/ MiB/,"",$2); if ($2+0>m) m=$2+0} END {print m}' "$o/mem.csv")"
awk -F, '{gsub(/ MiB/,"",$3); if ($3+0>m[$2]) m[$2]=$3+0} END {for (p in m) print "pid", p, "peak MiB", m[p]}' "$o/apps.csv"
gzip -f "$o/mem.csv" "$o/apps.csv"
