"""Replay recorded evaluations under two measures of a round trip's jitter.

The jitter sets what a candidate host may leave unexplained (`unexplained_tolerance` times it) and
the resolution floor (`timing.pass_resolution`). This script recomputes, from each record's round
trips (`EvalResult.round_trips`), the floor and the speedup under

- `p90-p10`: the 90th minus the 10th percentile of the fixed costs (the judge's rule until
  2026-12-05), and
- `iqr`: `timing.jitter`, 1.9 times the interquartile range (the rule now),

with everything else as the judge does it now (`timing.allowed_fixed_cost`,
`timing.candidate_rounds_ms`, `timing.speedup_stats`), and prints per task (and `kind`, for the
lean-host script's records) each rule's speedups, their spread ((max - min) / median) and floors.

    python benchmarks/jitter_replay.py docs/results/h100-2026-12-05-twenty-sixth/acceptance/repeat-records.jsonl.gz
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from cudal1.bench import timing
from cudal1.bench.settings import EvalSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allowance_replay import fixed_costs, judged_speedup, records  # noqa: E402


def p90_p10(values_ms: list[float]) -> float:
    return max(timing.percentile(values_ms, 0.9) - timing.percentile(values_ms, 0.1), 1e-6)


RULES: dict[str, Callable[[list[float]], float]] = {"p90-p10": p90_p10, "iqr": timing.jitter}


def replay(result: dict[str, Any], jitter: Callable[[list[float]], float]) -> tuple[float, float]:
    """(speedup ×, floor ms a call) the judge gives `result` with `jitter` as the jitter measure.
    Raises KeyError for a record without a calibration or a timing pass."""
    rt, k = result["round_trips"], result["calls_per_round"]
    cal_c = fixed_costs(rt["calibration candidate"], True)
    cal_r = fixed_costs(rt["calibration reference"], True)
    trips = fixed_costs(rt["reference"], False)
    s = EvalSettings.for_backend(result.get("backend") or "cuda")
    jit = jitter(cal_r + cal_c)
    tolerance = s.unexplained_tolerance * jit
    high = timing.allowed_fixed_cost(trips, cal_r, cal_c, jit, s.overhead_quantile)
    typical = timing.allowed_fixed_cost(trips, cal_r, cal_c, jit)
    floor = jit / k
    if s.resolution_source == "timing_pass" and len(trips) >= 3:
        floor = min(floor, max(jitter(trips) / k, tolerance / k))
    return judged_speedup(result, high, typical, tolerance, floor), floor


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path, help="JSONL files of EvalResult dicts (.gz allowed)")
    args = ap.parse_args(argv)
    for path in args.records:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for kind, r in records(path):
            if r.get("status") == "ok" and "calibration candidate" in (r.get("round_trips") or {}):
                groups.setdefault((r["task_id"], kind or ""), []).append(r)
        print(f"{path}: {sum(map(len, groups.values()))} evaluations")
        for (task, kind), rs in groups.items():
            print(f"  {task} {kind}".rstrip() + f" ({len(rs)}): judged " + " ".join(f"{r['speedup']:.3f}" for r in rs))
            for name, jitter in RULES.items():
                out = [replay(r, jitter) for r in rs]
                speedups = [s for s, _ in out]
                spread = (max(speedups) - min(speedups)) / statistics.median(speedups)
                print(
                    f"    {name:>7}: "
                    + " ".join(f"{s:.3f}" for s in speedups)
                    + f"  spread {spread:.3f}; floors ms "
                    + " ".join(f"{f:.3f}" for _, f in out)
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
