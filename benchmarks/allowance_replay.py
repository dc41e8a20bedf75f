"""Replay recorded evaluations under several rules for what a candidate host may leave unexplained.

Every evaluation records its round trips (`EvalResult.round_trips`: the judge's time and each
host's own time of its forwards, in the calibration and in the timing pass). From them this
script recomputes the candidate's figures (`timing.candidate_rounds_ms`) and the speedup under

- `calibration`: the candidate host's fixed cost from its own calibration, moved as far as the
  reference host's moved since then (at most the jitter): the judge's rule until 2026-12-05;
- `same_pass`: `timing.allowed_fixed_cost`, the reference host's fixed cost in the same pass,
  capped by the calibration's plus the jitter (the judge's rule on the CPU),
- `after_cap`: the same, its cap the larger of the calibration's and that of the reference's
  round trips after the candidate, where the record has them (`EvalSettings.
  fixed_cost_cap_after_candidate`: the judge's rule on CUDA since the thirty-ninth session),
- `uncapped`: the same without its cap (the calibration's reference fixed cost plus the jitter):
  how far the cap moved each evaluation, at most what `EvalSettings.fixed_cost_cap_after_candidate`
  can give back (it lifts the cap only as far as the fixed costs after the candidate),

and prints, per file, how many evaluations lie in a band (a reference evaluated as its own
candidate should give 1.0×) and, for records that name a `kind` (the lean-host script's
`{"task", "kind", "result"}` lines), each kind's median speedup per task and rule.

    python benchmarks/allowance_replay.py docs/results/h100-2026-12-05-twenty-fifth/tolerance/rec*.jsonl.gz
    python benchmarks/allowance_replay.py --tolerance 0.5 RECORDS.jsonl ...
    python benchmarks/allowance_replay.py --share 0.02 RECORDS.jsonl ...   # with the share cap

The replay of the rule that produced a record reproduces its judged speedup (the script says
how far it is off, per file): the figures depend only on the recorded round trips, the
reference's clean baseline and the resolution, which the record holds. `--tolerance` is
`EvalSettings.unexplained_tolerance` (default: the backend's).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterator

from cudal1.bench import timing
from cudal1.bench.judge import AFTER_BATCHED
from cudal1.bench.settings import EvalSettings

RULES = ("calibration", "same_pass", "after_cap", "uncapped")


def records(path: Path) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """(kind or None, EvalResult dict) for each line of a JSONL file (gzip by suffix)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                yield (d.get("kind"), d["result"]) if "result" in d else (None, d)


def fixed_costs(trips: list[dict[str, Any]], skip_first: bool) -> list[float]:
    """wall - own (ms) of each recorded round trip; the calibration's first round is the judge's
    warm-up (`Judge._calibrate_both` leaves it out)."""
    costs = [t["wall_ms"] - t["own_ms"] for t in trips if t.get("own_ms") is not None]
    return costs[1:] if skip_first else costs


def replay(result: dict[str, Any], rule: str, tolerance_share: float, cap_share: float | None = None) -> float:
    """The speedup (×) the judge gives under `rule` from `result`'s recorded round trips, the
    tolerance `tolerance_share` × the jitter, at most `cap_share` of the candidate's median round
    (`timing.candidate_rounds_ms`; None: no cap). Raises KeyError for a record without a
    calibration or a timing pass."""
    rt = result["round_trips"]
    cal_c = fixed_costs(rt["calibration candidate"], True)
    cal_r = fixed_costs(rt["calibration reference"], True)
    trips = fixed_costs(rt["reference"], False)
    jit, q = timing.jitter(cal_r + cal_c), EvalSettings().overhead_quantile
    if rule == "calibration":
        high = timing.percentile(cal_c, q) + min(timing.percentile(trips, q) - timing.percentile(cal_r, q), jit)
        typical = statistics.median(cal_c) + min(statistics.median(trips) - statistics.median(cal_r), jit)
    else:
        cap_jitter = math.inf if rule == "uncapped" else jit
        after = fixed_costs(rt.get(AFTER_BATCHED + "reference", []), False) if rule == "after_cap" else []
        after_ms = after if len(after) >= 2 else None  # the judge's condition (`Judge.after_the_candidate`)
        high = timing.allowed_fixed_cost(trips, cal_r, cal_c, cap_jitter, q, after_ms)
        typical = timing.allowed_fixed_cost(trips, cal_r, cal_c, cap_jitter, after_reference_ms=after_ms)
    floor = result.get("resolution_ms") or 0.0
    return judged_speedup(result, high, typical, tolerance_share * jit, floor, tolerance_cap_share=cap_share)


