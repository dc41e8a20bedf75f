"""Where a fast candidate's time and the round trip's fixed cost go (eighth session, H200).

1. For each builtin CUDA seed given: `REPEATS` evaluations; per timed candidate round, per call:
   the judge's wall, the moment the host's answer arrived, the host's own figure, and the host's
   parts (inputs, forwards, describe). One JSON line per evaluation.
2. The seed and the reference in this one process, 300 calls each, three ways of placing the
   CUDA events (L2 flushed and the device synchronized before each call):
     before_sync: start, forward, end, synchronize   (KernelBench's and inprocess.py's order)
     after_sync:  start, forward, synchronize, end   (the host's order)
     wall:        perf_counter around forward + synchronize
3. `measure_isolated` on the seed (the full error if it fails).

    PYTHONPATH=. python3 docs/results/h200-2026-12-03-eighth/fixed_cost.py level1/1 level2/1
"""
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

import torch

from cudal1.bench.evaluator import device_info, evaluate, extensions_dir
from cudal1.bench.inprocess import measure_isolated
from cudal1.bench.inputs import make_init_inputs, make_inputs
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks, seed_solutions
from cudal1.tasks.task import load_source_module

repeats = int(os.environ.get("REPEATS", "2"))
cache = os.environ.get("CUDAL1_CACHE") or tempfile.mkdtemp(prefix="cudal1-fixed-")
base = EvalSettings.for_backend("cuda", cache_dir=cache)
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")


def q(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))], 5)


def placements(model, module, n=300):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    out = {"before_sync": [], "after_sync": [], "wall": []}
    with torch.no_grad():
        for i in range(n + 5):
            args = make_inputs(module, 1000 + i, "cuda")
            for way in out:
                buf.fill_(1.0)
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                s.record()
                model(*args)
                if way == "before_sync":
                    e.record()
                    torch.cuda.synchronize()
                else:
                    torch.cuda.synchronize()
                    e.record()
                    e.synchronize()
                t1 = time.perf_counter()
                if i >= 5:
                    out[way].append((t1 - t0) * 1e3 if way == "wall" else s.elapsed_time(e))
    return {k: {"median": q(v, 0.5), "p10": q(v, 0.1), "p90": q(v, 0.9), "p99": q(v, 0.99)} for k, v in out.items()}


for tid in sys.argv[1:]:
    task, source = find_task(tasks, tid), seeds[tid].read_text()
    for i in range(repeats):
        r = evaluate(task, source, "cuda", settings=base)
        k = r.calls_per_round or 1
        cand = (r.round_trips or {}).get("candidate", [])
        ref = (r.round_trips or {}).get("reference", [])
        per = lambda t: {"wall": round(t["wall_ms"] / k, 4), "answered": round(t["answered_ms"] / k, 4),
                         "own": None if t.get("own_ms") is None else round(t["own_ms"] / k, 4),
                         **{p: round(v / k, 4) for p, v in (t.get("host_parts_ms") or {}).items()}}
        print(json.dumps({"task": tid, "i": i, "status": r.status.value, "speedup": r.speedup, "K": k,
                          "resolution_ms": r.resolution_ms, "overhead_ms": r.overhead_ms,
                          "reference_ms": r.reference.median_ms if r.reference else None,
                          "candidate_ms": r.candidate.median_ms if r.candidate else None,
                          "cand_rounds": [per(t) for t in cand], "ref_rounds": [per(t) for t in ref],
                          "phases_s": r.phases_s}, default=str), flush=True)
    build_dir = extensions_dir(base, device_info("cuda")["arch"], source)
    try:
        os.environ["TORCH_EXTENSIONS_DIR"] = str(build_dir)
        module = task.load_module("cuda")
        init = make_init_inputs(module)
        torch.manual_seed(0)
        ref_model = module.Model(*init).cuda()
        cand_module = load_source_module(source, f"fixed_cost_{task.level}_{task.problem_id}")
        torch.manual_seed(0)
        cand_model = cand_module.ModelNew(*init).cuda()
        print(json.dumps({"task": tid, "placements": {"reference": placements(ref_model, module),
                                                      "seed": placements(cand_model, module)}}), flush=True)
        del ref_model, cand_model
    except Exception:  # noqa: BLE001
        print(json.dumps({"task": tid, "placements_error": traceback.format_exc()[-3000:]}), flush=True)
    try:
        ip = measure_isolated(task, {"seed": source}, device="cuda", calls=100,
                              build_dir=build_dir if build_dir.exists() else None, flush_l2=True)
        print(json.dumps({"task": tid, "inprocess": {"reference_ms": ip.reference_ms, "seed_ms": ip.candidates_ms,
                                                     "ratio": ip.ratios, "errors": ip.errors}}), flush=True)
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"task": tid, "inprocess_error": str(exc)[-3000:]}), flush=True)
