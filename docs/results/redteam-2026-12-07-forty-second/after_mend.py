import sys, time, json, statistics
sys.path.insert(0, "tests/bench"); sys.path.insert(0, "tests/bench")
import evalkit
from test_parallel_cpu import SIN_16M
from cudal1.bench.evaluator import evaluate
s = evalkit.settings("/tmp/blk-cache", rounds=5, wall_timeout_s=120.0, **evalkit.TIMING_ONLY)
for c in sys.argv[1:]:
    t0 = time.time()
    r = evaluate(SIN_16M, evalkit.candidate(c), "cpu", settings=s)
    t = r.round_trips.get("candidate", [])
    print(c, r.status.value, r.speedup and round(r.speedup, 3), round(time.time() - t0, 1), "s",
          [(x.get("parallel_cpu_ms"), x.get("busiest_thread_ms"), x.get("cpu_ms"), x.get("cpu_interval_ms")) for x in t][:5], flush=True)
