"""The tie window per pool and task size, learned from pairs of independent measurements of one program.

Two correct results of one GRPO group tie when their log-speedups differ by at most
max(floor, tie_factor × spread) (`cudal1.rl.advantages.tie_clusters`). The floor is the
between-evaluation noise: how far apart two separate evaluations of the *same* program land. It
is not one number: separate evaluations of one 1-3 ms candidate differ by 1.4-4% on an H200,
those of a sub-0.1 ms kernel by 10-30%, and a CPU pool's by more. `TieNoise` learns it from the
pairs the run makes anyway:

- a correct result and its second opinion (`EvalResult.second_opinion`: the same candidate
  re-measured on another actor of the pool, `cudal1.pipeline.verify`);
- the same program (`program_key`: task id and `cudal1.rl.similarity.normalized_code`) measured
  again in a later step (within a step a program is evaluated once and its copies share that
  result, so it makes no pair).

**Formula.** For a key k = (pool, size bucket), with d_i = |ln s1_i - ln s2_i| (ln-speedup units,
unitless: 0.05 is about 5%) over the last `window` pairs of k, n_k of them:

    floor(k) = max(tie_floor, min(max_floor, Q_q(d)))   if n_k >= min_pairs
             = floor((pool, "all"))                     else, if that key has min_pairs pairs
             = tie_floor                                otherwise

where Q_q is the nearest-rank q-quantile (the ceil(q·n)-th smallest d, never an interpolation
below a measured value). No √2 correction: d is already the difference of two evaluations,
which is what the tie test compares. `tie_floor` (the configured constant) is the lower bound, so
calibration only widens the window; `max_floor` caps it (a pool so noisy that its window would tie
a 1.3× with a 1.0× carries a bug or a broken actor, not noise to absorb).

The pool is the result's architecture key (`EvalResult.arch`, e.g. "sm_90", "cpu-x86_64"; its
`backend` when unset). The size bucket is the decade of the reference's time per call
(`reference_ms`: the smaller of `baseline_ms` and the reference's median, the numerator the
speedup used): "lt0.01ms", "0.01-0.1ms", "0.1-1ms", "1-10ms", "10-100ms", "ge100ms", or
"unknown".

**Memory** is bounded: at most `window` differences per key (a ring: recent noise counts, an
old pool state ages out), keys = pools × (buckets + 1), and at most `programs` remembered
programs (least recently measured dropped). **Checkpoint**: `to_dict` / `from_dict`; the RL stage
stores it in the run state (`cudal1.pipeline.state.RunState.tie_noise`), saved with each learner
checkpoint, so a resumed run continues with the pairs it had.

Pure: no I/O, no torch, no Ray.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from cudal1.bench.result import EvalResult, Label, Status
from cudal1.rl.rewards import RewardConfig, finite_positive

BUCKET_EDGES_MS = (0.01, 0.1, 1.0, 10.0, 100.0)
"""Edges (ms per call of the reference) of the task-size buckets: one bucket per decade."""

ALL = "all"
"""The coarser bucket of a pool: every pair of the pool, whatever the task size."""


def size_bucket(ms: float | None, edges: tuple[float, ...] = BUCKET_EDGES_MS) -> str:
    """The name of the bucket that `ms` (reference time per call, ms) falls in: "lt<e0>ms" below
    the first edge, "<e_i>-<e_i+1>ms" between two (lower edge included), "ge<e_last>ms" from the
    last; "unknown" for None or a value that is not finite and > 0. Names hold only characters
    MLflow accepts in a metric name."""
    if finite_positive(ms) is None:
        return "unknown"
    if ms < edges[0]:
        return f"lt{edges[0]:g}ms"
    for lo, hi in zip(edges, edges[1:]):
        if lo <= ms < hi:
            return f"{lo:g}-{hi:g}ms"
    return f"ge{edges[-1]:g}ms"


def reference_ms(result: EvalResult) -> float | None:
    """The reference's time per call (ms) the speedup of `result` was computed from: the smaller
    of `baseline_ms` and the reference's median where each is finite and > 0; None with neither."""
    values = [result.baseline_ms, result.reference.median_ms if result.reference is not None else None]
    usable = [v for v in map(finite_positive, values) if v is not None]
    return min(usable) if usable else None


def pool_of(result: EvalResult) -> str:
    """The pool key of `result`: its `arch`, else its `backend`, else "unknown"."""
    return result.arch or result.backend or "unknown"


def noise_key(result: EvalResult) -> tuple[str, str]:
    """(pool, size bucket) of `result` (`pool_of`, `size_bucket(reference_ms(result))`)."""
    return pool_of(result), size_bucket(reference_ms(result))


