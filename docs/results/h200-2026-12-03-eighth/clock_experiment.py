"""Eighth session, last device run: does a fast candidate's slow rounds (1.7-1.9x its usual figure in 3-4 of 10 rounds)
go away when the judge keeps the GPU busy before each timed round trip (clock_warmup_ms), and does the garbage collector
off inside round trips narrow the resolution? Trees: "before" (HEAD without gc_paused), "gc" (HEAD); settings per variant.
Tasks: a synthetic fast candidate (reference: 100 relus of a 32M-float tensor, about 5 ms; candidate: one relu, about
0.05 ms: the shape of level2/1's seed, no build) and level1/12's reference as its own candidate. One JSON line per
evaluation, with the candidate's and the reference's own figure per timed round (ms a call)."""
import json, os, subprocess, sys
ONE = r'''
import json, sys, os, textwrap
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks
from cudal1.tasks.task import Task
backend = os.environ.get("BACKEND", "cuda")
n = int(os.environ.get("RELU_N", str(32 * 2**20)))
SYN = Task(level=9, problem_id=1, name="relu100", source=textwrap.dedent(f"""
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        for _ in range(100):
            x = torch.relu(x)
        return x

def get_inputs():
    return [torch.randn({n})]

def get_init_inputs():
    return []
"""))
CAND = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
extra = json.loads(os.environ.get("ABSET", "{}"))
s = EvalSettings.for_backend(backend, cache_dir=os.environ["ABCACHE"], **extra)
l12 = find_task(load_tasks("builtin"), "level1/12")
for tid, task, src in (("relu100", SYN, CAND), ("level1/12", l12, l12.source + "\nModelNew = Model\n")):
    r = evaluate(task, src, backend, settings=s)
    k = r.calls_per_round or 1
    trips = r.round_trips or {}
    own = lambda who: [None if t.get("own_ms") is None else round(t["own_ms"] / k, 4) for t in trips.get(who, [])]
    print(json.dumps({"task": tid, "status": getattr(r.status, "value", r.status), "speedup": r.speedup, "K": k,
                      "resolution_ms": r.resolution_ms, "overhead_ms": r.overhead_ms,
                      "ref_ms": r.reference.median_ms if r.reference else None,
                      "cand_ms": r.candidate.median_ms if r.candidate else None, "labels": r.labels,
                      "cand_own": own("candidate"), "ref_own": own("reference"), "eval_s": r.eval_seconds,
                      "msg": (r.message or "")[:200]}), flush=True)
'''
root = os.getcwd()
variants = {"before": (".scratch/ab2/before", {}), "gc": (root, {}), "gc_warm2": (root, {"clock_warmup_ms": 2.0}),
            "gc_warm10": (root, {"clock_warmup_ms": 10.0})}
for rep in range(int(os.environ.get("REPS", "3"))):
    for name, (path, extra) in variants.items():
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path), ABCACHE=f"/tmp/abcache2-{name}", ABSET=json.dumps(extra))
        p = subprocess.run([sys.executable, "-c", ONE], env=env, capture_output=True, text=True, timeout=120)
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                print(json.dumps({"variant": name, "rep": rep, **json.loads(line)}), flush=True)
        if p.returncode:
            print(json.dumps({"variant": name, "rep": rep, "error": p.stderr[-1500:]}), flush=True)