def judged_speedup(
    result: dict[str, Any],
    high_ms: float,
    typical_ms: float,
    tolerance_ms: float,
    floor_ms: float,
    tolerance_cap_share: float | None = None,
) -> float:
    """The speedup (×) of `result`'s recorded timing pass with the candidate host's allowances
    (`high_ms`, `typical_ms`, `tolerance_ms`, `tolerance_cap_share`: `timing.candidate_rounds_ms`)
    and the resolution floor `floor_ms` (ms a call: `timing.speedup_stats`), as the judge computes it."""
    rt, k = result["round_trips"], result["calls_per_round"]
    rounds = [[(t["wall_ms"], t["own_ms"])] for t in rt["candidate"]]
    totals = timing.candidate_rounds_ms(
        rounds, high_ms, typical_ms, tolerance_ms=tolerance_ms, tolerance_share=tolerance_cap_share
    )
    extra = [t.get("parallel_cpu_ms", 0.0) for t in rt["candidate"]]
    cand = [[(tot[0] + e) / k] for tot, e in zip(totals, extra)]
    ref = [[t["own_ms"] / k] for t in rt["reference"]]
    speedup, _ = timing.speedup_stats(ref, cand, result["baseline_ms"], floor_ms)
    return speedup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path, help="JSONL files of EvalResult dicts (.gz allowed)")
    ap.add_argument("--tolerance", type=float, default=None, help="unexplained_tolerance (default: the backend's)")
    ap.add_argument(
        "--share",
        type=float,
        default=None,
        help="cap the tolerance at this share of the candidate's median round (unexplained_share; default: no cap)",
    )
    ap.add_argument("--band", type=float, nargs=2, default=(0.98, 1.02), metavar=("LO", "HI"))
    args = ap.parse_args(argv)
    lo, hi = args.band
    for path in args.records:
        rows: list[tuple[str, str | None, dict[str, float], float]] = []
        for kind, r in records(path):
            if r.get("status") != "ok" or "calibration candidate" not in (r.get("round_trips") or {}):
                continue
            share = args.tolerance
            if share is None:
                share = EvalSettings.for_backend(r.get("backend") or "cuda").unexplained_tolerance
            rows.append(
                (r["task_id"], kind, {rule: replay(r, rule, share, args.share) for rule in RULES}, r["speedup"])
            )
        if not rows:
            print(f"{path}: no evaluation with recorded round trips")
            continue
        print(f"{path}: {len(rows)} evaluations")
        for rule in RULES:
            inside = [row for row in rows if lo <= row[2][rule] <= hi]
            misses = ", ".join(f"{t} {s[rule]:.3f}" for t, _, s, _ in rows if not lo <= s[rule] <= hi)
            judged_off = max(abs(s[rule] - judged) for _, _, s, judged in rows)
            print(
                f"  {rule:>11}: {len(inside)} of {len(rows)} in {lo}-{hi}x; off the judged speedup by up to "
                f"{judged_off:.4f}" + (f"; outside: {misses}" if misses else "")
            )
        moved = [
            f"{t} {s['same_pass']:.3f} -> {s['uncapped']:.3f}"
            for t, _, s, _ in rows
            if s["uncapped"] > s["same_pass"] * 1.005
        ]
        print(
            f"  the cap lowered {len(moved)} of {len(rows)} by more than 0.5%"
            + (f": {', '.join(moved)}" if moved else "")
        )
        kinds = sorted({(t, kind) for t, kind, _, _ in rows if kind is not None})
        for task, kind in kinds:
            medians = {
                rule: statistics.median(s[rule] for t, kd, s, _ in rows if (t, kd) == (task, kind)) for rule in RULES
            }
            print(f"  {task} {kind}: median " + ", ".join(f"{rule} {m:.4f}" for rule, m in medians.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
