"""Where the one-call floor's cap moved recorded evaluations. Reads recorded evaluations only.

    python benchmarks/one_call_replay.py RECORDS.jsonl[.gz] ... [--margin 1.0] [--one-sided] [--gaps] [--count]

RECORDS are `EvalResult` dicts, one a line, or `{"kind", "result"}` lines
(`scripts/gpu_lean_host.py --records`). For each evaluation with one-call round trips it prints
one line: the speedup as judged, the candidate's recorded per-call median, and the floor
(`timing.one_call_floor_ms`, ms per call) three ways: with the cap on the reference host's
one-call round trips (as judged), with the calibration's cap alone (as judged without
`EvalSettings.one_call_cap_after_candidate`: on records made with it, an A/B on the same
evaluations) and with no cap; then the reference host's one-call
round trips' medians in the calibration and the pass, and the cap (the calibration's, or the larger
of it and that of the reference's one-call trips after the candidate where the record has them:
`EvalSettings.one_call_cap_after_candidate`). A floor above the
candidate's median raised it. The reference's per-call figure is the smaller of its recorded
median and baseline, as the judge takes it (`Judge._one_call_floored`); the round trips are
recorded to 0.1 us, so the replay agrees with the judged floor to about that. (Records made
before 2026-12-06's thirty-third session were floored from the calibration's baseline, before
the baseline after the candidate.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from cudal1.bench import timing
from cudal1.bench.judge import AFTER_CANDIDATE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allowance_replay import records  # noqa: E402


def floors(result: dict[str, Any], margin: float = 1.0, signed_bias: bool = True) -> dict[str, Any] | None:
    """The one-call floors of one recorded evaluation (ms per call) and the reference host's
    one-call medians (ms), or None when it has no one-call round trips of both phases.

    Keys: "capped" (with the cap, as judged), "calibration_capped" (with the calibration's cap
    alone, as judged without `EvalSettings.one_call_cap_after_candidate`; the same as "capped"
    where the record has no trips after the candidate), "uncapped", "reference_ms" (the
    per-call figure the floor starts from), "calibration_ms", "pass_ms", "cap_ms"."""
    rt = result.get("round_trips") or {}

    def walls(key: str) -> list[float]:
        return [t["wall_ms"] for t in rt.get(key, [])]

    cal = list(zip(walls("calibration one-call candidate"), walls("calibration one-call reference")))
    trips = list(zip(walls("one-call candidate"), walls("one-call reference")))
    after = walls(AFTER_CANDIDATE + "reference")
    if not cal or not trips or not result.get("reference"):
        return None
    ref_ms = min(result["reference"]["median_ms"], result.get("baseline_ms") or float("inf"))
    cal_ref = [r for _, r in cal]
    return {
        "capped": timing.one_call_floor_ms(trips, cal, ref_ms, margin, signed_bias, after_reference_ms=after)[0],
        "calibration_capped": timing.one_call_floor_ms(trips, cal, ref_ms, margin, signed_bias)[0],
        "uncapped": timing.one_call_floor_ms(trips, cal, ref_ms, margin, signed_bias, cap=False)[0],
        "reference_ms": ref_ms,
        "calibration_ms": statistics.median(cal_ref),
        "pass_ms": statistics.median(r for _, r in trips),
        "cap_ms": timing.one_call_cap_ms(cal_ref, after),
    }


def idle_gaps(result: dict[str, Any]) -> dict[str, Any] | None:
    """The idle gaps before the reference host's one-call round trips of one recorded evaluation
    (ms: from the end of the round trip before it, of either host, to its go, on the judge's
    clock: `go_s` and `wall_ms` of every recorded round trip), or None without one-call round
    trips of both phases.

    Keys: "calibration_gap_ms", "pass_gap_ms" (medians), "pass_after_short_ms",
    "pass_after_long_ms" (the median round trip of the pass's reference one-call trips after the
    shorter and the longer half of their gaps)."""
    rt = result.get("round_trips") or {}

    def gaps(key: str) -> list[tuple[float, float]]:  # (gap, round trip) of each trip but a first one
        walls = [t["wall_ms"] for t in sorted(rt.get(key, []), key=lambda t: t["go_s"])]
        idle = timing.idle_gaps_ms(rt, key)
        return list(zip(idle, walls[len(walls) - len(idle) :]))

    cal, run = gaps("calibration one-call reference"), sorted(gaps("one-call reference"))
    if not cal or len(run) < 2:
        return None
    half = len(run) // 2
    return {
        "calibration_gap_ms": statistics.median(g for g, _ in cal),
        "pass_gap_ms": statistics.median(g for g, _ in run),
        "pass_after_short_ms": statistics.median(w for _, w in run[:half]),
        "pass_after_long_ms": statistics.median(w for _, w in run[half:]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="+", type=Path)
    p.add_argument("--margin", type=float, default=1.0, help="EvalSettings.one_call_margin")
    p.add_argument("--one-sided", action="store_true", help="the calibration's bias only where positive")
    p.add_argument("--gaps", action="store_true", help="add the idle gaps before the reference's one-call trips")
    p.add_argument(
        "--count",
        action="store_true",
        help="end with, per record kind, how many evaluations each floor raised (at or above the candidate's median)",
    )
    args = p.parse_args()
    # kind: [evaluations, raised capped, raised with the calibration's cap alone, raised uncapped]
    raised: dict[str, list[int]] = {}
    for path in args.records:
        for kind, r in records(path):
            f = floors(r, args.margin, not args.one_sided) if r.get("status") == "ok" else None
            if f is None:
                continue
            cand = r["candidate"]["median_ms"]
            tally = raised.setdefault(kind or "evaluation", [0, 0, 0, 0])
            tally[0] += 1
            for i, key in enumerate(("capped", "calibration_capped", "uncapped"), start=1):
                tally[i] += 0 < f[key] >= cand * (1 - 1e-4)  # the judge's floor, recorded to 0.1 us
            print(
                f"{r.get('task_id')} {kind or ''}: paid {r['speedup']:.3f}x, candidate {cand:.4f} ms | floor capped "
                f"{f['capped']:.4f}, calibration's cap alone {f['calibration_capped']:.4f}, uncapped "
                f"{f['uncapped']:.4f} | reference one-call calibration "
                f"{f['calibration_ms']:.3f}, pass {f['pass_ms']:.3f}, cap {f['cap_ms']:.3f} ms"
            )
            g = idle_gaps(r) if args.gaps else None
            if g is not None:
                print(
                    f"    idle gap before the reference's one-call trips: calibration {g['calibration_gap_ms']:.2f}, "
                    f"pass {g['pass_gap_ms']:.2f} ms; pass trips after the shorter half of the gaps "
                    f"{g['pass_after_short_ms']:.3f}, after the longer half {g['pass_after_long_ms']:.3f} ms"
                )
    for kind, (n, capped, calibration_capped, uncapped) in sorted(raised.items()) if args.count else ():
        print(
            f"{kind}: {n} with one-call rounds; the floor raised {capped} with the cap, "
            f"{calibration_capped} with the calibration's cap alone, {uncapped} without"
        )


if __name__ == "__main__":
    main()
