"""The three training stages. Each runs its remaining units (SFT epochs, self-training rounds, RL
steps) from `ctx.state.unit` on, and after every unit syncs the generator, checkpoints the
learner and saves the run state, so an interrupted run resumes at the next unit.

Stage 1, `sft`: supervised fine-tuning on the seed solutions, validated by the benchmark first.
Stage 2, `self_train`: sample with plain prompts, evaluate, keep successes, fine-tune on them.
Stage 3, `contrastive_rl`: prompts with exemplars and their measured speedups (CUDA-L1), GRPO.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from cudal1.pipeline.episodes import assign_episode_advantages, sample_episodes, turn_metrics
from cudal1.pipeline.metrics import overview_due, overview_metrics, rollout_metrics, step_breakdown
from cudal1.pipeline.overlap import OneStepAhead
from cudal1.pipeline.rollouts import (
    is_success,
    learn_noise,
    reward_config,
    sample_rollouts,
    successes,
    unusable_logprob_count,
    update_examples,
)
from cudal1.policy.model import chat_prompt_ids, chat_token_counter
from cudal1.progress import bar
from cudal1.training.schedule import lr_at
from cudal1.pipeline.health import GAP_METRIC, SyncWatch, too_stale
from cudal1.pipeline.sft_data import refinement_pairs, sft_pairs, stage1_solutions
from cudal1.pipeline.variants import stage1_ranks, stage1_shares
from cudal1.policy.prompts import Feedback, plain_prompt
from cudal1.records import Candidate, Exemplar, PolicyExample, Rollout
from cudal1.rl.buffer import code_hash
from cudal1.rl.noise import noise_key, tie_noise
from cudal1.rl.rewards import paid_speedup
from cudal1.rl.turns import pick_baseline
from cudal1.bench.result import UNPAID_LABELS, Status
from cudal1.tasks.suite import seeds_for
from cudal1.tasks.task import reference_as_candidate

if TYPE_CHECKING:
    from cudal1.pipeline.context import RunContext

log = logging.getLogger(__name__)


# ----- shared steps


def sync_weights(ctx: RunContext) -> float:
    """Learner → generator weight sync at the learner's version, by the run's transport
    (`ctx.weights`, chosen from `rollout.weight_sync`: `cudal1.actors.weight_transport`). Returns
    seconds."""
    t0 = time.perf_counter()
    ctx.weights.sync(int(ctx.learner.attribute("version")))
    return time.perf_counter() - t0


def finish_unit(
    ctx: RunContext,
    metrics: dict[str, float],
    summary: dict[str, Any] | None = None,
    checkpoint: bool = True,
    log_step: int | None = None,
    breakdown: list[dict[str, Any] | None] | None = None,
    sync: bool = True,
    wall_step_s: float | None = None,
    overview: bool = True,
) -> None:
    """After one unit: sync the generator (unless `sync` is False: the async RL stage syncs
    between generate calls itself and leaves "time/weight_sync_s" in `metrics`), log, and (when
    `checkpoint`) save the learner and then the run state, in that order, so the state on disk
    never points past its checkpoint. A run resumed after a unit without a checkpoint repeats the
    units since the last one.

    `log_step` is the step the unit's metrics are logged at (default: the current step); units
    that sampled rollouts log at the step recorded in those rollouts. Steps are the run's one
    counter (`RunState.step`: learner calls since the run began, over all stages), so every
    stage's metrics share MLflow's step axis. With `overview` (`cudal1.pipeline.metrics.overview_due`),
    the unit's headline figures are logged under "_overview/" (`overview_metrics`, with
    "_overview/stage" marking the stage) at the overview's own step, one more than the last
    (`RunState.overview_step`), so each stage gets a readable share of those charts whatever its
    count of learner calls. The unit's history row (`summary`, when given) gets "step", "stage",
    "unit" (the stage's own count of finished units: its epoch, round or RL step, from 1) and,
    with `overview`, "overview_step". With `breakdown` (the step's
    evaluation results) the step's time per phase and each role's idle share are logged too
    (`cudal1.pipeline.metrics.step_breakdown`; `wall_step_s`: the step's wall time when its
    phases overlap) and shown in one log line."""
    if sync:
        metrics["time/weight_sync_s"] = sync_weights(ctx)
    metrics.setdefault("time/weight_sync_s", 0.0)
    if breakdown is not None:
        wall = {
            "generate": metrics.get("time/generate_s", 0.0),
            "evaluate": metrics.get("time/evaluate_s", 0.0),
            "overlap": metrics.get("time/overlap_s", 0.0),
            "train": metrics.get("time/train_s", 0.0),
            "sync": metrics["time/weight_sync_s"],
        }
        metrics.update(step_breakdown(wall, breakdown, ctx.pools.primary.spec.num_actors, step_s=wall_step_s))
        log.info(
            "step time %.0f s: generate %.0f, evaluate %.0f (pool: builds %.0f, timing %.0f actor-s), train %.0f, "
            "sync %.1f; idle: generator %.0f%%, pool %.0f%%, learner %.0f%%",
            metrics["time/step_s"],
            wall["generate"],
            wall["evaluate"],
            metrics["time/build_actor_s"],
            metrics["time/timing_actor_s"],
            wall["train"],
            wall["sync"],
            100 * metrics["idle/generator"],
            100 * metrics["idle/pool"],
            100 * metrics["idle/learner"],
        )
    ctx.state.unit += 1
    step = ctx.state.step if log_step is None else log_step
    ctx.tracker.log_metrics(metrics, step=step)
    row: dict[str, Any] = {"step": step, "stage": ctx.state.stage, "unit": ctx.state.unit}
    if overview:
        ctx.state.overview_step += 1
        ctx.tracker.log_metrics(overview_metrics(ctx.state.stage, metrics, summary), step=ctx.state.overview_step)
        row["overview_step"] = ctx.state.overview_step
    if summary is not None:
        ctx.state.history.append({**row, **summary})
    if checkpoint:
        ctx.state.checkpoint_tag = ctx.learner.save(str(ctx.checkpoint_dir))
        ctx.state.checkpoint = str(ctx.checkpoint_dir)
        ctx.state.save(ctx.run_dir)


def response_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of an assistant response, ending with the end-of-turn token."""
    return tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]


