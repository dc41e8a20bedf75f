"""A/B of the judge's resolution and fixed cost on one machine: the reference as its own candidate on three builtin
tasks, under several cudal1 trees (PYTHONPATH per variant), interleaved. One JSON line per evaluation."""
import json, os, subprocess, sys
ONE = r'''
import json, sys, tempfile, os
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks
tasks = load_tasks("builtin")
s = EvalSettings.for_backend(os.environ.get("BACKEND", "cuda"), cache_dir=os.environ["ABCACHE"])
for tid in sys.argv[1:]:
    t = find_task(tasks, tid)
    r = evaluate(t, t.source + "\nModelNew = Model\n", os.environ.get("BACKEND", "cuda"), settings=s)
    print(json.dumps({"task": tid, "status": r.status.value if hasattr(r.status, "value") else r.status, "speedup": r.speedup,
                      "K": r.calls_per_round, "resolution_ms": r.resolution_ms, "overhead_ms": r.overhead_ms,
                      "ref_ms": r.reference.median_ms if r.reference else None,
                      "cand_ms": r.candidate.median_ms if r.candidate else None, "eval_s": r.eval_seconds}), flush=True)
'''
root = os.getcwd()
variants = {"old": ".scratch/ab/old", "new": root, "noread": ".scratch/ab/noread", "afterSync": ".scratch/ab/afterSync"}
tasks = os.environ.get("ABTASKS", "level1/1 level2/1 level1/12").split()
for rep in range(int(os.environ.get("REPS", "3"))):
    for name, path in variants.items():
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path), ABCACHE=f"/tmp/abcache-{name}")
        p = subprocess.run([sys.executable, "-c", ONE, *tasks], env=env, capture_output=True, text=True, timeout=120)
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                print(json.dumps({"variant": name, "rep": rep, **json.loads(line)}), flush=True)
        if p.returncode:
            print(json.dumps({"variant": name, "rep": rep, "error": p.stderr[-1500:]}), flush=True)
