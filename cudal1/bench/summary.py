"""Suite statistics over evaluation results: pass rate, speedup averages, fast_p.

Pure functions over `EvalResult` records (no I/O, no torch), so the CLI, the training job's
logging and the tests all compute the same numbers.

fast_p follows KernelBench (Ouyang et al., "KernelBench: Can LLMs Write Efficient GPU Kernels?",
2025, section 3): the share of *all* evaluated tasks whose candidate is correct and has
speedup > p. A task whose candidate failed in any way counts in the denominator, so fast_p never
rises by dropping failures; fast_0 is the pass rate.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from cudal1.bench.result import EvalResult, HackKind, Status

DEFAULT_PS: tuple[float, ...] = (1.0, 1.5, 2.0)


def fast_p_key(p: float) -> str:
    """Name of the fast_p entry for threshold p: 1.0 -> "fast_1", 1.5 -> "fast_1.5"."""
    return f"fast_{p:g}"


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log v)) of positive values (×). Raises ValueError if empty or any value <= 0."""
    if not values:
        raise ValueError("geometric mean of no values")
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(results: Iterable[EvalResult], ps: Sequence[float] = DEFAULT_PS) -> dict[str, Any]:
    """Statistics of one suite run: one `EvalResult` per evaluated task.

    Returns a JSON-safe dict:
      - "n": number of results (tasks evaluated).
      - "status_counts": {status value: count} for every `Status` (zeros included).
      - "hack_counts": {hack kind value: count} for every `HackKind` (zeros included).
      - "label_counts": {label: count} over correct results only (what the passing kernels are).
      - "n_correct", "pass_rate": correct results and their share of n (0.0 when n == 0).
      - "speedup_mean", "speedup_median", "speedup_geomean": over correct results that have a
        speedup (×); None when there is none.
      - "fast_p": {fast_p_key(p): share of all n with status ok and speedup > p} for each p in ps
        (strictly greater, as in KernelBench), 0.0 when n == 0.

    Duplicate task ids are not merged: pass one result per task (the CLI keeps the last).
    """
    results = list(results)
    n = len(results)
    status_counts = {s.value: 0 for s in Status}
    hack_counts = {k.value: 0 for k in HackKind}
    label_counts: Counter[str] = Counter()
    speedups: list[float] = []
    n_correct = 0
    for r in results:
        status_counts[r.status.value] += 1
        if r.hack_kind is not None:
            hack_counts[r.hack_kind.value] += 1
        if r.correct:
            n_correct += 1
            label_counts.update(r.labels)
            if r.speedup is not None:
                speedups.append(r.speedup)

    fast_p = {}
    for p in ps:
        hits = sum(1 for r in results if r.correct and r.speedup is not None and r.speedup > p)
        fast_p[fast_p_key(p)] = hits / n if n else 0.0

    positive = [s for s in speedups if s > 0]
    return {
        "n": n,
        "status_counts": status_counts,
        "hack_counts": hack_counts,
        "label_counts": dict(sorted(label_counts.items())),
        "n_correct": n_correct,
        "pass_rate": n_correct / n if n else 0.0,
        "speedup_mean": statistics.fmean(speedups) if speedups else None,
        "speedup_median": statistics.median(speedups) if speedups else None,
        # A zero speedup cannot come from a valid timing; leave it out rather than fail.
        "speedup_geomean": geometric_mean(positive) if positive else None,
        "fast_p": fast_p,
    }


def _fmt_speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}×"


def format_summary(summary: dict[str, Any]) -> str:
    """An aligned plain-text table of a `summarize` dict (zero counts left out), for terminals/logs."""
    n = summary["n"]
    rows: list[tuple[str, str]] = [
        ("tasks evaluated", str(n)),
        ("correct", f"{summary['n_correct']} ({summary['pass_rate']:.1%})"),
        ("speedup mean", _fmt_speedup(summary["speedup_mean"])),
        ("speedup median", _fmt_speedup(summary["speedup_median"])),
        ("speedup geomean", _fmt_speedup(summary["speedup_geomean"])),
    ]
    for key, share in summary["fast_p"].items():
        rows.append((key, f"{share:.1%}  ({round(share * n)}/{n})"))
    rows.append(("", ""))
    for status, count in summary["status_counts"].items():
        if count:
            rows.append((f"status {status}", str(count)))
    for kind, count in summary["hack_counts"].items():
        if count:
            rows.append((f"hack {kind}", str(count)))
    for label, count in summary.get("label_counts", {}).items():
        rows.append((f"label {label}", str(count)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}".rstrip() for k, v in rows)
