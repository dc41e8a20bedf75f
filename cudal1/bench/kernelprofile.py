"""A short profile of one candidate forward, for the model's next prompt (never for the reward).

The candidate host records one forward under `torch.profiler` once the timing and the late checks
are over (`record`, called from the host's `profile` step) and sends a summary with its answer;
the judge keeps it in `EvalResult.profile` (`clean`), and `describe` turns it into the line a
refinement turn or an optimize round shows after the evaluator's verdict
(`cudal1.policy.prompts.Feedback.of`). On CUDA the summary lists the GPU work (kernels, copies,
memsets) by device time; on the CPU, the operators by their own CPU time.

The profile comes from the candidate's own process, so it is the candidate's word: it is shown to
the policy and never priced, and the judge accepts it only in the shape `wire.HOST_MESSAGES`
gives it (anything else is a protocol violation, as for any other field), with names cut to the
characters a kernel name needs. A candidate can still name a region of its own
(`torch.profiler.record_function`) with words for its next prompt; that prompt shows its whole
code anyway, comments included, so the profile gives it no voice it did not have.

Summary (a dict, {} when none): {"device": "cuda" | "cpu", "total_ms": float (ms, the summed time
of every row, not only the shown ones), "launches": int (kernel launches and copies on CUDA,
operator calls on the CPU), "top": [{"name": str, "ms": float, "calls": int}, ...] (at most the
asked number, slowest first)}.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

NAME_CHARS = 120
"""A row's name is cut to this many characters (C++ kernel names run to thousands)."""
MOST_ROWS = 16
"""The most rows a summary may hold (`EvalSettings.profile_top` is at most this)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_:<>,.()\[\]*&+=/ -]")
"""What a kernel or operator name needs (C++ templates and signatures included); anything else
(quotes, backticks, newlines) becomes "?"."""


def summarize(rows: Iterable[tuple[str, float, int]], device: str, top: int) -> dict[str, Any]:
    """The summary of profiler rows (name, time in microseconds, calls): rows of the same name
    merged, the `top` slowest kept (ties by name), times in ms rounded to 1 ns. Pure.
    Raises ValueError for top outside 1..MOST_ROWS."""
    if not 1 <= top <= MOST_ROWS:
        raise ValueError(f"top must lie in 1..{MOST_ROWS}, got {top}")
    merged: dict[str, list[float]] = {}
    for name, us, calls in rows:
        entry = merged.setdefault(name, [0.0, 0])
        entry[0] += max(float(us), 0.0)
        entry[1] += max(int(calls), 0)
    order = sorted(merged.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return {
        "device": device,
        "total_ms": round(sum(us for us, _ in merged.values()) / 1000.0, 6),
        "launches": int(sum(calls for _, calls in merged.values())),
        "top": [{"name": name, "ms": round(us / 1000.0, 6), "calls": int(calls)} for name, (us, calls) in order[:top]],
    }


def record(forward: Callable[[], Any], cuda: bool, top: int) -> dict[str, Any]:
    """Profile one call of `forward` (which runs the model on the inputs and waits for the device)
    and summarize it (`summarize`): on CUDA the rows on the GPU, by their device time; on the CPU
    the operators, by their own CPU time. Raises whatever the profiler or `forward` raises."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with torch.no_grad(), profile(activities=activities) as prof:
        forward()
    rows = []
    for event in prof.key_averages():
        on_device = event.device_type == DeviceType.CUDA
        if on_device != cuda:
            continue
        if cuda:
            us = getattr(event, "self_device_time_total", None)
            if us is None:
                us = getattr(event, "self_cuda_time_total", 0.0)
        else:
            us = event.self_cpu_time_total
        rows.append((str(event.key), float(us), int(event.count)))
    return summarize(rows, "cuda" if cuda else "cpu", top)


def clean(summary: dict[str, Any], top: int) -> dict[str, Any]:
    """`summary` as the judge keeps it: at most `top` rows, each name of the characters a kernel
    or operator name needs (`_UNSAFE`: others as "?") and at most `NAME_CHARS` long. `summary` has the wire's shape
    (`wire.HOST_MESSAGES["profiled"]`), so its types and ranges are already checked; {} for
    top < 1."""
    if top < 1:
        return {}
    rows = [
        {"name": _UNSAFE.sub("?", r["name"])[:NAME_CHARS], "ms": float(r["ms"]), "calls": int(r["calls"])}
        for r in summary["top"][:top]
    ]
    return {
        "device": _UNSAFE.sub("?", summary["device"])[:16],
        "total_ms": float(summary["total_ms"]),
        "launches": int(summary["launches"]),
        "top": rows,
    }


def describe(summary: dict[str, Any], name_chars: int = 60) -> str:
    """One line for a prompt: "one forward, profiled: 12 GPU launches, 0.812 ms on the GPU; most
    time in: gemm_kernel 0.500 ms (1 call), ..." ("" for an empty summary). Each name is cut to
    `name_chars` characters."""
    if not summary or not summary.get("top"):
        return ""
    on_gpu = summary.get("device") == "cuda"
    what = "GPU launches" if on_gpu else "operator calls"
    where = "on the GPU" if on_gpu else "of CPU time"
    parts = []
    for row in summary["top"]:
        name = row["name"] if len(row["name"]) <= name_chars else row["name"][: name_chars - 3] + "..."
        calls = row["calls"]
        parts.append(f"{name} {row['ms']:.3f} ms ({calls} call{'s' if calls != 1 else ''})")
    return (
        f"one forward, profiled: {summary['launches']} {what}, {summary['total_ms']:.3f} ms {where}; "
        f"most time in: " + ", ".join(parts)
    )
