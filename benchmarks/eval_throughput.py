"""Evaluation throughput (cold and warm build cache) and repeatability of the evaluator.

Prints figures and writes them as JSON; the figures in docs/benchmarks.md come from this script.

    python benchmarks/eval_throughput.py --backend cuda --levels 1 2 --copies 1 --out throughput.json

Throughput: every seed solution of the chosen levels, each in `--copies` variants made distinct
by a salt comment (so each is its own build), goes through the suite pipeline (parallel builds,
one timing at a time per device). "cold" starts from an empty build cache; "warm" evaluates the
same sources again. Candidates per hour = candidates / wall seconds × 3600.

Repeatability: each `--repeat-task` seed evaluated `--repeats` times; the spread of its speedup
is (max − min) / median over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings
from cudal1.bench.summary import format_summary, summarize
from cudal1.bench.suite import ResultWriter, SuiteJob, run_suite
from cudal1.tasks import find_task, load_tasks, seed_solutions


def run_jobs(jobs: list[SuiteJob], backend: str, settings: EvalSettings, build_jobs: int | None, jsonl: Path | None,
             per_device: int = 1) -> dict:
    results = []
    writer = ResultWriter(jsonl) if jsonl else None

    def on_result(job: SuiteJob, r) -> None:
        results.append(r)
        if writer:
            writer.write(r, solution=str(job.solution))

    t0 = time.perf_counter()
    run_suite(jobs, backend, settings, on_result, build_jobs=build_jobs, per_device=per_device)
    wall = time.perf_counter() - t0
    print(format_summary(summarize(results)))
    for r in sorted(results, key=lambda r: r.task_id):
        speed = f"{r.speedup:.2f}x" if r.speedup else "-"
        print(f"  {r.task_id:11s} {r.status.value:14s} {speed:>8s}  build {r.build_seconds or 0:6.1f}s  {','.join(r.labels)}  {r.message[:120]}")
    ok = [r for r in results if r.status is Status.OK]
    builds = [r.build_seconds for r in results if r.build_seconds]
    return {
        "candidates": len(jobs),
        "ok": len(ok),
        "statuses": {s: sum(r.status.value == s for r in results) for s in {r.status.value for r in results}},
        "wall_s": round(wall, 1),
        "per_hour": round(len(jobs) / wall * 3600, 1),
        "median_eval_s": round(statistics.median([r.eval_seconds or 0 for r in results]), 2) if results else None,
        "median_build_s_in_eval": round(statistics.median(builds), 2) if builds else None,
        # The two-process evaluator's fixed cost per candidate call and its jitter (None before it).
        "median_overhead_ms": _median_of(results, "overhead_ms"),
        "median_resolution_ms": _median_of(results, "resolution_ms"),
        # Where an evaluation's time goes: the median seconds of each of the judge's phases.
        "median_phases_s": _median_phases(results),
    }


def _median_phases(results: list) -> dict[str, float]:
    names = sorted({k for r in results for k in (getattr(r, "phases_s", None) or {})})
    return {k: round(statistics.median([r.phases_s[k] for r in results if k in r.phases_s]), 3) for k in names}


def build_edges(cache: str) -> dict:
    """Compile and link times from the ninja logs of every build under `cache`: the median and
    total seconds per kind of edge (the C++ binding, the CUDA source, the link)."""
    kinds: dict[str, list[float]] = {}
    for log in Path(cache).rglob(".ninja_log"):
        for line in log.read_text().splitlines():
            parts = line.split("\t")
            if line.startswith("#") or len(parts) < 4:
                continue
            out = parts[3]
            kind = "link" if out.endswith(".so") else "cuda" if ".cuda" in out else "cpp" if out.endswith(".o") else "other"
            kinds.setdefault(kind, []).append((int(parts[1]) - int(parts[0])) / 1e3)
    return {k: {"n": len(v), "median_s": round(statistics.median(v), 1), "total_s": round(sum(v), 1)} for k, v in kinds.items()}


def _median_of(results: list, field: str) -> float | None:
    values = [getattr(r, field, None) for r in results]
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 4) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--levels", type=int, nargs="+", default=[1])
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--build-jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    ap.add_argument("--per-device", type=int, default=1,
                    help="evaluations at a time on the device (setup overlaps, timing takes turns); also for the repeats")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--repeat-task", nargs="+", default=None, help="tasks for the repeatability runs (default: the first seed)")
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    ap.add_argument("--results-dir", default=None, help="write every result to cold.jsonl / warm.jsonl here")
    args = ap.parse_args(argv)

    cache = tempfile.mkdtemp(prefix="cudal1-bench-cache-")
    settings = EvalSettings.for_backend(args.backend, cache_dir=cache)
    tasks = load_tasks("builtin")
    seeds = {tid: p for tid, p in seed_solutions(args.backend).items() if int(tid.split("/")[0][5:]) in args.levels}
    if not seeds:
        print(f"no {args.backend} seed solutions for levels {args.levels}", file=sys.stderr)
        return 1
    jobs = []
    for copy in range(args.copies):
        for tid, path in sorted(seeds.items()):
            source = path.read_text() + f"\n# throughput-benchmark variant {copy}\n"
            jobs.append(SuiteJob(find_task(tasks, tid), source, path))
    report: dict = {"backend": args.backend, "levels": args.levels, "build_jobs": args.build_jobs,
                    "cpu_count": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    print(f"{len(jobs)} candidates ({len(seeds)} seeds × {args.copies} variants), build jobs {args.build_jobs}")
    results_dir = Path(args.results_dir) if args.results_dir else None
    if results_dir:
        results_dir.mkdir(parents=True, exist_ok=True)
    report["per_device"] = args.per_device
    report["cold"] = run_jobs(jobs, args.backend, settings, args.build_jobs, results_dir / "cold.jsonl" if results_dir else None,
                              args.per_device)
    print("cold cache:", json.dumps(report["cold"]))
    report["build_edges"] = build_edges(cache)
    print("build edges:", json.dumps(report["build_edges"]))
    report["warm"] = run_jobs(jobs, args.backend, settings, args.build_jobs, results_dir / "warm.jsonl" if results_dir else None,
                              args.per_device)
    print("warm cache:", json.dumps(report["warm"]))

    report["repeatability"] = []
    for tid in (args.repeat_task or [sorted(seeds)[0]]) if args.repeats > 0 else []:
        task, source = find_task(tasks, tid), seeds[tid].read_text()
        # The repeats run as the suite does (per_device at a time), so their spread includes
        # whatever sharing the device costs.
        runs: list = []
        run_suite([SuiteJob(task, source, seeds[tid])] * args.repeats, args.backend, settings,
                  lambda job, r: runs.append(r), per_device=args.per_device)
        speedups = [r.speedup if r.status is Status.OK else float("nan") for r in runs]
        med = statistics.median(speedups)
        entry = {
            "task": tid,
            "candidate_ms": round(statistics.median([r.candidate.median_ms for r in runs if r.candidate]), 4),
            "reference_ms": [round(r.reference.median_ms, 4) if r.reference else None for r in runs],
            "overhead_ms": _median_of(runs, "overhead_ms"),
            "resolution_ms": _median_of(runs, "resolution_ms"),
            "speedups": [round(x, 4) for x in speedups],
            "median": round(med, 4),
            "spread": round((max(speedups) - min(speedups)) / med, 4),
        }
        report["repeatability"].append(entry)
        print("repeatability:", json.dumps(entry))
    shutil.rmtree(cache, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
