"""Early GPU check of batched timing: judge vs a plain in-process measurement."""
import json, os, random, statistics, sys, time, tempfile
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.getcwd())
import torch
from cudal1.bench.evaluator import evaluate, prebuild
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import load_tasks, find_task, seed_solutions, load_suite
from cudal1.tasks.task import reference_as_candidate, load_source_module

def inproc(task, source, calls=100, dev="cuda:0"):
    mod = task.load_module("cuda")
    cand = load_source_module(source, "cand_mod")
    init = list(mod.get_init_inputs())
    torch.manual_seed(0); ref = mod.Model(*init).to(dev)
    torch.manual_seed(0); new = cand.ModelNew(*init).to(dev)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    flush = torch.empty(2 * l2 // 4 + 1024, device=dev)
    def inputs(seed):
        torch.manual_seed(seed)
        with torch.device(dev):
            return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    with torch.no_grad():
        for i in range(3):
            x = inputs(10**6 + i); ref(*x); new(*x)
        times = {"ref": [], "cand": []}
        for i in range(calls):
            x = inputs(i)
            for who in random.sample(["ref", "cand"], 2):
                m = ref if who == "ref" else new
                flush.fill_(0); torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); m(*x); torch.cuda.synchronize(); e.record(); e.synchronize()
                times[who].append(s.elapsed_time(e))
    r, c = statistics.median(times["ref"]), statistics.median(times["cand"])
    return r, c, r / c

def main():
    out = sys.argv[1]
    cache = tempfile.mkdtemp()
    st = EvalSettings.for_backend("cuda", cache_dir=cache)
    tasks = load_tasks("builtin"); seeds = seed_solutions("cuda")
    kb = load_suite(".kb/KernelBench", levels=[1, 2], profile="cuda")
    kbt = {t.task_id: t for t in kb.tasks}
    pairs = []
    for tid in ["level1/1", "level1/7", "level1/12", "level2/5", "level2/1", "level1/17"]:
        t = find_task(tasks, tid); pairs.append((t, seeds[tid].read_text(), "seed"))
    for tid in ["level1/19", "level1/23", "level1/1", "level1/40", "level2/1", "level2/20", "level1/4", "level1/88"]:
        if tid in kbt:
            t = kbt[tid]; pairs.append((t, reference_as_candidate(t.source), "self"))
    t0 = time.time()
    with ThreadPoolExecutor(8) as pool:
        pr = list(pool.map(lambda p: prebuild(p[0], p[1], "cuda", st), [p for p in pairs if p[2] == "seed"]))
    print("prebuild", round(time.time() - t0, 1), [None if r is None else r.status.value for r in pr], flush=True)
    rows = []
    for task, src, kind in pairs:
        t1 = time.time()
        r = evaluate(task, src, "cuda", settings=st)
        ev = time.time() - t1
        try:
            ri, ci, xi = inproc(task, src)
        except Exception as e:
            ri = ci = xi = float("nan"); print("inproc failed", e)
        row = dict(task=task.task_id, name=task.name, kind=kind, status=r.status.value, msg=r.message[:200],
                   judge=r.speedup, inproc=xi, ref_ms=r.reference.median_ms if r.reference else None,
                   cand_ms=r.candidate.median_ms if r.candidate else None, ref_ip=ri, cand_ip=ci, K=r.calls_per_round,
                   res=r.resolution_ms, ovh=r.overhead_ms, base=r.baseline_ms, labels=r.labels, eval_s=round(ev, 2),
                   phases=r.phases_s, extra_log=(r.log[-1500:] if r.status.value != "ok" else ""))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("phases", "extra_log")}), flush=True)
        if row["extra_log"]: print(row["extra_log"])
    # repeatability: 5 fresh evaluations of 3 seeds
    for tid in ["level1/1", "level1/7", "level2/5"]:
        t = find_task(tasks, tid); src = seeds[tid].read_text()
        xs = [evaluate(t, src, "cuda", settings=st).speedup for _ in range(5)]
        xs = [x for x in xs if x]
        print("repeat", tid, [round(x, 3) for x in xs], "spread", round((max(xs) - min(xs)) / statistics.median(xs), 4) if xs else None, flush=True)
    json.dump(rows, open(os.path.join(out, "early.json"), "w"), indent=1)
    print("phases example", json.dumps(rows[0]["phases"]))

main()
