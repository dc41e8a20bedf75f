"""Per-step statistics of a batch of rollouts, as flat MLflow metric names → floats.

Pure (no I/O, no torch): the driver calls `rollout_metrics` on each step's rollouts and hands the
dict to `cudal1.tracking.Tracker.log_metrics`. Speedup statistics and fast_p come from
`cudal1.bench.summary.summarize`, so a training step and `cudal1 bench` report the same numbers.

Headline figures count only what the reward pays: a rollout passes when its price
(`cudal1.rl.rewards.price`) is "ok", "ok:noisy" or "ok:disputed", and its speedup is the paid
one (`Rollout.paid_speedup`: rounded toward 1.00, the slower of two measurements, label
factors applied). Copies, fallbacks, hacks (caught, or on a second opinion), unconfirmed
("suspect:unverified") and unpriced rollouts do not pass; reduced precision passes at 1.00×, so it
is never fast. The status and hack counts stay the evaluator's raw facts.

Denominators: rates (pass rate, fast_p, parse-failure rate) are over *all* rollouts of the step,
so a response that failed to parse, or was never evaluated, counts as a failure and a rate never
rises by dropping failures (as fast_p does in KernelBench). Speedup mean / median / geomean are
over the passing rollouts only, and left out when there is none.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from cudal1.bench.result import HARNESS_LABELS, EvalResult, Label, Status
from cudal1.bench.summary import DEFAULT_PS, fast_p_key, summarize
from cudal1.records import Rollout
from cudal1.tracking import metric_key  # mlflow itself is imported only when a Tracker is enabled


PASSING = ("ok", "ok:noisy", "ok:disputed")
"""Reward reasons of a rollout paid as correct."""


def rollout_metrics(rollouts: Sequence[Rollout], ps: Sequence[float] = DEFAULT_PS) -> dict[str, float]:
    """Statistics of one step's rollouts, keyed by MLflow-safe metric names.

    Args:
        rollouts: the step's rollouts; `result` is None when not evaluated (e.g. after a parse failure).
        ps: fast_p thresholds (× speedup, strict >).

    Returns:
        Always present (an empty batch gives `rollouts` = 0 and nothing else):
          - "rollouts", "evaluated": counts.
          - "reward/mean", "reward/std" (population std; 0 for one rollout), "reward/max".
          - "pass_rate": share that passes (paid as correct: a reason in `PASSING`).
          - "parse_failure_rate": share with a `parse_error`.
          - "truncated_rate": share whose generation hit max_tokens (finish_reason "length").
          - "format_ok_rate": share that parsed and has every required section (a reward reason
            that is neither "truncated", "parse_error:*" nor "format:*").
          - "trainable_rate": share that takes part in the update.
          - "fast_1", "fast_1.5", "fast_2" (one per p, names from `fast_p_key`): share that passes
            with a paid speedup > p.
          - "status/<status>" for every `Status` (zeros included): counts over evaluated rollouts.
          - "hack/<kind>" for every `HackKind` (zeros included): counts.
          - "response_tokens/mean": mean response length in tokens.
          - "harness_failures": count of evaluated rollouts the harness failed to measure (a
            result carrying one of `HARNESS_LABELS`: the benchmark actor died or timed out, or
            its evaluator raised); they are priced untrainable, so this is what the step lost to
            infrastructure rather than what the policy wrote. "harness/<label>" counts each
            label (zeros included).
        Present when defined:
          - "speedup/mean", "speedup/median", "speedup/geomean" (×): paid speedups of the passing rollouts.
          - "below_resolution_rate": share of the correct rollouts whose candidate time was below
            the measurement's resolution (label "below_resolution": their speedup is a bound).
          - "parse/<label>": count of each parse-error label seen.
          - "reason/<reason>": count of each reward reason seen ("ok", "ok:noisy", "copy", "fallback",
            "suspect:unverified", "format:missing_analysis", ...).
    """
    n = len(rollouts)
    if n == 0:
        return {"rollouts": 0.0}
    results = [r.result for r in rollouts if r.result is not None]
    summary = summarize(results, ps)
    paid = [float(r.paid_speedup) for r in rollouts if r.reward_reason in PASSING and r.paid_speedup is not None]
    n_eval = summary["n"]
    rewards = [float(r.reward) for r in rollouts]

    out: dict[str, float] = {
        "rollouts": float(n),
        "evaluated": float(n_eval),
        "reward/mean": statistics.fmean(rewards),
        "reward/std": statistics.pstdev(rewards),
        "reward/max": max(rewards),
        "pass_rate": len(paid) / n,
        "parse_failure_rate": sum(r.parse_error is not None for r in rollouts) / n,
        "truncated_rate": sum(r.generation.finish_reason == "length" for r in rollouts) / n,
        "response_tokens/mean": statistics.fmean(len(r.generation.response_ids) for r in rollouts),
        "format_ok_rate": sum(
            not r.reward_reason.startswith(("truncated", "parse_error:", "format:")) and r.parse_error is None
            for r in rollouts
        )
        / n,
        "trainable_rate": sum(r.trainable for r in rollouts) / n,
        "harness_failures": float(sum(bool(HARNESS_LABELS.intersection(r.labels)) for r in results)),
    }
    for label in sorted(HARNESS_LABELS):
        out[metric_key(f"harness/{label}")] = float(sum(label in r.labels for r in results))
    for p in ps:
        out[metric_key(fast_p_key(p))] = sum(s > p for s in paid) / n
    correct = [r for r in results if r.status is Status.OK]
    if correct:
        out["below_resolution_rate"] = sum(Label.BELOW_RESOLUTION in r.labels for r in correct) / len(correct)
    if paid:
        out["speedup/mean"] = statistics.fmean(paid)
        out["speedup/median"] = statistics.median(paid)
        out["speedup/geomean"] = math.exp(statistics.fmean(math.log(s) for s in paid))
    for status, count in summary["status_counts"].items():
        out[metric_key(f"status/{status}")] = float(count)
    for kind, count in summary["hack_counts"].items():
        out[metric_key(f"hack/{kind}")] = float(count)
    for label, count in Counter(r.parse_error for r in rollouts if r.parse_error is not None).items():
        out[metric_key(f"parse/{label}")] = float(count)
    for reason, count in Counter(r.reward_reason for r in rollouts if r.reward_reason).items():
        out[metric_key(f"reason/{reason}")] = float(count)
    return out


OVERVIEW = "_overview"
"""The prefix of the run's headline metrics (`overview_metrics`). MLflow's chart view groups charts
into sections by the part of the key before its last "/" and orders the sections by name
(`localeCompare`), the unprefixed "Model metrics" and "System metrics" last; the leading
underscore sorts this section before every other prefix (bench, learner, rl, ...)."""

OVERVIEW_ORDER = ("reward", "pass_rate", "paid_speedup", "fast_1", "fast_share", "stage", "sft_loss", "kl", "entropy")
"""The headline figures in the order a researcher reads them. Within a section MLflow orders the
charts by key, so each key carries its rank (`overview_key`): reward, pass rate and paid speedup
fill the first row of a window 1600 pixels wide, then fast_1, the fast share and the stage."""


def overview_key(name: str) -> str:
    """The MLflow key of headline figure `name` (one of `OVERVIEW_ORDER`): "_overview/1_reward",
    "_overview/6_stage", ... Raises ValueError for another name."""
    return f"{OVERVIEW}/{OVERVIEW_ORDER.index(name) + 1}_{name}"


OVERVIEW_SFT_POINTS = 20
"""The most `OVERVIEW` points an SFT stage logs (`overview_due`): its epochs are many short units
(300 in the embedded default), and one point each would leave the sampling stages a sliver of the
overview's step axis."""


