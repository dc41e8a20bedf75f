"""`EvalSettings`: every knob of one evaluation, with defaults per backend.

Units: seconds for limits, MiB for memory, ms nowhere (timings are outputs, in `result.Timing`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any


def default_cache_dir() -> Path:
    """Build cache root: $CUDAL1_CACHE, else ~/.cache/cudal1."""
    return Path(os.environ.get("CUDAL1_CACHE", Path.home() / ".cache" / "cudal1"))


@dataclasses.dataclass
class EvalSettings:
    """How one candidate is checked and timed.

    Correctness: `correctness_trials` fresh input sets, plus
    `shifted_trials` with the input distribution shifted (x*scale+shift, see `cudal1.bench.inputs`)
    where the reference stays finite. Timing: `rounds` rounds of `calls_per_round` interleaved
    (reference, candidate) call pairs in random order, after `warmup_calls`, each with fresh inputs.
    """

    size_profile: str | None = None
    """Task size profile ("cpu" / "cuda"); None means the backend's name."""
    correctness_trials: int = 5
    shifted_trials: int = 2
    seed: int | None = None
    """Base seed of all inputs, for reproducing an evaluation; None (the default) lets the judge
    draw one from OS entropy. Either way every input set's torch seed is derived from it inside the
    judge (SHA-256 of base and call number) and never reaches the candidate's process; the base is
    recorded in the result once the evaluation is over."""
    rtol: float | None = None
    """Relative tolerance; None uses the per-dtype default in `cudal1.bench.correctness`."""
    atol: float | None = None
    warmup_calls: int = 2
    rounds: int = 5
    calls_per_round: int = 5
    min_round_ms: float = 0.0
    """Raise calls per round until the faster program's calls add up to this much time per round
    (estimated from the warm-up): short kernels need more samples for a stable median."""
    max_calls_per_round: int = 200
    check_timed_outputs: bool = True
    """Compare every timed candidate output to the reference output on the same inputs."""
    flush_l2: bool = True
    """Overwrite a buffer larger than the last-level cache before every timed call."""
    remeasure_above: float = 3.0
    """A speedup (×) above this is measured a second time and the lower value is kept."""
    calibration_calls: int = 30
    """Round trips of the reference through the reference host, before the candidate is imported,
    that measure the round trip's fixed cost (which bounds what a candidate call may claim) and
    the reference's clean time (see `cudal1.bench.timing.calibration`)."""
    overhead_quantile: float = 0.9
    """Which quantile of the round trip's fixed cost (round trip minus the reference host's own
    time of the forward) bounds each candidate call's own clock from below: a call counts as at
    least the judge's time minus that cost (`cudal1.bench.timing.candidate_rounds_ms`; the pass as
    a whole is then held to the median cost). Lower: honest calls fall back to the judge's clock
    more often (the speedup leans low and is noisier)."""
    # limits
    wall_timeout_s: float = 300.0
    """Whole evaluation, build included."""
    build_timeout_s: float = 600.0
    """The whole prebuild (`cudal1.bench.evaluator.prebuild`): its child is ended after this long."""
    build_grace_s: float = 20.0
    """Seconds the prebuild gives the candidate's own code outside extension builds (its import,
    ModelNew(), one forward without a device), in all: a forward that hangs or runs long there is
    ended after this, builds already done."""
    cpu_time_limit_s: float | None = None
    """RLIMIT_CPU of the worker (None: 4 × wall_timeout_s); counts all threads."""
    memory_limit_mib: int = 8192
    """Resident memory limit of the candidate process and its children (watched by the parent).
    The judge process gets twice this (it holds inputs, reference outputs and the shared slots)."""
    max_processes: int = 2048
    """RLIMIT_NPROC once the worker runs unprivileged: processes *and threads* of that user, summed
    over all workers running at once (torch thread pools and parallel compilers count)."""
    sandbox: bool = True
    """Apply `cudal1.bench.sandbox` (no network, writes only to scratch and cache) where the OS allows."""
    cache_dir: str = dataclasses.field(default_factory=lambda: str(default_cache_dir()))

    def __post_init__(self) -> None:
        if not 0.0 <= self.overhead_quantile <= 1.0:
            raise ValueError(f"overhead_quantile must lie in [0, 1], got {self.overhead_quantile}")

    @classmethod
    def for_backend(cls, backend: str, **overrides: Any) -> "EvalSettings":
        """Defaults tuned per backend: the CPU backend takes fewer, longer calls."""
        base: dict[str, Any] = {"size_profile": backend}
        if backend == "cpu":
            base.update(rounds=5, calls_per_round=3, warmup_calls=1, flush_l2=False, calibration_calls=9)
        elif backend == "cuda":
            base.update(rounds=5, calls_per_round=20, warmup_calls=3, min_round_ms=10.0)
        else:
            raise ValueError(f"unknown backend {backend!r}: expected 'cpu' or 'cuda'")
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