def measured_speedup(result: EvalResult | None) -> float | None:
    """The raw speedup (×) of a correct result that is a measurement of its program: status ok, a
    finite speedup > 0, not below the timer's resolution (label "below_resolution": only a lower
    bound); None otherwise."""
    if result is None or result.status is not Status.OK or Label.BELOW_RESOLUTION in result.labels:
        return None
    return finite_positive(result.speedup)


def program_id(task_id: str, normalized: str) -> str:
    """A short, stable id (hex, 24 characters) of a program: its task id and normalized code."""
    return hashlib.sha256(f"{task_id}\0{normalized}".encode()).hexdigest()[:24]


@dataclasses.dataclass
class TieNoise:
    """Between-evaluation noise per (pool, size bucket), and the tie floor it gives (see the
    module docstring for the formula).

    Attributes:
        tie_floor: the configured floor (ln-speedup units, >= 0): the lower bound and the fallback.
        quantile: q in (0, 1]: the share of same-program pairs the window must hold.
        min_pairs: pairs a key needs (>= 1) before its own quantile is used.
        max_floor: the cap on a calibrated floor (ln units, >= tie_floor).
        window: the most recent differences kept per key (>= min_pairs).
        programs: programs remembered for cross-step pairs (>= 0).

    Raises:
        ValueError: on construction, for a value out of those ranges.
    """

    tie_floor: float = 0.04
    quantile: float = 0.9
    min_pairs: int = 20
    max_floor: float = 0.25
    window: int = 512
    programs: int = 2048
    _diffs: dict[tuple[str, str], collections.deque[float]] = dataclasses.field(default_factory=dict, repr=False)
    _last: collections.OrderedDict[str, tuple[str, str, float]] = dataclasses.field(
        default_factory=collections.OrderedDict, repr=False
    )

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tie_floor) and self.tie_floor >= 0):
            raise ValueError(f"tie_floor must be finite and >= 0, got {self.tie_floor}")
        if not 0 < self.quantile <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {self.quantile}")
        if int(self.min_pairs) != self.min_pairs or self.min_pairs < 1:
            raise ValueError(f"min_pairs must be an integer >= 1, got {self.min_pairs}")
        if not (math.isfinite(self.max_floor) and self.max_floor >= self.tie_floor):
            raise ValueError(f"max_floor must be finite and >= tie_floor ({self.tie_floor}), got {self.max_floor}")
        if int(self.window) != self.window or self.window < self.min_pairs:
            raise ValueError(f"window must be an integer >= min_pairs ({self.min_pairs}), got {self.window}")
        if int(self.programs) != self.programs or self.programs < 0:
            raise ValueError(f"programs must be an integer >= 0, got {self.programs}")
        self.min_pairs, self.window, self.programs = int(self.min_pairs), int(self.window), int(self.programs)

    # ----- learning

    def add_pair(self, pool: str, bucket: str, s1: float, s2: float) -> None:
        """Record two independent measurements s1, s2 (×, finite, > 0) of one program in one pool
        and task-size bucket: |ln s1 - ln s2| joins that key's window and the pool's "all" window.
        Raises ValueError for a speedup that is not finite and > 0."""
        a, b = finite_positive(s1), finite_positive(s2)
        if a is None or b is None:
            raise ValueError(f"speedups must be finite and > 0, got {s1}, {s2}")
        d = abs(math.log(a) - math.log(b))
        for key in ((pool, bucket), (pool, ALL)):
            self._diffs.setdefault(key, collections.deque(maxlen=self.window)).append(d)

    def observe(self, result: EvalResult | None, program: str | None = None) -> int:
        """Learn from one evaluation; returns the pairs it added (0, 1 or 2).

        A correct measurement (`measured_speedup`) with a second opinion that is one too makes a
        pair. With `program` (a `program_id`), it is also paired with the last measurement of the
        same program in the same pool, and becomes that program's last measurement. Each call must
        be a separate evaluation: a result shared by several responses (copies within a step) is
        observed once, else it would pair with itself (d = 0) and shrink the quantile.
        """
        s = measured_speedup(result)
        if s is None:
            return 0
        assert result is not None
        pool, bucket = noise_key(result)
        added = 0
        check = result.second_opinion
        if check is not None and check.status is Status.OK and finite_positive(check.speedup) is not None:
            self.add_pair(pool, bucket, s, float(check.speedup))  # type: ignore[arg-type]
            added += 1
        if program is not None and self.programs > 0:
            last = self._last.pop(program, None)
            if last is not None and last[0] == pool:
                self.add_pair(pool, last[1], last[2], s)
                added += 1
            self._last[program] = (pool, bucket, s)
            while len(self._last) > self.programs:
                self._last.popitem(last=False)
        return added

    # ----- reading

    def pairs(self, pool: str, bucket: str) -> int:
        """The pairs in the window of (pool, bucket) (`ALL` for the pool's)."""
        return len(self._diffs.get((pool, bucket), ()))

    def _quantile(self, key: tuple[str, str]) -> float | None:
        diffs = self._diffs.get(key)
        if diffs is None or len(diffs) < self.min_pairs:
            return None
        ranked = sorted(diffs)
        return ranked[max(0, math.ceil(self.quantile * len(ranked)) - 1)]

    def floor(self, pool: str, bucket: str) -> float:
        """The tie floor (ln-speedup units) of (pool, bucket): the formula of the module docstring
        (its own quantile, else the pool's, else `tie_floor`; within [tie_floor, max_floor])."""
        q = self._quantile((pool, bucket))
        if q is None:
            q = self._quantile((pool, ALL))
        if q is None:
            return self.tie_floor
        return max(self.tie_floor, min(self.max_floor, q))

    def floor_for(self, result: EvalResult | None) -> float:
        """The tie floor (ln units) for `result`'s pool and task size; `tie_floor` for None."""
        return self.tie_floor if result is None else self.floor(*noise_key(result))

    def metrics(self, used: Iterable[tuple[str, str]] = (), prefix: str = "reward") -> dict[str, float]:
        """The floors in use as metrics: "<prefix>/tie_floor/<pool>/<bucket>" (ln units) and
        "<prefix>/tie_pairs/<pool>/<bucket>" (pairs in its window), for every key in `used` (the
        step's (pool, bucket) keys) and every key with pairs, the pools' "all" keys included."""
        out: dict[str, float] = {}
        for pool, bucket in sorted(set(used) | set(self._diffs)):
            out[f"{prefix}/tie_floor/{pool}/{bucket}"] = self.floor(pool, bucket)
            out[f"{prefix}/tie_pairs/{pool}/{bucket}"] = float(self.pairs(pool, bucket))
        return out

    # ----- checkpoint

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of the settings and the learned state (differences per key in order,
        the remembered programs oldest first); `from_dict` reads it back."""
        return {
            "settings": {
                "tie_floor": self.tie_floor,
                "quantile": self.quantile,
                "min_pairs": self.min_pairs,
                "max_floor": self.max_floor,
                "window": self.window,
                "programs": self.programs,
            },
            "diffs": [[pool, bucket, list(d)] for (pool, bucket), d in self._diffs.items()],
            "last": [[program, *value] for program, value in self._last.items()],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **settings: Any) -> "TieNoise":
        """The `TieNoise` of `to_dict`'s `d`, with `settings` (keyword: the constructor's) replacing
        the saved ones (a resumed run takes the config it was started with; a smaller window or
        memory keeps the newest). Raises KeyError/ValueError/TypeError on a malformed record."""
        noise = cls(**{**dict(d["settings"]), **settings})
        for pool, bucket, diffs in d["diffs"]:
            window = noise._diffs.setdefault((str(pool), str(bucket)), collections.deque(maxlen=noise.window))
            window.extend(float(x) for x in diffs)
        for program, pool, bucket, s in d["last"]:
            noise._last[str(program)] = (str(pool), str(bucket), float(s))
        while len(noise._last) > noise.programs:
            noise._last.popitem(last=False)
        return noise


def tie_noise(cfg: RewardConfig, saved: Mapping[str, Any] | None = None) -> TieNoise | None:
    """The run's `TieNoise` from its reward config (`tie_floor`, `tie_quantile`, `tie_min_pairs`,
    `tie_max_floor`), continuing `saved` (a `TieNoise.to_dict()` from the run state) when given;
    None when `cfg.tie_calibration` is false (every result then ties within `cfg.tie_floor`).
    Raises ValueError for a malformed `saved` record."""
    if not cfg.tie_calibration:
        return None
    settings = dict(
        tie_floor=cfg.tie_floor, quantile=cfg.tie_quantile, min_pairs=cfg.tie_min_pairs, max_floor=cfg.tie_max_floor
    )
    settings["window"] = max(TieNoise.window, cfg.tie_min_pairs)
    if saved is None:
        return TieNoise(**settings)
    try:
        return TieNoise.from_dict(saved, **settings)
    except (KeyError, TypeError) as e:
        raise ValueError(f"malformed tie-noise state: {e!r}") from e
