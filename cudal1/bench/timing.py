"""Clocks and statistics: every time that decides a reward is read by the judge, or by the reference
host, which runs no candidate code.

- Reference and candidate each run in a host process of their own, through the same round trip.
  A timed round trip runs K calls back to back on K fresh input sets (`batch_size` chooses K
  from the reference's time and the one-call round trip's jitter). The judge reads its own clock
  (`DeviceClock.now_ns`) right before it tells a host to go and again once it holds its own copy
  of every output of the round (read from the host's memory) and has synchronized; what the
  host does in between (the forwards, the synchronizes, describing the outputs) and whatever it
  leaves running that the outputs depend on is inside.
- The reference host also times each forward on its own clock (CUDA events on the current
  stream around the forward, a device-wide synchronize after the end event; on the CPU
  `time.perf_counter_ns`): that is
  the reference's time, and the judge's interval minus the round's sum is the fixed cost of a
  round trip (`fixed_costs`, `calibration`). The candidate host reports the same figures; the
  judge holds their sum (`claimed_total_ms`) to its own interval minus that fixed cost as the
  reference host paid it in the same pass (`allowed_fixed_cost`, `candidate_rounds_ms`).
- On the CPU the candidate's round trip counts as at least the CPU time its processes spent in
  it beyond one core (`parallel_cpu_ms`): both hosts run their forwards on one thread.
- A round's figure is its mean per call; a side's time is the median of its rounds' figures, and
  the speedup their ratio, with the same floor on both sides (`speedup_stats`).
- `DeviceClock.time_call` (device-wide synchronize, call, device-wide synchronize) times a
  function in the calling process; the task probe uses it.

The clock functions are bound when this module is imported, before any candidate code exists
anywhere in the evaluation.
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from typing import Any, Callable, Iterator

import torch

from .result import Timing

_perf_counter_ns = time.perf_counter_ns
_gc_disable, _gc_enable, _gc_isenabled = gc.disable, gc.enable, gc.isenabled
_cuda_synchronize = torch._C._cuda_synchronize if hasattr(torch._C, "_cuda_synchronize") else None
_Event = torch.cuda.Event


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, as it was after it. A round trip runs
    inside one in the judge and in both hosts: a collection that falls inside a round trip adds
    its pause to that round trip's fixed cost (a full collection of a process that imported torch
    walks millions of objects), widening the jitter the resolution is made of. The objects
    allocated meanwhile are collected at the first allocation after the block, outside the
    round trip. Reference counting still frees everything that is not in a cycle."""
    was = _gc_isenabled()
    _gc_disable()
    try:
        yield
    finally:
        if was:
            _gc_enable()


