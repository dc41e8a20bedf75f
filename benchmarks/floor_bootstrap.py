"""Where the spread of recorded evaluations comes from: the measured times or the resolution floor,
and how steady the floor would be with more round trips a pass. Reads recorded evaluations only.

    python benchmarks/floor_bootstrap.py RECORDS.jsonl[.gz] ... [--trips 10 40 100] [--draws 2000]

RECORDS are `EvalResult` dicts, one a line (`benchmarks/repeatability.py --records`, `self_speedup.py
--records`). Per task it prints:

- the judged speedups' spread ((max - min) / median) and the spread of the same evaluations'
  unfloored ratios, min(reference median, baseline) / candidate median (ms / ms): where the two
  differ, the floor (`timing.speedup_stats`'s `floor_ms`, the pass's resolution) moved the
  speedup, not the times;
- the floor a timing pass of n round trips would get (`timing.pass_resolution` with the
  "timing_pass" source: the jitter, `timing.jitter`, of the reference host's fixed
  costs, over K), drawn `--draws` times with replacement from the fixed costs the records hold for
  that task (all evaluations pooled): its 10th, 50th and 90th percentiles per n, against the
  candidate's median per-call time;
- the least floor the tolerance sets (`pass_resolution`'s `least_ms`: `unexplained_tolerance`
  times the jitter of the calibration's batched round trips of both hosts, over K), drawn the
  same way from the calibration's fixed costs, for 16 round trips (the CUDA default: 8 rounds of
  two hosts) and 64.
A pass's floor is the larger of the two, at most the calibration's own jitter over K; each draw
here shows one part alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from cudal1.bench import timing
from cudal1.bench.settings import EvalSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allowance_replay import records  # noqa: E402


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="+", type=Path)
    p.add_argument("--trips", nargs="+", type=int, default=[10, 40, 100])
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in (result for path in args.records for _, result in records(path)):
        if r.get("status") == "ok" and r.get("round_trips", {}).get("reference"):
            by_task.setdefault(r["task_id"], []).append(r)
    for task, rs in by_task.items():
        judged = [r["speedup"] for r in rs]
        unfloored = [min(r["reference"]["median_ms"], r["baseline_ms"]) / r["candidate"]["median_ms"] for r in rs]
        k = rs[0]["calls_per_round"]
        trips = [t["wall_ms"] - t["own_ms"] for r in rs for t in r["round_trips"]["reference"]]
        cand = statistics.median(r["candidate"]["median_ms"] for r in rs)
        recorded = ", ".join(f"{r['resolution_ms']:.3f}" for r in rs)
        print(
            f"{task}: {len(rs)} evaluations, K {k}, candidate {cand:.4f} ms | judged spread {spread(judged):.3f}, "
            f"unfloored {spread(unfloored):.3f} ({', '.join(f'{u:.2f}' for u in unfloored)}) | "
            f"floors recorded {recorded}"
        )
        cal = [
            t["wall_ms"] - t["own_ms"]
            for r in rs
            for side in ("calibration reference", "calibration candidate")
            for t in r["round_trips"].get(side, [])[1:]  # the first round only settles the allocators
        ]
        tol = EvalSettings.for_backend(rs[0]["backend"]).unexplained_tolerance
        sources = [("pass", trips, 1.0, args.trips)]
        if cal and tol > 0:
            sources.append(("calibration (tolerance)", cal, tol, [16, 64]))
        for what, pool, factor, sizes in sources:
            for n in sizes:
                floors = sorted(factor * timing.jitter(rng.choices(pool, k=n)) / k for _ in range(args.draws))
                q = [timing.percentile(floors, x) for x in (0.1, 0.5, 0.9)]
                above = sum(f > cand for f in floors) / len(floors)
                print(
                    f"    {what}, {n:3d} trips: floor p10 {q[0]:.3f} p50 {q[1]:.3f} p90 {q[2]:.3f} ms; "
                    f"above the candidate's time in {above:.0%} of draws"
                )


if __name__ == "__main__":
    main()