def train_supervised(
    ctx: RunContext, examples: list[PolicyExample], epochs: int, batch_size: int, prefix: str
) -> dict[str, float]:
    """`epochs` passes of learner.sft_step over shuffled batches; logs each step. Returns the last metrics."""
    last: dict[str, float] = {}
    for _ in range(epochs):
        order = list(examples)
        ctx.rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            m = ctx.learner.sft_step(order[i : i + batch_size])
            ctx.state.step += 1
            last = {f"{prefix}/{k}": v for k, v in m.items()}
            ctx.tracker.log_metrics(last, step=ctx.state.step)
    return last


def progress(ctx: RunContext, total: int, stage: str, unit: str) -> Any:
    """A progress bar over a stage's units, starting at the units already done (resume); drawn
    only on a terminal (`cudal1.progress.bar`)."""
    return bar(total=total, initial=min(ctx.state.unit, total), desc=stage, unit=unit)


def log_samples(ctx: RunContext, rollouts: list[Rollout], name: str) -> None:
    for r in rollouts[: ctx.cfg.tracking.log_samples]:
        res = r.result
        head = (
            f"task {r.task_id}  reward {r.reward:.3f}  advantage {r.advantage:+.3f}  "
            f"status {res.status.value if res is not None else r.parse_error}  "
            f"speedup {res.speedup if res is not None else None}"
        )
        ctx.tracker.log_text(
            f"{head}\n\n=== prompt ===\n{r.prompt}\n\n=== response ===\n{r.generation.text}\n",
            f"samples/{name}/g{r.group}_s{r.sample}.txt",
        )


ROLLOUT_TABLE = "tables/rollouts.json"
"""The MLflow table every unit's rollouts are appended to (sortable and filterable in the UI by
task, reward, status; columns `cudal1.review.ROLLOUT_COLUMNS`)."""