class DeviceClock:
    """Times one call on `device` ("cpu" or "cuda[:i]"), in milliseconds."""

    def __init__(self, device: str, flush_l2: bool = False) -> None:
        self.cuda = device.startswith("cuda")
        self._flush_buf: torch.Tensor | None = None
        if self.cuda and flush_l2:
            # Twice the last-level cache (H100/H200: 50-60 MB), so nothing of the previous call stays resident.
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 * 2**20) or 64 * 2**20
            self._flush_buf = torch.empty(2 * l2 // 4 + 1024, dtype=torch.float32, device=device)
        self._warm_args: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        if self.cuda:
            self._default_stream = torch.cuda.default_stream(device)

    def sync(self) -> None:
        """Wait until every stream of the device is idle (no-op on the CPU)."""
        if self.cuda:
            _cuda_synchronize()

    def warm(self, ms: float) -> None:
        """Queue about `ms` milliseconds of matrix products (4096x4096 bfloat16, about 0.2 ms each
        on an H200) on this process's stream, without waiting; nothing for ms <= 0 or on the
        CPU. The next `flush` waits for them."""
        if not self.cuda or ms <= 0:
            return
        if self._warm_args is None:
            a = torch.randn(4096, 4096, device=self._default_stream.device, dtype=torch.bfloat16)
            self._warm_args = (a, a.clone(), torch.empty_like(a))
        a, b, out = self._warm_args
        for _ in range(max(1, math.ceil(ms / 0.2))):
            torch.mm(a, b, out=out)

    def flush(self) -> None:
        """Overwrite the cache-flush buffer (if any) and wait for it."""
        if self._flush_buf is not None:
            self._flush_buf.fill_(0.0)
        self.sync()

    @staticmethod
    def now_ns() -> int:
        """The judge's host clock (`time.perf_counter_ns`, bound at import)."""
        return _perf_counter_ns()

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


def summarize_rounds(rounds_ms: list[list[float]], calls_per_figure: int = 1) -> Timing:
    """Statistics over rounds of per-call figures (ms). Each figure stands for `calls_per_figure`
    calls (a batched round's mean per call stands for its K calls). spread = (max - min) / median
    of the round medians, 0 when that median is 0 (a candidate's figures can all be 0: claims of
    no time in round trips no longer than their fixed cost). Raises statistics.StatisticsError for
    no figures."""
    flat = [t for r in rounds_ms for t in r]
    medians = [statistics.median(r) for r in rounds_ms if r]
    med = statistics.median(flat)
    return Timing(
        median_ms=med,
        mean_ms=statistics.fmean(flat),
        min_ms=min(flat),
        max_ms=max(flat),
        round_medians_ms=medians,
        spread=(max(medians) - min(medians)) / mid if medians and (mid := statistics.median(medians)) > 0 else 0.0,
        calls=len(flat) * calls_per_figure,
    )


def speedup_stats(
    ref_rounds: list[list[float]],
    cand_rounds: list[list[float]],
    ref_cap_ms: float = float("inf"),
    floor_ms: float = 0.0,
) -> tuple[float, float]:
    """(speedup, spread) from rounds of per-call times (ms).

    speedup = max(min(R, ref_cap_ms), floor_ms) / max(C, floor_ms) (×), with R and C the medians
    of all reference and all candidate figures; spread = (max - min) / median of the per-round
    speedups (round medians, capped and floored the same way). The judge caps the reference at a
    clean time measured while no candidate code was alive (`baseline_ms`), and floors both sides
    at the measurement's resolution: the floor is the same on both sides, so a candidate whose
    time is below the reference's (as capped) is never reported slower than it, and two times
    below the resolution are reported as equal (1.0×) rather than as the reference over the
    floor. Raises statistics.StatisticsError for empty rounds.
    """

    def ratio(ref_ms: float, cand_ms: float) -> float:
        return max(min(ref_ms, ref_cap_ms), floor_ms) / max(cand_ms, floor_ms, 1e-12)

    ref = statistics.median([t for r in ref_rounds for t in r])
    cand = statistics.median([t for r in cand_rounds for t in r])
    per_round = [ratio(statistics.median(a), statistics.median(b)) for a, b in zip(ref_rounds, cand_rounds)]
    mid = statistics.median(per_round)
    return ratio(ref, cand), (max(per_round) - min(per_round)) / mid if mid else 0.0


def batch_size(
    reference_ms: float,
    jitter_ms: float,
    *,
    factor: float,
    min_round_ms: float,
    max_round_ms: float,
    least: int,
    most: int,
) -> int:
    """K, the calls of one timed round trip: enough that a round's work is at least `factor` ×
    the round trip's jitter (and at least `min_round_ms`), within [least, most] and, beyond
    `least`, within a round of at most `max_round_ms` of work.

    reference_ms: one reference call (ms, the reference host's own clock); jitter_ms: the jitter
    of a one-call round trip's fixed cost (`jitter`). The judge calls this before the candidate
    exists, so K depends on the task alone, and the candidate cannot choose how it is timed.
    Raises ValueError when least < 1 or most < least.
    """
    if least < 1 or most < least:
        raise ValueError(f"batch bounds must satisfy 1 <= least <= most, got {least}, {most}")
    per_call = max(reference_ms, 1e-6)
    k = math.ceil(max(factor * jitter_ms, min_round_ms) / per_call)
    k = min(k, max(1, math.floor(max_round_ms / per_call)))
    return max(least, min(k, most))


def timed_rounds(rounds: int, most: int, round_ms: float, jitter_ms: float, factor: float) -> int:
    """How many timed rounds a pass asks for: `rounds`, or more where a round's work (`round_ms`,
    ms: K calls of the reference or of the candidate, whichever is shorter) is less than
    `factor` × the round trip's jitter (`jitter_ms`), which happens when K is held below what
    `batch_size` asked for (the memory budget) or the candidate is much faster than the
    reference: rounds × (factor × jitter / round_ms)², at most `most` rounds.

    Why the square: the timing pass compares medians of the two hosts' round trips, whose noise
    falls as 1 / sqrt(rounds), against a round's work; a round a third as long as the jitter asks
    for needs nine times the rounds to be compared as well as a full one. Never below `rounds`
    (nor below 1)."""
    least = max(rounds, 1)
    if round_ms <= 0.0 or jitter_ms <= 0.0:
        return least
    want = least * (factor * jitter_ms / round_ms) ** 2
    return max(least, min(most, math.ceil(want)))


def one_call_round_count(
    least: int, most: int, jitter_ms: float, reference_ms: float, margin: float, share: float
) -> int:
    """How many one-call rounds the calibration and each timing pass make: enough that the one-call
    floor's allowance (`one_call_floor_ms`: margin × jitter × (1/sqrt(n) + 1/sqrt(m)), with as
    many rounds n in a pass as m in the calibration) is at most `share` of the reference's
    per-call figure (`reference_ms`, ms):

        n = ceil((2 × margin × jitter / (share × reference_ms))²)

    at least `least` and at most `most` (a time budget's worth). `jitter_ms`: the jitter of the
    first `least` calibration rounds' differences (candidate host minus reference host, ms).
    `share` <= 0, or a jitter or reference that is not positive: `least`."""
    least = max(least, 0)
    if share <= 0.0 or jitter_ms <= 0.0 or reference_ms <= 0.0 or margin <= 0.0:
        return least
    want = math.ceil((2.0 * margin * jitter_ms / (share * reference_ms)) ** 2)
    return max(least, min(most, want))


def claimed_total_ms(claims: object, calls: int) -> float | None:
    """The sum of a host's per-call figures (ms) for a round of `calls` calls, or None when they
    are not exactly `calls` finite, non-negative numbers (anything a host sends is data: this
    never raises, whatever it is given)."""
    if not isinstance(claims, list) or len(claims) != calls:
        return None
    total = 0.0
    for c in claims:
        if isinstance(c, bool) or not isinstance(c, (int, float)):
            return None
        try:
            value = float(c)
        except OverflowError:
            return None
        if not math.isfinite(value) or value < 0:
            return None
        total += value
    return total if math.isfinite(total) else None


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values` by linear interpolation. Raises ValueError when empty."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def clocked_call_ms(claimed_ms: object, wall_ms: float, overhead_ms: float) -> float:
    """A candidate call's time in ms: its host's own clock where the judge's clock allows it.

    `claimed_ms` is what the candidate's host reports for the forward (the same clock the reference
    host's figure comes from, so an honest candidate is measured exactly like the reference);
    `wall_ms` the judge's own time of the whole round trip; `overhead_ms` the round trip's fixed
    cost measured on the reference host. The claim is held within [wall - overhead, wall]: a host
    that under-reports gains at most the difference between the fixed cost subtracted and its own
    (bounded by the round trips' jitter), and one that reports nothing usable (not a number,
    negative, infinite) is counted at the lower bound. Never negative.
    """
    floor = max(wall_ms - overhead_ms, 0.0)
    if isinstance(claimed_ms, bool) or not isinstance(claimed_ms, (int, float)):
        return floor
    try:
        claim = float(claimed_ms)
    except OverflowError:  # an integer beyond any float: no figure at all
        return floor
    if not math.isfinite(claim):
        return floor
    return min(max(claim, floor), max(wall_ms, 0.0))


def candidate_rounds_ms(
    rounds: list[list[tuple[float, object]]],
    overhead_high_ms: float,
    overhead_typical_ms: float,
    tolerance_ms: float = 0.0,
    tolerance_share: float | None = None,
) -> list[list[float]]:
    """Candidate ms per call, per round, from (judge's round trip ms, the host's own claim) pairs.

    Each call is first held within the judge's clock (`clocked_call_ms` with `overhead_high_ms`, a
    high quantile of the round trip's fixed cost). Then the pass as a whole: a host whose calls
    leave more round trip unexplained (median of wall - figure) than `overhead_typical_ms` (that
    fixed cost's median, `allowed_fixed_cost`) plus `tolerance_ms` has under-reported, and
    every figure is raised by the excess over that sum. An honest host is measured by its own
    clock (the one the reference's time comes from); the median figure of a host that claims less
    than it took ends near or above the median of the judge's times less the typical fixed cost
    less `tolerance_ms` (the tests try constant, proportional, wall-tracking and missing claims).

    `tolerance_ms` is the noise of that comparison: both medians come from a few round trips each
    (the candidate host's and the reference host's of one pass, `allowed_fixed_cost`). Without
    it, an honest host is raised whenever its median happens to land above the reference host's
    (about half the time) and never lowered: a bias against every candidate, up to several percent for
    rounds of few calls (measured on an H200, docs/benchmarks.md). It is the benefit of the doubt
    for figures the judge could believe: a host whose claims had to be replaced by the judge's
    bound (missing, or below the judge's time less the high fixed cost) in half of its calls or
    more gets none, and is counted at the judge's time less the typical fixed cost (an honest
    host's claims fall below that bound in about 1 - the quantile of its calls; a host that sends
    no times, or a nanosecond, kept up to the whole tolerance a round trip, which on an H200
    paid x*2+1 over 16 Mi floats up to 1.7x when the rounds' memory capped K: docs/benchmarks.md).
    A host that under-reports by less than the bound gains at most `tolerance_ms` a round trip.

    `tolerance_share` caps the tolerance at that share of the median round's figure (the host's
    time as the judge counts it before any raise), so that what an under-reporting host gains is
    at most that share of its own time (1 / (1 - share) in speedup), however short its rounds:
    where K is held below what the jitter asks for (the memory budget), a 0.5-jitter tolerance
    was 5-10% of a 3 ms round, and a host reporting 0.9 of its forwards' time was paid up to
    1.11x against its honest twin (H100, docs/benchmarks.md). None: no cap. Never negative.
    """
    figures = [[clocked_call_ms(claim, wall, overhead_high_ms) for wall, claim in rnd] for rnd in rounds]
    pairs = [(wall, f) for rnd, frnd in zip(rounds, figures) for (wall, _), f in zip(rnd, frnd)]
    unexplained = [wall - f for wall, f in pairs]
    bounded = sum(1 for wall, f in pairs if f <= max(wall - overhead_high_ms, 0.0))
    tolerance = max(tolerance_ms, 0.0) if 2 * bounded < len(pairs) else 0.0
    if tolerance_share is not None and pairs:
        tolerance = min(tolerance, max(tolerance_share, 0.0) * statistics.median(f for _, f in pairs))
    allowed = overhead_typical_ms + tolerance
    excess = max(statistics.median(unexplained) - allowed, 0.0) if unexplained else 0.0
    return [[f + excess for f in frnd] for frnd in figures]


def allowed_fixed_cost(
    pass_reference_ms: list[float],
    calibration_reference_ms: list[float],
    calibration_candidate_ms: list[float],
    jitter_ms: float,
    q: float | None = None,
    after_reference_ms: list[float] | None = None,
) -> float:
    """What a candidate host's round trips may leave unexplained in a timing pass (ms): a statistic
    S (the median, or with `q` the q-quantile, `percentile`) of the reference host's fixed costs
    in this same pass, at most S of its calibration's plus `jitter_ms`, plus how much higher the
    candidate host's S was than the reference host's in the calibration, where it was higher:

        min(S(pass_reference), S(calibration_reference) + jitter) + max(S(calibration_candidate) - S(calibration_reference), 0)

    With `after_reference_ms` (the reference host's fixed costs in round trips made once the
    candidate's processes were ended: `EvalSettings.fixed_cost_cap_after_candidate`) the cap is
    max(S(calibration_reference), S(after_reference)) + jitter: both are clean, so a candidate
    still widens its allowance by at most a jitter, while a machine whose fixed costs drifted up
    between the calibration and the pass no longer holds an honest host to the calibration's
    (on an H100, level1/12's seed with K = 2: the pass's 2.67 ms against the calibration's 2.25
    ms raised it 17%, docs/benchmarks.md, thirty-eighth session).

    Each list holds fixed costs (ms: a round trip on the judge's clock minus the host's own time
    of its forwards). The two hosts run the same code, interleaved, so the reference host's round
    trips of the same pass are the closest measure of what the candidate host's cost; the cap
    keeps a candidate that slows the reference host's round trips from widening its own
    allowance; the calibration's difference comes from before any candidate code existed, so no
    candidate moves it. A candidate host that was faster in the calibration is not held to that:
    over 50 H100 evaluations of references as their own candidates, the calibration's difference
    did not carry over to the pass (its median error 0.095 ms a round trip against 0.071 ms for
    none), and holding honest hosts to it raised 5 of them by 2.4-6.4% (docs/benchmarks.md).
    With no pass trips, S(calibration_candidate). Raises ValueError when a calibration list is
    empty."""

    def stat(values: list[float]) -> float:
        return statistics.median(values) if q is None else percentile(values, q)

    if not calibration_reference_ms or not calibration_candidate_ms:
        raise ValueError("the allowance needs both hosts' calibration fixed costs")
    ref_cal, cand_cal = stat(calibration_reference_ms), stat(calibration_candidate_ms)
    if not pass_reference_ms:
        return cand_cal
    clean = max(ref_cal, stat(after_reference_ms)) if after_reference_ms else ref_cal
    return min(stat(pass_reference_ms), clean + jitter_ms) + max(cand_cal - ref_cal, 0.0)


def parallel_cpu_ms(cpu_ms: float, elapsed_ms: float, busiest_ms: float | None = None) -> float:
    """The CPU time (ms) a round trip's processes spent beyond one core: max(cpu_ms - min(elapsed_ms,
    busiest_ms), 0), with `cpu_ms` the CPU time of every process of the candidate from just before
    the go until the judge holds its outputs, `elapsed_ms` that interval on the judge's clock and
    `busiest_ms` the most CPU time any one thread of the candidate spent in it (None: unknown, the
    interval alone bounds it).

    A host that runs its forwards on one thread, as the reference host does (`EvalSettings.host_threads`),
    spends at most the interval, all of it on that thread (it spins on each reveal). Whatever
    the other threads spent is charged: threads, thread pools, helper processes, and threads that
    ended within the interval (their time is in `cpu_ms`, in no live thread's). Counting only the
    excess over the interval, the time a second thread ran while the host's own thread blocked
    went free (a red team's host blocked where the stock one spins and ran sin on two threads:
    median 1.19x against an honest 1.00x, 2026-12-07); counting all but the busiest thread's
    time, a round trip is charged at least the CPU time of every thread, since no thread runs
    longer than the interval. Never negative; a non-finite input gives 0."""
    own = elapsed_ms if busiest_ms is None else min(elapsed_ms, busiest_ms)
    excess = cpu_ms - own
    return excess if math.isfinite(excess) and excess > 0 else 0.0


NORMAL_10_90_PER_IQR = 1.9
"""The 10th-90th percentile range of a normal distribution over its interquartile range
(2 × 1.2816 / (2 × 0.6745) = 1.900)."""


def jitter(values_ms: list[float]) -> float:
    """Run-to-run jitter of a fixed cost (ms, at least 1e-6): `NORMAL_10_90_PER_IQR` × its
    interquartile range, the 10th-90th percentile range of normal noise of the same spread.

    Robust, because one slow round trip must not set it: the judge's round trips come in sixteens
    or tens, and their 90th percentile is then the second or first slowest; on an H100 one or two
    trips of 5-7 ms among 1.0-1.5 ms ones took a pass's resolution from 0.08 to 0.78 ms a call and
    a seed's speedup from 3.03x to 2.72x (docs/benchmarks.md, floor_bootstrap). Raises ValueError
    when empty."""
    return max(NORMAL_10_90_PER_IQR * (percentile(values_ms, 0.75) - percentile(values_ms, 0.25)), 1e-6)


def idle_gaps_ms(round_trips: dict[str, list[dict[str, Any]]], key: str) -> list[float]:
    """The idle gap before each round trip recorded under `key` (ms, at least 0): from the end of
    the recorded round trip before it, of any kind, to its go, on the judge's clock.
    `round_trips`: `EvalResult.round_trips` (each record's "go_s", s, and "wall_ms", ms). The
    first round trip recorded has no gap."""
    trips = sorted((t["go_s"] * 1e3, t["wall_ms"], k) for k, ts in round_trips.items() for t in ts)
    return [max(go - go0 - wall0, 0.0) for (go0, wall0, _), (go, _, k) in zip(trips, trips[1:]) if k == key]


def one_call_cap_ms(calibration_reference_ms: list[float], after_reference_ms: list[float] | None = None) -> float:
    """The most a reference one-call round trip of a timing pass counts for in the one-call floor
    (ms): the median of the calibration's reference one-call round trips (ms) plus their jitter
    (`one_call_floor_ms`); with `after_reference_ms` (the reference's one-call round trips once
    the candidate's processes were ended), the larger of that and the same of theirs. Raises
    ValueError when the calibration's are empty."""
    cap = statistics.median(calibration_reference_ms) + jitter(calibration_reference_ms)
    if after_reference_ms:
        cap = max(cap, statistics.median(after_reference_ms) + jitter(after_reference_ms))
    return cap


def one_call_floor_ms(
    pass_trips_ms: list[tuple[float, float]],
    calibration_trips_ms: list[tuple[float, float]],
    reference_ms: float,
    margin: float,
    signed_bias: bool = False,
    cap: bool = True,
    after_reference_ms: list[float] | None = None,
) -> tuple[float, float]:
    """(floor, allowance), ms per call: the least a candidate's per-call figure from batched
    round trips may be, from one-call round trips in which nothing of another call exists.

    Each pair is one one-call round: (the candidate host's round trip, the reference host's) on
    the same input set, ms on the judge's clock; `pass_trips_ms` from the timing pass,
    `calibration_trips_ms` from the calibration, where both hosts ran the reference before any
    candidate code existed; `reference_ms` is the reference's per-call figure in the batched
    rounds (its median, as capped for the speedup). With d = candidate - min(reference, cap) per
    pass round and c = candidate - reference per calibration round:

        floor = reference_ms + median(d) - max(median(c), 0) - allowance
        (with `signed_bias`: - median(c), whatever its sign)
        allowance = margin × jitter(c) × (1 / sqrt(n) + 1 / sqrt(m))

    `jitter` is the 10-90 percentile range of normal noise of the same interquartile range (about
    two standard errors of a median per sqrt(count)). The noise is the calibration's, taken for both
    medians: d's own spread is the candidate's to widen (a long delay in a third of its one-call
    rounds leaves the median where it was), so it must not set what the floor forgives. cap = the
    calibration's reference round trips' median plus their jitter (`one_call_cap_ms`): work a
    candidate leaves running on the device can slow the reference host's round trips, and so lower
    d, by no more than about one jitter (as `allowed_fixed_cost` caps its fixed cost; a median and
    an interquartile range, so that a few stalls among the calibration's round trips do not lift the
    cap). The calibration's bias is taken only where the candidate host was the slower one, as
    there, unless `signed_bias`: on an H100 the stock reference host was the slower one in one-call
    rounds by 0.1-0.17 ms, which a one-sided bias leaves to a batching candidate
    (docs/benchmarks.md, 2026-12-06); signed, drift between the calibration and the pass moves an
    honest floor by as much, either way. That bias is mostly the hosts' cores (a one-call forward is
    mostly the CPU launching kernels): unpinned it reached 0.39 ms and wandered; with both hosts on
    one core (`cudal1.bench.cores.judge_and_hosts`) it stayed within 0.07 ms. `after_reference_ms`:
    reference one-call round trips made once the candidate's processes were ended
    (`EvalSettings.one_call_cap_after_candidate`); the cap is then the larger of the two clean
    caps, so that the reference host drifting slower between the calibration and the pass does
    not raise an honest floor, while what a candidate can do to the pass's trips stays within a
    jitter of a clean measurement (as `baseline_ms` takes the larger of two clean baselines).
    `cap` False leaves the pass's reference round trips uncapped: only for replays of recorded
    evaluations (`benchmarks/one_call_replay.py`), never in a judge.

    So a candidate is paid, per call, at most what it gains over the reference when each call
    must be finished before the judge reads it and no later input exists, plus the noise of
    that comparison: work batched across the calls of a round (a first call that computes the
    others' outputs, an output a later call completes, whole calls run side by side) pays
    nothing beyond it. The reference's own launch latency, exposed in a one-call round and
    hidden in a batched one, is in both hosts' round trips and cancels; what an honest
    candidate can lose to the floor is only how much more of its launch latency than the
    reference's a one-call round exposes. At least 0. Raises ValueError when either list is
    empty."""
    if not pass_trips_ms or not calibration_trips_ms:
        raise ValueError("one_call_floor_ms needs one-call round trips from the pass and from the calibration")
    most = one_call_cap_ms([r for _, r in calibration_trips_ms], after_reference_ms) if cap else math.inf
    d = [c - min(r, most) for c, r in pass_trips_ms]
    bias = [c - r for c, r in calibration_trips_ms]
    allowance = margin * jitter(bias) * (1 / math.sqrt(len(d)) + 1 / math.sqrt(len(bias)))
    shift = statistics.median(d) - (statistics.median(bias) if signed_bias else max(statistics.median(bias), 0.0))
    return max(reference_ms + shift - allowance, 0.0), allowance


def pass_resolution(
    calibrated_ms: float, trips_ms: list[float], k: int, source: str = "calibration", least_ms: float = 0.0
) -> float:
    """The resolution (ms per call) a timing pass uses.

    Args:
        calibrated_ms: the calibration's resolution (ms per call): the jitter of its round
            trips' fixed costs over K.
        trips_ms: the reference host's fixed cost (ms, the judge's clock minus the host's own
            time of its K forwards) of each round trip of this timing pass.
        k: calls per round trip (K >= 1).
        source: "calibration" (`calibrated_ms` as it is) or "timing_pass" (`jitter(trips_ms)`
            over K, at least `least_ms` and at most `calibrated_ms`; with fewer than 3 trips,
            `calibrated_ms`).
        least_ms: the least resolution "timing_pass" may give (ms per call): what a candidate
            host may leave unexplained per call without being raised (the judge passes its
            tolerance over K, `candidate_rounds_ms`), so a host that under-claims by that much
            is still below the floor it is measured against.

    The reference host is the judge's own, so nothing of the candidate's sets its fixed costs
    except through the machine they share; the cap keeps a candidate that makes them jitter more
    from raising the floor of both sides above the calibration's.

    Raises ValueError for an unknown source or k < 1.
    """
    if source not in ("calibration", "timing_pass"):
        raise ValueError(f"unknown resolution source {source!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if source == "calibration" or len(trips_ms) < 3:
        return calibrated_ms
    return min(calibrated_ms, max(jitter(trips_ms) / k, least_ms))


def fixed_costs(round_trips_ms: list[float], reference_ms: list[float]) -> list[float]:
    """Round trip minus forward (ms) of each calibration call after the first third (warm-up).

    round_trips_ms[i]: the judge's time of the i-th reference call through the whole round trip to
    the reference host; reference_ms[i]: the reference host's own time of the forward in that same
    call. What is left is what a call through a host costs besides the forward (messages, the
    reads of the outputs, GPU context switches, the host's bookkeeping). Raises ValueError for
    fewer than 3 calls, or lists of different lengths.
    """
    if len(round_trips_ms) != len(reference_ms):
        raise ValueError("calibration needs one reference time per round trip")
    if len(round_trips_ms) < 3:
        raise ValueError("calibration needs at least 3 round trips")
    skip = len(round_trips_ms) // 3
    return [t - r for t, r in zip(round_trips_ms[skip:], reference_ms[skip:])]


def calibration(round_trips_ms: list[float], reference_ms: list[float]) -> tuple[float, float]:
    """(fixed cost, jitter) in ms of one-call round trips to the reference host.

    fixed cost = the median of `fixed_costs` (never negative); jitter = the `jitter` of the round
    trips after the first third. The judge uses the jitter to choose how many calls a timed
    round trip runs (`batch_size`). Raises ValueError as `fixed_costs` does.
    """
    costs = fixed_costs(round_trips_ms, reference_ms)
    trips = round_trips_ms[len(round_trips_ms) - len(costs) :]
    return max(statistics.median(costs), 0.0), jitter(trips)
