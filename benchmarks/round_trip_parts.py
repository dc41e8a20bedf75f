"""Where a round trip's fixed cost and its jitter go, from evaluation records.

Reads JSONL of whole `EvalResult` records (`benchmarks/repeatability.py --records`, or
`cudal1 eval-suite --out`) and prints, per evaluation and per kind of round trip (calibration or
timing, reference or candidate host), the median and the jitter (90th minus 10th percentile, ms a
round trip) of each part:

- wall: the judge's clock, from the go until it holds its copy of every output;
- messages: the judge's "answered" time less the host's own parts (both messages and the wake-ups);
- read: wall less answered (the judge copying the outputs and synchronizing);
- launch: the host's CPU time around its forwards less their GPU time (launches, synchronizes);
- locate, inputs: the host's own parts after and before the forwards, before its answer;
- audit: the host's memory checks after its answer (outside wall's interval but for the overlap);
- fixed: wall less the forwards' own time, what the resolution is made of (its jitter / K).

    python benchmarks/round_trip_parts.py records.jsonl [--task level1/7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def percentile(values: list[float], q: float) -> float:
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def parts(trip: dict) -> dict[str, float] | None:
    """The parts (ms) of one recorded round trip, or None without the host's own figures."""
    host, own = trip.get("host_parts_ms") or {}, trip.get("own_ms")
    if own is None or not host:
        return None
    mine = host.get("inputs", 0.0) + host.get("forwards", 0.0) + host.get("locate", 0.0)
    return {
        "wall": trip["wall_ms"],
        "messages": trip["answered_ms"] - mine,
        "read": trip["wall_ms"] - trip["answered_ms"],
        "launch": host.get("forwards", 0.0) - own,
        "locate": host.get("locate", 0.0),
        "audit": host.get("audit", 0.0),
        "inputs": host.get("inputs", 0.0),
        "fixed": trip["wall_ms"] - own,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records")
    ap.add_argument("--task", default=None, help="only this task id")
    args = ap.parse_args(argv)
    for line in open(args.records, encoding="utf-8"):
        r = json.loads(line)
        if args.task and r.get("task_id") != args.task:
            continue
        print(
            f"{r.get('task_id')} {r.get('status')} {r.get('speedup')}x K={r.get('calls_per_round')} "
            f"resolution={r.get('resolution_ms')} ms"
        )
        for kind, trips in (r.get("round_trips") or {}).items():
            rows = [p for p in map(parts, trips) if p is not None]
            if not rows:
                continue
            cells = []
            for key in rows[0]:
                values = [row[key] for row in rows]
                cells.append(
                    f"{key} {statistics.median(values):.3f}±{percentile(values, 0.9) - percentile(values, 0.1):.3f}"
                )
            print(f"  {kind:24s} n={len(rows):2d}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