def save_rollouts(ctx: RunContext, rollouts: list[Rollout], name: str) -> None:
    """Every rollout of a unit, as JSONL under <run_dir>/rollouts (the raw record of the run), and
    its rows appended to the run's MLflow rollouts table (`ROLLOUT_TABLE`)."""
    import json

    out = ctx.run_dir / "rollouts"
    out.mkdir(exist_ok=True)
    records = [r.to_dict() for r in rollouts]
    with open(out / f"{name}.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    if rollouts:
        from cudal1.review import file_unit, rollout_row

        stage, unit = file_unit(name)
        rows = [rollout_row(record, stage, unit) for record in records]
        ctx.tracker.log_table([{**row, "labels": ",".join(row["labels"])} for row in rows], ROLLOUT_TABLE)


def rollout_summary(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    """The history row of a unit: a few of the rollout metrics `_rollout_log` computed under `prefix`."""
    keys = ("reward/mean", "pass_rate", "speedup/mean", "fast_1", "fast_share", "slow_share")
    return {k: metrics[f"{prefix}/{k}"] for k in keys if f"{prefix}/{k}" in metrics}


# ----- stage 1


def run_sft(ctx: RunContext) -> None:
    """Stage 1: validate the seed solutions of the selected tasks and, with `data.augmented`, the
    dataset's kept variants of them (`cudal1.pipeline.sft_data.stage1_solutions`) on the primary
    pool (and, with `reference_variants`, each task's reference as a candidate (`ModelNew = Model` appended), a correct
    1.00× variant), store the correct ones in the exemplar buffer at the speedups the reward
    would pay for them (`cudal1.rl.rewards.paid_speedup`: a noisy or unconfirmed gain shows as
    1.00×), then fine-tune: each correct solution as the answer to the plain prompt, and, where
    a task has a correct variant paid strictly less than its fastest one, the fastest as the
    answer to a contrastive prompt that shows the slower ones (`sft_pairs`), and, with
    `refinement_prompts` (by default when `stage.contrastive_rl.turns` > 1), as the answer to the
    second turn of a refinement episode after each slower one and the evaluator's report on it
    (`refinement_pairs`). Without `validate_seeds` the augmented variants keep their recorded
    speedups. A stage with nothing to train on is skipped with a log line."""
    cfg = ctx.cfg.stage.sft
    backend = ctx.pools.primary.spec.backend
    seeds = seeds_for(ctx.tasks, backend) if cfg.seeds else {}
    solutions = stage1_solutions(ctx.tasks, seeds, ctx.cfg.data.augmented, ctx.cfg.data.variants)
    if not solutions:
        log.warning(
            "sft: no %s seed solutions belong to the selected tasks (seeds are matched by task source)%s; "
            "stage skipped",
            backend,
            " and data.augmented holds none of them" if ctx.cfg.data.augmented else "",
        )
        return
    if ctx.cfg.data.augmented:
        log.info(
            "sft: %d solutions from %s join the seeds",
            sum(e.origin != "seed" for e in solutions),
            ctx.cfg.data.augmented,
        )
    variants: dict[str, list[Exemplar]] = {}
    reports: dict[str, Feedback] = {}
    if cfg.validate_seeds:
        solutions, variants, reports = _validated_variants(ctx, solutions, cfg.reference_variants)
    else:
        for e in solutions:
            if e.origin != "seed":
                variants.setdefault(e.task_id, []).append(e)
        ctx.buffer.add([e for found in variants.values() for e in found])
    examples = []
    max_prompt = ctx.cfg.rollout.max_model_len - ctx.cfg.rollout.max_tokens
    rl = ctx.cfg.stage.contrastive_rl
    k = rl.exemplars
    refine = rl.turns > 1 if cfg.refinement_prompts is None else cfg.refinement_prompts
    count = chat_token_counter(ctx.tokenizer) if refine else None
    budget = rl.feedback_tokens if rl.feedback_tokens is not None else max_prompt  # as sample_episodes
    contrastive, refinement, trained = 0, 0, 0
    for t in ctx.tasks:
        answers = [e for e in solutions if e.task_id == t.task_id]
        if not answers:
            continue
        trained += 1
        pairs = sft_pairs(
            t.source,
            answers,
            variants.get(t.task_id, []),
            k,
            ctx.cfg.reward.min_gain,
            contrastive=cfg.contrastive_prompts,
        )
        contrastive += any(kind == "contrastive" for kind, _, _ in pairs)
        if count is not None:
            more = refinement_pairs(
                t.source,
                variants.get(t.task_id, []),
                reports,
                ctx.cfg.reward.min_gain,
                budget,
                count,
                report=rl.feedback == "report",
            )
            refinement += len(more)
            pairs += more
        for _, messages, text in pairs:
            ids = chat_prompt_ids(ctx.tokenizer, messages)
            if len(ids) <= max_prompt:
                examples.append(PolicyExample(ids, response_ids(ctx.tokenizer, text)))
    ctx.tracker.log_metrics(
        {"sft/examples": len(examples), "sft/contrastive_tasks": contrastive, "sft/refinement_pairs": refinement},
        step=ctx.state.step,
    )
    if not examples:
        log.warning("sft: nothing to train on (no seed validated, or every prompt is too long); stage skipped")
        return
    if not cfg.contrastive_prompts:
        kind = "no contrastive prompt: stage.sft.contrastive_prompts is false"
    elif k == 0:
        kind = "no contrastive prompt, as stage 3 shows none: stage.contrastive_rl.exemplars is 0"
    else:
        kind = f"{contrastive} with a contrastive example"
    if count is not None:
        kind += f"; {refinement} second-turn refinement pairs"
    log.info("sft: %d examples (%d tasks; %s)", len(examples), trained, kind)
    base_lr = cfg.lr or ctx.cfg.learner.lr
    with progress(ctx, cfg.epochs, "sft", "epoch") as bar:
        while ctx.state.unit < cfg.epochs:
            # From the unit, not a counter: a resumed stage continues the schedule where it stopped.
            lr = lr_at(base_lr, ctx.state.unit, cfg.epochs, cfg.lr_schedule, cfg.min_lr_ratio)
            ctx.learner.set_lr(lr)
            last = train_supervised(ctx, examples, 1, cfg.batch_size, "sft")
            finish_unit(
                ctx,
                {"sft/epoch": ctx.state.unit + 1, "sft/lr": lr},
                {"sft_loss": last.get("sft/loss")},
                overview=overview_due("sft", ctx.state.unit + 1, cfg.epochs),
            )
            bar.set_postfix(loss=f"{last.get('sft/loss', float('nan')):.3f}")
            bar.update()
            done = ctx.state.unit
            if bar.disable and (done % max(1, cfg.epochs // 10) == 0 or done == cfg.epochs):
                # No bar off a terminal (a captured log): a line every tenth of the stage instead.
                log.info("sft: epoch %d/%d, loss %.4f", done, cfg.epochs, last.get("sft/loss", float("nan")))


def _validated_variants(
    ctx: RunContext, solutions: list[Exemplar], references: bool
) -> tuple[list[Exemplar], dict[str, list[Exemplar]], dict[str, Feedback]]:
    """Evaluate `solutions` (and, with `references`, each of their tasks' reference as a
    candidate) on the primary pool; store the correct ones in the buffer, each at the speedup the
    reward would pay for it (`cudal1.rl.rewards.paid_speedup`). Returns (the solutions that are
    correct, with those speedups, the correct variants per task, the evaluator's report on each
    correct variant by `code_hash` of its code: what a refinement prompt shows)."""
    candidates = [Candidate(e.task_id, e.code, origin=e.origin) for e in solutions]
    if references:
        sources = {t.task_id: t.source for t in ctx.tasks}
        candidates += [
            Candidate(t, reference_as_candidate(sources[t]), origin="reference")
            for t in dict.fromkeys(e.task_id for e in solutions)
        ]
    results = ctx.pools.primary.evaluate_many(candidates)
    if getattr(ctx, "recorder", None) is not None:  # the seeds on the other architectures, for the record
        ctx.recorder.submit(ctx.state.step, candidates, results)
    analyses = [e.analysis for e in solutions] + [""] * (len(candidates) - len(solutions))
    variants: dict[str, list[Exemplar]] = {}
    reports: dict[str, Feedback] = {}
    correct: list[Exemplar] = []
    reward_cfg = reward_config(ctx.cfg)
    for c, res, analysis in zip(candidates, results, analyses):
        # The speedup the reward would pay, not the raw measurement: a noisy or unconfirmed gain
        # shows as 1.00x, so neither the buffer nor a contrastive pair learns from noise. The
        # reference is the baseline: whatever it measured against itself is noise.
        paid = paid_speedup(res, reward_cfg) if not UNPAID_LABELS.intersection(res.labels) else None
        if paid is not None and c.origin == "reference":
            paid = 1.0
        if res.status is Status.OK and paid is not None:
            e = Exemplar(c.task_id, c.source, paid, analysis=analysis, origin=c.origin)
            variants.setdefault(c.task_id, []).append(e)
            reports[code_hash(c.source)] = Feedback.of(res)
            if c.origin != "reference":
                correct.append(e)
        else:
            log.warning(
                "sft: %s for %s is %s (%s): not trained on", c.origin, c.task_id, res.status.value, res.message[:200]
            )
    ctx.buffer.add([e for found in variants.values() for e in found])
    seeds = sum(e.origin == "seed" for e in solutions)
    seeds_ok = sum(e.origin == "seed" for e in correct)
    written = sum(e.origin.startswith("variant:") for e in solutions)  # data.variants
    written_ok = sum(e.origin.startswith("variant:") for e in correct)
    ctx.tracker.log_metrics(
        {
            "sft/seeds_ok": seeds_ok,
            "sft/seeds": seeds,
            "sft/augmented": len(solutions) - seeds - written,
            "sft/augmented_ok": len(correct) - seeds_ok - written_ok,
            "sft/variants": written,
            "sft/variants_ok": written_ok,
        },
        step=ctx.state.step,
    )
    augmented = (
        f", {len(correct) - seeds_ok - written_ok} of {len(solutions) - seeds - written} augmented solutions"
        if len(solutions) > seeds + written
        else ""
    )
    if written:
        augmented += f", {written_ok} of {written} variants ({ctx.cfg.data.variants})"
    log.info(
        "sft: %d of %d seeds%s correct; %d tasks with their reference as a 1.00x variant",
        seeds_ok,
        seeds,
        augmented,
        sum(1 for found in variants.values() if any(e.origin == "reference" for e in found)),
    )
    return correct, variants, reports


# ----- stage 2


def run_self_train(ctx: RunContext) -> None:
    """Stage 2: per round, sample `samples_per_task` responses to plain prompts for
    `tasks_per_round` tasks, keep the correct candidates at least `min_speedup` fast (into the
    buffer), and fine-tune on those responses for `epochs` (0: sample and store only)."""
    cfg = ctx.cfg.stage.self_train
    bar = progress(ctx, cfg.rounds, "self_train", "round")
    while ctx.state.unit < cfg.rounds:
        tasks = ctx.rng.sample(ctx.tasks, min(cfg.tasks_per_round, len(ctx.tasks)))
        timings: dict[str, float] = {}
        sampled_at = ctx.state.step
        rollouts = sample_rollouts(
            ctx, tasks, [plain_prompt(t.source) for t in tasks], cfg.samples_per_task, sampled_at, timings
        )
        keep = successes(rollouts, cfg.min_speedup)
        if keep:
            ctx.buffer.add(keep)
        examples = [r.to_example() for r in rollouts if is_success(r, cfg.min_speedup)]
        metrics = _rollout_log(ctx, rollouts, timings, "self_train")
        metrics.update(_stage1_share_log(ctx, rollouts, "self_train"))
        summary = rollout_summary(metrics, "self_train")
        metrics["self_train/successes"] = float(len(examples))
        if examples and cfg.epochs > 0:
            metrics.update(train_supervised(ctx, examples, cfg.epochs, cfg.batch_size, "self_train"))
        else:  # nothing to train on, or epochs 0 (sample and store only): the next unit logs at a step of its own
            ctx.state.step += 1
        name = f"self_train_round{ctx.state.unit}"
        save_rollouts(ctx, rollouts, name)
        log_samples(ctx, rollouts, name)
        finish_unit(ctx, metrics, summary, log_step=sampled_at)
        bar.set_postfix(successes=len(examples))
        bar.update()
    bar.close()


# ----- stage 3


def run_contrastive_rl(ctx: RunContext) -> None:
    """Stage 3: per step, `tasks_per_step` contrastive prompts (reference + exemplars with their
    measured speedups, from the buffer), `group_size` responses each, rewards from the primary
    pool, group-normalized advantages, one GRPO update, weight sync, successes into the buffer.

    `pipeline.mode=async` samples (and evaluates) step t+1 in a background thread while the
    learner trains step t (`cudal1.pipeline.overlap.OneStepAhead`): step t's successes go into the
    buffer first, so step t+1's prompts see the same buffer as in sync mode; its weights are
    those the learner had before step t's update (one step off-policy, corrected per token by
    truncated importance weights, `learner.tis_cap`). Nothing of a step is recorded before it is
    trained: an interrupted run drops the step in flight and a resumed one samples it again.
    """
    cfg = ctx.cfg.stage.contrastive_rl
    mode = ctx.cfg.pipeline.mode
    reward_cfg = reward_config(ctx.cfg)
    # The tie floor per pool and task size, learned from the run's repeated measurements and
    # continued from the run state on a resume (`cudal1.rl.noise`); None: reward.tie_floor only.
    noise = tie_noise(reward_cfg, ctx.state.tie_noise)
    bar = progress(ctx, cfg.steps, "contrastive_rl", "step")
    pipeline = OneStepAhead(mode, lambda step: _sample_rl_step(ctx, step), lambda: _sync_if_behind(ctx))
    watch = SyncWatch(ctx.cfg.pipeline.max_engine_gap)
    try:
        while ctx.state.unit < cfg.steps:
            t_step = time.perf_counter()
            rollouts, timings, sampled_at = pipeline.take(ctx.state.step)
            keep = successes(rollouts)
            if keep:  # before the next step's prompts are drawn (async: they are drawn now)
                ctx.buffer.add(keep)
            last = ctx.state.unit + 1 == cfg.steps
            sync_s = pipeline.ahead(ctx.state.step + 1) if not last else 0.0
            # This step's pairs count for its own ties and fallbacks (pricing ran before they were seen).
            floors, in_noise = learn_noise(noise, rollouts, reward_cfg)
            if noise is not None:
                ctx.state.tie_noise = noise.to_dict()  # saved with the next checkpoint
            assign_episode_advantages(
                rollouts,
                reward_cfg,
                cfg.advantage_scale,
                gamma=cfg.gamma,
                form=cfg.turn_return,
                baseline=pick_baseline(cfg.turn_baseline, cfg.turns),
                floors=floors,
            )
            metrics = _rollout_log(ctx, rollouts, timings, "rl")
            if noise is not None:
                used = {noise_key(r.result) for r in rollouts if r.result is not None and r.result.correct}
                metrics.update(noise.metrics(used))
                metrics["reward/fallbacks_within_noise"] = float(in_noise)
            metrics.update({f"rl/{k}": v for k, v in turn_metrics(rollouts).items()})
            metrics.update(_stage1_share_log(ctx, rollouts, "rl"))
            learner_version = int(ctx.learner.attribute("version"))
            versions = [r.generation.model_version for r in rollouts]
            stale = too_stale(versions, learner_version, ctx.cfg.pipeline.max_staleness)
            fresh = [r for r, old in zip(rollouts, stale) if not old]  # the stale stay in the record only
            examples = update_examples(fresh)
            metrics["learner/nan_logprob_samples"] = float(unusable_logprob_count(fresh))
            metrics["pipeline/stale_dropped"] = float(sum(stale))
            if any(stale):
                log.warning(
                    "rl step %d: %d rollouts sampled more than %d versions behind the learner (%d) are left out "
                    "of the update",
                    ctx.state.unit,
                    sum(stale),
                    ctx.cfg.pipeline.max_staleness,
                    learner_version,
                )
            t_train = time.perf_counter()
            if examples:
                metrics.update({f"learner/{k}": v for k, v in ctx.learner.grpo_step(examples).items()})
            metrics["time/train_s"] = time.perf_counter() - t_train
            metrics["learner/skipped"] = float(not examples)  # every advantage 0: no gradient signal
            metrics.update(_pipeline_metrics(versions, learner_version, pipeline.waited_s))
            # The weight sync, judged on on-policy steps: one step over the limit makes the next
            # sync (after this update) the test, a second stops the run (WeightSyncBroken).
            metrics["health/resync"] = float(
                watch.check(ctx.state.unit, metrics.get(GAP_METRIC), metrics["pipeline/staleness"])
            )
            if not examples:
                log.info("rl step %d: no update (every response in each group scored the same)", ctx.state.unit)
            ctx.state.step += 1
            name = f"rl_step{ctx.state.unit}"
            save_rollouts(ctx, rollouts, name)
            log_samples(ctx, rollouts, name)
            summary = {
                **rollout_summary(metrics, "rl"),
                "rollout_version": min(versions, default=learner_version),
                "learner_version": learner_version,
            }
            # One entry per evaluation: copies (and later turns) of one program share its result object.
            breakdown = list({id(r.result): r.result for r in rollouts if r.result is not None}.values())
            del rollouts, examples  # the driver keeps no past step's rollouts (async: the next one is sampling)
            if mode == "async":
                metrics["time/weight_sync_s"] = sync_s
            # Async: the weights go to the generator in `ahead`, between generate calls; only the
            # last step (nothing in flight) syncs here.
            finish_unit(
                ctx,
                metrics,
                summary,
                log_step=sampled_at,
                checkpoint=last or (ctx.state.unit + 1) % cfg.checkpoint_every == 0,
                breakdown=breakdown,
                sync=mode == "sync" or last,
                wall_step_s=(time.perf_counter() - t_step) if mode == "async" else None,
            )
            bar.set_postfix(
                reward=f"{metrics.get('rl/reward/mean', 0.0):.2f}", pass_rate=f"{metrics.get('rl/pass_rate', 0.0):.2f}"
            )
            bar.update()
    finally:
        dropped = pipeline.drop()
        if dropped is not None:
            ctx.dropped.append(dropped)  # `RunContext.close` waits for it after stopping the actors
        bar.close()


def _sync_if_behind(ctx: RunContext) -> float:
    """`sync_weights` unless every engine already holds the learner's version (the first async
    step: the last unit of the previous stage, or the resumed checkpoint, synced them) and none
    was replaced since (a replaced engine holds the checkpoint's weights). Seconds."""
    current = set(ctx.generator.model_versions()) == {int(ctx.learner.attribute("version"))}
    if current and not ctx.generator.unsynced:
        return 0.0
    return sync_weights(ctx)


def _sample_rl_step(ctx: RunContext, step: int) -> tuple[list[Rollout], dict[str, float], int]:
    """One RL step's rollouts (prompts drawn from the buffer as it stands now, then
    `sample_episodes`: with turns 1 `sample_rollouts` itself; with more, every turn of every
    episode): (rollouts, timings, step). In async mode this runs in the sampling thread."""
    cfg = ctx.cfg.stage.contrastive_rl
    tasks = ctx.rng.sample(ctx.tasks, min(cfg.tasks_per_step, len(ctx.tasks)))
    drawn = [ctx.buffer.draw(t, cfg.exemplars) for t in tasks]
    timings: dict[str, float] = {}
    best = None
    if cfg.turns > 1 and cfg.stop_margin is not None:
        best = [_best_shown(shown) for _, shown in drawn]
    rollouts = sample_episodes(
        ctx,
        tasks,
        [m for m, _ in drawn],
        cfg.group_size,
        step,
        timings,
        shown=[[e.code for e in shown] for _, shown in drawn],
        turns=cfg.turns,
        best_shown=best,
        margin=cfg.stop_margin,
        feedback_tokens=cfg.feedback_tokens,
        feedback=cfg.feedback,
        max_evaluations=cfg.max_evaluations,
    )
    return rollouts, timings, step


def _best_shown(shown: list[Exemplar]) -> float | None:
    """The best speedup (×) among the exemplars a prompt showed (`ExemplarBuffer.draw`), which a
    refinement episode's turn must beat by `stop_margin` to end early; None when it showed none."""
    return max((e.speedup for e in shown), default=None)


def _pipeline_metrics(versions: list[int], learner_version: int, waited_s: float) -> dict[str, float]:
    """ "pipeline/rollout_version" (the oldest policy version among the step's rollouts),
    "pipeline/learner_version" (the learner's version when it trained them), "pipeline/staleness"
    (their difference, in learner optimizer steps: 0 on-policy) and "pipeline/wait_s" (seconds the
    step waited for its rollouts)."""
    oldest = min(versions, default=learner_version)
    return {
        "pipeline/rollout_version": float(oldest),
        "pipeline/learner_version": float(learner_version),
        "pipeline/staleness": float(learner_version - oldest),
        "pipeline/wait_s": waited_s,
    }


def _stage1_share_log(ctx: RunContext, rollouts: list[Rollout], prefix: str) -> dict[str, float]:
    """`<prefix>/fast_share` and `<prefix>/slow_share` (`cudal1.pipeline.variants.stage1_shares`:
    the share of the unit's responses that reproduce their task's fastest stage-1 solution, or a
    slower one, as the buffer holds them now), also in one log line."""
    ids = dict.fromkeys(r.task_id for r in rollouts)
    ranks = stage1_ranks({t: ctx.buffer.exemplars(t) for t in ids})
    shares = stage1_shares(rollouts, ranks)
    if shares:
        log.info(
            "%s: fast share %.2f, slow share %.2f (responses that are their task's fastest / a slower stage-1 solution)",
            prefix,
            shares["fast_share"],
            shares["slow_share"],
        )
    return {f"{prefix}/{k}": v for k, v in shares.items()}


def _rollout_log(ctx: RunContext, rollouts: list[Rollout], timings: dict[str, float], prefix: str) -> dict[str, float]:
    metrics = {f"{prefix}/{k}": v for k, v in rollout_metrics(rollouts).items()}
    gen_s, eval_s = timings.get("generate_s", 0.0), timings.get("evaluate_s", 0.0)
    metrics.update(
        {
            "time/generate_s": gen_s,
            "time/evaluate_s": eval_s,
            "time/overlap_s": timings.get("overlap_s", 0.0),  # evaluation while generating: inside both
            "rollout/tokens_per_s": timings.get("tokens", 0.0) / gen_s if gen_s else 0.0,
            "bench/evaluations_per_s": timings.get("evaluations", 0.0) / eval_s if eval_s else 0.0,
            "bench/evaluations_saved": timings.get("evaluations_saved", 0.0),  # copies that shared one result
            # A rollout engine lost mid-sampling: replaced, its unfinished groups sampled again.
            "rollout/engine_restarts": timings.get("engine_restarts", 0.0),
            "rollout/resampled_groups": timings.get("resampled_groups", 0.0),
            "time/engine_recovery_s": timings.get("recovery_s", 0.0),
        }
    )
    reasons = Counter(r.reward_reason for r in rollouts if r.reward_reason)
    log.info(
        "%s: %d rollouts, reward mean %.3f, pass rate %.2f (%s)",
        prefix,
        len(rollouts),
        metrics.get(f"{prefix}/reward/mean", 0.0),
        metrics.get(f"{prefix}/pass_rate", 0.0),
        ", ".join(f"{reason} {count}" for reason, count in reasons.most_common()) or "no reward reasons",
    )
    if metrics["rollout/engine_restarts"]:
        log.warning(
            "%s: %d rollout engine(s) lost while sampling were replaced; %d groups sampled again (recovery %.1f s)",
            prefix,
            int(metrics["rollout/engine_restarts"]),
            int(metrics["rollout/resampled_groups"]),
            metrics["time/engine_recovery_s"],
        )
    lost = int(metrics.get(f"{prefix}/harness_failures", 0.0))
    if lost:
        log.warning(
            "%s: %d of %d rollouts were not measured: the harness failed (%s); they are left out of the update",
            prefix,
            lost,
            len(rollouts),
            ", ".join(
                f"{k.split('/')[-1]} {int(v)}" for k, v in metrics.items() if k.startswith(f"{prefix}/harness/") and v
            ),
        )
    if metrics.get(f"{prefix}/below_resolution_rate", 0.0) > 0.5:
        log.warning(
            "%s: %.0f%% of the correct candidates ran below the benchmark's resolution: their speedups are "
            "bounds, not measurements (a busy machine, or tasks too small for it; see EvalResult.resolution_ms)",
            prefix,
            100 * metrics[f"{prefix}/below_resolution_rate"],
        )
    return metrics


STAGE_RUNNERS: dict[str, Callable[[Any], None]] = {
    "sft": run_sft,
    "self_train": run_self_train,
    "contrastive_rl": run_contrastive_rl,
}
