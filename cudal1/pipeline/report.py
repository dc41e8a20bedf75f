"""What a finished training run says in the terminal: `task_outcomes`, `format_run_summary`.

Per task: the best speedup the seeds reached and the best the policy's own rollouts reached
(self-training and contrastive RL), so a reader sees at once whether training beat the seeds;
then where each stage lies on MLflow's step axis, the last unit's pass rate and fast_1, the
registered model versions, the MLflow run and the command that opens it, and the run directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cudal1.pipeline.metrics import OVERVIEW


def written_by_policy(origin: str) -> bool:
    """Whether an exemplar origin names a rollout ("step<k>/g<group>/s<sample>", `Rollout.origin`);
    every other origin (seed, reference, dataset records) is stage-1 data."""
    return origin.startswith("step")


def task_outcomes(task_ids: Sequence[str], exemplars: Mapping[str, Iterable[Any]]) -> list[dict[str, Any]]:
    """One row per task: {"task", "seed_best", "policy_best", "beat_seed"}.

    `exemplars[task_id]` holds the buffer's `Exemplar`s (correct solutions with `speedup` in × and
    an `origin`, see `written_by_policy`). `seed_best` / `policy_best` are the best speedups (×) of seed-origin and
    policy-origin exemplars (None when there are none); `beat_seed` is True when the policy's best
    is strictly above the seeds' best (or the policy has one and the seeds none), False when it has
    one that is not, None when the policy has no correct solution for the task.
    """
    rows = []
    for task_id in task_ids:
        seed_best = policy_best = None
        for e in exemplars.get(task_id, ()):
            if written_by_policy(e.origin):
                policy_best = e.speedup if policy_best is None else max(policy_best, e.speedup)
            else:
                seed_best = e.speedup if seed_best is None else max(seed_best, e.speedup)
        beat = None if policy_best is None else (seed_best is None or policy_best > seed_best)
        rows.append({"task": task_id, "seed_best": seed_best, "policy_best": policy_best, "beat_seed": beat})
    return rows


UNIT_NAMES = {"sft": "epoch", "self_train": "round", "contrastive_rl": "step"}
"""What a unit of each stage is called: the stage's own counter, which `RunState.history` rows
carry as "unit" (1 for its first)."""


def step_ranges(history: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Stage → (first, last) MLflow step of its history rows, in the order the stages ran: where
    each stage lies on the run's one step axis (`RunState.step`, learner updates over all stages;
    a row's step is where its unit's metrics are logged). Rows without a stage or step are skipped."""
    ranges: dict[str, tuple[int, int]] = {}
    for h in history:
        stage, step = h.get("stage"), h.get("step")
        if stage is None or step is None:
            continue
        first, last = ranges.get(stage, (int(step), int(step)))
        ranges[stage] = (min(first, int(step)), max(last, int(step)))
    return ranges


def format_run_summary(
    outcomes: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    versions: Mapping[str, str],
    run_dir: str,
    run_id: str | None,
    tracking_uri: str | None,
) -> str:
    """The summary block printed when a training run ends (plain text, one item per line).

    `history` is `RunState.history` (per-unit rows with "step", "stage", "unit", and "pass_rate"
    and "fast_1" where rollouts were sampled); `versions` maps stage → registered model version of
    `cudal1-policy`. Two counters are named apart: a stage's own units (`UNIT_NAMES`: "contrastive_rl
    step 3") and MLflow's step, the learner updates since the run began (`step_ranges` says where
    each stage lies on it).
    """

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    width = max([len("task"), *(len(o["task"]) for o in outcomes)])
    lines = ["run summary", f"  {'task':<{width}}  {'seeds':>8}  {'policy':>8}  beat seed"]
    for o in outcomes:
        # None: no correct rollout other than a stage-1 solution (the buffer keeps one copy of a
        # program, the first), e.g. the default's RL writing its fast variant again
        beat = {True: "yes", False: "no", None: "no new correct solution"}[o["beat_seed"]]
        lines.append(f"  {o['task']:<{width}}  {x(o['seed_best']):>8}  {x(o['policy_best']):>8}  {beat}")
    n_beat = sum(1 for o in outcomes if o["beat_seed"])
    lines.append(f"  the policy beat its seeds on {n_beat} of {len(outcomes)} tasks")
    axis = step_ranges(history)
    if axis:
        lines.append(
            f"  stages on MLflow's step axis (learner updates since the run began; {OVERVIEW}/ charts): "
            + ", ".join(f"{stage} {a}-{b}" if a != b else f"{stage} {a}" for stage, (a, b) in axis.items())
        )
    sampled = [(i, h) for i, h in enumerate(history) if "pass_rate" in h]
    if sampled:
        i, last = sampled[-1]
        stage = last.get("stage")
        unit = last.get("unit") or sum(1 for h in history[: i + 1] if h.get("stage") == stage)
        fast = f", fast_1 {last['fast_1']:.2f}" if "fast_1" in last else ""
        lines.append(
            f"  last sampled unit: {stage} {UNIT_NAMES.get(stage, 'unit')} {unit} (MLflow step {last.get('step')}): "
            f"pass rate {last['pass_rate']:.2f}{fast}"
        )
    if versions:
        lines.append(
            "  registered: " + ", ".join(f"models:/cudal1-policy/{v} ({stage})" for stage, v in versions.items())
        )
    if run_id:
        lines.append(f"  MLflow run {run_id}: mlflow ui --backend-store-uri {tracking_uri}")
    lines.append(f"  run directory: {run_dir}")
    return "\n".join(lines)
