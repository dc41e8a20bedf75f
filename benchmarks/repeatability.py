"""Repeatability of the evaluator: one candidate evaluated N times under several timing settings.

Prints, per task and settings variant, each evaluation's reference ms, candidate ms and speedup,
and the spread ((max − min) / median) of each over the N evaluations. Seeing which of the two
times moves between evaluations says where the variance comes from.

    python benchmarks/repeatability.py --backend cuda --tasks level1/7 level2/5 --repeats 5 --out rep.json
    ... --records all.jsonl     # every evaluation's whole result too: where each round trip's time went

Variants: `default` (the backend's EvalSettings), `long` (3× the rounds and 5× the time per
round), `fixed_seed` (the same inputs in every evaluation), `overhead_q50` (the median fixed cost
bounds the claims), `calibration_x3` (3× the calibration's batched rounds), `timing_resolution`
(the resolution from the timing pass's own reference round trips, capped by the calibration's;
CUDA's default), `calibration_resolution` (the calibration's; the CPU's default),
`round<N>` (each timed round trip at least N ms of reference work: more calls per round, K, for a
task whose reference is short against N).

    ... --inprocess             # beside each task, the seed timed in one plain process (the yardstick),
                                # with the cache flushed before each call and without
    ... --plain 3 --variants    # no judge at all: the seed timed in 3 fresh plain processes (new input
                                # seeds), their speedups and spread: what a plain process can repeat
                                # (`benchmarks/repeat_verdict.py` sets the repeat check's limit from it)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

from cudal1.bench.evaluator import evaluate
from cudal1.bench.inprocess import measure_isolated
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings, add_overrides_argument
from cudal1.tasks import find_task, load_tasks, seed_solutions


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if xs else float("nan")


def variants(backend: str, cache: str) -> dict[str, EvalSettings]:
    base = EvalSettings.for_backend(backend, cache_dir=cache)
    return {
        "default": base,
        "long": EvalSettings.for_backend(
            backend, cache_dir=cache, rounds=base.rounds * 3, min_round_ms=max(base.min_round_ms, 1.0) * 5
        ),
        "fixed_seed": EvalSettings.for_backend(backend, cache_dir=cache, seed=1234),
        "overhead_q50": EvalSettings.for_backend(backend, cache_dir=cache, overhead_quantile=0.5),
        # 3x the calibration's batched rounds: its jitter (the resolution) from more round trips,
        # so one or two slow ones no longer set the 90th percentile.
        "calibration_x3": EvalSettings.for_backend(
            backend, cache_dir=cache, calibration_rounds=3 * base.calibration_rounds
        ),
        # The resolution from the reference host's round trips of the timing pass itself, capped
        # by the calibration's (`cudal1.bench.timing.pass_resolution`).
        "timing_resolution": EvalSettings.for_backend(backend, cache_dir=cache, resolution_source="timing_pass"),
        "calibration_resolution": EvalSettings.for_backend(backend, cache_dir=cache, resolution_source="calibration"),
        # Each host polls its socket for the go of a timed round trip (`EvalSettings.warm_go`).
        "warm_go": EvalSettings.for_backend(backend, cache_dir=cache, warm_go=True),
    }


def variant(name: str, backend: str, cache: str) -> EvalSettings:
    """The settings named `name`: one of `variants`, or `round<N>` (min_round_ms=N).
    Raises KeyError for an unknown name."""
    if name.startswith("round") and name[5:].isdigit():
        base = EvalSettings.for_backend(backend, cache_dir=cache)
        n = float(name[5:])
        return EvalSettings.for_backend(
            backend, cache_dir=cache, min_round_ms=n, max_round_ms=max(base.max_round_ms, n)
        )
    return variants(backend, cache)[name]


def plain_entry(tid: str, task, source: str, backend: str, processes: int, builds: Path) -> dict:
    """The seed `source` timed against the task's reference in `processes` fresh plain processes
    (`cudal1.bench.inprocess.measure_isolated`, 100 calls each, input seed i in process i, builds
    kept in `builds/<task>` so only the first compiles): an entry shaped as the judge's (variant
    "plain"; times in ms, speedups in ×, spreads (max − min) / median). A process that fails is
    counted in `of` and not in `ok`, its error in `errors`."""
    device = "cuda" if backend == "cuda" else "cpu"
    ref, cand, sp, errors = [], [], [], []
    for i in range(processes):
        try:
            m = measure_isolated(
                task,
                {"seed": source},
                device=device,
                build_dir=builds / tid.replace("/", "_"),
                keep_builds=True,
                seed=i,
            )
        except (RuntimeError, TimeoutError) as exc:
            errors.append(str(exc)[-300:])
            continue
        if "seed" not in m.ratios:
            errors.append(m.errors.get("seed", "no ratio"))
            continue
        ref.append(m.reference_ms)
        cand.append(m.candidates_ms["seed"])
        sp.append(m.ratios["seed"])
    return {
        "task": tid,
        "variant": "plain",
        "ok": len(sp),
        "of": processes,
        "reference_ms": [round(x, 5) for x in ref],
        "candidate_ms": [round(x, 5) for x in cand],
        "speedups": [round(x, 4) for x in sp],
        "spread_reference": round(spread(ref), 4) if ref else None,
        "spread_candidate": round(spread(cand), 4) if cand else None,
        "spread_speedup": round(spread(sp), 4) if sp else None,
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variants", nargs="*", default=["default", "long", "fixed_seed"])
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--records",
        default=None,
        help="also append every evaluation's whole result (its round trips and their parts included) to this JSONL",
    )
    ap.add_argument("--cache", default=None, help="build cache to use (default: a new temporary one)")
    ap.add_argument(
        "--inprocess",
        action="store_true",
        help="also time each task's seed against its reference in one plain process (cudal1.bench.inprocess)",
    )
    ap.add_argument(
        "--plain",
        type=int,
        default=0,
        metavar="N",
        help="also time each task's seed against its reference in N fresh plain processes (one entry, variant 'plain')",
    )
    add_overrides_argument(ap, example="warm_go=true")
    args = ap.parse_args(argv)
    overrides = dict(args.set)

    cache = args.cache or tempfile.mkdtemp(prefix="cudal1-rep-cache-")
    tasks, seeds = load_tasks("builtin"), seed_solutions(args.backend)
    chosen = {name: dataclasses.replace(variant(name, args.backend, cache), **overrides) for name in args.variants}
    report = []
    for tid in args.tasks:
        task, source = find_task(tasks, tid), seeds[tid].read_text()
        yardstick = None
        if args.inprocess:
            device = "cuda" if args.backend == "cuda" else "cpu"
            yardstick = measure_isolated(task, {"seed": source}, device=device).to_dict()
            # The same without the cache flush before each call: how much of a gap to the judge
            # (which flushes once per round trip of K calls) the cache's state explains.
            warm = measure_isolated(task, {"seed": source}, device=device, flush_l2=False).to_dict()
            yardstick["warm_cache"] = {k: warm[k] for k in ("reference_ms", "candidates_ms", "ratios", "spreads")}
            print(json.dumps({"task": tid, "inprocess": yardstick}), flush=True)
        if args.plain:
            report.append(plain_entry(tid, task, source, args.backend, args.plain, Path(cache) / "plain-builds"))
            print(json.dumps(report[-1]), flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(report, indent=2))
        for name in args.variants:
            runs = [evaluate(task, source, args.backend, settings=chosen[name]) for _ in range(args.repeats)]
            if args.records:
                with open(args.records, "a", encoding="utf-8") as f:
                    for r in runs:
                        f.write(json.dumps({"variant": name, **r.to_dict()}) + "\n")
            ok = [r for r in runs if r.status is Status.OK]
            ref = [r.reference.median_ms for r in ok]
            cand = [r.candidate.median_ms for r in ok]
            sp = [r.speedup for r in ok]
            entry = {
                "task": tid,
                "variant": name,
                "ok": len(ok),
                "of": len(runs),
                "reference_ms": [round(x, 5) for x in ref],
                "candidate_ms": [round(x, 5) for x in cand],
                "speedups": [round(x, 4) for x in sp],
                "within_eval_spread": [round(r.speedup_spread or 0, 4) for r in ok],
                "spread_reference": round(spread(ref), 4) if ref else None,
                "spread_candidate": round(spread(cand), 4) if cand else None,
                "spread_speedup": round(spread(sp), 4) if sp else None,
                "eval_seconds": round(statistics.median([r.eval_seconds or 0 for r in runs]), 1),
                "overhead_ms": [getattr(r, "overhead_ms", None) for r in ok],
                "resolution_ms": [getattr(r, "resolution_ms", None) for r in ok],
                "statuses": sorted({r.status.value for r in runs}),
                "calls_per_round": [r.calls_per_round for r in ok],
            }
            if yardstick is not None:
                entry["inprocess"] = yardstick
            report.append(entry)
            print(json.dumps(entry), flush=True)
            if args.out:  # after every entry: a run cut short by its time limit keeps what it measured
                Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
