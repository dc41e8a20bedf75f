"""What the judge pays the embedded default's programs, against one plain process's timing of them.

The embedded default's RL stage learns only if the judge tells `data.variants=slow_fast`'s fast
programs from its slow ones by more than the reward's tie floor (`cudal1/pipeline/variants.py`).
For each variant (or those of `--kinds`), this evaluates it `--evaluations` times with the CPU
backend's default settings, one after another, and prints the speedup's median and range, how
many of the evaluations were `below_resolution`, and the medians of the round trip's fixed cost
(`EvalResult.overhead_ms`, ms a round trip), of the resolution (ms a call) and of K. Beside it,
the same programs timed in one plain process (`cudal1.bench.inprocess.measure_isolated`: fresh
inputs every call, no hosts, the evaluator's malloc and OpenMP environment): the yardstick the
judge's figure is held to (`docs/benchmarks.md`). With `--honest`, each task's own reference
submitted as the candidate too (kind "honest": 1.0x but for the measurement's noise and bias).

    python benchmarks/variant_speedups.py --evaluations 8
    ... --kinds fast --tasks level1/17
    ... --honest --kinds honest                 # the control alone
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from cudal1.bench.evaluator import evaluate
from cudal1.bench.inprocess import measure_isolated
from cudal1.bench.settings import EvalSettings
from cudal1.pipeline.variants import VARIANT_SETS, Variant
from cudal1.tasks import find_task, load_tasks
from cudal1.tasks.task import reference_as_candidate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evaluations", type=int, default=8)
    p.add_argument("--set", default="slow_fast", choices=sorted(VARIANT_SETS))
    p.add_argument("--kinds", nargs="*", default=None, help="variant kinds (default: all)")
    p.add_argument("--tasks", nargs="*", default=None, help="task ids (default: the set's)")
    p.add_argument("--inprocess-calls", type=int, default=60, help="timed calls a program in the yardstick")
    p.add_argument("--honest", action="store_true", help="each task's reference as a candidate too")
    args = p.parse_args()
    tasks = load_tasks()
    cache = tempfile.mkdtemp(prefix="cudal1-variants-")
    variants = list(VARIANT_SETS[args.set])
    if args.honest:
        for task_id in dict.fromkeys(v.task_id for v in variants):
            source = reference_as_candidate(find_task(tasks, task_id).source)
            variants.append(Variant(task_id, "honest", "The reference itself.", source))
    chosen = [
        v
        for v in variants
        if (args.kinds is None or v.kind in args.kinds) and (args.tasks is None or v.task_id in args.tasks)
    ]
    print("variant | judge: speedup median (range); below_resolution; fixed cost ms; resolution ms; K | one process")
    for v in chosen:
        task = find_task(tasks, v.task_id)
        results = [
            evaluate(task, v.code, "cpu", settings=EvalSettings.for_backend("cpu", cache_dir=cache))
            for _ in range(args.evaluations)
        ]
        ok = [r for r in results if r.speedup is not None]
        yard = measure_isolated(task, {v.kind: v.code}, "cpu", calls=args.inprocess_calls)
        if not ok:
            print(f"{v.task_id} {v.kind} | no speedup: {[r.status.value for r in results]}")
            continue
        speedups = [r.speedup for r in ok]
        below = sum("below_resolution" in r.labels for r in ok)
        print(
            f"{v.task_id} {v.kind} | {statistics.median(speedups):.2f}x ({min(speedups):.2f}-{max(speedups):.2f}); "
            f"{below}/{len(ok)}; {statistics.median(r.overhead_ms for r in ok):.1f}; "
            f"{statistics.median(r.resolution_ms for r in ok):.2f}; "
            f"{statistics.median(r.calls_per_round for r in ok):.0f} | "
            f"{yard.ratios.get(v.kind, float('nan')):.2f}x (reference {yard.reference_ms:.2f} ms, "
            f"{v.kind} {yard.candidates_ms.get(v.kind, float('nan')):.2f} ms)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
