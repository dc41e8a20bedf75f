"""Evaluation throughput (cold and warm build cache) and repeatability of the evaluator.

Prints figures and writes them as JSON; the figures in docs/benchmarks.md come from this script.

    python benchmarks/eval_throughput.py --backend cuda --levels 1 2 --copies 1 --out throughput.json

Throughput: every seed solution of the chosen levels, each in `--copies` variants made distinct
by a salt comment (so each is its own build), goes through the suite pipeline (parallel builds,
one timing at a time per device; on CUDA builds overlap timing, on cores kept apart from the
timing slot unless `--no-reserve-cores`). "cold" starts from an empty build cache; "warm"
evaluates the same sources again. Candidates per hour = candidates / wall seconds × 3600.

Cold against warm: per candidate, the speedup measured in the cold run (while other candidates
compiled on the same host) and in the warm run (nothing compiling), their ratio, and the build
seconds and import phase of each; then the median and worst ratio. Timing that compilers do not
disturb gives ratios near 1 (within the evaluator's repeatability). The median seconds of each
phase of an evaluation, cold and warm ("prebuild" is the build before it), close the report.

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


def run_jobs(
    jobs: list[SuiteJob],
    backend: str,
    settings: EvalSettings,
    build_jobs: int | None,
    jsonl: Path | None,
    per_device: int = 1,
    reserve_cores: bool = True,
    by_job: dict | None = None,
) -> dict:
    """Run `jobs` through the suite pipeline; print and return the run's figures. `by_job`, when
    given, gets each job's index -> its result."""
    results = []
    writer = ResultWriter(jsonl) if jsonl else None
    index = {id(job): i for i, job in enumerate(jobs)}

    def on_result(job: SuiteJob, r) -> None:
        results.append(r)
        if by_job is not None:
            by_job[index[id(job)]] = r
        if writer:
            writer.write(r, solution=str(job.solution))

    t0 = time.perf_counter()
    run_suite(
        jobs, backend, settings, on_result, build_jobs=build_jobs, per_device=per_device, reserve_cores=reserve_cores
    )
    wall = time.perf_counter() - t0
    print(format_summary(summarize(results)))
    for r in sorted(results, key=lambda r: r.task_id):
        speed = f"{r.speedup:.2f}x" if r.speedup else "-"
        print(
            f"  {r.task_id:11s} {r.status.value:14s} {speed:>8s}  build {r.build_seconds or 0:6.1f}s  {','.join(r.labels)}  {r.message[:120]}"
        )
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


def cold_against_warm(jobs: list[SuiteJob], cold: dict, warm: dict) -> dict:
    """Per candidate: the speedup cold and warm and their ratio, build seconds, import phase and
    timing resolution (the round trip's jitter, ms) of each; printed as a table. Returns {"rows", "median_ratio", "worst_ratio", "ok_both"} (ratio
    = cold / warm speedup, over candidates correct in both runs; worst = farthest from 1)."""
    rows = []
    seeds = len({j.task.task_id for j in jobs})  # jobs are laid out copy by copy, seeds in order
    print(
        f"{'candidate':22s} {'cold':>8s} {'warm':>8s} {'cold/warm':>9s}  {'build cold':>10s} {'import cold':>11s} "
        f"{'import warm':>11s} {'res cold':>9s} {'res warm':>9s}  statuses"
    )
    for i, job in enumerate(jobs):
        c, w = cold.get(i), warm.get(i)
        ok = (
            c is not None
            and w is not None
            and c.status is Status.OK
            and w.status is Status.OK
            and c.speedup
            and w.speedup
        )
        ratio = c.speedup / w.speedup if ok else None
        name = f"{job.task.task_id}#{i // seeds}"
        row = {
            "candidate": name,
            "cold": c.speedup if c else None,
            "warm": w.speedup if w else None,
            "ratio": round(ratio, 4) if ratio else None,
            "build_s_cold": c.build_seconds if c else None,
            "build_s_warm": w.build_seconds if w else None,
            "import_s_cold": (c.phases_s or {}).get("import") if c else None,
            "import_s_warm": (w.phases_s or {}).get("import") if w else None,
            "resolution_ms_cold": c.resolution_ms if c else None,
            "resolution_ms_warm": w.resolution_ms if w else None,
            "status_cold": c.status.value if c else None,
            "status_warm": w.status.value if w else None,
        }
        rows.append(row)

        def num(x, unit="", width=8):
            return f"{x:{width}.2f}{unit}" if isinstance(x, (int, float)) else f"{'-':>{width + len(unit)}s}"

        print(
            f"{name:22s} {num(row['cold'], 'x', 7)} {num(row['warm'], 'x', 7)} {num(ratio, '', 9)}  "
            f"{num(row['build_s_cold'], 's', 9)} {num(row['import_s_cold'], 's', 10)} {num(row['import_s_warm'], 's', 10)} "
            f"{num(row['resolution_ms_cold'], 'ms', 7)} {num(row['resolution_ms_warm'], 'ms', 7)}  "
            f"{row['status_cold']}/{row['status_warm']}"
        )
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    summary = {
        "rows": rows,
        "ok_both": len(ratios),
        "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "worst_ratio": max(ratios, key=lambda x: abs(x - 1.0)) if ratios else None,
    }
    print(
        f"cold/warm speedup ratio over {len(ratios)} candidates correct in both: median {summary['median_ratio']}, "
        f"farthest from 1: {summary['worst_ratio']}"
    )
    return summary


