"""Independent check of the repeat check's spread: each seed timed in a plain child process
(cudal1.bench.inprocess.measure_isolated, 100 calls, L2 flush) three times."""
import json, sys, time
from cudal1.bench.inprocess import measure_isolated
from cudal1.tasks import find_task, load_tasks, seed_solutions
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
for tid in sys.argv[1:]:
    task, source = find_task(tasks, tid), seeds[tid].read_text()
    for i in range(3):
        t = time.time()
        m = measure_isolated(task, {"seed": source}, device="cuda", build_dir="/tmp/inproc-build", seed=i).to_dict()
        print(json.dumps({"task": tid, "i": i, "ref": m["reference_ms"], "cand": m["candidates_ms"], "ratio": m["ratios"],
                          "spreads": m["spreads"], "errors": m.get("errors"), "s": round(time.time() - t, 1)}), flush=True)
