"""Where a fast candidate's spread between evaluations comes from (seventh session, H200).

For each builtin CUDA seed given: `REPEATS` evaluations per settings variant, each printed with K, the resolution, the fixed
cost, and per timed round the candidate host's own figure (own_ms / K) beside the judge's
(wall_ms / K) and the figure the judge kept (the round's candidate median). One JSON line per
evaluation; then an independent in-process timing of seed and reference (with the judge's
build directory), with and without an L2 flush before each call.

    PYTHONPATH=. python3 docs/results/h200-2026-12-03-seventh/fast_candidates.py level1/1 level2/1
"""
import json
import os
import statistics
import sys
import tempfile

from cudal1.bench.evaluator import device_info, evaluate, extensions_dir
from cudal1.bench.inprocess import measure_isolated
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_tasks, seed_solutions

backend = os.environ.get("BACKEND", "cuda")
repeats = int(os.environ.get("REPEATS", "4"))
cache = os.environ.get("CUDAL1_CACHE") or tempfile.mkdtemp(prefix="cudal1-fast-")
base = EvalSettings.for_backend(backend, cache_dir=cache)
variants = {
    "default": base,
    "k40": EvalSettings.for_backend(backend, cache_dir=cache, calls_per_round=min(40, base.max_calls_per_round)),
    "round100": EvalSettings.for_backend(backend, cache_dir=cache, min_round_ms=100.0),
}
only = os.environ.get("VARIANTS")
if only:
    variants = {k: v for k, v in variants.items() if k in only.split(",")}
tasks, seeds = load_tasks("builtin"), seed_solutions(backend)
for tid in sys.argv[1:]:
    task, source = find_task(tasks, tid), seeds[tid].read_text()
    for name, settings in variants.items():
        for i in range(repeats):
            r = evaluate(task, source, backend, settings=settings)
            k = r.calls_per_round or 1
            trips = r.round_trips or {}
            cand = trips.get("candidate", [])
            entry = {
                "task": tid, "variant": name, "i": i, "status": r.status.value, "speedup": r.speedup,
                "K": k, "resolution_ms": r.resolution_ms, "overhead_ms": r.overhead_ms,
                "baseline_ms": r.baseline_ms, "labels": r.labels,
                "reference_ms": r.reference.median_ms if r.reference else None,
                "candidate_ms": r.candidate.median_ms if r.candidate else None,
                "kept_per_round": [round(x, 5) for x in (r.candidate.round_medians_ms if r.candidate else [])],
                "own_per_call": [None if t.get("own_ms") is None else round(t["own_ms"] / k, 5) for t in cand],
                "wall_per_call": [round(t["wall_ms"] / k, 5) for t in cand],
                "ref_wall": [t["wall_ms"] for t in trips.get("reference", [])],
                "ref_own": [t["own_ms"] for t in trips.get("reference", [])],
                "eval_s": r.eval_seconds, "error": (r.message or "")[:200],
            }
            print(json.dumps(entry, default=str), flush=True)
    device = "cuda" if backend == "cuda" else "cpu"
    build_dir = extensions_dir(base, device_info(device)["arch"], source)
    for flush in (True, False):
        try:
            ip = measure_isolated(task, {"seed": source}, device=device, calls=100 if backend == "cuda" else 5,
                                  build_dir=build_dir if build_dir.exists() else None, flush_l2=flush)
            print(json.dumps({"task": tid, "inprocess_flush_l2": flush, "reference_ms": ip.reference_ms,
                              "seed_ms": ip.candidates_ms, "ratio": ip.ratios, "errors": ip.errors}, default=str), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"task": tid, "inprocess_error": repr(exc)[:300]}), flush=True)
