"""Issue 20 data: the reference as its own candidate on the tasks that missed the self band on the
slow side (level1/47, level2/1, level1/88), four evaluations each, with per-round times."""
import json, sys, tempfile, time
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_suite
from cudal1.tasks.task import reference_as_candidate

settings = EvalSettings.for_backend("cuda", cache_dir=tempfile.mkdtemp(prefix="cudal1-diag-"))
tasks = load_suite(".kb/KernelBench", levels=[1, 2], profile="cuda").tasks
out = []
for tid in sys.argv[1:]:
    task = find_task(tasks, tid)
    for i in range(4):
        t0 = time.time()
        r = evaluate(task, reference_as_candidate(task.source), "cuda", settings=settings)
        e = {"task": tid, "i": i, "status": r.status.value, "speedup": r.speedup, "baseline_ms": r.baseline_ms,
             "ref_rounds": [round(x, 4) for x in (r.reference.round_medians_ms if r.reference else [])],
             "cand_rounds": [round(x, 4) for x in (r.candidate.round_medians_ms if r.candidate else [])],
             "ref_median": r.reference.median_ms if r.reference else None,
             "cand_median": r.candidate.median_ms if r.candidate else None,
             "K": r.calls_per_round, "overhead_ms": r.overhead_ms, "resolution_ms": r.resolution_ms,
             "s": round(time.time() - t0, 1)}
        out.append(e)
        print(json.dumps(e), flush=True)
