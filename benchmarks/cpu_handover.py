"""What the CPU backend's round trips cost: honest candidates (each task's reference code as the
candidate) evaluated N times with the default settings, one after another.

Prints, per task: the speedup's median and range (an honest candidate's is 1.0 but for the
machine's noise), the median and range of the round trip's fixed cost (`EvalResult.overhead_ms`:
the judge's clock less the host's own time of its K forwards, ms a round trip), the calls per
round trip (K) seen, and the reference's median ms a call. Run it on two commits to compare what a
change to the round trip costs (`docs/benchmarks.md`, twenty-first session).

    python benchmarks/cpu_handover.py --evaluations 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "bench")]

import evalkit  # noqa: E402  (the tests' tasks and candidates)
from cudal1.bench.evaluator import evaluate  # noqa: E402

TASKS = {
    # label: (task, honest candidate in tests/bench/candidates)
    "sin_chain 16x256": (evalkit.SIN_CHAIN, "honest_sin_chain"),
    "sin_chain 16x1024": (evalkit.SIN_CHAIN_WIDE, "honest_sin_chain"),
    "matmul_512": (evalkit.MATMUL_512, "honest_matmul_relu"),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evaluations", type=int, default=5)
    args = p.parse_args()
    cache = tempfile.mkdtemp(prefix="cudal1-handover-")
    rows: dict[str, list[tuple[float, float, int, float]]] = {}
    for _ in range(args.evaluations):
        for label, (task, name) in TASKS.items():
            r = evaluate(task, evalkit.candidate(name), "cpu", settings=evalkit.settings(Path(cache)))
            if r.speedup is None or r.reference is None:
                print(f"{label}: {evalkit.describe(r)}", flush=True)
                continue
            rows.setdefault(label, []).append(
                (r.speedup, r.overhead_ms or 0.0, r.calls_per_round or 0, r.reference.median_ms)
            )
    for label, rs in rows.items():
        sp, oh, ks, ref = zip(*rs)
        print(
            f"{label}: speedup median {statistics.median(sp):.3f} ({min(sp):.3f}-{max(sp):.3f}); fixed cost "
            f"{statistics.median(oh):.2f} ms ({min(oh):.2f}-{max(oh):.2f}) a round trip; K {sorted(set(ks))}; "
            f"reference {statistics.median(ref):.3f} ms a call"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
