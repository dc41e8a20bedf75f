"""The repeat check's verdict: does the judge repeat a seed's speedup as well as it can be repeated?

Reads the reports of `benchmarks/repeatability.py` (judge entries, and `variant: plain` entries
from `--plain N`: the same seed timed in N fresh plain processes) and prints one line per judge
entry, `ok` or `BAD`, then exits 1 if any is BAD.

    python benchmarks/repeat_verdict.py repeat.json [plain.json ...]

An entry is ok when every evaluation was correct and its speedups' spread ((max − min) / median)
is within the limit `repeat_limit` gives: 1% where both medians are at least 1 ms, 3% below that,
or the spread of the plain processes' speedups of the same task where that is larger: no judge
is asked to repeat a figure more closely than a plain process timing the same kernels can.
"""

from __future__ import annotations

import json
import math
import statistics
import sys


def repeat_limit(reference_ms: float, candidate_ms: float, plain_spread: float | None = None) -> float:
    """The largest spread of a seed's speedups (a fraction) the repeat check accepts: 0.01 where
    `reference_ms` and `candidate_ms` (medians, ms) are both >= 1 ms, else 0.03; raised to
    `plain_spread` (the spread of the same seed's speedups over fresh plain processes) when given
    and larger. Raises ValueError for a negative or non-finite `plain_spread`."""
    base = 0.01 if min(reference_ms, candidate_ms) >= 1.0 else 0.03
    if plain_spread is None:
        return base
    if not math.isfinite(plain_spread) or plain_spread < 0:
        raise ValueError(f"plain_spread must be a finite fraction >= 0, got {plain_spread}")
    return max(base, plain_spread)


def verdicts(entries: list[dict]) -> list[tuple[bool, str]]:
    """One (ok, line) per judge entry of `entries` (repeatability.py's report rows, plain ones
    included), in their order."""
    plain = {e["task"]: e for e in entries if e.get("variant") == "plain" and e.get("spread_speedup") is not None}
    out = []
    for e in entries:
        if e.get("variant") == "plain":
            continue
        ref = statistics.median(e["reference_ms"] or [0])
        cand = statistics.median(e["candidate_ms"] or [0])
        yardstick = plain.get(e["task"])
        limit = repeat_limit(ref, cand, yardstick["spread_speedup"] if yardstick else None)
        ok = e["ok"] == e["of"] and e["spread_speedup"] is not None and e["spread_speedup"] <= limit
        seen = f"; plain processes {yardstick['speedups']} spread {yardstick['spread_speedup']}" if yardstick else ""
        out.append(
            (
                ok,
                f"{'ok ' if ok else 'BAD'} {e['task']}: speedups {e['speedups']} spread {e['spread_speedup']} "
                f"(limit {limit:.1%}), reference {ref:.4g} ms, candidate {cand:.4g} ms{seen}",
            )
        )
    return out


def main(argv: list[str]) -> int:
    entries = [e for path in argv for e in json.load(open(path, encoding="utf-8"))]
    rows = verdicts(entries)
    if not rows:
        print("BAD no judge entries in " + " ".join(argv))
    for _, line in rows:
        print(line)
    return 0 if rows and all(ok for ok, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
