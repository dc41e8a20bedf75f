"""GPU diagnostic: the reference as its own candidate and three CUDA seeds, with the medians of each
kind of round trip (calibration and pass, reference host and candidate host).

    PYTHONPATH=$PWD python3 round_trips.py [SELF_TASKS,...] [SEED_TASKS,...]

Needs a KernelBench checkout at .kb/KernelBench."""
import json, statistics as S, sys, tempfile, time
from cudal1.bench.evaluator import evaluate, prebuild
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import load_suite, find_task, load_tasks, seed_solutions
from cudal1.tasks.task import reference_as_candidate

st = EvalSettings.for_backend("cuda", cache_dir=tempfile.mkdtemp())
ts = load_suite(".kb/KernelBench", levels=[1, 2], profile="cuda").tasks

def med(xs):
    xs = [x for x in xs if x is not None]
    return round(S.median(xs), 4) if xs else None

def trips(r, key):
    rows = r.round_trips.get(key, [])
    k = r.calls_per_round or 1
    return {"n": len(rows), "wall-own": med([x["wall_ms"] - x["own_ms"] for x in rows if x["own_ms"] is not None]),
            "ans-own": med([x["answered_ms"] - x["own_ms"] for x in rows if x["own_ms"] is not None]),
            "wall-ans": med([x["wall_ms"] - x["answered_ms"] for x in rows]),
            "own/K": med([x["own_ms"] / k for x in rows if x["own_ms"] is not None]),
            "parts": {p: med([x["host_parts_ms"].get(p) for x in rows]) for p in ("inputs", "forwards", "describe")}}

def show(tag, r):
    line = {"tag": tag, "speedup": round(r.speedup, 4) if r.speedup else None, "status": r.status.value,
            "K": r.calls_per_round, "ref": round(r.reference.median_ms, 4) if r.reference else None,
            "cand": round(r.candidate.median_ms, 4) if r.candidate else None, "ovh": r.overhead_ms,
            "res": r.resolution_ms, "base": r.baseline_ms, "eval_s": r.eval_seconds, "labels": r.labels}
    print(json.dumps(line), flush=True)
    for key in ("calibration reference", "calibration candidate", "reference", "candidate"):
        print("   ", key.ljust(22), json.dumps(trips(r, key)), flush=True)

t0 = time.time()
SELF = sys.argv[1].split(",") if len(sys.argv) > 1 else ["level1/4", "level1/19", "level1/23", "level2/1", "level1/1", "level1/40", "level1/88", "level2/76"]
SEEDS = sys.argv[2].split(",") if len(sys.argv) > 2 else ["level1/1", "level1/7", "level2/5"]
for tid in SELF:
    t = find_task(ts, tid)
    show("self " + tid, evaluate(t, reference_as_candidate(t.source), "cuda", settings=st))
b = load_tasks("builtin"); seeds = seed_solutions("cuda")
for tid in SEEDS:
    t = find_task(b, tid); src = seeds[tid].read_text()
    prebuild(t, src, "cuda", st)
    for i in range(3):
        show(f"seed {tid} #{i}", evaluate(t, src, "cuda", settings=st))
print("total", round(time.time() - t0), "s")
