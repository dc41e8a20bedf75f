"""The repeat check's verdict: does the judge repeat a seed's speedup as well as it can be repeated?

Reads the reports of `benchmarks/repeatability.py` (judge entries, and `variant: plain` entries
from `--plain N`: the same seed timed in N fresh plain processes) and prints one line per judge
entry, `ok` or `BAD`, then exits 1 if any is BAD.

    python benchmarks/repeat_verdict.py repeat.json [plain.json ...]

An entry is ok when every evaluation was correct and its speedups' spread ((max − min) / median)
is within the limit `repeat_limit` gives: 1% where both medians are at least 1 ms, 3% below that,
or the spread of the plain processes' speedups of the same task where that is larger. Where the
plain processes spread more than 3% (a seed no process repeats to the sub-millisecond limit),
their spread times the factor by which the spreads of two samples of these sizes drawn from one
distribution still differ at the 95th percentile (`spread_ratio_quantile`: 4.4 for three judge
evaluations against three plain processes): no judge is asked to repeat a figure more closely
than a plain process timing the same kernels can, and a noisy seed's verdict is not decided by
which of two samples of three came out wider. With three of each, the check then tells only a
judge several times noisier than a plain process.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import sys

import numpy as np


NOISY_SEED = 0.03
"""A plain-process spread above this (the sub-millisecond limit) marks a seed no process repeats
closely: `repeat_limit` then allows for the sampling noise of comparing two small samples."""


@functools.lru_cache(maxsize=32)
def spread_ratio_quantile(n_judge: int, n_plain: int, q: float = 0.95) -> float:
    """The `q` quantile of range(a) / range(b) for a of `n_judge` and b of `n_plain` independent
    draws of one normal distribution (the range, max − min, is what the spread measures):
    how much larger the judge's spread may come out than the plain processes' by sampling alone.
    Estimated from 200,000 seeded draws (deterministic; (3, 3) gives 4.4, (3, 5) 2.1). Raises
    ValueError for a sample of fewer than 2 or q outside (0, 1)."""
    if n_judge < 2 or n_plain < 2 or not 0.0 < q < 1.0:
        raise ValueError(f"needs samples of at least 2 and 0 < q < 1, got {n_judge}, {n_plain}, {q}")
    rng = np.random.default_rng(0)
    a = np.ptp(rng.standard_normal((200_000, n_judge)), axis=1)
    b = np.ptp(rng.standard_normal((200_000, n_plain)), axis=1)
    return float(np.quantile(a / b, q))


def repeat_limit(
    reference_ms: float, candidate_ms: float, plain_spread: float | None = None, n_judge: int = 3, n_plain: int = 3
) -> float:
    """The largest spread of a seed's speedups (a fraction) the repeat check accepts: 0.01 where
    `reference_ms` and `candidate_ms` (medians, ms) are both >= 1 ms, else 0.03, raised to
    `plain_spread` (the spread of the same seed's speedups over `n_plain` fresh plain processes)
    when given and larger. Where `plain_spread` exceeds 0.03 (`NOISY_SEED`) over at least three
    processes, `plain_spread` × `spread_ratio_quantile(n_judge, n_plain)`: the judge's `n_judge`
    evaluations are held to what a plain process repeats, less only what two samples that small
    differ by chance (from two processes that factor is 19 for three evaluations, no check at
    all, so two keep the plain spread itself). Raises ValueError for a negative or non-finite
    `plain_spread`."""
    base = 0.01 if min(reference_ms, candidate_ms) >= 1.0 else 0.03
    if plain_spread is None:
        return base
    if not math.isfinite(plain_spread) or plain_spread < 0:
        raise ValueError(f"plain_spread must be a finite fraction >= 0, got {plain_spread}")
    if plain_spread <= NOISY_SEED or n_plain < 3:
        return max(base, plain_spread)
    return plain_spread * spread_ratio_quantile(n_judge, n_plain)


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
        limit = repeat_limit(
            ref,
            cand,
            yardstick["spread_speedup"] if yardstick else None,
            n_judge=max(2, len(e["speedups"] or [])),
            n_plain=max(2, len(yardstick["speedups"])) if yardstick else 2,
        )
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
