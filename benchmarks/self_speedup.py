"""How far from 1× the evaluator puts a candidate that IS the reference: its bias and noise.

Each chosen builtin task's reference, renamed ModelNew, is evaluated `--repeats` times as its own
candidate. A perfect evaluator reports 1.000× every time; the median says which way the
measurement leans (the judge's subtraction of the round trip's fixed cost, the candidate's
process being another process), the spread how much one evaluation can be trusted.

    python benchmarks/self_speedup.py --backend cpu --tasks level1/3 level1/13 level2/1 --repeats 3
    python benchmarks/self_speedup.py --backend cuda --kernelbench PATH --tasks level1/19 level2/1 --repeats 1 --band 0.98 1.02
    ... --records all.jsonl     # every evaluation's whole result too: each round trip's clocks

Prints one JSON line per task and writes them all with --out. With --band LO HI it ends with two
verdict lines: "LABELS PASS"/"LABELS FAIL" (no evaluation carries a label that says the reference
computes otherwise than itself: `FALSE_FOR_REFERENCE`), then "PASS"/"FAIL" and the share of
evaluations whose speedup lies in [LO, HI] (PASS at >= 95%); the exit status is 1 if either fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings, add_overrides_argument
from cudal1.tasks import find_task, load_suite, load_tasks
from cudal1.tasks.task import reference_as_candidate

FALSE_FOR_REFERENCE = ("profile_failed", "reduced_precision")
"""Labels the reference, evaluated as its own candidate, must never get: each says the candidate
computes otherwise than the reference (or could not be checked for it), and each cuts its pay."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--overhead-quantile", type=float, default=None, help="EvalSettings.overhead_quantile")
    ap.add_argument("--unexplained-tolerance", type=float, default=None, help="EvalSettings.unexplained_tolerance")
    add_overrides_argument(ap, example="one_call_share=0.1, one_call_signed_bias=true")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--records", default=None, help="append each evaluation's whole result (EvalResult.to_dict) here, one JSON line"
    )
    ap.add_argument(
        "--kernelbench", default=None, help="take the tasks from this KernelBench checkout, not the builtin suite"
    )
    ap.add_argument(
        "--band",
        type=float,
        nargs=2,
        default=None,
        metavar=("LO", "HI"),
        help="end with PASS/FAIL: >= 95%% of the evaluations within [LO, HI]",
    )
    args = ap.parse_args(argv)

    overrides = dict(args.set)
    if args.overhead_quantile is not None:
        overrides["overhead_quantile"] = args.overhead_quantile
    if args.unexplained_tolerance is not None:
        overrides["unexplained_tolerance"] = args.unexplained_tolerance
    settings = EvalSettings.for_backend(args.backend, cache_dir=tempfile.mkdtemp(prefix="cudal1-self-"), **overrides)
    if args.kernelbench:
        levels = sorted({int(t.split("/")[0].removeprefix("level")) for t in args.tasks})
        tasks = load_suite(args.kernelbench, levels=levels, profile=args.backend).tasks
    else:
        tasks = load_tasks("builtin")
    report = []
    for tid in args.tasks:
        task = find_task(tasks, tid)
        runs = [
            evaluate(task, reference_as_candidate(task.source), args.backend, settings=settings)
            for _ in range(args.repeats)
        ]
        if args.records:
            with open(args.records, "a", encoding="utf-8") as f:
                for r in runs:
                    f.write(json.dumps({"task": tid, **r.to_dict()}) + "\n")
        ok = [r for r in runs if r.status is Status.OK]
        speedups = [r.speedup for r in ok]
        entry = {
            "task": tid,
            "ok": len(ok),
            "of": len(runs),
            "speedups": [round(x, 3) for x in speedups],
            "median": round(statistics.median(speedups), 3) if speedups else None,
            "reference_ms": [round(r.reference.median_ms, 3) for r in ok],
            "candidate_ms": [round(r.candidate.median_ms, 3) for r in ok],
            "overhead_ms": [r.overhead_ms for r in ok],
            "resolution_ms": [r.resolution_ms for r in ok],
            "statuses": sorted({r.status.value for r in runs}),
            "labels": sorted({label for r in runs for label in r.labels}),
            "false_labels": sum(1 for r in ok if set(r.labels) & set(FALSE_FOR_REFERENCE)),
            "label_reasons": sorted({f"{k}: {v}" for r in runs for k, v in r.label_reasons.items()}),
            "failures": [r.message[:300] for r in runs if r.status.value != "ok"],
        }
        report.append(entry)
        print(json.dumps(entry), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    if args.band:
        lo, hi = args.band
        all_runs = [x for e in report for x in e["speedups"]] + [None] * sum(e["of"] - e["ok"] for e in report)
        inside = sum(1 for x in all_runs if x is not None and lo <= x <= hi)
        share = inside / len(all_runs) if all_runs else 0.0
        false = sum(e["false_labels"] for e in report)
        n_ok = sum(e["ok"] for e in report)
        print(
            f"LABELS {'FAIL' if false else 'PASS'} reference as candidate: {false} of {n_ok} correct evaluations "
            f"labelled {' or '.join(FALSE_FOR_REFERENCE)}"
            + "".join(f"; {e['task']}: {'; '.join(e['label_reasons'])[:300]}" for e in report if e["false_labels"])
        )
        print(
            f"{'PASS' if share >= 0.95 else 'FAIL'} reference as candidate: {inside} of {len(all_runs)} evaluations "
            f"({share:.0%}) in {lo}-{hi}x (needs 95%)"
        )
        return 0 if share >= 0.95 and not false else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
