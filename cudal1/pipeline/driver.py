"""The training driver: starts the actors, runs the selected stages in order, resumes, and
shuts down cleanly.

`train(cfg)` is what `jobs/train.py` calls after Hydra composed and `cudal1.config.load_config`
validated the config. Ctrl-C (or a `ray job stop`) stops after closing the actors: the exemplar
buffer is already on disk and the last checkpoint is untouched, so `resume=true` continues.
"""

from __future__ import annotations

import logging
import signal
from typing import Any

from omegaconf import DictConfig

from cudal1.config import STAGES
from cudal1.pipeline.context import RunContext
from cudal1.pipeline.report import format_run_summary, task_outcomes
from cudal1.pipeline.stages import STAGE_RUNNERS, sync_weights
from cudal1.pipeline.state import RunState

log = logging.getLogger(__name__)


def stages_to_run(name: str) -> list[str]:
    """["sft", "self_train", "contrastive_rl"] for "all", else [name]."""
    return list(STAGES) if name == "all" else [name]


def train(cfg: DictConfig) -> RunState:
    """Run the stages of `cfg.stage.name` (all three by default) and return the final state.

    Raises whatever a stage raises after closing the actors and marking the MLflow run FAILED;
    KeyboardInterrupt (also raised on SIGTERM) marks it KILLED.
    """
    ctx = RunContext.start(cfg)
    # After Ray's start-up, which installs a SIGTERM handler of its own in the driver.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = "FINISHED"
    try:
        if ctx.state.checkpoint:
            log.info("resuming: loading the learner checkpoint %s (%s)", ctx.state.checkpoint, ctx.state.checkpoint_tag)
            ctx.learner.load(ctx.state.checkpoint, ctx.state.checkpoint_tag)
            sync_weights(ctx)
        for stage in stages_to_run(cfg.stage.name):
            if stage in ctx.state.completed:
                log.info("stage %s already completed: skipped", stage)
                continue
            if ctx.state.stage != stage:
                ctx.state.stage, ctx.state.unit = stage, 0
            log.info("stage %s from unit %d", stage, ctx.state.unit)
            ctx.learner.reset_reference()
            ctx.learner.set_lr(cfg.stage[stage].lr or cfg.learner.lr)
            STAGE_RUNNERS[stage](ctx)
            finish_stage(ctx, stage)
        finish_run(ctx)
    except KeyboardInterrupt:
        status = "KILLED"
        log.warning(
            "interrupted: the buffer and the last checkpoint are kept; continue with run_dir=%s resume=true",
            ctx.run_dir,
        )
        raise
    except BaseException:
        status = "FAILED"
        raise
    finally:
        ctx.close(status)
        signal.signal(signal.SIGTERM, previous)
    return ctx.state


def finish_stage(ctx: RunContext, stage: str) -> None:
    """Mark `stage` done, export the policy as a Hugging Face checkpoint and register it in MLflow."""
    export = ctx.run_dir / "exports" / stage
    ctx.learner.export(str(export))
    version = ctx.tracker.register_checkpoint(export, "cudal1-policy", {"stage": stage, "step": str(ctx.state.step)})
    if version is not None:
        ctx.state.registered[stage] = version
    ctx.state.completed.append(stage)
    ctx.state.stage, ctx.state.unit = None, 0
    ctx.state.checkpoint_tag = ctx.learner.save(str(ctx.checkpoint_dir))
    ctx.state.checkpoint = str(ctx.checkpoint_dir)
    ctx.state.save(ctx.run_dir)


def finish_run(ctx: RunContext) -> None:
    """Artifacts for review: the best solution per task, a results table, reward and speedup curves."""
    stats = ctx.buffer.stats()
    rows = []
    exemplars = {}
    for task in ctx.tasks:
        best = ctx.buffer.best(task.task_id)
        exemplars[task.task_id] = ctx.buffer.exemplars(task.task_id)
        rows.append(
            {
                "task": task.task_id,
                "name": task.name,
                "exemplars": len(exemplars[task.task_id]),
                "best_speedup": best.speedup if best else None,
                "best_origin": best.origin if best else None,
            }
        )
        if best is not None:
            ctx.tracker.log_text(best.code, f"best/{task.task_id.replace('/', '_')}.py")
    ctx.tracker.log_table(rows, "results/best_per_task.json")
    ctx.tracker.log_dict(stats, "results/buffer_stats.json")
    history: list[dict[str, Any]] = [h for h in ctx.state.history if "reward/mean" in h]
    if history:
        ctx.tracker.log_curves(
            history,
            ["reward/mean", "pass_rate", "speedup/mean", "fast_1", "fast_share", "slow_share"],
            "plots/reward_speedup.png",
            "contrastive RL and self-training",
        )
    (ctx.run_dir / "rollouts").mkdir(exist_ok=True)
    ctx.tracker.log_artifact(ctx.run_dir / "rollouts")  # kept under its own name: rollouts/
    outcomes = task_outcomes([t.task_id for t in ctx.tasks], exemplars)
    ctx.tracker.log_table(outcomes, "results/seed_vs_policy.json")
    log.info(
        "%s",
        format_run_summary(
            outcomes,
            ctx.state.history,
            ctx.state.registered,
            str(ctx.run_dir),
            ctx.tracker.run_id,
            ctx.tracker.uri,
            ctx.tracker.experiment_id,
        ),
    )


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
