"""Run (task, candidate) pairs in turn, `reps` times, one evaluation at a time; print a line each.
usage: series.py REPS TASK:cand.py[,cand2.py...] [key=value ...]"""
import json, sys, pathlib, time
sys.path.insert(0, "/tmp/rt44/tests/bench")
here = pathlib.Path(__file__).parent
sys.path.insert(0, str(here))
import evalkit, tasks
from cudal1.bench.evaluator import evaluate

reps = int(sys.argv[1])
tname, cands = sys.argv[2].split(":")
task = getattr(tasks, tname, None) or getattr(evalkit, tname)
over = dict(evalkit.TIMING_ONLY)
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    over[k] = json.loads(v)
s = evalkit.settings("/tmp/jrt44-cache", **{"rounds": 5, "wall_timeout_s": 120.0, **over})
for rep in range(reps):
    for c in cands.split(","):
        t0 = time.time()
        src = here / "candidates" / c  # the variants no test uses; the rest in tests/bench/candidates
        if not src.exists():
            src = pathlib.Path("/tmp/rt44/tests/bench/candidates") / c
        r = evaluate(task, src.read_text(), "cpu", settings=s)
        cand = r.round_trips.get("candidate", [])
        line = {
            "rep": rep, "task": tname, "cand": c, "over": {k: v for k, v in over.items() if k not in evalkit.TIMING_ONLY},
            "status": r.status.value, "hack": r.hack_kind.value if r.hack_kind else None,
            "speedup": r.speedup, "labels": r.labels, "K": r.calls_per_round,
            "ref_ms": r.reference.median_ms if r.reference else None,
            "cand_ms": r.candidate.median_ms if r.candidate else None,
            "parallel_cpu_ms": [t.get("parallel_cpu_ms") for t in cand][:8],
            "cpu_ms": [t.get("cpu_ms") for t in cand][:5], "busiest_ms": [t.get("busiest_thread_ms") for t in cand][:5], "cpu_interval_ms": [t.get("cpu_interval_ms") for t in cand][:4],
            "resolution_ms": r.resolution_ms, "overhead_ms": r.overhead_ms, "baseline_ms": r.baseline_ms, "msg": r.message[:200], "s": round(time.time() - t0, 1),
        }
        print(json.dumps(line), flush=True)
        with open(here / "results.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        if r.status.value != "ok":
            print(r.log[-1500:], flush=True)
