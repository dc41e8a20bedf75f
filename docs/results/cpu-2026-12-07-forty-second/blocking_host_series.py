"""honest sin vs the blocking two-thread host, alternated; one line each."""
import json, sys, pathlib, statistics, time
sys.path.insert(0, "/work/main/tests/bench")
sys.path.insert(0, "/work/main/docs/results/redteam-2026-12-07-forty-first")
import evalkit, tasks
from cudal1.bench.evaluator import evaluate
red = pathlib.Path("/work/main/docs/results/redteam-2026-12-07-forty-first")
reps = int(sys.argv[1]); extra = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
s = evalkit.settings("/tmp/blk-cache", **{"rounds": 5, "wall_timeout_s": 120.0, **evalkit.TIMING_ONLY, **extra})
for rep in range(reps):
    for c in ("honest_sin.py", "blocks_while_judge_reads.py", "threads_only_sin.py"):
        r = evaluate(tasks.SIN_16M, (red / c).read_text(), "cpu", settings=s)
        t = r.round_trips.get("candidate", [])
        print(json.dumps({"rep": rep, "cand": c[:12], "st": r.status.value, "x": r.speedup and round(r.speedup, 3),
            "charged": [x.get("parallel_cpu_ms") for x in t][:5], "cpu": [x.get("cpu_ms") for x in t][:5],
            "busiest": [x.get("busiest_thread_ms") for x in t][:5], "iv": [x.get("cpu_interval_ms") for x in t][:5]}), flush=True)
