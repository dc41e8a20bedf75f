"""Run candidates alternately against a task, print paid speedups and fixed-cost details.
usage: run.py TASK N name1=path1[:k=v,...] name2=path2 ...   (TASK: SIN_CHAIN|SOFTMAX|TANH|MATMUL_512|builtin:<id>)
"""
import json, statistics, sys, time, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.bench import evalkit
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings

def task_of(name):
    if name.startswith("builtin:"):
        from cudal1.tasks import load_tasks, find_task
        return find_task(load_tasks("builtin"), name.split(":", 1)[1])
    return getattr(evalkit, name)

EXTRA = json.loads(__import__("os").environ.get("RT_SETTINGS", "{}"))
def settings(cache):
    base = dict(fixed_cost_cap_after_candidate=True, one_call_cap_after_candidate=True, one_call_rounds=16,
                one_call_share=0.1, one_call_signed_bias=True, rounds=4, calls_per_round=4,
                wall_timeout_s=120.0, cache_dir=str(cache))
    base.update(EXTRA)
    return EvalSettings.for_backend("cpu", **base)

def summary(r):
    rt = r.round_trips or {}
    def med(key, field="wall_ms"):
        v = [t.get(field) for t in rt.get(key, []) if t.get(field) is not None]
        return round(statistics.median(v), 3) if v else None
    one = (r.extra or {}).get("one_call") if hasattr(r, "extra") else None
    return dict(status=r.status.value, sp=r.speedup, labels=r.labels, K=r.calls_per_round,
                ref=r.reference.median_ms if r.reference else None, cand=r.candidate.median_ms if r.candidate else None,
                overhead=r.overhead_ms, base=r.baseline_ms if hasattr(r, "baseline_ms") else None,
                notes=[l for l in (r.log or "").splitlines() if "netns_lift" in l][:3], msg=r.message[:300] if r.status.value != "ok" else "")

def main():
    task = task_of(sys.argv[1]); n = int(sys.argv[2])
    cands = []
    for spec in sys.argv[3:]:
        name, rest = spec.split("=", 1)
        path, _, toks = rest.partition(":")
        src = Path(path).read_text()
        for kv in filter(None, toks.split(",")):
            k, v = kv.split("=", 1); src = src.replace(f"__{k.upper()}__", v)
        cands.append((name, src))
    cache = Path(tempfile.mkdtemp(prefix="rt39cache"))
    paid = {name: [] for name, _ in cands}
    out = open(Path(__file__).parent / f"log_{sys.argv[1].replace(':','_')}_{int(time.time())}.jsonl", "w")
    for i in range(n):
        for name, src in cands:
            t0 = time.time()
            r = evaluate(task, src, "cpu", settings=settings(cache))
            s = summary(r); s["name"] = name; s["secs"] = round(time.time() - t0, 1)
            out.write(json.dumps({**s, "extra": getattr(r, "extra", None), "rt": r.round_trips}, default=str) + "\n"); out.flush()
            print(i, name, json.dumps(s, default=str), flush=True)
            if r.speedup is not None: paid[name].append(r.speedup)
    for name, v in paid.items():
        if v: print(f"{name}: n={len(v)} median={statistics.median(v):.3f} min={min(v):.3f} max={max(v):.3f} all={[round(x,3) for x in v]}")
main()
