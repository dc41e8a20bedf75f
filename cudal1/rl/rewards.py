"""The reward policy: what one response is worth (`price`), as a pure function of the evaluator's
result, the parser's verdict and how the response ended.

The reward is the product's learning signal, so it is built to rank honestly:

- **Failures are below every correct candidate, under every transform.** A correct candidate's
  credit is a bounded, increasing function of its speedup (`credit`): (-B, B) for
  "log_speedup", (0, M) for "speedup"; a failure gets the lower bound (or a lower
  `failure_reward`; a higher one is a configuration error), a caught hack `hack_reward` <= that.
- **Outliers are bounded without erasing the ranking.** Credit is squashed by a softsign
  (x / (1 + |x|), which unlike tanh does not round to its bound in floating point) at a scale of
  `max_credit` (10× by default): 20×, 25×, 30×, 40× and even 10^6× keep their order, and one huge speedup,
  more often a loophole than skill (CUDA-L1, Li et al., arXiv 2507.14111, on reward hacking),
  cannot dwarf the rest. This replaces CUDA-L1's batch-wide standardize-then-clip at ±1.5, which
  maps a whole group of large wins to the clip and so to advantage 0.
- **Noise is not signal.** A speedup is rounded toward 1.00 (to `round_step`), counts as a gain
  only above `min_gain` (1.01×); a result whose rounds disagree by more than `max_spread` earns
  only the gain three rounds in four agree on (`noisy_quantile`, `consistent_speedup`), and one
  whose spread is missing, NaN or infinite (its noise is unknown) earns no gain (paid as 1.00×);
  both have reason "ok:noisy". Within a group, results closer than the between-evaluation noise
  (`tie_floor`, 4% by default: separate evaluations of one 1-3 ms candidate differ by 1.4-4%,
  docs/benchmarks.md, "Repeatability, second look"; with `tie_calibration`, learned per pool and
  task size from the run's repeated measurements, `cudal1.rl.noise`) or than the faster one's spread are ties, results
  below the timer's resolution (label "below_resolution", `Priced.bound`) tie with each other
  when their labels price them alike (`Priced.factor`), and
  responses with the same normalized code share one price (`share_identical`); see
  `cudal1.rl.advantages`.
- **Facts are priced.** A gain (log-speedup above 0) is scaled by each matching evaluator label's
  factor (`label_factors`: lowered precision earns no gain, a rewrite that calls the reference's
  own operators little); slowdowns are never forgiven.
- **Copies and fallbacks are not progress.** A correct candidate whose normalized code
  (`normalized_code`: the AST with comments, docstrings, formatting and no-op statements removed
  and identifiers renamed by first occurrence, `cudal1.rl.similarity`) equals an exemplar its
  prompt showed is a copy (reason "copy"); a correct candidate labelled `calls_reference_ops` (every
  reference operator still called, whatever library of its own it maps) with no gain after the rules above,
  or a gain within the between-evaluation noise (`tie_floor`, or the pool's calibrated floor
  that the RL stage passes in), is a fallback (reason "fallback"): the reference's own operators
  measured 1.04-1.14x on a loaded CPU by noise alone. Both earn the failure reward and stay in the update. Why not
  leave them out of it: a response left out is neither raised nor lowered, so a policy that has
  learned to copy keeps copying as long as nothing else in its groups succeeds; priced as a
  failure a copy ties the failures of its group (advantage 0 beside them, never positive) and
  falls below every honest correct answer, slow ones included. `price`'s Priced for them is not
  "ok", so they never enter the exemplar buffer either (`cudal1.pipeline.rollouts.successes`).
- **A measurement that failed is not the candidate's.** A result with status ok whose speedup is
  missing, NaN, infinite or <= 0 earns the failure reward but stays out of the update (reason
  "bad_speedup", not trainable): the judge floors both times at its resolution, so only an
  inconsistent harness record gets there, and it says nothing about the response.
- **A second opinion that fails is a failure.** A fast result re-measured on another actor whose
  re-measurement is incorrect earns the failure reward (reason "second_opinion:incorrect"), and
  one caught as a hack there the hack reward ("second_opinion:hack"): the same code gave a wrong
  answer on other inputs. Two correct measurements that disagree, or a re-measurement that crashed
  or timed out (which may be the other actor's fault), earn no gain ("suspect:unverified"). Two
  correct measurements are paid the slower of the two: "ok" when they agree within
  `verify_tolerance` (`second_opinion`), "ok:disputed" when they do not. Why the slower and not
  1.00x: both are measurements of the same code on two actors, and what makes one figure too
  fast (one actor's state, a burst of noise) is unlikely to be in both, so the slower is the
  figure to trust; paying 1.00x instead taught nothing about speed on a noisy pool (a 15.7x
  kernel re-measured at 10.1x was paid 1.00x, like the reference). A disputed result passes but
  is not kept as an exemplar
  (`cudal1.pipeline.rollouts.is_success`): a prompt shows only figures two actors agree on or
  that needed no second look.
- **Only finished, well-formed responses are paid.** A response cut at `max_tokens`
  (finish reason "length") earns nothing and is left out of the update (DAPO's overlong
  filtering, Yu et al. 2025); one without its performance analysis and algorithm design sections
  (`required_sections`, at least `min_section_chars` each) earns the failure reward, and is not
  sent to the benchmark pool (`format_failure`).

Pure functions: no I/O, no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cudal1.errors import ConfigError
from cudal1.bench.result import FAILED_STATUSES, HARNESS_LABELS, EvalResult, Label, SecondOpinion, Status
from cudal1.rl.similarity import normalized_code

TRANSFORMS = ("log_speedup", "speedup")

MIN_GAIN = 1.01
"""The default gain bar (×): a speedup counts as a gain only above it (pricing, exemplar targets,
an optimize outcome "improved")."""

FALLBACK_LABEL = "calls_reference_ops"
"""The evaluator's label of a candidate that still calls every reference operator, with or without
a library of its own mapped (`cudal1.bench.labels`): with no gain beyond the noise it is a
fallback."""

VERIFY_TOLERANCE = 0.10
"""The default tolerance of a second opinion: two measurements of one candidate whose speedups
s1, s2 (×) have |s1 - s2| / min(s1, s2) above this disagree."""

DEFAULT_LABEL_FACTORS: dict[str, float] = {
    "reduced_precision": 0.0,
    "calls_reference_ops": 0.25,
    "pytorch_only": 0.75,
    "global_flags": 0.5,
}
"""The default price of a gain per evaluator label (a factor on the log-speedup; several multiply):

