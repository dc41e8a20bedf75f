"""Clocks and statistics for one forward call.

Every timer stops only after the whole device is idle, so work launched on side streams, from
C++ streams, or asynchronously is inside the measured time:

- CUDA: device-wide synchronize, record a start event on the default stream, call, device-wide
  synchronize, record the end event. Both events sit on the default stream after a full
  synchronize, so the interval spans every stream's work and the host-side launch cost.
- CPU: `time.perf_counter_ns` around the call (torch's CPU ops are synchronous).

The clock functions are bound when this module is imported, which the runner does before it
imports any candidate code: patching `torch.cuda.synchronize` or `time.perf_counter` afterwards
does not change these timers (and the patch itself is a hack the guards report).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from .result import Timing

_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch._C._cuda_synchronize if hasattr(torch._C, "_cuda_synchronize") else None
_Event = torch.cuda.Event


class DeviceClock:
    """Times one call on `device` ("cpu" or "cuda[:i]"), in milliseconds."""

    def __init__(self, device: str, flush_l2: bool = False) -> None:
        self.cuda = device.startswith("cuda")
        self._flush_buf: torch.Tensor | None = None
        if self.cuda and flush_l2:
            # Twice the last-level cache (H100/H200: 50-60 MB), so nothing of the previous call stays resident.
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 * 2**20) or 64 * 2**20
            self._flush_buf = torch.empty(2 * l2 // 4 + 1024, dtype=torch.float32, device=device)
        if self.cuda:
            self._default_stream = torch.cuda.default_stream(device)

    def sync(self) -> None:
        """Wait until every stream of the device is idle (no-op on the CPU)."""
        if self.cuda:
            _cuda_synchronize()

    def flush(self) -> None:
        """Overwrite the cache-flush buffer (if any) and wait for it."""
        if self._flush_buf is not None:
            self._flush_buf.fill_(0.0)
        self.sync()

    def time_call(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, Any]:
        """Call fn(*args) once; return (milliseconds, output)."""
        if self.cuda:
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _cuda_synchronize()
            start.record(self._default_stream)
            out = fn(*args)
            _cuda_synchronize()
            end.record(self._default_stream)
            end.synchronize()
            return start.elapsed_time(end), out
        t0 = _perf_counter_ns()
        out = fn(*args)
        return (_perf_counter_ns() - t0) / 1e6, out


def summarize_rounds(rounds_ms: list[list[float]]) -> Timing:
    """Statistics over rounds of per-call times (ms). spread = (max - min) / median of round medians."""
    flat = [t for r in rounds_ms for t in r]
    medians = [statistics.median(r) for r in rounds_ms if r]
    med = statistics.median(flat)
    return Timing(
        median_ms=med,
        mean_ms=statistics.fmean(flat),
        min_ms=min(flat),
        max_ms=max(flat),
        round_medians_ms=medians,
        spread=(max(medians) - min(medians)) / statistics.median(medians) if medians else 0.0,
        calls=len(flat),
    )


def speedup_stats(ref_rounds: list[list[float]], cand_rounds: list[list[float]]) -> tuple[float, float]:
    """(speedup, spread): speedup = median(all reference calls) / median(all candidate calls) (×);
    spread = (max - min) / median of the per-round speedups (ratios of round medians)."""
    ref = statistics.median([t for r in ref_rounds for t in r])
    cand = statistics.median([t for r in cand_rounds for t in r])
    per_round = [statistics.median(a) / statistics.median(b) for a, b in zip(ref_rounds, cand_rounds)]
    mid = statistics.median(per_round)
    return ref / cand, (max(per_round) - min(per_round)) / mid if mid else 0.0