def print_phases(cold: dict, warm: dict) -> None:
    """The median seconds of each phase of an evaluation, cold against warm."""
    names = sorted(set(cold) | set(warm), key=lambda k: (k.startswith("calls: "), k))
    print(f"{'phase (median s)':34s} {'cold':>8s} {'warm':>8s}")
    for k in names:
        print(f"{k:34s} {cold.get(k, float('nan')):8.3f} {warm.get(k, float('nan')):8.3f}")


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
            kind = (
                "link"
                if out.endswith(".so")
                else "cuda"
                if ".cuda" in out
                else "cpp"
                if out.endswith(".o")
                else "other"
            )
            kinds.setdefault(kind, []).append((int(parts[1]) - int(parts[0])) / 1e3)
    return {
        k: {"n": len(v), "median_s": round(statistics.median(v), 1), "total_s": round(sum(v), 1)}
        for k, v in kinds.items()
    }


def _median_of(results: list, field: str) -> float | None:
    values = [getattr(r, field, None) for r in results]
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 4) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--levels", type=int, nargs="+", default=[1])
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--tasks", nargs="+", default=None, help="only these seeds (task ids), e.g. for a quick run")
    ap.add_argument("--build-jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    ap.add_argument(
        "--per-device",
        type=int,
        default=1,
        help="evaluations at a time on the device (setup overlaps, timing takes turns); also for the repeats",
    )
    ap.add_argument(
        "--reserve-cores",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep compilers off the timing slot's cores (default on; --no-reserve-cores: the old way)",
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--repeat-task", nargs="+", default=None, help="tasks for the repeatability runs (default: the first seed)"
    )
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    ap.add_argument("--results-dir", default=None, help="write every result to cold.jsonl / warm.jsonl here")
    args = ap.parse_args(argv)

    cache = tempfile.mkdtemp(prefix="cudal1-bench-cache-")
    settings = EvalSettings.for_backend(args.backend, cache_dir=cache)
    tasks = load_tasks("builtin")
    seeds = {
        tid: p
        for tid, p in seed_solutions(args.backend).items()
        if int(tid.split("/")[0][5:]) in args.levels and (args.tasks is None or tid in args.tasks)
    }
    if not seeds:
        print(f"no {args.backend} seed solutions for levels {args.levels}", file=sys.stderr)
        return 1
    jobs = []
    for copy in range(args.copies):
        for tid, path in sorted(seeds.items()):
            source = path.read_text() + f"\n# throughput-benchmark variant {copy}\n"
            jobs.append(SuiteJob(find_task(tasks, tid), source, path))
    report: dict = {
        "backend": args.backend,
        "levels": args.levels,
        "build_jobs": args.build_jobs,
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    print(f"{len(jobs)} candidates ({len(seeds)} seeds × {args.copies} variants), build jobs {args.build_jobs}")
    results_dir = Path(args.results_dir) if args.results_dir else None
    if results_dir:
        results_dir.mkdir(parents=True, exist_ok=True)
    report["per_device"] = args.per_device
    report["reserve_cores"] = args.reserve_cores
    cold, warm = {}, {}
    report["cold"] = run_jobs(
        jobs,
        args.backend,
        settings,
        args.build_jobs,
        results_dir / "cold.jsonl" if results_dir else None,
        args.per_device,
        args.reserve_cores,
        cold,
    )
    print("cold cache:", json.dumps(report["cold"]))
    report["build_edges"] = build_edges(cache)
    print("build edges:", json.dumps(report["build_edges"]))
    report["warm"] = run_jobs(
        jobs,
        args.backend,
        settings,
        args.build_jobs,
        results_dir / "warm.jsonl" if results_dir else None,
        args.per_device,
        args.reserve_cores,
        warm,
    )
    print("warm cache:", json.dumps(report["warm"]))
    report["cold_against_warm"] = cold_against_warm(jobs, cold, warm)
    print_phases(report["cold"]["median_phases_s"], report["warm"]["median_phases_s"])
    print(
        f"candidates/hour: cold {report['cold']['per_hour']}, warm {report['warm']['per_hour']} "
        f"({len(jobs)} candidates, {os.cpu_count()} cores, reserve_cores={args.reserve_cores})"
    )

    report["repeatability"] = []
    for tid in (args.repeat_task or [sorted(seeds)[0]]) if args.repeats > 0 else []:
        task, source = find_task(tasks, tid), seeds[tid].read_text()
        # The repeats run as the suite does (per_device at a time), so their spread includes
        # whatever sharing the device costs.
        runs: list = []
        run_suite(
            [SuiteJob(task, source, seeds[tid])] * args.repeats,
            args.backend,
            settings,
            lambda job, r: runs.append(r),
            per_device=args.per_device,
        )
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