- `reduced_precision`: 0. The task asks for its reference's precision; a gain from computing in
  lower precision is a different computation (its outputs still passed the tolerance).
- `calls_reference_ops`: 0.25. Every reference operator still called (a library of its own mapped
  beside them or not): a gain here is mostly a reordering or a measurement effect, rarely the
  optimization sought.
- `pytorch_only`: 0.75. A better PyTorch formulation is a legitimate answer, worth less than a
  kernel of its own (the project teaches kernels).
- `global_flags` (matches every "global_flags:<names>"): 0.5. The candidate changed process-wide
  settings (cuDNN autotuning, TF32, ...): part of its gain is the setting, not its code."""


@dataclasses.dataclass
class RewardConfig:
    """How a response is priced: the `reward` config group (conf/reward/*.yaml), consumed whole.
    Rewards are unitless scalars; speedups are × (reference time / candidate time).

    Validated on construction (Hydra's structured config builds it with `OmegaConf.to_object`):
    raises `cudal1.errors.ConfigError` (a ValueError) naming the key for an unknown transform, a
    non-finite or out-of-range value, or a failure or hack reward that would pay more than a
    correct candidate. Not frozen: OmegaConf makes a frozen dataclass's node read-only, which no
    YAML file or override could then set.
    """

    transform: str = "log_speedup"
    """A correct candidate's credit, bounded softly: "log_speedup" (B·v / (1 + |v|), v = ln(s) / B,
    B = ln max_credit: about ln s for small gains, 0 at 1×, symmetric in speedup and slowdown,
    within (-B, B)) or "speedup" (s at or below 1×; above, 1 + (M-1)·u / (1 + u),
    u = (s-1) / (M-1), M = max_credit: within (0, M))."""
    max_credit: float = 10.0
    """The scale (×) of the softsign that bounds credit: a speedup of max_credit earns half the
    credit bound above 1×, so outliers keep their rank but cannot dwarf the rest; > 1."""
    min_gain: float = MIN_GAIN
    """A speedup counts as a gain only above this (×, >= 1); at or below it (and >= 1) it is paid
    as 1.00×."""
    round_step: float = 0.01
    """Speedups are rounded toward 1.00 to a multiple of this (×; 0 = no rounding)."""
    max_spread: float = 0.5
    """A correct result whose per-round speedups disagree by more than this ((max - min) / median,
    the evaluator's `speedup_spread`) is paid only the gain most of its rounds agree on
    (`noisy_quantile`)."""
    noisy_quantile: float = 0.25
    """For a result beyond `max_spread`: the nearest-rank quantile (0, 0.5] of its per-round
    speedups that is paid, when it is a gain and no more than the speedup itself
    (`consistent_speedup`): with 0.25, three rounds in four were at least that fast. 0: such a
    result earns no gain (paid as 1.00×)."""
    tie_floor: float = 0.04
    """Two correct results of one group tie when their log-speedups differ by at most
    max(tie_floor, tie_factor × the faster one's spread) (`cudal1.rl.advantages.tie_clusters`).
    tie_floor is the between-evaluation noise of the pool (relative; ln-speedup units): 0.04, the
    top of the 1.4-4% that separate evaluations of one 1-3 ms candidate differ by on an H200
    (docs/benchmarks.md, "Repeatability, second look"). With `tie_calibration` it is the lower
    bound of the floor learned per pool and task size and the value used until one is learned;
    without, it is the floor everywhere (re-measure it for another pool with
    benchmarks/repeatability.py and set it there)..."""
    tie_factor: float = 1.0
    """...or within this × the faster one's spread (a spread is the whole range of one result's
    rounds: within one evaluation, usually far smaller than tie_floor; only the faster one's, so
    that a candidate's own noise never ties it up to a faster result)."""
    tie_calibration: bool = True
    """Learn the tie floor per pool and task size from the run's own pairs of measurements of one
    program (a result and its second opinion; a program measured again in a later step): the
    `tie_quantile` of their |ln s1 - ln s2|, within [tie_floor, tie_max_floor], once a key has
    `tie_min_pairs` pairs (`cudal1.rl.noise.TieNoise`). false: tie_floor everywhere."""
    tie_quantile: float = 0.9
    """The share (0, 1] of same-program pairs a calibrated tie window must hold."""
    tie_min_pairs: int = 20
    """Pairs a (pool, size bucket) needs before its own quantile is used (before that: its pool's
    over all sizes, then tie_floor)."""
    tie_max_floor: float = 0.25
    """The cap on a calibrated floor (ln units; 0.25 is about 28%): a wider window would tie
    results the policy should learn to tell apart; >= tie_floor."""
    failure_reward: float | None = None
    """Reward of a failure (parse error, bad format, compile or runtime error, timeout, limit,
    wrong output, degenerate task or a failed degenerate-task check, no result). null: the
    transform's lower bound (-ln max_credit, or 0): a failure is below every correct candidate.
    Must not exceed that bound. `failure_value` is the one paid."""
    hack_reward: float | None = None
    """Reward of a caught hack (status "hack"). null: failure_reward. Must not exceed it.
    `hack_value` is the one paid."""
    label_factors: dict[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LABEL_FACTORS))
    """Factor on a gain's log-speedup per evaluator label (a key matches the label itself and
    "<key>:..."; `DEFAULT_LABEL_FACTORS` says why each default). Set one to 1.0 to pay that label
    in full."""
    required_sections: tuple[str, ...] = ("analysis", "design")
    """Response sections a response must have (each at least `min_section_chars`) to be paid."""
    min_section_chars: int = 20
    """A required section shorter than this (characters, stripped) counts as missing."""
    verify_above: float = 3.0
    """A correct result faster than this (×) is measured again on another actor of the pool
    before it is paid (`needs_second_opinion`, `cudal1.pipeline.verify`)..."""
    verify_over_best: float = 2.0
    """...and so is one faster than this × its task's best known speedup."""
    verify_tolerance: float = VERIFY_TOLERANCE
    """Two measurements s1, s2 (×) may differ by this much, |s1 - s2| / min(s1, s2) (unitless;
    0.10 = 10%); beyond it the result is not paid ("suspect:unverified")."""

    def __post_init__(self) -> None:
        if self.transform not in TRANSFORMS:
            raise ConfigError("reward.transform", f"{self.transform!r} is not one of {', '.join(TRANSFORMS)}")
        for name in (
            "max_credit",
            "min_gain",
            "round_step",
            "max_spread",
            "noisy_quantile",
            "tie_floor",
            "tie_factor",
            "tie_max_floor",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"reward.{name}", f"must be a finite number >= 0, got {value!r}")
        if not isinstance(self.tie_calibration, bool):
            raise ConfigError("reward.tie_calibration", f"must be true or false, got {self.tie_calibration!r}")
        if not self.noisy_quantile <= 0.5:
            raise ConfigError("reward.noisy_quantile", f"must be in [0, 0.5], got {self.noisy_quantile!r}")
        if not (isinstance(self.tie_quantile, (int, float)) and 0 < self.tie_quantile <= 1):
            raise ConfigError("reward.tie_quantile", f"must be in (0, 1], got {self.tie_quantile!r}")
        if isinstance(self.tie_min_pairs, bool) or not isinstance(self.tie_min_pairs, int) or self.tie_min_pairs < 1:
            raise ConfigError("reward.tie_min_pairs", f"must be an integer >= 1, got {self.tie_min_pairs!r}")
        if self.tie_max_floor < self.tie_floor:
            raise ConfigError(
                "reward.tie_max_floor", f"must be >= tie_floor ({self.tie_floor}), got {self.tie_max_floor}"
            )
        if not self.max_credit > 1:
            raise ConfigError("reward.max_credit", f"must be > 1 (×), got {self.max_credit}")
        if self.min_gain < 1:
            raise ConfigError("reward.min_gain", f"must be >= 1 (×), got {self.min_gain}")
        for name in ("verify_above", "verify_over_best"):
            if not getattr(self, name) >= 1:
                raise ConfigError(f"reward.{name}", f"must be >= 1 (×), got {getattr(self, name)}")
        if not 0 < self.verify_tolerance < math.inf:
            raise ConfigError("reward.verify_tolerance", f"must be > 0, got {self.verify_tolerance}")
        # One form whatever built it (a mapping, a DictConfig's node, pairs): what OmegaConf takes back.
        factors = self.label_factors.items() if hasattr(self.label_factors, "items") else self.label_factors
        self.label_factors = {str(k): float(v) for k, v in factors}
        for key, value in self.label_factors.items():
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"reward.label_factors.{key}", f"must be finite and >= 0, got {value}")
        self.required_sections = tuple(str(s) for s in self.required_sections)
        floor, failure, hack = self.lower_bound, self.failure_value, self.hack_value
        if not math.isfinite(failure) or failure > floor:
            raise ConfigError(
                "reward.failure_reward",
                f"{failure} would pay a failure more than a correct candidate (correct rewards under "
                f"{self.transform} lie above {floor:.4f}); set it <= {floor:.4f}",
            )
        if not math.isfinite(hack) or hack > failure:
            raise ConfigError(
                "reward.hack_reward", f"{hack} would pay a caught hack more than a failure ({failure:.4f})"
            )

    @classmethod
    def from_config(cls, node: Any) -> "RewardConfig":
        """The `reward` config group as a `RewardConfig`: one already built, its DictConfig node, or
        a mapping of its fields. Raises ConfigError as the constructor does."""
        return node if isinstance(node, cls) else cls(**dict(node.items()))

    @property
    def lower_bound(self) -> float:
        """The infimum of a correct candidate's credit: -ln(max_credit) for "log_speedup", 0 for
        "speedup" (never reached)."""
        return -math.log(self.max_credit) if self.transform == "log_speedup" else 0.0

    @property
    def failure_value(self) -> float:
        """The reward a failure is paid: `failure_reward`, or `lower_bound` when it is null."""
        return self.lower_bound if self.failure_reward is None else float(self.failure_reward)

    @property
    def hack_value(self) -> float:
        """The reward a caught hack is paid: `hack_reward`, or `failure_value` when it is null."""
        return self.failure_value if self.hack_reward is None else float(self.hack_reward)


@dataclasses.dataclass(frozen=True)
class Priced:
    """What one response is worth.

    Attributes:
        reward: the scalar reward.
        reason: "ok", "ok:noisy", "suspect:unverified", or a failure label: "copy", "fallback",
            "second_opinion:incorrect", "second_opinion:hack", "truncated",
            "parse_error:<label>", "format:missing_<section>", an evaluator status, "hack:<kind>",
            "degenerate_task", "degenerate_check_failed", "not_evaluated", "bad_speedup", or a
            harness label ("actor_died", ...) on a result whose status is not a failure.
        speedup: the speedup the reward was computed from (×, after rounding and the gain rules),
            for correct results; None otherwise.
        spread: the evaluator's `speedup_spread` of a correct result (inf when it gave none
            usable: its noise is unknown).
        bound: the candidate's time was below the timer's resolution (label "below_resolution"):
            its speedup is a lower bound, and such results tie with each other.
        trainable: False when the response must stay out of the update (truncated, or an
            outcome that says nothing about the response: the harness failed or the task is
            invalid).
        unpaid: a correct result carries a label whose gain factor is 0 (`label_factors`, e.g.
            "reduced_precision"): whatever it measured, none of it is paid, so it is not kept as
            an example (`cudal1.pipeline.rollouts.is_success`).
        factor: the product of its labels' gain factors (`label_factor`; 1.0 for a result that
            is not correct): below-resolution results tie only with those of the same factor.
    """

    reward: float
    reason: str
    speedup: float | None = None
    spread: float = 0.0
    trainable: bool = True
    bound: bool = False
    unpaid: bool = False
    factor: float = 1.0

    @property
    def correct(self) -> bool:
        return self.speedup is not None


def credit(speedup: float, cfg: RewardConfig) -> float:
    """The bounded, increasing credit of a correct candidate at `speedup` (× > 0), before label
    factors (see `RewardConfig.transform`). Raises ValueError for a speedup <= 0 or non-finite."""
    if not math.isfinite(speedup) or speedup <= 0:
        raise ValueError(f"speedup must be finite and > 0, got {speedup}")
    if cfg.transform == "log_speedup":
        bound = math.log(cfg.max_credit)
        v = math.log(speedup) / bound
        return bound * v / (1 + abs(v))
    if speedup <= 1:
        return speedup
    top = cfg.max_credit - 1
    u = (speedup - 1) / top
    return 1 + top * u / (1 + u)


def conservative_speedup(speedup: float, cfg: RewardConfig) -> float:
    """`speedup` rounded toward 1.00 to `round_step` (a gain down, a loss up), and 1.00 when it
    is a gain no larger than `min_gain`. E.g. 1.237 -> 1.23, 0.873 -> 0.88, 1.009 -> 1.0."""
    s = speedup
    steps = s / cfg.round_step if cfg.round_step > 0 else math.inf
    if math.isfinite(steps):  # not for a speedup so large that the step count overflows
        # The 1e-9 keeps 1.23 (stored as 1.2299999...) at 1.23 instead of rounding it down a step.
        s = (math.floor(steps + 1e-9) if s > 1 else math.ceil(steps - 1e-9)) * cfg.round_step
        s = round(s, 12)
    if 1.0 < s <= cfg.min_gain:
        s = 1.0
    return s if s > 0 else speedup


def round_speedups(result: EvalResult) -> list[float]:
    """The speedup (×) of each timed round of `result`: the reference's round median over the
    candidate's (`Timing.round_medians_ms`), the reference capped at `baseline_ms` and both sides
    floored at `resolution_ms` as the evaluator does for the whole (`timing.speedup_stats`).
    Empty where the result has no usable rounds (no timings, unequal round counts, a value that
    is not finite and > 0)."""
    ref, cand = result.reference, result.candidate
    if (
        ref is None
        or cand is None
        or not ref.round_medians_ms
        or len(ref.round_medians_ms) != len(cand.round_medians_ms)
    ):
        return []
    values = [*ref.round_medians_ms, *cand.round_medians_ms]
    if any(finite_positive(v) is None for v in values):
        return []
    cap = finite_positive(result.baseline_ms) or math.inf
    floor = finite_positive(result.resolution_ms) or 0.0
    # The evaluator's ratio (cudal1.bench.timing.speedup_stats), not imported: that module needs torch.
    return [max(min(r, cap), floor) / max(c, floor) for r, c in zip(ref.round_medians_ms, cand.round_medians_ms)]


def consistent_speedup(result: EvalResult, quantile: float, speedup: float) -> float:
    """The gain a noisy result's rounds agree on (×): the nearest-rank `quantile` of its
    `round_speedups` (the ceil(q·n)-th smallest), at most `speedup` (the whole-pass figure);
    1.0 where that is no gain, where the rounds are unusable, or for quantile 0.

    Why: a result whose rounds disagree widely (spread > `max_spread`) may still be faster in
    nearly every round, as a 2x kernel timed on a loaded CPU is (rounds 1.2-3.4x); paying it 1.00x
    would teach nothing about speed. A quantile below the median pays only what most rounds
    show, so a candidate fast in a few rounds and not in the rest earns nothing."""
    rounds = sorted(round_speedups(result))
    if quantile <= 0 or not rounds:
        return 1.0
    low = rounds[max(0, math.ceil(quantile * len(rounds)) - 1)]
    return max(1.0, min(low, speedup))


def label_factor(labels: Iterable[str], cfg: RewardConfig) -> float:
    """The product of the factors of every label in `labels` that a `label_factors` key matches
    (the key itself, or "<key>:<anything>")."""
    factor = 1.0
    labels = set(labels)
    for key, value in sorted(cfg.label_factors.items()):
        if key in labels or any(label.startswith(key + ":") for label in labels):
            factor *= value
    return factor


def finite_positive(value: Any) -> float | None:
    """`value` as a float when it is a finite number > 0 (not a bool), else None: a usable
    speedup (×) or time (ms)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _spread(result: EvalResult) -> float:
    """`result.speedup_spread` when it is a finite number >= 0, else inf (unknown noise is not
    no noise)."""
    x = result.speedup_spread
    return (
        float(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
        else math.inf
    )


def needs_second_opinion(result: EvalResult | None, best_known: float | None, cfg: RewardConfig) -> bool:
    """True for a correct result (status ok) whose speedup (×) exceeds `cfg.verify_above`, or
    `cfg.verify_over_best` × `best_known` (the task's best stored speedup, × ; None: unknown)."""
    if result is None or result.status is not Status.OK:
        return False
    s = finite_positive(result.speedup)
    if s is None:
        return False
    return s > cfg.verify_above or (best_known is not None and best_known > 0 and s > cfg.verify_over_best * best_known)


def second_opinion(first: EvalResult, second: EvalResult, cfg: RewardConfig) -> SecondOpinion:
    """Compare a correct result (`first`, its speedup set) with its re-measurement on another actor.

    With s1 and s2 the two speedups (×), the disagreement is the relative difference
    |s1 - s2| / min(s1, s2) (unitless: 0.10 means the faster figure is 10% above the slower; None
    when `second` is not a correct result with a usable speedup). The tolerance is
    `cfg.verify_tolerance` (same unit), fixed: neither result's own `speedup_spread` nor a
    "below_resolution" label widens it, because a noisy or unresolved measurement is exactly what
    a second opinion must not wave through. The two agree if and only if the disagreement is set
    and disagreement <= tolerance. `price` pays the slower of two that agree and no gain for two
    that do not.
    """
    s1 = float(first.speedup)  # type: ignore[arg-type]
    s2 = finite_positive(second.speedup) if second.status is Status.OK else None
    disagreement = abs(s1 - s2) / min(s1, s2) if s2 is not None else None
    tolerance = float(cfg.verify_tolerance)
    return SecondOpinion(
        speedup=s2,
        status=second.status,
        actor=second.actor,
        disagreement=disagreement,
        tolerance=tolerance,
        agrees=disagreement is not None and disagreement <= tolerance,
    )


def format_failure(sections: Mapping[str, str] | None, cfg: RewardConfig) -> str | None:
    """The reason "format:missing_<key>" for the first of `cfg.required_sections` that `sections`
    lacks or holds in fewer than `cfg.min_section_chars` characters (stripped); None when all are
    there, or for `sections` None (no check). Such a response earns the failure reward whatever
    its code does, so it is never evaluated (`cudal1.pipeline.rollouts.sample_rollouts`)."""
    if sections is None:
        return None
    for key in cfg.required_sections:
        if len((sections.get(key) or "").strip()) < cfg.min_section_chars:
            return f"format:missing_{key}"
    return None


def price(
    result: EvalResult | None,
    parse_error: str | None = None,
    cfg: RewardConfig | None = None,
    *,
    finish_reason: str = "stop",
    sections: Mapping[str, str] | None = None,
    code: str | None = None,
    shown: Iterable[str] = (),
    tie_floor: float | None = None,
) -> Priced:
    """The reward of one response and why (see the module docstring for the rules).

    Args:
        result: the evaluation of the response's candidate, or None when it was never evaluated.
        parse_error: the parser's error label, or None when the response parsed.
        cfg: pricing; `RewardConfig()` when None.
        finish_reason: the generation's finish reason ("stop" or "length").
        sections: the parsed sections (key -> text); None skips the format check.
        code: the candidate's code, compared with `shown` (the code of the exemplars its prompt
            showed) to detect a copy.
        tie_floor: the between-evaluation noise of the result's pool and task size (ln-speedup
            units, `cudal1.rl.noise.TieNoise.floor_for`); None: `cfg.tie_floor`. A candidate
            labelled `calls_reference_ops` whose speedup is within it of 1.00x is a fallback.

    Returns:
        A `Priced`. Never raises for any result content.
    """
    cfg = cfg or RewardConfig()
    fail, hack = cfg.failure_value, cfg.hack_value
    if finish_reason == "length":
        return Priced(fail, "truncated", trainable=False)
    if parse_error is not None:
        return Priced(fail, f"parse_error:{parse_error}")
    bad_format = format_failure(sections, cfg)
    if bad_format is not None:
        return Priced(fail, bad_format)
    if result is None:
        return Priced(fail, "not_evaluated")
    status, labels = result.status, result.labels
    if status is Status.HACK:
        kind = result.hack_kind.value if result.hack_kind is not None else "unknown"
        return Priced(hack, f"hack:{kind}")
    harness = sorted(HARNESS_LABELS.intersection(labels))
    if harness:
        # The harness failed: the result says nothing about the response, whatever its status.
        # A caught hack (above) is the judge's own finding and keeps its price: no label turns a
        # candidate's failure into the harness's.
        return Priced(fail, status.value if status in FAILED_STATUSES else harness[0], trainable=False)
    if status in FAILED_STATUSES:
        return Priced(fail, status.value, trainable=status is not Status.INVALID_TASK)
    if Label.DEGENERATE_TASK in labels:
        # Wrong code passes on a degenerate task: a "correct" result there says nothing.
        return Priced(fail, Label.DEGENERATE_TASK)
    if Label.DEGENERATE_CHECK_FAILED in labels:
        # Paid as on a degenerate task (no speedup credit), but left out of the update: the check
        # failed on the reference, which says nothing about the response either way.
        return Priced(fail, Label.DEGENERATE_CHECK_FAILED, trainable=False)
    if code is not None:
        mine = normalized_code(code)
        if any(normalized_code(other) == mine for other in shown):
            return Priced(fail, "copy")
    speedup = finite_positive(result.speedup)
    if speedup is None:
        return Priced(fail, "bad_speedup", trainable=False)
    spread = _spread(result)
    s, reason = conservative_speedup(speedup, cfg), "ok"
    if s > 1 and spread > cfg.max_spread:
        agreed = consistent_speedup(result, cfg.noisy_quantile, speedup) if math.isfinite(spread) else 1.0
        s, reason = conservative_speedup(agreed, cfg), "ok:noisy"
    check = result.second_opinion
    if check is not None and check.status is Status.HACK:
        return Priced(hack, "second_opinion:hack")
    if check is not None and check.status is Status.INCORRECT:
        return Priced(fail, "second_opinion:incorrect")
    if s > 1 and check is not None:
        checked = finite_positive(check.speedup)
        if checked is None:  # the re-measurement crashed or timed out (maybe the actor's fault), or is unusable
            s, reason = 1.0, "suspect:unverified"
        else:  # the slower of the two measurements, whether or not they agree
            s = min(s, conservative_speedup(checked, cfg))
            reason = reason if check.agrees else "ok:disputed"
    floor = cfg.tie_floor if tie_floor is None else tie_floor
    if FALLBACK_LABEL in labels and math.log(s) <= max(0.0, floor):
        return Priced(fail, "fallback")
    factor = label_factor(labels, cfg)
    if s > 1:
        s = math.exp(math.log(s) * factor)
    return Priced(
        credit(s, cfg),
        reason,
        speedup=s,
        spread=spread,
        bound=Label.BELOW_RESOLUTION in labels,
        unpaid=factor == 0.0,
        factor=factor,
    )


def paid_speedup(result: EvalResult | None, cfg: RewardConfig | None = None) -> float | None:
    """The speedup (×) the reward counts for `result` as a correct program, the number an exemplar
    shows: `price`'s (rounded toward 1.00, the agreed share of a noisy gain, 1.00 for a gain whose
    re-measurement failed, the slower of two measurements, label factors applied), or None where
    `price` counts no correct program (a failure, a hack, a degenerate task, an unusable speedup,
    a second opinion that was wrong or a hack, labels that zero the pay). The fallback rule, which
    is about what a response earns, not about what the program runs at, is not applied: a correct
    program that calls the reference's operators with no gain beyond `cfg.tie_floor` shows its
    rounded speedup, at most 1.00× (a gain within the noise is none). The copy rule needs a prompt
    and is not applied either. Never raises."""
    cfg = cfg or RewardConfig()
    priced = price(result, cfg=cfg)
    if priced.reason == "fallback" and result is not None:
        measured = finite_positive(result.speedup)
        return min(1.0, conservative_speedup(measured, cfg)) if measured is not None else None
    if priced.speedup is None or priced.unpaid:
        return None
    return priced.speedup


def share_identical(priced: Sequence[Priced], groups: Sequence[Any], codes: Sequence[str | None]) -> list[Priced]:
    """One price per program per group: responses of one group (same id in `groups`) whose
    `normalized_code` is equal (`codes`: each response's code, None when it has none) all get the
    same `Priced`, that of the lower median of their rewards (separate evaluations of one program
    differ only by noise, and the lower median is a real measurement that does not favour the
    luckiest). Untrainable responses keep their own (they stay out of the update anyway).
    Returns a new list in input order. Raises ValueError for lengths that differ."""
    if not len(priced) == len(groups) == len(codes):
        raise ValueError(f"{len(priced)} prices, {len(groups)} group ids, {len(codes)} codes")
    same: dict[tuple[Any, str], list[int]] = {}
    for i, (p, g, c) in enumerate(zip(priced, groups, codes)):
        if p.trainable and c is not None:
            same.setdefault((g, normalized_code(c)), []).append(i)
    out = list(priced)
    for idx in same.values():
        ranked = sorted(idx, key=lambda i: priced[i].reward)
        shared = priced[ranked[(len(ranked) - 1) // 2]]
        for i in idx:
            out[i] = shared
    return out
