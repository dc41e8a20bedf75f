"""Run one candidate file against a task on the CPU backend and print status/speedup/details.
usage: run1.py TASK CANDIDATE [key=value ...]"""
import json, sys, pathlib
sys.path.insert(0, "/work/main/tests/bench")
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import evalkit, tasks
from cudal1.bench.evaluator import evaluate

task = getattr(tasks, sys.argv[1], None) or getattr(evalkit, sys.argv[1])
src = pathlib.Path(sys.argv[2]).read_text()
over = dict(evalkit.TIMING_ONLY)
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    over[k] = json.loads(v)
s = evalkit.settings("/tmp/jrt-cache", **{"rounds": 5, "wall_timeout_s": 120.0, **over})
r = evaluate(task, src, "cpu", settings=s)
cand = r.round_trips.get("candidate", [])
par = [t.get("parallel_cpu_ms") for t in cand]
print(json.dumps({
    "cand": sys.argv[2], "status": r.status.value, "hack": r.hack_kind.value if r.hack_kind else None,
    "speedup": r.speedup, "labels": r.labels, "K": r.calls_per_round,
    "ref_ms": r.reference.median_ms if r.reference else None,
    "cand_ms": r.candidate.median_ms if r.candidate else None,
    "parallel_cpu_ms": par[:6], "msg": r.message[:300],
}))
if r.status.value != "ok":
    print(r.log[-2000:])