def overview_due(stage: str, unit: int, units: int, sft_points: int = OVERVIEW_SFT_POINTS) -> bool:
    """Whether finished unit `unit` (1-based) of a `stage` of `units` units gets a point on the
    `OVERVIEW` charts. Self-training rounds and RL steps: each one. SFT epochs: every
    ceil(`units` / `sft_points`)-th and the last, so at most `sft_points` (+1) points; the SFT
    points show that epoch's loss (a sample of the curve; `sft/loss` has every learner step)."""
    if stage != "sft":
        return True
    every = max(1, math.ceil(units / max(1, sft_points)))
    return unit % every == 0 or unit >= units


STAGE_INDEX = {"sft": 1, "self_train": 2, "contrastive_rl": 3}
"""`<OVERVIEW>/stage`: each stage's number, as the docs count them (stage 1 `sft`, ...)."""

STAGE_PREFIX = {"sft": "sft", "self_train": "self_train", "contrastive_rl": "rl"}
"""The prefix each stage's own metrics are logged under."""


def overview_metrics(
    stage: str, metrics: Mapping[str, float], summary: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The headline figures of one finished unit of `stage`, under `OVERVIEW` (keys by
    `overview_key`, in `OVERVIEW_ORDER`), with the same names in every stage, so each is one
    curve across all stages on the overview's own step axis (`RunState.overview_step`: one step
    per point, `overview_due` says which units get one; the other metrics are logged at the
    learner's optimizer steps since the run began, `RunState.step`).

    Args:
        stage: "sft", "self_train" or "contrastive_rl".
        metrics: the unit's metrics as logged (keys under the stage's `STAGE_PREFIX`, and
            "learner/..." for RL).
        summary: the unit's history row (`RunState.history`); its "sft_loss" is SFT's loss.

    Returns (each only where the unit has it; a copy, never a new measurement):
        stage: `STAGE_INDEX[stage]` (1, 2, 3), always: where it changes, a stage begins.
        reward: mean reward of the unit's rollouts (`<prefix>/reward/mean`).
        pass_rate, fast_1: shares of all the unit's rollouts paid as correct, and as faster than
            1.00× (`rollout_metrics`).
        paid_speedup: mean paid speedup (×) of the passing rollouts (`<prefix>/speedup/mean`).
        fast_share: share of responses that are their task's fastest stage-1 solution.
        kl, entropy: the GRPO update's token-mean k3 KL to the reference and policy entropy
            (nats; `learner/kl`, `learner/entropy`: RL only).
        sft_loss: supervised loss (mean NLL per response token, nats) of the unit's last step:
            SFT's (`summary["sft_loss"]`), and self-training's when it fine-tuned
            (`self_train/loss`); never RL's (its `learner/loss` is the GRPO objective).

    Raises:
        KeyError: an unknown stage.
    """
    prefix = STAGE_PREFIX[stage]
    sources = {
        "reward": f"{prefix}/reward/mean",
        "pass_rate": f"{prefix}/pass_rate",
        "paid_speedup": f"{prefix}/speedup/mean",
        "fast_1": f"{prefix}/{fast_p_key(1.0)}",
        "fast_share": f"{prefix}/fast_share",
        "kl": "learner/kl",
        "entropy": "learner/entropy",
        "sft_loss": f"{prefix}/loss",
    }
    values = {**metrics}
    if summary is not None and summary.get("sft_loss") is not None:  # SFT logs its loss per learner step
        values.setdefault(f"{prefix}/loss", summary["sft_loss"])
    out = {overview_key("stage"): float(STAGE_INDEX[stage])}
    out.update({overview_key(name): float(values[key]) for name, key in sources.items() if values.get(key) is not None})
    return out


def step_breakdown(
    wall_s: dict[str, float], results: Sequence[EvalResult | None], pool_actors: int, step_s: float | None = None
) -> dict[str, float]:
    """Where one training step's time went, and how long each role sat idle.

    Args:
        wall_s: the step's wall-clock seconds per phase: "generate", "evaluate", "train", "sync",
            and "overlap", the part of generate and evaluate that ran at once (evaluation of the
            groups already finished while others are sampled; `sample_rollouts`); the phases
            otherwise run one after another (a missing phase counts 0).
        results: the step's results (None for a rollout not evaluated).
        pool_actors: timing actors in the primary pool.
        step_s: the step's wall time when its phases overlap (`pipeline.mode=async`: the next
            step is generated and evaluated while this one trains); None: the sum of the phases.

    Returns (seconds, and shares in [0, 1]):
        time/step_s: `step_s`, or the sum of the phases less the overlap;
        time/build_actor_s, time/timing_actor_s: the pool's actor-seconds compiling candidates and
            in the judge's timed phase, summed over candidates (`build_seconds`, `phases_s["timing"]`);
        idle/generator, idle/learner: 1 - its busy wall time / step_s (generator: generate;
            learner: train + sync);
        idle/pool: 1 - the pool's evaluation actor-seconds (`eval_seconds` plus starting and
            ending the evaluation's processes, `phases_s["processes"]`; a build inside the
            evaluation included) / (pool_actors × step_s).
    With step_s = 0 every share is 0.
    """
    gen, ev, train, sync, overlap = (
        float(wall_s.get(k, 0.0)) for k in ("generate", "evaluate", "train", "sync", "overlap")
    )
    step = gen + ev - overlap + train + sync if step_s is None else float(step_s)
    done = [r for r in results if r]
    build = sum(float(r.build_seconds or 0.0) for r in done)
    timing = sum(float(r.phases_s.get("timing", 0.0)) for r in done)
    busy = sum(float(r.eval_seconds or 0.0) + float(r.phases_s.get("processes", 0.0)) for r in done)

    def idle(busy_s: float, capacity: float) -> float:
        return min(1.0, max(0.0, 1.0 - busy_s / capacity)) if capacity > 0 else 0.0

    return {
        "time/step_s": step,
        "time/build_actor_s": build,
        "time/timing_actor_s": timing,
        "idle/generator": idle(gen, step),
        "idle/learner": idle(train + sync, step),
        "idle/pool": idle(busy, max(pool_actors, 1) * step),
    }
