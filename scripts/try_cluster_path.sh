#!/usr/bin/env bash
# Follows the README's cluster section from a new shell (no .venv on PATH, no VIRTUAL_ENV): a head
# node of its own, the smoke job submitted with the README's command, then that head stopped.
# Deviations from the README, so that it can run beside other Ray clusters on one machine: its own
# ports and temp dir (and the dashboard's address passed to `ray job submit`).
#
#   bash scripts/try_cluster_path.sh [OUTDIR]      # writes OUTDIR/cluster_path.log, exit 0 when the job succeeded
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${1:-$(mktemp -d /tmp/cudal1-cluster-path.XXXXXX)}
mkdir -p "$out"
tmp=$(mktemp -d /tmp/cudal1-ray.XXXXXX)
port=$((20000 + RANDOM % 20000)); dash=$((port + 1))
log="$out/cluster_path.log"
t0=$(date +%s)
env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb bash --noprofile --norc -c "
  set -e
  echo \"shell's python: \$(command -v python3 || true); ray on PATH: \$(command -v ray || echo none)\"
  .venv/bin/ray start --head --num-cpus 6 --port $port --dashboard-port $dash --temp-dir $tmp/ray
  RAY_AUTH_MODE=token .venv/bin/ray job submit --address http://127.0.0.1:$dash --working-dir . -- \
    \"\$PWD/.venv/bin/python\" jobs/train.py --config-name smoke run_dir=$tmp/run tracking.uri=sqlite:///$tmp/mlflow.db
" > "$log" 2>&1
rc=$?
# Stop only this head: `ray stop` would stop every Ray cluster of the machine.
pkill -f -- "$tmp/ray" 2>/dev/null
sleep 2
pkill -9 -f -- "$tmp/ray" 2>/dev/null
echo "rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$log"
tail -5 "$log"
rm -rf "$tmp"
exit $rc
